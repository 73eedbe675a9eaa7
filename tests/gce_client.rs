//! gce::Client over real HTTP against a tiny scripted server: paths, retries, classification,
//! pagination, timeouts and operation waits, including fault shapes a simulator may not make.
//!
//! The tests about timing (retries and their deadline, `Retry-After`, per-attempt timeouts, operation
//! waits, the shared rate limit) run on tokio's paused clock: the client and the scripted server both
//! sleep on it, so the durations are exact and nobody waits for them.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};
use slurm_dws::gce::{
    AccessToken, Backoff, Client, ClientOptions, Credentials, ErrorClass, GceError, InstanceGroupManager,
    InstanceGroupManagerResizeRequest, Location, OperationScope, OperationStatus, StaticToken,
};
use tokio::time::Instant;

const RID: &str = "6f1c1f4e-2a0b-4c8e-9a53-2f4f1c9d7e10";

/// What the fake server saw.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    query: BTreeMap<String, String>,
    auth: Option<String>,
    content_length: Option<String>,
    body: Value,
}

#[derive(Clone)]
struct Canned {
    status: u16,
    body: String,
    retry_after: Option<u64>,
    delay: Duration,
}

fn ok(v: Value) -> Canned {
    Canned { status: 200, body: v.to_string(), retry_after: None, delay: Duration::ZERO }
}

fn fail(status: u16, v: Value) -> Canned {
    Canned { status, body: v.to_string(), retry_after: None, delay: Duration::ZERO }
}

fn gerr(code: u16, status: &str, reason: &str, message: &str) -> Canned {
    fail(
        code,
        json!({"error": {"code": code, "message": message, "status": status,
            "errors": [{"reason": reason, "domain": "global", "message": message}]}}),
    )
}

#[derive(Default)]
struct State {
    seen: Vec<Seen>,
    /// Scripted answers per path, in order; the last one repeats.
    script: BTreeMap<String, VecDeque<Canned>>,
}

/// A scripted HTTP server on 127.0.0.1 with GCE's URL layout.
#[derive(Clone)]
struct Fake {
    state: Arc<Mutex<State>>,
    base: String,
}

const PREFIX: &str = "/compute/v1/projects/p/";

impl Fake {
    async fn start() -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let st = state.clone();
        let app = Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let st = st.clone();
            async move { handle(st, method, uri, headers, body).await }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { state, base: format!("http://{addr}/compute/v1/") }
    }

    /// Scripts answers for `path` (relative to `projects/p/`).
    fn script(&self, path: &str, answers: Vec<Canned>) {
        self.state.lock().unwrap().script.insert(format!("{PREFIX}{path}"), answers.into());
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    fn client(&self) -> Client {
        self.client_with(Duration::from_secs(5), Duration::from_secs(5), 0)
    }

    fn client_with(&self, request_timeout: Duration, retry_deadline: Duration, cpm: u32) -> Client {
        let c = client_at(self.base.clone(), request_timeout, retry_deadline, cpm);
        c.set_backoff(Backoff { initial: Duration::from_millis(20), max: Duration::from_millis(100) });
        c
    }
}

/// A client of project `p` at `endpoint`, without credentials.
fn client_at(endpoint: String, request_timeout: Duration, retry_deadline: Duration, cpm: u32) -> Client {
    Client::new(
        ClientOptions {
            endpoint,
            project: "p".into(),
            calls_per_minute: cpm,
            reads_per_minute: 0,
            writes_per_minute: 0,
            request_timeout,
            retry_deadline,
        },
        Credentials::None,
    )
    .unwrap()
}

async fn handle(
    st: Arc<Mutex<State>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let query: BTreeMap<String, String> = uri
        .query()
        .map(|q| url_pairs(q).into_iter().collect::<BTreeMap<String, String>>())
        .unwrap_or_default();
    let canned = {
        let mut s = st.lock().unwrap();
        s.seen.push(Seen {
            method: method.to_string(),
            path: uri.path().to_string(),
            query,
            auth: headers.get("authorization").map(|v| v.to_str().unwrap().to_string()),
            content_length: headers.get("content-length").map(|v| v.to_str().unwrap().to_string()),
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        });
        match s.script.get_mut(uri.path()) {
            Some(q) if q.len() > 1 => q.pop_front(),
            Some(q) => q.front().cloned(),
            None => Some(ok(json!({"name": "default"}))),
        }
    };
    let c = canned.unwrap();
    if !c.delay.is_zero() {
        tokio::time::sleep(c.delay).await;
    }
    let mut resp = (StatusCode::from_u16(c.status).unwrap(), [("content-type", "application/json")], c.body)
        .into_response();
    if let Some(ra) = c.retry_after {
        resp.headers_mut().insert("retry-after", ra.to_string().parse().unwrap());
    }
    resp
}

/// Minimal query-string decoding (percent-decoding and '+').
fn url_pairs(q: &str) -> Vec<(String, String)> {
    fn dec(s: &str) -> String {
        let s = s.replace('+', " ");
        let bytes = s.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' && i + 2 < bytes.len() {
                if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                    out.push(b);
                    i += 3;
                    continue;
                }
            }
            out.push(bytes[i]);
            i += 1;
        }
        String::from_utf8(out).unwrap()
    }
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (dec(k), dec(v))
        })
        .collect()
}

fn region() -> Location {
    Location::Region("us-central1".into())
}

fn zone() -> Location {
    Location::Zone("us-central1-a".into())
}

#[tokio::test]
async fn every_endpoint_hits_the_documented_path() {
    let fake = Fake::start().await;
    let c = fake.client();
    let mig = InstanceGroupManager { name: "m".into(), target_size: Some(0), ..Default::default() };
    let rr = InstanceGroupManagerResizeRequest::for_instances("rr", "", vec!["n0".into()], 600);
    for loc in [region(), zone()] {
        c.insert_mig(&loc, &mig, RID).await.unwrap();
        c.get_mig(&loc, "m").await.unwrap();
        c.list_migs(&loc, None).await.unwrap();
        c.delete_mig(&loc, "m", RID).await.unwrap();
        c.delete_instances(&loc, "m", &["n0".into()], RID).await.unwrap();
        c.list_managed_instances(&loc, "m", None).await.unwrap();
        c.insert_resize_request(&loc, "m", &rr, RID).await.unwrap();
        c.get_resize_request(&loc, "m", "rr").await.unwrap();
        c.list_resize_requests(&loc, "m", None).await.unwrap();
        c.cancel_resize_request(&loc, "m", "rr", RID).await.unwrap();
        c.delete_resize_request(&loc, "m", "rr", RID).await.unwrap();
    }
    c.get_instance("us-central1-a", "n0").await.unwrap();
    c.list_instances("us-central1-a", None).await.unwrap();
    c.aggregated_list_instances(None).await.unwrap();
    c.get_instance_template("t").await.unwrap();
    c.get_region_instance_template("us-central1", "t").await.unwrap();
    c.get_instance_template_ref("projects/other/regions/us-east1/instanceTemplates/t2").await.unwrap();
    for scope in [
        OperationScope::Zone("us-central1-a".into()),
        OperationScope::Region("us-central1".into()),
        OperationScope::Global,
    ] {
        c.get_operation(&scope, "op").await.unwrap();
        c.wait_operation(&scope, "op").await.unwrap();
    }

    let got: Vec<String> = fake
        .seen()
        .iter()
        .map(|s| {
            let rid = s.query.get("requestId").map_or("", |_| " rid");
            format!("{} {}{rid}", s.method, s.path.trim_start_matches("/compute/v1/"))
        })
        .collect();
    let mut want = Vec::new();
    for l in ["regions/us-central1", "zones/us-central1-a"] {
        let m = format!("projects/p/{l}/instanceGroupManagers");
        want.extend([
            format!("POST {m} rid"),
            format!("GET {m}/m"),
            format!("GET {m}"),
            format!("DELETE {m}/m rid"),
            format!("POST {m}/m/deleteInstances rid"),
            format!("POST {m}/m/listManagedInstances"),
            format!("POST {m}/m/resizeRequests rid"),
            format!("GET {m}/m/resizeRequests/rr"),
            format!("GET {m}/m/resizeRequests"),
            format!("POST {m}/m/resizeRequests/rr/cancel rid"),
            format!("DELETE {m}/m/resizeRequests/rr rid"),
        ]);
    }
    want.extend(
        [
            "GET projects/p/zones/us-central1-a/instances/n0",
            "GET projects/p/zones/us-central1-a/instances",
            "GET projects/p/aggregated/instances",
            "GET projects/p/global/instanceTemplates/t",
            "GET projects/p/regions/us-central1/instanceTemplates/t",
            "GET projects/other/regions/us-east1/instanceTemplates/t2",
            "GET projects/p/zones/us-central1-a/operations/op",
            "POST projects/p/zones/us-central1-a/operations/op/wait",
            "GET projects/p/regions/us-central1/operations/op",
            "POST projects/p/regions/us-central1/operations/op/wait",
            "GET projects/p/global/operations/op",
            "POST projects/p/global/operations/op/wait",
        ]
        .map(String::from),
    );
    assert_eq!(got, want);

    let seen = fake.seen();
    // Bodies are exactly what was set, camelCase, int64 as string.
    assert_eq!(seen[0].body, json!({"name": "m", "targetSize": 0}));
    assert_eq!(seen[4].body, json!({"instances": ["n0"], "skipInstancesOnValidationError": true}));
    assert_eq!(
        seen[6].body,
        json!({"name": "rr", "instances": [{"name": "n0"}], "requestedRunDuration": {"seconds": "600"}})
    );
    // Body-less POSTs say so (Google's front end answers 411 otherwise).
    assert_eq!(seen[5].content_length.as_deref(), Some("0"));
    assert_eq!(seen[9].content_length.as_deref(), Some("0"));
    assert!(seen.iter().all(|s| s.auth.is_none()));
    // Lists ask for full pages.
    assert_eq!(seen[2].query.get("maxResults").map(String::as_str), Some("500"));

    let stats = c.stats();
    assert_eq!(stats["regionInstanceGroupManagers.insert"].calls, 1);
    assert_eq!(stats["instanceGroupManagers.insert"].calls, 1);
    assert_eq!(stats["regionInstanceGroupManagerResizeRequests.cancel"].calls, 1);
    assert_eq!(stats["instanceGroupManagerResizeRequests.delete"].calls, 1);
    assert_eq!(stats["regionInstanceTemplates.get"].calls, 2);
    assert_eq!(stats["globalOperations.wait"].calls, 1);
    assert!(stats.values().all(|s| s.errors_by_class.is_empty()));
}

#[tokio::test]
async fn bearer_token_is_sent_and_request_id_validated() {
    let fake = Fake::start().await;
    let c = Client::with_token_source(
        ClientOptions {
            endpoint: fake.base.clone(),
            project: "p".into(),
            calls_per_minute: 0,
            reads_per_minute: 0,
            writes_per_minute: 0,
            request_timeout: Duration::from_secs(5),
            retry_deadline: Duration::from_secs(5),
        },
        Arc::new(StaticToken(AccessToken::new("ya29.secret"))),
    )
    .unwrap();
    c.get_mig(&region(), "m").await.unwrap();
    assert_eq!(fake.seen()[0].auth.as_deref(), Some("Bearer ya29.secret"));
    assert!(!format!("{c:?}").contains("ya29"));

    let err = c.delete_mig(&region(), "m", "not-a-uuid").await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Invalid);
    let err = c.delete_instances(&region(), "m", &vec!["x".to_string(); 1001], RID).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Invalid);
    assert_eq!(fake.seen().len(), 1, "invalid calls never reach the server");
}

#[tokio::test(start_paused = true)]
async fn retryable_errors_are_retried_with_the_same_request_id() {
    let fake = Fake::start().await;
    let path = "regions/us-central1/instanceGroupManagers";
    fake.script(
        path,
        vec![
            gerr(503, "UNAVAILABLE", "backendError", "Backend Error"),
            gerr(403, "PERMISSION_DENIED", "rateLimitExceeded", "Rate Limit Exceeded"),
            gerr(429, "RESOURCE_EXHAUSTED", "rateLimitExceeded", "Too many"),
            gerr(500, "INTERNAL", "backendError", "Internal"),
            fail(502, json!("bad gateway")),
            fail(504, json!({})),
            ok(json!({"name": "operation-1", "status": "RUNNING", "region": "regions/us-central1"})),
        ],
    );
    let c = fake.client();
    let op = c.insert_mig(&region(), &InstanceGroupManager::default(), RID).await.unwrap();
    assert_eq!(op.name, "operation-1");
    let seen = fake.seen();
    assert_eq!(seen.len(), 7);
    assert!(seen.iter().all(|s| s.query.get("requestId").map(String::as_str) == Some(RID)));
    let st = &c.stats()["regionInstanceGroupManagers.insert"];
    assert_eq!(st.calls, 7);
    assert_eq!(st.errors_by_class.get(&ErrorClass::Retryable), Some(&6));
}

#[tokio::test(start_paused = true)]
async fn retry_budget_is_bounded_by_the_deadline() {
    let fake = Fake::start().await;
    fake.script(
        "regions/us-central1/instanceGroupManagers/m",
        vec![gerr(503, "UNAVAILABLE", "backendError", "Backend Error")],
    );
    let c = fake.client_with(Duration::from_secs(5), Duration::from_millis(400), 0);
    let t = Instant::now();
    let err = c.get_mig(&region(), "m").await.unwrap_err();
    let took = t.elapsed();
    assert!(err.is_retryable(), "{err}");
    assert_eq!(err.http_status(), Some(503));
    assert!(took < Duration::from_secs(2), "took {took:?}");
    let n = fake.seen().len();
    assert!(n >= 3, "only {n} attempts in 400 ms with ≤100 ms backoff");
    assert_eq!(err.to_string(), "regionInstanceGroupManagers.get: 503 backendError: Backend Error");
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured() {
    let fake = Fake::start().await;
    let mut slow_down = gerr(429, "RESOURCE_EXHAUSTED", "rateLimitExceeded", "slow down");
    slow_down.retry_after = Some(1);
    fake.script("zones/us-central1-a/instances", vec![slow_down, ok(json!({"items": [{"name": "a"}]}))]);
    let c = fake.client();
    let t = Instant::now();
    let vms = c.list_instances("us-central1-a", None).await.unwrap();
    assert_eq!(vms.len(), 1);
    assert!(t.elapsed() >= Duration::from_secs(1), "{:?}", t.elapsed());

    // A Retry-After beyond the deadline ends the call at once with the error.
    let mut far = gerr(503, "UNAVAILABLE", "backendError", "later");
    far.retry_after = Some(60);
    fake.script("zones/us-central1-a/instances/x", vec![far]);
    let t = Instant::now();
    let err = c.get_instance("us-central1-a", "x").await.unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_secs(60)));
    assert!(t.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn non_retryable_errors_return_at_once_with_their_class() {
    let fake = Fake::start().await;
    let cases: Vec<(&str, Canned, ErrorClass)> = vec![
        ("m404", gerr(404, "NOT_FOUND", "notFound", "The resource 'm404' was not found"), ErrorClass::NotFound),
        ("m409", gerr(409, "ALREADY_EXISTS", "alreadyExists", "The resource 'm409' already exists"), ErrorClass::AlreadyExists),
        ("m400", gerr(400, "INVALID_ARGUMENT", "invalid", "Invalid value for field 'resource.targetSize'"), ErrorClass::Invalid),
        ("m412", gerr(412, "FAILED_PRECONDITION", "conditionNotMet", "not now"), ErrorClass::ConditionNotMet),
        ("m403", gerr(403, "PERMISSION_DENIED", "forbidden", "Required 'compute.instanceGroupManagers.get' permission"), ErrorClass::Auth),
        ("m401", gerr(401, "UNAUTHENTICATED", "authError", "Invalid Credentials"), ErrorClass::Auth),
        ("mquota", gerr(403, "PERMISSION_DENIED", "quotaExceeded", "Quota 'NVIDIA_H100_GPUS' exceeded. Limit: 8.0 in region us-central1."), ErrorClass::Quota),
        ("mstock", gerr(503, "UNAVAILABLE", "ZONE_RESOURCE_POOL_EXHAUSTED",
            "The zone 'projects/p/zones/us-central1-a' does not have enough resources available to fulfill the request."), ErrorClass::Capacity),
        ("m418", fail(418, json!({"error": {"code": 418, "message": "teapot"}})), ErrorClass::Other),
    ];
    for (name, canned, _) in &cases {
        fake.script(&format!("regions/us-central1/instanceGroupManagers/{name}"), vec![canned.clone()]);
    }
    let c = fake.client();
    for (name, _, want) in &cases {
        let err = c.get_mig(&region(), name).await.unwrap_err();
        assert_eq!(err.class(), *want, "{name}: {err}");
        let GceError::Api(api) = &err else { panic!("{name}: {err:?}") };
        assert_eq!(api.method, "regionInstanceGroupManagers.get");
        assert_eq!(api.http_method, "GET");
        assert_eq!(
            api.path,
            format!("/compute/v1/projects/p/regions/us-central1/instanceGroupManagers/{name}")
        );
    }
    assert_eq!(fake.seen().len(), cases.len(), "none was retried");
    let st = &c.stats()["regionInstanceGroupManagers.get"];
    assert_eq!(st.calls, cases.len() as u64);
    assert_eq!(st.errors_by_class[&ErrorClass::Auth], 2);
    assert_eq!(st.errors_by_class[&ErrorClass::Capacity], 1);
}

#[tokio::test]
async fn undecodable_answers_are_not_retried() {
    let fake = Fake::start().await;
    fake.script(
        "regions/us-central1/instanceGroupManagers/m",
        vec![Canned {
            status: 200,
            body: "<html>hello</html>".into(),
            retry_after: None,
            delay: Duration::ZERO,
        }],
    );
    let err = fake.client().get_mig(&region(), "m").await.unwrap_err();
    assert!(matches!(err, GceError::Decode { .. }), "{err:?}");
    assert_eq!(err.class(), ErrorClass::Other);
    assert_eq!(fake.seen().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn timeouts_are_retried_then_succeed() {
    let fake = Fake::start().await;
    let mut slow = ok(json!({"name": "m"}));
    slow.delay = Duration::from_millis(600);
    fake.script(
        "regions/us-central1/instanceGroupManagers/m",
        vec![slow, ok(json!({"name": "m", "targetSize": 2}))],
    );
    let c = fake.client_with(Duration::from_millis(200), Duration::from_secs(5), 0);
    let mig = c.get_mig(&region(), "m").await.unwrap();
    assert_eq!(mig.target_size, Some(2));
    assert_eq!(c.stats()["regionInstanceGroupManagers.get"].errors_by_class[&ErrorClass::Retryable], 1);

    // Always slow: the timeout error comes back, typed.
    let mut slow = ok(json!({}));
    slow.delay = Duration::from_millis(600);
    fake.script("regions/us-central1/instanceGroupManagers/s", vec![slow]);
    let c = fake.client_with(Duration::from_millis(100), Duration::from_millis(300), 0);
    let err = c.get_mig(&region(), "s").await.unwrap_err();
    assert!(matches!(err, GceError::Transport { timeout: true, .. }), "{err:?}");
    assert!(err.is_retryable());
}

#[tokio::test]
async fn connection_refused_is_a_retryable_transport_error() {
    // A port bound and never listened on, held for the whole test: a connection is refused, and no
    // other test can take the port meanwhile (bound then dropped, it was once taken by a test running
    // beside this one, and the call timed out instead).
    use nix::sys::socket::{bind, getsockname, socket, AddressFamily, SockFlag, SockType, SockaddrIn};
    let held = socket(AddressFamily::Inet, SockType::Stream, SockFlag::SOCK_CLOEXEC, None).unwrap();
    bind(std::os::fd::AsRawFd::as_raw_fd(&held), &SockaddrIn::new(127, 0, 0, 1, 0)).unwrap();
    let port = getsockname::<SockaddrIn>(std::os::fd::AsRawFd::as_raw_fd(&held)).unwrap().port();
    let c = client_at(
        format!("http://127.0.0.1:{port}/compute/v1/"),
        Duration::from_secs(2),
        Duration::from_millis(200),
        0,
    );
    c.set_backoff(Backoff { initial: Duration::from_millis(10), max: Duration::from_millis(50) });
    let err = c.list_migs(&region(), None).await.unwrap_err();
    assert!(matches!(err, GceError::Transport { timeout: false, .. }), "{err:?}");
    assert!(err.is_retryable());
    assert!(c.stats()["regionInstanceGroupManagers.list"].calls >= 2);
    drop(held);
}

#[tokio::test]
async fn lists_follow_every_page_with_the_filter() {
    let fake = Fake::start().await;
    // The scripted server answers pages in order; the client must send the tokens it got.
    fake.script(
        "zones/us-central1-a/instances",
        vec![
            ok(json!({"items": [{"name": "a"}, {"name": "b"}], "nextPageToken": "t1"})),
            ok(json!({"items": [{"name": "c"}], "nextPageToken": "t2"})),
            ok(json!({"nextPageToken": "t3"})),
            ok(json!({"items": [{"name": "d"}]})),
        ],
    );
    let c = fake.client();
    let filter = "name eq 'hpc-a3u-.*'";
    let vms = c.list_instances("us-central1-a", Some(filter)).await.unwrap();
    let names: Vec<&str> = vms.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c", "d"]);
    let seen = fake.seen();
    let tokens: Vec<Option<&str>> =
        seen.iter().map(|s| s.query.get("pageToken").map(String::as_str)).collect();
    assert_eq!(tokens, [None, Some("t1"), Some("t2"), Some("t3")]);
    assert!(seen.iter().all(|s| s.query.get("filter").map(String::as_str) == Some(filter)));

    // listManagedInstances pages under `managedInstances`, over POST.
    fake.script(
        "regions/us-central1/instanceGroupManagers/m/listManagedInstances",
        vec![
            ok(json!({"managedInstances": [{"name": "n0", "instanceStatus": "PENDING"}], "nextPageToken": "x"})),
            ok(json!({"managedInstances": [{"instance": "https://x/zones/z/instances/n1", "instanceStatus": "RUNNING"}]})),
        ],
    );
    let mis = c.list_managed_instances(&region(), "m", None).await.unwrap();
    assert_eq!(mis.iter().map(|m| m.vm_name()).collect::<Vec<_>>(), ["n0", "n1"]);

    // aggregatedList flattens the zones of every page.
    fake.script(
        "aggregated/instances",
        vec![
            ok(json!({"items": {"zones/a": {"instances": [{"name": "x", "zone": "zones/a"}]},
                                 "zones/b": {"warning": {"code": "NO_RESULTS_ON_PAGE"}}},
                      "nextPageToken": "p2"})),
            ok(json!({"items": {"zones/b": {"instances": [{"name": "y", "zone": "zones/b"}]}}})),
        ],
    );
    let (all, unreachable) = c.aggregated_list_instances(None).await.unwrap();
    assert_eq!(all.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["x", "y"]);
    assert!(unreachable.is_empty(), "NO_RESULTS_ON_PAGE is an empty zone, not a missing one");

    // A partial success: the zones that did not answer are said, whichever way GCE says it.
    fake.script(
        "aggregated/instances",
        vec![
            ok(json!({"items": {"zones/a": {"instances": [{"name": "x", "zone": "zones/a"}]},
                                 "zones/b": {"warning": {"code": "UNREACHABLE", "message": "down",
                                             "data": [{"key": "scope", "value": "zones/b"}]}}},
                      "unreachables": ["zones/b", "projects/p/zones/c"],
                      "nextPageToken": "p2"})),
            ok(json!({"items": {}, "warning": {"code": "PARTIAL_SUCCESS", "message": "some",
                                                "data": [{"key": "scope", "value": "zones/d"}]}})),
        ],
    );
    let (all, unreachable) = c.aggregated_list_instances(None).await.unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(unreachable.zones.iter().map(String::as_str).collect::<Vec<_>>(), ["b", "c", "d"]);
    assert_eq!(unreachable.unscoped, None);
    // A partial answer that names no zone: nothing of it can be trusted for absence.
    fake.script(
        "aggregated/instances",
        vec![ok(
            json!({"items": {}, "warning": {"code": "PARTIAL_SUCCESS", "message": "some scopes failed"}}),
        )],
    );
    let (_, unreachable) = c.aggregated_list_instances(None).await.unwrap();
    assert!(
        unreachable.unscoped.as_deref().is_some_and(|w| w.contains("some scopes failed")),
        "{unreachable:?}"
    );

    // A server that repeats its token is reported, not followed for ever.
    fake.script(
        "regions/us-central1/instanceGroupManagers",
        vec![ok(json!({"items": [{"name": "m"}], "nextPageToken": "same"}))],
    );
    let err = c.list_migs(&region(), None).await.unwrap_err();
    assert!(matches!(err, GceError::Decode { .. }), "{err:?}");
}

#[tokio::test(start_paused = true)]
async fn wait_done_loops_until_done_and_types_the_outcome() {
    let fake = Fake::start().await;
    let wait = "regions/us-central1/operations/op-1/wait";
    fake.script(
        wait,
        vec![
            ok(json!({"name": "op-1", "status": "RUNNING", "region": "regions/us-central1"})),
            ok(json!({"name": "op-1", "status": "RUNNING", "region": "regions/us-central1"})),
            ok(json!({"name": "op-1", "status": "DONE", "region": "regions/us-central1",
                      "targetLink": "projects/p/regions/us-central1/instanceGroupManagers/m"})),
        ],
    );
    let c = fake.client();
    let op: slurm_dws::gce::Operation = serde_json::from_value(
        json!({"name": "op-1", "status": "PENDING", "region": "https://x/projects/p/regions/us-central1"}),
    )
    .unwrap();
    let done = c.wait_done(&op, Instant::now() + Duration::from_secs(10)).await.unwrap();
    assert_eq!(done.status, OperationStatus::Done);
    assert_eq!(fake.seen().len(), 3);

    // DONE with a stockout: a typed Capacity error carrying the operation.
    fake.script(
        "zones/us-central1-a/operations/op-2/wait",
        vec![ok(json!({"name": "op-2", "status": "DONE", "zone": "zones/us-central1-a",
            "operationType": "compute.instanceGroupManagers.insert",
            "httpErrorStatusCode": 503, "httpErrorMessage": "SERVICE UNAVAILABLE",
            "error": {"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED",
                "message": "The zone 'projects/p/zones/us-central1-a' does not have enough resources available to fulfill the request."}]}}))],
    );
    let op2 = slurm_dws::gce::Operation {
        name: "op-2".into(),
        zone: "zones/us-central1-a".into(),
        ..Default::default()
    };
    let err = c.wait_done(&op2, Instant::now() + Duration::from_secs(10)).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Capacity);
    assert_eq!(
        err.to_string(),
        "instanceGroupManagers.insert: 503 ZONE_RESOURCE_POOL_EXHAUSTED: The zone \
         'projects/p/zones/us-central1-a' does not have enough resources available to fulfill \
         the request. (operation op-2)"
    );

    // Never DONE: the deadline ends the wait with the last state seen.
    fake.script("global/operations/op-3/wait", vec![ok(json!({"name": "op-3", "status": "RUNNING"}))]);
    let op3 = slurm_dws::gce::Operation { name: "op-3".into(), ..Default::default() };
    let t = Instant::now();
    let err = c.wait_done(&op3, Instant::now() + Duration::from_millis(800)).await.unwrap_err();
    assert!(
        matches!(&err, GceError::OperationTimeout(op) if op.status == OperationStatus::Running),
        "{err:?}"
    );
    assert!(err.is_retryable());
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(790) && took < Duration::from_secs(3), "{took:?}");
    // Early answers are paced: a few calls, not a busy loop.
    let n = c.stats()["globalOperations.wait"].calls;
    assert!((2..=6).contains(&n), "{n} wait calls in 800 ms");

    // An operation already DONE needs no call.
    let before = fake.seen().len();
    let done_op = slurm_dws::gce::Operation {
        name: "op-4".into(),
        status: OperationStatus::Done,
        ..Default::default()
    };
    c.wait_done(&done_op, Instant::now()).await.unwrap();
    assert_eq!(fake.seen().len(), before);
}

#[tokio::test(start_paused = true)]
async fn rate_limit_is_shared_by_clones() {
    let fake = Fake::start().await;
    // 120/min = 2/s with a burst of 20: 22 calls need about one second.
    let c = fake.client_with(Duration::from_secs(5), Duration::from_secs(5), 120);
    let t = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..22 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            c.get_instance("z", &format!("vm-{i}")).await.unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(950) && took < Duration::from_secs(3), "{took:?}");
    assert_eq!(c.stats()["instances.get"].calls, 22);
}

/// A raw HTTP/1.1 server on 127.0.0.1 that answers every connection with `answer`, written in
/// `pieces` with a short pause between them, then closes: body shapes axum does not make.
async fn raw_server(answer: Vec<u8>, pieces: usize) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (mut conn, _) = listener.accept().await.unwrap();
            let answer = answer.clone();
            tokio::spawn(async move {
                // The request: read up to its blank line (a GET has no body).
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                for piece in answer.chunks(answer.len().div_ceil(pieces)) {
                    if conn.write_all(piece).await.is_err() {
                        return;
                    }
                    let _ = conn.flush().await;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            });
        }
    });
    format!("http://{addr}/compute/v1/")
}

fn raw_client(endpoint: String) -> Client {
    let c = client_at(endpoint, Duration::from_secs(5), Duration::from_millis(300), 0);
    c.set_backoff(Backoff { initial: Duration::from_millis(10), max: Duration::from_millis(50) });
    c
}

#[tokio::test]
async fn bodies_are_read_whole_however_they_arrive() {
    // A large body (~1 MB, as a VM list page) without a length, chunked, in many writes.
    let description = "x".repeat(1 << 20);
    let body = json!({"name": "m", "targetSize": 3, "description": description}).to_string();
    let mut chunked = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n".to_vec();
    for part in body.as_bytes().chunks(100_000) {
        chunked.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
        chunked.extend_from_slice(part);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let c = raw_client(raw_server(chunked, 37).await);
    let mig = c.get_mig(&region(), "m").await.unwrap();
    assert_eq!((mig.name.as_str(), mig.target_size), ("m", Some(3)));

    // The same with its length announced, in many writes.
    let mut sized = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    sized.extend_from_slice(body.as_bytes());
    let c = raw_client(raw_server(sized, 23).await);
    assert_eq!(c.get_mig(&region(), "m").await.unwrap().target_size, Some(3));
}

#[tokio::test]
async fn a_body_cut_short_is_a_retryable_transport_error_not_a_decode_error() {
    // A length announced, a tenth of it sent, the connection closed: the answer never arrived whole.
    let body = json!({"name": "m", "targetSize": 3}).to_string();
    let mut cut = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len() * 10
    )
    .into_bytes();
    cut.extend_from_slice(body.as_bytes());
    let c = raw_client(raw_server(cut, 2).await);
    let err = c.get_mig(&region(), "m").await.unwrap_err();
    // Retried until the deadline; the last attempt may be cut by the deadline itself (a timeout).
    assert!(matches!(err, GceError::Transport { .. }), "{err:?}");
    assert!(err.is_retryable());
    assert!(c.stats()["regionInstanceGroupManagers.get"].calls >= 2, "retried");
}
