//! [`BillingClient`]: the Cloud Billing Catalog API's two list methods, authenticated with the same
//! credentials as the Compute client (`gcp.credentials`; the token asks for the `cloud-platform`
//! scope, which the Catalog API accepts), each request timed out, retried with jittered backoff while
//! it fails for a transient reason, and every list bounded in pages.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderValue, AUTHORIZATION, RETRY_AFTER};
use reqwest::Url;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use super::error::BillingError;
use super::types::{Service, ServicesPage, Sku, SkusPage};
use crate::gce::auth::{token_source, Credentials, TokenSource};
use crate::gce::client::error_chain;
use crate::gce::retry::{parse_retry_after, Backoff};

/// Google's endpoint of the Catalog API.
pub const DEFAULT_ENDPOINT: &str = "https://cloudbilling.googleapis.com/v1/";

/// The largest page `services.skus.list` and `services.list` give (the reference: 5000).
pub const PAGE_SIZE: u32 = 5000;

/// No list goes on past this many pages (Compute Engine's SKUs fill a few dozen pages of 5000).
pub const MAX_PAGES: usize = 200;

/// The client's settings, from plain values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BillingOptions {
    /// Base URL ending with `/`: [`DEFAULT_ENDPOINT`], or the simulator's `http://127.0.0.1:P/v1/`.
    pub endpoint: String,
    /// Timeout of one HTTP attempt.
    pub request_timeout: Duration,
    /// How long one call keeps retrying transient failures.
    pub retry_deadline: Duration,
    /// Items asked for per page.
    pub page_size: u32,
    /// The most pages one list reads.
    pub max_pages: usize,
}

impl BillingOptions {
    /// Google's endpoint with the given timeouts, pages of [`PAGE_SIZE`], at most [`MAX_PAGES`].
    pub fn new(endpoint: &str, request_timeout: Duration, retry_deadline: Duration) -> Self {
        BillingOptions {
            endpoint: endpoint.to_string(),
            request_timeout,
            retry_deadline,
            page_size: PAGE_SIZE,
            max_pages: MAX_PAGES,
        }
    }
}

/// The Catalog API's endpoint that goes with a Compute API endpoint (`gcp.endpoint`): Google's own
/// for Google's (`compute.googleapis.com` → `cloudbilling.googleapis.com`, and a Private Service
/// Connect name `compute-X.p.googleapis.com` → `cloudbilling-X.p.googleapis.com`), and for any
/// other (the simulator, a proxy) the same origin with the path `/v1/`.
pub fn endpoint_for(compute_endpoint: &str) -> String {
    let Ok(url) = Url::parse(compute_endpoint) else { return DEFAULT_ENDPOINT.to_string() };
    let host = url.host_str().unwrap_or_default();
    if host == "compute.googleapis.com" || host == "www.googleapis.com" {
        return DEFAULT_ENDPOINT.to_string();
    }
    if let Some(rest) = host.strip_prefix("compute").filter(|_| host.ends_with(".googleapis.com")) {
        return format!("{}://cloudbilling{rest}/v1/", url.scheme());
    }
    let mut origin = url.clone();
    origin.set_path("/v1/");
    origin.set_query(None);
    origin.set_fragment(None);
    origin.to_string()
}

/// A Catalog API client. Cheap to clone.
#[derive(Clone)]
pub struct BillingClient {
    http: reqwest::Client,
    endpoint: Url,
    tokens: Option<Arc<dyn TokenSource>>,
    opts: BillingOptions,
    backoff: Backoff,
}

impl std::fmt::Debug for BillingClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BillingClient")
            .field("endpoint", &self.endpoint.as_str())
            .field("tokens", &self.tokens)
            .finish_non_exhaustive()
    }
}

impl BillingClient {
    /// A client for `opts` authenticating with `creds`: an `https://` endpoint, or plain `http://` on
    /// a loopback address (the simulator); `Credentials::None` only with the latter.
    pub fn new(opts: BillingOptions, creds: &Credentials) -> Result<Self, BillingError> {
        let endpoint = check_endpoint(&opts.endpoint)?;
        if *creds == Credentials::None && endpoint.scheme() != "http" {
            return Err(BillingError::InvalidArgument(format!(
                "credentials \"none\" is only allowed with an http:// loopback endpoint (a simulator), not {}",
                opts.endpoint
            )));
        }
        let tokens = token_source(creds).map_err(|e| BillingError::Auth(e.to_string()))?;
        let http = reqwest::Client::builder()
            .user_agent(concat!("slurm-dws/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(opts.request_timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| BillingError::InvalidArgument(format!("HTTP client: {e}")))?;
        Ok(BillingClient { http, endpoint, tokens, opts, backoff: Backoff::default() })
    }

    /// The same client with other backoff parameters (tests use milliseconds).
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// `services.list`, every page.
    pub async fn list_services(&self) -> Result<Vec<Service>, BillingError> {
        let mut out = Vec::new();
        self.pages("services", &[], |page: ServicesPage| {
            out.extend(page.services);
            page.next_page_token
        })
        .await?;
        Ok(out)
    }

    /// The id of the service `display_name` names (`Compute Engine` → `6F81-5844-456A`).
    pub async fn service_id(&self, display_name: &str) -> Result<String, BillingError> {
        let services = self.list_services().await?;
        services
            .into_iter()
            .find(|s| s.display_name == display_name)
            .map(|s| s.service_id)
            .ok_or_else(|| BillingError::NoSuchService(display_name.to_string()))
    }

    /// `services.skus.list` of `service_id` with prices in `currency` (ISO 4217), every page; only
    /// the SKUs `keep` accepts are kept (a catalog is tens of thousands of SKUs).
    pub async fn list_skus(
        &self,
        service_id: &str,
        currency: &str,
        mut keep: impl FnMut(&Sku) -> bool,
    ) -> Result<Vec<Sku>, BillingError> {
        let mut out = Vec::new();
        let path = format!("services/{service_id}/skus");
        self.pages(&path, &[("currencyCode", currency.to_string())], |page: SkusPage| {
            out.extend(page.skus.into_iter().filter(|s| keep(s)));
            page.next_page_token
        })
        .await?;
        Ok(out)
    }

    /// Reads `path` page after page, handing each to `take` (which returns the next page token),
    /// until a page has no token, or fails past [`BillingOptions::max_pages`].
    async fn pages<P: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
        mut take: impl FnMut(P) -> String,
    ) -> Result<(), BillingError> {
        let mut token = String::new();
        for _ in 0..self.opts.max_pages.max(1) {
            let mut q: Vec<(&str, String)> = query.to_vec();
            q.push(("pageSize", self.opts.page_size.to_string()));
            if !token.is_empty() {
                q.push(("pageToken", token.clone()));
            }
            let page: P = self.get(path, &q).await?;
            token = take(page);
            if token.is_empty() {
                return Ok(());
            }
        }
        Err(BillingError::TooManyPages { path: self.full_path(path), pages: self.opts.max_pages })
    }

    fn full_path(&self, path: &str) -> String {
        format!("{}{path}", self.endpoint.path())
    }

    /// One GET, retried while it fails for a transient reason and the deadline allows.
    async fn get<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T, BillingError> {
        let deadline = Instant::now() + self.opts.retry_deadline;
        let mut attempt = 0u32;
        loop {
            let err = match self.attempt(path, query).await {
                Ok(v) => return Ok(v),
                Err(e) if e.is_retryable() => e,
                Err(e) => return Err(e),
            };
            let delay = self.backoff.delay(attempt, err.retry_after());
            if Instant::now() + delay >= deadline {
                return Err(err);
            }
            tracing::debug!(error = %err, delay_ms = delay.as_millis() as u64, "Cloud Billing call failed; retrying");
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    async fn attempt<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T, BillingError> {
        let mut url = self
            .endpoint
            .join(path)
            .map_err(|e| BillingError::InvalidArgument(format!("path {path}: {e}")))?;
        url.query_pairs_mut().extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
        let shown = url.path().to_string();
        let mut req = self.http.get(url).timeout(self.opts.request_timeout.max(Duration::from_millis(1)));
        if let Some(tokens) = &self.tokens {
            let tok = tokens.token().await.map_err(|e| BillingError::Auth(e.to_string()))?;
            let mut value = HeaderValue::from_str(&format!("Bearer {}", tok.secret()))
                .map_err(|_| BillingError::Auth("access token is not a valid header value".into()))?;
            value.set_sensitive(true);
            req = req.header(AUTHORIZATION, value);
        }
        let transport = |e: reqwest::Error| BillingError::Transport {
            path: shown.clone(),
            message: error_chain(&e),
            timeout: e.is_timeout(),
        };
        let resp = req.send().await.map_err(transport)?;
        let status = resp.status();
        let retry_after =
            resp.headers().get(RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(parse_retry_after);
        let body = resp.bytes().await.map_err(transport)?;
        if !status.is_success() {
            return Err(BillingError::from_response(&shown, status.as_u16(), &body, retry_after));
        }
        serde_json::from_slice(&body)
            .map_err(|e| BillingError::Decode { path: shown, message: e.to_string() })
    }
}

fn check_endpoint(endpoint: &str) -> Result<Url, BillingError> {
    let bad =
        |why: &str| BillingError::InvalidArgument(format!("Cloud Billing endpoint {endpoint:?}: {why}"));
    if !endpoint.ends_with('/') {
        return Err(bad("must end with '/'"));
    }
    let url = Url::parse(endpoint).map_err(|e| bad(&e.to_string()))?;
    let loopback = url.host_str().is_some_and(|h| {
        let h = h.trim_start_matches('[').trim_end_matches(']');
        h.eq_ignore_ascii_case("localhost") || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    });
    match url.scheme() {
        "https" => Ok(url),
        "http" if loopback => Ok(url),
        "http" => Err(bad("plain http:// is only allowed on a loopback address")),
        _ => Err(bad("must be http:// or https://")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_endpoint_follows_the_compute_endpoint() {
        for (compute, billing) in [
            ("https://compute.googleapis.com/compute/v1/", DEFAULT_ENDPOINT),
            (
                "https://compute-myendpoint.p.googleapis.com/compute/v1/",
                "https://cloudbilling-myendpoint.p.googleapis.com/v1/",
            ),
            ("http://127.0.0.1:8080/compute/v1/", "http://127.0.0.1:8080/v1/"),
            ("https://proxy.example.com/gce/compute/v1/", "https://proxy.example.com/v1/"),
            ("not a url", DEFAULT_ENDPOINT),
        ] {
            assert_eq!(endpoint_for(compute), billing, "{compute}");
        }
    }

    #[test]
    fn endpoints_and_credentials_are_checked() {
        let opts = |e: &str| BillingOptions::new(e, Duration::from_secs(5), Duration::from_secs(5));
        assert!(BillingClient::new(opts("http://127.0.0.1:1/v1/"), &Credentials::None).is_ok());
        for bad in ["http://10.0.0.1/v1/", "https://cloudbilling.googleapis.com/v1", "ftp://127.0.0.1/"] {
            let e = BillingClient::new(opts(bad), &Credentials::Auto).unwrap_err();
            assert!(matches!(e, BillingError::InvalidArgument(_)), "{bad}: {e}");
            assert!(e.to_string().contains(bad), "{e}");
        }
        let e = BillingClient::new(opts(DEFAULT_ENDPOINT), &Credentials::None).unwrap_err();
        assert!(e.to_string().contains("loopback"), "{e}");
        let c = BillingClient::new(opts(DEFAULT_ENDPOINT), &Credentials::Auto).unwrap();
        assert!(format!("{c:?}").contains("cloudbilling.googleapis.com"));
    }
}
