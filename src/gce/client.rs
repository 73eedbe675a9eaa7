//! The `Client`: one place where every Compute Engine call is authenticated, rate-limited,
//! retried, counted and turned into a typed result.
//!
//! A call goes: rate limiter → token → HTTP with a per-attempt timeout → classify. Retryable
//! failures (see [`ErrorClass::Retryable`]) are retried with full-jitter backoff until
//! `retry_deadline`; every attempt of a mutation carries the same `requestId`, so GCE answers a
//! repeat with the first Operation instead of acting twice. Everything else returns at once:
//! the reconciler, not the client, decides what a stockout or a 404 means.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::header::{HeaderValue, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use reqwest::{Method, Url};
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::auth::{token_source, Credentials, TokenSource};
use super::error::{ApiError, ErrorClass, GceError};
use super::ratelimit::{Budgets, CallKind, RateLimiter};
use super::retry::{parse_retry_after, Backoff};

/// The client's settings, from plain values (the config module fills them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOptions {
    /// Base URL ending with `/`, e.g. `https://compute.googleapis.com/compute/v1/`.
    pub endpoint: String,
    /// The project every call is made in.
    pub project: String,
    /// Client-side rate limit shared by all calls of this client (0 = unlimited).
    pub calls_per_minute: u32,
    /// Client-side rate limit of reads (`get`, `list`, `aggregatedList`, `listManagedInstances`,
    /// operation `wait`), within `calls_per_minute` (0 = no limit of their own).
    pub reads_per_minute: u32,
    /// Client-side rate limit of writes (every mutation), within `calls_per_minute` (0 = no limit of
    /// their own).
    pub writes_per_minute: u32,
    /// Timeout of one HTTP attempt.
    pub request_timeout: Duration,
    /// How long a call keeps retrying retryable errors before it returns the last one.
    pub retry_deadline: Duration,
}

/// Where a MIG or resize request lives. GCE has a zonal and a regional flavour of each.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Location {
    /// A region name, e.g. `us-central1`.
    Region(String),
    /// A zone name, e.g. `us-central1-a`.
    Zone(String),
}

impl Location {
    /// `regions/us-central1` or `zones/us-central1-a`.
    pub fn path(&self) -> String {
        match self {
            Self::Region(r) => format!("regions/{r}"),
            Self::Zone(z) => format!("zones/{z}"),
        }
    }

    /// The method-id prefix: `regionInstanceGroupManagers` or `instanceGroupManagers`.
    pub(crate) fn collection(&self, zonal: &'static str, regional: &'static str) -> &'static str {
        match self {
            Self::Region(_) => regional,
            Self::Zone(_) => zonal,
        }
    }
}

/// Calls and errors of one API method, for metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MethodStats {
    /// HTTP requests sent (each retry counts: that is what GCE's quota counts).
    pub calls: u64,
    /// Failed requests by class.
    pub errors_by_class: BTreeMap<ErrorClass, u64>,
}

/// One API call, before it is sent.
pub(crate) struct Call {
    /// Method id, e.g. `regionInstanceGroupManagers.insert`.
    pub method: String,
    pub verb: Method,
    /// Path relative to the endpoint: `projects/p/regions/r/...`.
    pub path: String,
    pub query: Vec<(&'static str, String)>,
    /// JSON body; `None` sends an empty body (with `Content-Length: 0` on POST).
    pub body: Option<Vec<u8>>,
    /// Timeout of one attempt, when it must differ from `request_timeout` (operation waits).
    pub timeout: Option<Duration>,
    /// Stop retrying at this instant, when earlier than `retry_deadline` from now.
    pub deadline: Option<Instant>,
}

impl Call {
    pub fn new(method: String, verb: Method, path: String) -> Self {
        Self { method, verb, path, query: Vec::new(), body: None, timeout: None, deadline: None }
    }

    /// Asks for a partial response (`fields=`), when `fields` is given.
    pub fn fields(mut self, fields: Option<&str>) -> Self {
        if let Some(f) = fields.filter(|f| !f.is_empty()) {
            self.query.push(("fields", f.to_string()));
        }
        self
    }

    /// Which rate budget the call counts against, as GCE counts it: a mutation (it carries a
    /// `requestId`) is a write, everything else — `wait` of an operation included — a read.
    pub fn kind(&self) -> CallKind {
        if self.query.iter().any(|(k, _)| *k == "requestId") {
            CallKind::Write
        } else {
            CallKind::Read
        }
    }
}

/// A typed, retrying, rate-limited Compute Engine client. Cheap to clone: clones share the
/// HTTP connection pool, the rate limiter, the token cache and the counters.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    /// When set, no call (its retries included) runs longer than this, whatever `retry_deadline`
    /// says: see [`Client::with_call_budget`].
    call_budget: Option<Duration>,
}

struct Inner {
    http: reqwest::Client,
    endpoint: Url,
    project: String,
    tokens: Option<Arc<dyn TokenSource>>,
    limiter: RateLimiter,
    backoff: Mutex<Backoff>,
    request_timeout: Duration,
    retry_deadline: Duration,
    stats: Mutex<BTreeMap<String, MethodStats>>,
    /// Nanoseconds GCE took to answer, request sent → response headers, over every call.
    answer_nanos: std::sync::atomic::AtomicU64,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("endpoint", &self.inner.endpoint.as_str())
            .field("project", &self.inner.project)
            .field("tokens", &self.inner.tokens)
            .finish_non_exhaustive()
    }
}

fn is_loopback(url: &Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl Client {
    /// A client for `opts` authenticating with `creds`.
    ///
    /// Refuses an endpoint that is not an absolute `http(s)://` URL ending with `/`, plain
    /// `http://` anywhere but loopback (a token must never cross a network in clear text), and
    /// `Credentials::None` with anything but an `http://` loopback endpoint (the simulator).
    pub fn new(opts: ClientOptions, creds: Credentials) -> Result<Self, GceError> {
        let endpoint = check_endpoint(&opts.endpoint)?;
        if creds == Credentials::None && endpoint.scheme() != "http" {
            return Err(GceError::InvalidArgument(format!(
                "credentials \"none\" is only allowed with an http:// loopback endpoint \
                 (a simulator), not {}",
                opts.endpoint
            )));
        }
        let tokens = token_source(&creds)?;
        Self::build(opts, endpoint, tokens)
    }

    /// A client whose tokens come from `source` (tests, or tokens obtained elsewhere).
    pub fn with_token_source(opts: ClientOptions, source: Arc<dyn TokenSource>) -> Result<Self, GceError> {
        let endpoint = check_endpoint(&opts.endpoint)?;
        Self::build(opts, endpoint, Some(source))
    }

    fn build(
        opts: ClientOptions,
        endpoint: Url,
        tokens: Option<Arc<dyn TokenSource>>,
    ) -> Result<Self, GceError> {
        if opts.project.is_empty() {
            return Err(GceError::InvalidArgument("project is empty".into()));
        }
        let http = reqwest::Client::builder()
            .user_agent(concat!("slurm-dws/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(opts.request_timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| GceError::InvalidArgument(format!("HTTP client: {e}")))?;
        Ok(Self {
            call_budget: None,
            inner: Arc::new(Inner {
                http,
                endpoint,
                project: opts.project,
                tokens,
                limiter: RateLimiter::new(Budgets {
                    total: opts.calls_per_minute,
                    reads: opts.reads_per_minute,
                    writes: opts.writes_per_minute,
                }),
                backoff: Mutex::new(Backoff::default()),
                request_timeout: opts.request_timeout,
                retry_deadline: opts.retry_deadline,
                stats: Mutex::new(BTreeMap::new()),
                answer_nanos: std::sync::atomic::AtomicU64::new(0),
            }),
        })
    }

    /// Replaces the backoff parameters (tests use millisecond backoffs). Affects all clones.
    pub fn set_backoff(&self, backoff: Backoff) {
        *self.inner.backoff.lock().unwrap_or_else(|p| p.into_inner()) = backoff;
    }

    /// A clone (sharing everything) whose calls each end within `budget`, retries included: a
    /// retryable failure is retried only while the budget lasts, then returned. The reconciler's
    /// client, so that no call holds a pass longer than about `gcp.request_timeout`: what did not
    /// finish is carried to the next pass.
    pub fn with_call_budget(&self, budget: Duration) -> Client {
        Client { inner: self.inner.clone(), call_budget: Some(budget) }
    }

    /// The calls per minute the client allows itself now for reads or writes (lower than configured
    /// for a while after GCE answered "rate limit"); `None` = unlimited.
    pub fn rate_in_force(&self, kind: CallKind) -> Option<f64> {
        self.inner.limiter.per_minute(kind)
    }

    /// The project this client works in.
    pub fn project(&self) -> &str {
        &self.inner.project
    }

    /// The endpoint, ending with `/`.
    pub fn endpoint(&self) -> &str {
        self.inner.endpoint.as_str()
    }

    /// Calls and errors by method id, for metrics.
    pub fn stats(&self) -> BTreeMap<String, MethodStats> {
        self.inner.stats.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The time GCE has taken to answer this client's calls (and its clones'), request sent → response
    /// headers, in all: GCE's own time, which a pass only waits for. A pass reports its difference.
    pub fn answer_time(&self) -> Duration {
        Duration::from_nanos(self.inner.answer_nanos.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// `projects/{project}/`.
    pub(crate) fn project_path(&self) -> String {
        format!("projects/{}", self.inner.project)
    }

    pub(crate) fn request_timeout(&self) -> Duration {
        self.inner.request_timeout
    }

    fn record(&self, method: &str, class: Option<ErrorClass>) {
        let mut stats = self.inner.stats.lock().unwrap_or_else(|p| p.into_inner());
        let entry = stats.entry(method.to_string()).or_default();
        entry.calls += 1;
        if let Some(c) = class {
            *entry.errors_by_class.entry(c).or_default() += 1;
        }
    }

    /// Sends `call`, retrying retryable failures, and decodes the answer as `T`.
    pub(crate) async fn execute<T: DeserializeOwned>(&self, call: &Call) -> Result<T, GceError> {
        self.execute_with(call, |bytes| serde_json::from_slice(bytes).map_err(|e| e.to_string())).await
    }

    /// [`Client::execute`] with the answer's bytes handed to `decode` (which may borrow from them
    /// while it runs, e.g. to decode a page into borrowed fields and keep only what it needs).
    pub(crate) async fn execute_with<T>(
        &self,
        call: &Call,
        decode: impl FnMut(&[u8]) -> Result<T, String>,
    ) -> Result<T, GceError> {
        self.execute_buffered(call, &mut Vec::new(), decode).await
    }

    /// [`Client::execute_with`] reading the answer into `body` (emptied first): the pages of a list
    /// read one after the other into one buffer, which a buffer taken afresh for each would cost
    /// paging in again each time (the allocator returns freed memory at once; a VM list page is
    /// ~600 KB).
    pub(crate) async fn execute_buffered<T>(
        &self,
        call: &Call,
        body: &mut Vec<u8>,
        mut decode: impl FnMut(&[u8]) -> Result<T, String>,
    ) -> Result<T, GceError> {
        let start = Instant::now();
        let mut deadline = start + self.inner.retry_deadline;
        if let Some(d) = call.deadline {
            deadline = deadline.min(d);
        }
        let mut per_attempt = call.timeout.unwrap_or(self.inner.request_timeout);
        if let Some(budget) = self.call_budget {
            deadline = deadline.min(start + budget);
            per_attempt = per_attempt.min(budget);
        }
        let kind = call.kind();
        let mut attempt: u32 = 0;
        loop {
            // The first attempt always gets its full timeout; later ones never outlive the
            // deadline.
            let timeout = if attempt == 0 {
                per_attempt
            } else {
                per_attempt.min(deadline.saturating_duration_since(Instant::now()))
            };
            let result = self.attempt(call, kind, timeout, body, &mut decode).await;
            self.record(&call.method, result.as_ref().err().map(GceError::class));
            if result.as_ref().err().is_some_and(GceError::is_rate_limit) {
                self.inner.limiter.throttle(kind);
            }
            let err = match result {
                Ok(v) => return Ok(v),
                Err(e) if e.is_retryable() => e,
                Err(e) => {
                    debug!(method = %call.method, error = %e, "GCE call failed");
                    return Err(e);
                }
            };
            let backoff = *self.inner.backoff.lock().unwrap_or_else(|p| p.into_inner());
            let delay = backoff.delay(attempt, err.retry_after());
            let now = Instant::now();
            if now + delay >= deadline {
                warn!(method = %call.method, attempts = attempt + 1, error = %err,
                      "GCE call failed; retry deadline reached");
                return Err(err);
            }
            warn!(method = %call.method, attempt = attempt + 1, delay_ms = delay.as_millis() as u64,
                  error = %err, "GCE call failed; retrying");
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// One HTTP attempt.
    async fn attempt<T>(
        &self,
        call: &Call,
        kind: CallKind,
        timeout: Duration,
        bytes: &mut Vec<u8>,
        decode: &mut impl FnMut(&[u8]) -> Result<T, String>,
    ) -> Result<T, GceError> {
        self.inner.limiter.acquire(kind).await;
        let mut url = self
            .inner
            .endpoint
            .join(&call.path)
            .map_err(|e| GceError::InvalidArgument(format!("path {}: {e}", call.path)))?;
        if !call.query.is_empty() {
            url.query_pairs_mut().extend_pairs(call.query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        let path = url.path().to_string();
        let mut req =
            self.inner.http.request(call.verb.clone(), url).timeout(timeout.max(Duration::from_millis(1)));
        if let Some(tokens) = &self.inner.tokens {
            let tok = tokens.token().await?;
            let mut value = HeaderValue::from_str(&format!("Bearer {}", tok.secret()))
                .map_err(|_| GceError::Auth("access token is not a valid header value".into()))?;
            value.set_sensitive(true);
            req = req.header(AUTHORIZATION, value);
        }
        req = match &call.body {
            Some(body) => req.header(CONTENT_TYPE, "application/json").body(body.clone()),
            // Google's front end answers 411 to a body-less POST without a length.
            None if call.verb == Method::POST => req.header(CONTENT_LENGTH, "0").body(Vec::new()),
            None => req,
        };
        let began = Instant::now();
        let transport = |e: reqwest::Error| GceError::Transport {
            method: call.method.clone(),
            path: path.clone(),
            message: error_chain(&e),
            timeout: e.is_timeout(),
        };
        let sent = req.send().await;
        self.inner
            .answer_nanos
            .fetch_add(began.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
        let resp = sent.map_err(transport)?;
        let status = resp.status();
        let retry_after =
            resp.headers().get(RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(parse_retry_after);
        read_body(resp, bytes).await.map_err(transport)?;
        debug!(method = %call.method, %path, status = status.as_u16(),
               elapsed_ms = began.elapsed().as_millis() as u64, "GCE call");
        if !status.is_success() {
            return Err(GceError::Api(Box::new(ApiError::from_response(
                &call.method,
                call.verb.as_str(),
                &path,
                status.as_u16(),
                bytes,
                retry_after,
            ))));
        }
        decode(bytes).map_err(|message| GceError::Decode { method: call.method.clone(), message })
    }
}

/// The most of an announced `Content-Length` taken in one allocation before the body arrives.
const BODY_PRESIZE_MAX: u64 = 16 << 20;

/// The response body into `body` (emptied first), grown once to its announced length (a VM list
/// page is ~600 KB), each chunk copied in as it arrives: no list of chunks held until the end and
/// copied again, no growth by doubling, and the HTTP client's read buffer free for the next chunk
/// at once.
async fn read_body(mut resp: reqwest::Response, body: &mut Vec<u8>) -> Result<(), reqwest::Error> {
    let announced = resp.content_length().unwrap_or(0).min(BODY_PRESIZE_MAX);
    body.clear();
    body.reserve(announced as usize);
    while let Some(chunk) = resp.chunk().await? {
        body.extend_from_slice(&chunk);
    }
    Ok(())
}

/// A reqwest error with its causes ("error sending request: connection refused"); the Cloud
/// Billing client says its errors the same way.
pub(crate) fn error_chain(e: &reqwest::Error) -> String {
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    msg
}

fn check_endpoint(endpoint: &str) -> Result<Url, GceError> {
    let bad = |why: &str| GceError::InvalidArgument(format!("endpoint {endpoint:?}: {why}"));
    if !endpoint.ends_with('/') {
        return Err(bad("must end with '/'"));
    }
    let url = Url::parse(endpoint).map_err(|e| bad(&e.to_string()))?;
    match url.scheme() {
        "https" => {}
        "http" if is_loopback(&url) => {}
        "http" => return Err(bad("plain http:// is only allowed on a loopback address")),
        _ => return Err(bad("must be http:// or https://")),
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("must not have a query or fragment"));
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(endpoint: &str) -> ClientOptions {
        ClientOptions {
            endpoint: endpoint.into(),
            project: "p".into(),
            calls_per_minute: 0,
            reads_per_minute: 0,
            writes_per_minute: 0,
            request_timeout: Duration::from_secs(5),
            retry_deadline: Duration::from_secs(5),
        }
    }

    #[test]
    fn none_credentials_only_on_http_loopback() {
        for ok in [
            "http://127.0.0.1:8080/compute/v1/",
            "http://localhost:1/compute/v1/",
            "http://[::1]:9/compute/v1/",
            "http://127.3.4.5/",
        ] {
            Client::new(opts(ok), Credentials::None).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in [
            "https://compute.googleapis.com/compute/v1/",
            "https://127.0.0.1/compute/v1/",
            "http://10.0.0.1/compute/v1/",
            "http://compute.googleapis.com/compute/v1/",
            "http://127.0.0.1:8080/compute/v1",
            "ftp://127.0.0.1/",
            "not a url/",
        ] {
            let err = Client::new(opts(bad), Credentials::None).unwrap_err();
            assert_eq!(err.class(), ErrorClass::Invalid, "{bad}");
            assert!(err.to_string().contains(bad) || err.to_string().contains("endpoint"));
        }
        let err =
            Client::new(opts("https://compute.googleapis.com/compute/v1/"), Credentials::None).unwrap_err();
        assert!(err.to_string().contains("loopback"), "{err}");
    }

    #[test]
    fn auto_credentials_build_lazily_and_debug_is_clean() {
        let c = Client::new(opts("https://compute.googleapis.com/compute/v1/"), Credentials::Auto).unwrap();
        let dbg = format!("{c:?}");
        assert!(dbg.contains("compute.googleapis.com"), "{dbg}");
        assert!(dbg.contains("initialized: false"), "{dbg}");
        assert_eq!(c.project(), "p");
    }

    #[test]
    fn location_paths() {
        assert_eq!(Location::Region("us-central1".into()).path(), "regions/us-central1");
        assert_eq!(Location::Zone("us-central1-a".into()).path(), "zones/us-central1-a");
    }
}
