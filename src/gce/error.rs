//! `GceError`: every failure of a Compute Engine call, with full detail and a class to branch on.
//!
//! GCE reports failures in three places, and all three are classified by the same rules so the
//! reconciler can answer one question (`ErrorClass`) whatever the path:
//! 1. a synchronous HTTP error: `{"error":{"code","message","status","errors":[{reason,domain,
//!    message}],"details":[...]}}` → [`GceError::Api`], classified by [`classify_http`];
//! 2. an Operation that ends DONE with `error.errors[]` → [`GceError::Operation`];
//! 3. a resize request's `status.error.errors[]` (or `lastAttempt`) → [`classify_errors`].
//!
//! Stockouts can arrive through any of them (a 503, an Operation error, a FAILED resize
//! request); they are `Capacity`, never `Retryable`, because retrying in a tight loop does not
//! make a zone grow GPUs: the caller backs off per nodeset instead.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use super::types::{Operation, OperationErrorItem};

/// What a caller should do about an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorClass {
    /// Transient (rate limit, 5xx, timeout, connection): retry soon with backoff.
    Retryable,
    /// No capacity in the zone/region (stockout): retry later, per-nodeset backoff.
    Capacity,
    /// A quota is exhausted: retry later; an admin may need to raise it.
    Quota,
    /// The resource does not exist.
    NotFound,
    /// A resource with that name exists already (a retry without the same requestId).
    AlreadyExists,
    /// The resource is not in a state that allows the call (e.g. cancel of a final request).
    ConditionNotMet,
    /// The request is wrong (bad field, bad value): a bug or a config error, do not retry.
    Invalid,
    /// Credentials missing, rejected, or lacking permission: a config error.
    Auth,
    /// Anything else.
    Other,
}

impl ErrorClass {
    /// Stable snake_case name, for metrics labels and event logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retryable => "retryable",
            Self::Capacity => "capacity",
            Self::Quota => "quota",
            Self::NotFound => "not_found",
            Self::AlreadyExists => "already_exists",
            Self::ConditionNotMet => "condition_not_met",
            Self::Invalid => "invalid",
            Self::Auth => "auth",
            Self::Other => "other",
        }
    }

    /// Order used to pick one class out of several errors: the most specific, most actionable
    /// cause wins (a stockout explains a failure better than a generic internal error).
    fn rank(self) -> u8 {
        match self {
            Self::Capacity => 0,
            Self::Quota => 1,
            Self::Auth => 2,
            Self::Invalid => 3,
            Self::NotFound => 4,
            Self::AlreadyExists => 5,
            Self::ConditionNotMet => 6,
            Self::Retryable => 7,
            Self::Other => 8,
        }
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error codes that mean "no capacity right now".
pub const CAPACITY_CODES: &[&str] = &[
    "ZONE_RESOURCE_POOL_EXHAUSTED",
    "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
    "REGION_RESOURCE_POOL_EXHAUSTED",
    "RESOURCE_POOL_EXHAUSTED",
    "VM_MIN_COUNT_NOT_REACHED",
];

/// `ZONE_RESOURCE_POOL_EXHAUSTED` and `zoneResourcePoolExhausted` are the same code: HTTP
/// `errors[].reason` is camelCase while Operation codes are SCREAMING_SNAKE.
pub(crate) fn normalize_code(code: &str) -> String {
    let mut out = String::with_capacity(code.len() + 8);
    let mut prev_lower = false;
    for c in code.chars() {
        if c.is_ascii_uppercase() && prev_lower {
            out.push('_');
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// Class of one error code or reason (either spelling), or `None` when it says nothing
/// definite.
pub fn classify_code(code: &str) -> Option<ErrorClass> {
    let c = normalize_code(code);
    if CAPACITY_CODES.contains(&c.as_str()) {
        return Some(ErrorClass::Capacity);
    }
    Some(match c.as_str() {
        "QUOTA_EXCEEDED" | "QUOTA_EXCEEDED_INFO" => ErrorClass::Quota,
        "RATE_LIMIT_EXCEEDED"
        | "USER_RATE_LIMIT_EXCEEDED"
        | "BACKEND_ERROR"
        | "INTERNAL_ERROR"
        | "SERVICE_UNAVAILABLE"
        | "RESOURCE_NOT_READY"
        | "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"
        | "TIMEOUT"
        | "DEADLINE_EXCEEDED"
        | "UNAVAILABLE"
        | "ABORTED" => ErrorClass::Retryable,
        "CONDITION_NOT_MET" | "FAILED_PRECONDITION" => ErrorClass::ConditionNotMet,
        "RESOURCE_NOT_FOUND" | "NOT_FOUND" => ErrorClass::NotFound,
        "RESOURCE_ALREADY_EXISTS" | "ALREADY_EXISTS" => ErrorClass::AlreadyExists,
        "PERMISSION_DENIED"
        | "INSUFFICIENT_PERMISSIONS"
        | "FORBIDDEN"
        | "UNAUTHENTICATED"
        | "AUTH_ERROR"
        | "ACCESS_NOT_CONFIGURED" => ErrorClass::Auth,
        "BAD_REQUEST"
        | "REQUIRED"
        | "REQUIRED_FIELD_MISSING"
        | "INVALID_ARGUMENT"
        | "INVALID_USAGE"
        | "UNSUPPORTED_OPERATION" => ErrorClass::Invalid,
        c if c.starts_with("INVALID") => ErrorClass::Invalid,
        _ => return None,
    })
}

/// Class of an HTTP status code alone (the fallback when no code or reason is known).
pub fn classify_status(status: u16) -> ErrorClass {
    match status {
        408 | 429 | 500 | 502 | 503 | 504 => ErrorClass::Retryable,
        401 | 403 => ErrorClass::Auth,
        404 | 410 => ErrorClass::NotFound,
        409 => ErrorClass::AlreadyExists,
        412 => ErrorClass::ConditionNotMet,
        400 | 411 | 413 | 422 => ErrorClass::Invalid,
        _ => ErrorClass::Other,
    }
}

/// Class of a list of Operation / resize-request / managed-instance errors: the highest-ranked
/// class among the codes (`Capacity` > `Quota` > ... > `Retryable` > `Other`); `Other` when
/// the list is empty or says nothing known.
pub fn classify_errors(errors: &[OperationErrorItem]) -> ErrorClass {
    errors
        .iter()
        .filter_map(|e| {
            std::iter::once(e.code.as_str())
                .chain(e.error_info_reasons())
                .filter_map(classify_code)
                .min_by_key(|c| c.rank())
        })
        .min_by_key(|c| c.rank())
        .unwrap_or(ErrorClass::Other)
}

/// Class of a finished Operation's error: its codes, else its `httpErrorStatusCode`.
pub fn classify_operation(op: &Operation) -> ErrorClass {
    match classify_errors(op.errors()) {
        ErrorClass::Other => op
            .http_error_status_code
            .and_then(|s| u16::try_from(s).ok())
            .map_or(ErrorClass::Other, classify_status),
        c => c,
    }
}

/// One `error.errors[]` entry of an HTTP error body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct ErrorReason {
    pub reason: String,
    pub domain: String,
    pub message: String,
    #[serde(rename = "location")]
    pub location: String,
}

/// An HTTP error answer from GCE, kept whole.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// Method id, e.g. `regionInstanceGroupManagers.insert`.
    pub method: String,
    /// HTTP verb.
    pub http_method: String,
    /// URL path without the query (the query may hold page tokens; never credentials).
    pub path: String,
    /// HTTP status of the response.
    pub http_status: u16,
    /// `error.code` (usually equal to the HTTP status).
    pub code: Option<i64>,
    /// `error.status`, e.g. `PERMISSION_DENIED`, `RESOURCE_EXHAUSTED`.
    pub status: String,
    /// `error.message`, or the start of the body when it was not JSON.
    pub message: String,
    /// `error.errors[]`.
    pub errors: Vec<ErrorReason>,
    /// `error.details` (google.rpc details: ErrorInfo, QuotaFailure, Help ...), as sent.
    pub details: Option<serde_json::Value>,
    /// `Retry-After`, when the server sent one.
    pub retry_after: Option<Duration>,
}

#[derive(Deserialize)]
struct ErrorEnvelope {
    error: ErrorBody,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ErrorBody {
    code: Option<i64>,
    message: String,
    status: String,
    errors: Vec<ErrorReason>,
    details: Option<serde_json::Value>,
}

impl ApiError {
    /// Builds the error from an HTTP answer. Bodies that are not GCE's JSON shape (a proxy's
    /// HTML page) keep their first 300 characters as the message.
    pub fn from_response(
        method: &str,
        http_method: &str,
        path: &str,
        http_status: u16,
        body: &[u8],
        retry_after: Option<Duration>,
    ) -> Self {
        let body = match serde_json::from_slice::<ErrorEnvelope>(body) {
            Ok(env) => env.error,
            Err(_) => ErrorBody {
                message: String::from_utf8_lossy(body).chars().take(300).collect(),
                ..ErrorBody::default()
            },
        };
        Self {
            method: method.to_string(),
            http_method: http_method.to_string(),
            path: path.to_string(),
            http_status,
            code: body.code,
            status: body.status,
            message: body.message,
            errors: body.errors,
            details: body.details,
            retry_after,
        }
    }

    /// Every code-like string in the answer: `errors[].reason` and `details[].reason`.
    fn reasons(&self) -> impl Iterator<Item = &str> {
        let detail_reasons = self
            .details
            .as_ref()
            .and_then(|d| d.as_array())
            .into_iter()
            .flatten()
            .filter_map(|d| d.get("reason")?.as_str());
        self.errors.iter().map(|e| e.reason.as_str()).chain(detail_reasons).filter(|r| !r.is_empty())
    }

    /// The code shown in `Display`: the most telling reason, else `error.status`.
    pub fn headline_code(&self) -> &str {
        self.reasons().min_by_key(|r| classify_code(r).map_or(u8::MAX, |c| c.rank())).unwrap_or(&self.status)
    }

    /// The class of this answer; see [`classify_http`].
    pub fn class(&self) -> ErrorClass {
        classify_http(self)
    }
}

/// A rate-limit reason (403 `rateLimitExceeded` / `userRateLimitExceeded`): the call was not acted on.
fn is_rate_limit(reason: &str) -> bool {
    matches!(reason, "rateLimitExceeded" | "userRateLimitExceeded" | "RATE_LIMIT_EXCEEDED")
}

/// Classifies an HTTP error answer.
///
/// 1. A stockout code anywhere (reason, details, or a 503 saying "does not have enough
///    resources") → `Capacity`; a quota code → `Quota`.
/// 2. Rate limits (403 `rateLimitExceeded` / `userRateLimitExceeded`, 429) and 408/500/502/
///    503/504 → `Retryable`; 409 `ABORTED` and `resourceNotReady` too (GCE's "try again").
/// 3. Otherwise the most specific reason (`notFound`, `alreadyExists`, `conditionNotMet`,
///    `invalid`, `forbidden` ...) and finally the HTTP status alone.
pub fn classify_http(e: &ApiError) -> ErrorClass {
    let by_reason = e.reasons().filter_map(classify_code).min_by_key(|c| c.rank());
    if let Some(c @ (ErrorClass::Capacity | ErrorClass::Quota)) = by_reason {
        return c;
    }
    if e.http_status == 503 && e.message.contains("does not have enough resources") {
        return ErrorClass::Capacity;
    }
    if matches!(e.http_status, 408 | 429 | 500 | 502 | 503 | 504) {
        return ErrorClass::Retryable;
    }
    if e.status == "ABORTED" {
        return ErrorClass::Retryable;
    }
    if let Some(c) = by_reason {
        return c;
    }
    match e.status.as_str() {
        "NOT_FOUND" => ErrorClass::NotFound,
        "ALREADY_EXISTS" => ErrorClass::AlreadyExists,
        "FAILED_PRECONDITION" => ErrorClass::ConditionNotMet,
        "INVALID_ARGUMENT" => ErrorClass::Invalid,
        "PERMISSION_DENIED" | "UNAUTHENTICATED" => ErrorClass::Auth,
        "RESOURCE_EXHAUSTED" | "UNAVAILABLE" | "DEADLINE_EXCEEDED" => ErrorClass::Retryable,
        _ => classify_status(e.http_status),
    }
}

/// An Operation that ended DONE with errors.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationFailed {
    /// The whole operation, as GCE last returned it.
    pub operation: Operation,
}

/// Every way a Compute Engine call can fail.
#[derive(Debug, thiserror::Error)]
pub enum GceError {
    /// GCE answered with an HTTP error.
    #[error("{}", fmt_api(.0))]
    Api(Box<ApiError>),
    /// An Operation finished with errors.
    #[error("{}", fmt_operation(&.0.operation))]
    Operation(Box<OperationFailed>),
    /// No answer: connection refused or reset, DNS, TLS, or the request timed out.
    #[error("{method}: {}{message}", if *.timeout { "timed out: " } else { "" })]
    Transport { method: String, path: String, message: String, timeout: bool },
    /// The operation was still running when the caller's deadline passed.
    #[error("operation {} ({}) still {:?} at the deadline", .0.name, .0.operation_type, .0.status)]
    OperationTimeout(Box<Operation>),
    /// An answer that does not parse as the documented type.
    #[error("{method}: cannot decode the response: {message}")]
    Decode { method: String, message: String },
    /// No token could be obtained, or credentials are unusable.
    #[error("credentials: {0}")]
    Auth(String),
    /// The client was given something it cannot use (bad endpoint, too many instances).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn fmt_api(e: &ApiError) -> String {
    let code = e.headline_code();
    let msg = one_line(&e.message);
    match (code.is_empty(), msg.is_empty()) {
        (false, false) => format!("{}: {} {}: {}", e.method, e.http_status, code, msg),
        (false, true) => format!("{}: {} {}", e.method, e.http_status, code),
        (true, false) => format!("{}: {}: {}", e.method, e.http_status, msg),
        (true, true) => format!("{}: HTTP {}", e.method, e.http_status),
    }
}

fn fmt_operation(op: &Operation) -> String {
    let what = if op.operation_type.is_empty() {
        "operation".to_string()
    } else {
        op.operation_type.trim_start_matches("compute.").to_string()
    };
    let status = op.http_error_status_code.map(|s| format!("{s} ")).unwrap_or_default();
    let errs: Vec<String> = op
        .errors()
        .iter()
        .map(|e| {
            if e.message.is_empty() {
                e.code.clone()
            } else {
                format!("{}: {}", e.code, one_line(&e.message))
            }
        })
        .collect();
    let detail = if errs.is_empty() { one_line(&op.http_error_message) } else { errs.join("; ") };
    format!("{what}: {status}{detail} (operation {})", op.name)
}

impl GceError {
    /// What the caller should do about it.
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Api(e) => e.class(),
            Self::Operation(f) => classify_operation(&f.operation),
            Self::Transport { .. } | Self::OperationTimeout(_) => ErrorClass::Retryable,
            Self::Decode { .. } => ErrorClass::Other,
            Self::Auth(_) => ErrorClass::Auth,
            Self::InvalidArgument(_) => ErrorClass::Invalid,
        }
    }

    /// True when the same call may succeed if simply repeated after a backoff. A workload policy
    /// in use (`resourceInUseByAnotherResource` naming a resource policy) is not: it stays in use
    /// until a MIG goes, so the reconciler waits for it with its own backoff (`policy_error`).
    pub fn is_retryable(&self) -> bool {
        self.class() == ErrorClass::Retryable && self.policy_failure().is_none()
    }

    /// Shorthand for `class() == NotFound`, the most common branch.
    pub fn is_not_found(&self) -> bool {
        self.class() == ErrorClass::NotFound
    }

    /// GCE refused the call for a rate limit (403 `rateLimitExceeded` / `userRateLimitExceeded`,
    /// 429): the caller should slow down, not only retry.
    pub fn is_rate_limit(&self) -> bool {
        match self {
            Self::Api(e) => {
                e.http_status == 429
                    || e.errors
                        .iter()
                        .any(|r| matches!(r.reason.as_str(), "rateLimitExceeded" | "userRateLimitExceeded"))
            }
            _ => false,
        }
    }

    /// The server's `Retry-After`, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Api(e) => e.retry_after,
            _ => None,
        }
    }

    /// Whether sending the same `requestId` again is right: the call may not have been acted on
    /// (no answer, a 408/429/5xx or rate-limit answer, never sent: credentials, a bad argument, an
    /// answer that did not decode) or may still be running (its Operation outlived the deadline).
    /// Not for an Operation that ended DONE with an error, nor for another 4xx: GCE decided, and
    /// the same `requestId` would only return the same failure (docs/gce-facts.md).
    pub fn reuses_request_id(&self) -> bool {
        match self {
            Self::Transport { .. }
            | Self::OperationTimeout(_)
            | Self::Auth(_)
            | Self::Decode { .. }
            | Self::InvalidArgument(_) => true,
            Self::Api(e) => {
                matches!(e.http_status, 408 | 429) || e.http_status >= 500 || e.reasons().any(is_rate_limit)
            }
            Self::Operation(_) => false,
        }
    }

    /// HTTP status of an API error, or the Operation's `httpErrorStatusCode`.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Self::Api(e) => Some(e.http_status),
            Self::Operation(f) => f.operation.http_error_status_code.and_then(|s| u16::try_from(s).ok()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn api(method: &str, status: u16, body: serde_json::Value) -> GceError {
        GceError::Api(Box::new(ApiError::from_response(
            method,
            "POST",
            "projects/p/regions/r/instanceGroupManagers",
            status,
            body.to_string().as_bytes(),
            None,
        )))
    }

    fn err(status: u16, http_status: &str, reason: &str, domain: &str, message: &str) -> GceError {
        api(
            "regionInstanceGroupManagers.insert",
            status,
            json!({"error": {"code": status, "message": message, "status": http_status,
                    "errors": [{"reason": reason, "domain": domain, "message": message}]}}),
        )
    }

    #[test]
    fn http_error_table() {
        use ErrorClass::*;
        let table: Vec<(GceError, ErrorClass)> = vec![
            (err(403, "PERMISSION_DENIED", "rateLimitExceeded", "usageLimits", "Rate Limit Exceeded"), Retryable),
            (err(403, "PERMISSION_DENIED", "userRateLimitExceeded", "usageLimits", "User Rate Limit Exceeded"), Retryable),
            (err(429, "RESOURCE_EXHAUSTED", "rateLimitExceeded", "usageLimits", "Quota exceeded for quota metric 'Queries'"), Retryable),
            (err(500, "INTERNAL", "backendError", "global", "Internal error"), Retryable),
            (err(502, "", "", "", "Bad Gateway"), Retryable),
            (err(503, "UNAVAILABLE", "backendError", "global", "Backend Error"), Retryable),
            (err(504, "DEADLINE_EXCEEDED", "", "", "timeout"), Retryable),
            (err(503, "UNAVAILABLE", "ZONE_RESOURCE_POOL_EXHAUSTED", "global",
                 "The zone 'projects/p/zones/us-central1-a' does not have enough resources available to fulfill the request."), Capacity),
            (err(503, "UNAVAILABLE", "resourcePoolExhausted", "global", "x"), Capacity),
            (err(503, "UNAVAILABLE", "backendError", "global",
                 "The zone 'projects/p/zones/us-central1-a' does not have enough resources available to fulfill the request. Try a different zone, or try again later."), Capacity),
            (err(403, "PERMISSION_DENIED", "quotaExceeded", "usageLimits", "Quota 'NVIDIA_H100_GPUS' exceeded. Limit: 8.0 in region us-central1."), Quota),
            (err(403, "PERMISSION_DENIED", "QUOTA_EXCEEDED", "global", "Quota exceeded"), Quota),
            (err(403, "PERMISSION_DENIED", "forbidden", "global", "Required 'compute.instanceGroupManagers.create' permission"), Auth),
            (err(403, "PERMISSION_DENIED", "accessNotConfigured", "usageLimits", "Compute Engine API has not been used"), Auth),
            (err(401, "UNAUTHENTICATED", "authError", "global", "Invalid Credentials"), Auth),
            (err(404, "NOT_FOUND", "notFound", "global", "The resource 'projects/p/regions/r/instanceGroupManagers/m' was not found"), NotFound),
            (err(409, "ALREADY_EXISTS", "alreadyExists", "global", "The resource 'm' already exists"), AlreadyExists),
            (err(409, "ABORTED", "conflict", "global", "concurrent change"), Retryable),
            (err(400, "FAILED_PRECONDITION", "resourceNotReady", "global", "The resource is not ready"), Retryable),
            (err(400, "INVALID_ARGUMENT", "invalid", "global", "Invalid value for field 'resource.targetSize': '-1'."), Invalid),
            (err(400, "INVALID_ARGUMENT", "required", "global", "Required field 'resource.name' not specified"), Invalid),
            (err(400, "FAILED_PRECONDITION", "conditionNotMet", "global", "Resize request cannot be cancelled in state SUCCEEDED"), ConditionNotMet),
            (err(412, "FAILED_PRECONDITION", "conditionNotMet", "global", "Precondition failed"), ConditionNotMet),
            (err(418, "", "", "", "teapot"), Other),
            (api("x.get", 503, json!("<html>Service Unavailable</html>")), Retryable),
            (api("x.get", 404, json!({"error": {"code": 404, "message": "no", "details": [
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "RESOURCE_NOT_FOUND"}]}})), NotFound),
            (api("x.get", 503, json!({"error": {"code": 503, "message": "x", "details": [
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"}]}})), Capacity),
        ];
        for (e, want) in table {
            assert_eq!(e.class(), want, "{e}");
            assert_eq!(e.is_retryable(), want == Retryable, "{e}");
        }
    }

    #[test]
    fn non_api_errors() {
        let t = GceError::Transport {
            method: "instances.list".into(),
            path: "projects/p/zones/z/instances".into(),
            message: "connection refused".into(),
            timeout: false,
        };
        assert!(t.is_retryable());
        assert_eq!(t.to_string(), "instances.list: connection refused");
        assert_eq!(GceError::Auth("no token".into()).class(), ErrorClass::Auth);
        assert_eq!(GceError::InvalidArgument("x".into()).class(), ErrorClass::Invalid);
        assert_eq!(GceError::Decode { method: "m".into(), message: "x".into() }.class(), ErrorClass::Other);
    }

    fn item(code: &str) -> OperationErrorItem {
        OperationErrorItem { code: code.into(), message: format!("{code} happened"), ..Default::default() }
    }

    #[test]
    fn operation_code_table() {
        use ErrorClass::*;
        let table = [
            ("ZONE_RESOURCE_POOL_EXHAUSTED", Capacity),
            ("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", Capacity),
            ("REGION_RESOURCE_POOL_EXHAUSTED", Capacity),
            ("RESOURCE_POOL_EXHAUSTED", Capacity),
            ("VM_MIN_COUNT_NOT_REACHED", Capacity),
            ("QUOTA_EXCEEDED", Quota),
            ("CONDITION_NOT_MET", ConditionNotMet),
            ("RESOURCE_NOT_FOUND", NotFound),
            ("RESOURCE_ALREADY_EXISTS", AlreadyExists),
            ("INVALID_FIELD_VALUE", Invalid),
            ("PERMISSION_DENIED", Auth),
            ("RESOURCE_NOT_READY", Retryable),
            ("INTERNAL_ERROR", Retryable),
            ("SOMETHING_NEW", Other),
        ];
        for (code, want) in table {
            assert_eq!(classify_errors(&[item(code)]), want, "{code}");
        }
        assert_eq!(classify_errors(&[]), Other);
        // The most telling cause wins whatever the order.
        assert_eq!(
            classify_errors(&[item("INTERNAL_ERROR"), item("ZONE_RESOURCE_POOL_EXHAUSTED")]),
            Capacity
        );
        // An errorInfo reason can carry the code when the top-level code is generic.
        let mut generic = item("UNKNOWN_ERROR");
        generic.error_details =
            vec![json!({"errorInfo": {"reason": "QUOTA_EXCEEDED", "domain": "compute.googleapis.com"}})];
        assert_eq!(classify_errors(&[generic]), Quota);
    }

    #[test]
    fn operation_error_falls_back_to_http_status_and_displays_one_line() {
        let op: Operation = serde_json::from_value(json!({
            "name": "operation-1", "status": "DONE",
            "operationType": "compute.regionInstanceGroupManagerResizeRequests.cancel",
            "httpErrorStatusCode": 400, "httpErrorMessage": "BAD REQUEST",
            "error": {"errors": [{"code": "CONDITION_NOT_MET",
                "message": "Resize request is in state SUCCEEDED\nand cannot be cancelled."}]}
        }))
        .unwrap();
        let e = GceError::Operation(Box::new(OperationFailed { operation: op }));
        assert_eq!(e.class(), ErrorClass::ConditionNotMet);
        assert_eq!(e.http_status(), Some(400));
        assert_eq!(
            e.to_string(),
            "regionInstanceGroupManagerResizeRequests.cancel: 400 CONDITION_NOT_MET: \
             Resize request is in state SUCCEEDED and cannot be cancelled. (operation operation-1)"
        );
        let unknown: Operation = serde_json::from_value(json!({
            "name": "o", "status": "DONE", "httpErrorStatusCode": 503,
            "error": {"errors": [{"code": "WHO_KNOWS"}]}
        }))
        .unwrap();
        assert_eq!(classify_operation(&unknown), ErrorClass::Retryable);
    }

    #[test]
    fn api_display_is_one_line_with_the_telling_code() {
        let e = api(
            "regionInstanceGroupManagers.insert",
            503,
            json!({"error": {"code": 503, "status": "UNAVAILABLE",
                "message": "The zone 'projects/p/zones/us-central1-a' does not have enough resources\navailable to fulfill the request.",
                "errors": [{"reason": "backendError", "domain": "global", "message": "x"},
                           {"reason": "ZONE_RESOURCE_POOL_EXHAUSTED", "domain": "global", "message": "x"}]}}),
        );
        assert_eq!(
            e.to_string(),
            "regionInstanceGroupManagers.insert: 503 ZONE_RESOURCE_POOL_EXHAUSTED: The zone \
             'projects/p/zones/us-central1-a' does not have enough resources available to fulfill the request."
        );
        let Some(GceError::Api(a)) = Some(e) else { unreachable!() };
        assert_eq!(a.errors.len(), 2);
        assert_eq!(a.errors[0].domain, "global");
        assert_eq!(a.code, Some(503));
        assert_eq!(a.path, "projects/p/regions/r/instanceGroupManagers");
        let bare =
            GceError::Api(Box::new(ApiError::from_response("instances.get", "GET", "/p", 502, b"", None)));
        assert_eq!(bare.to_string(), "instances.get: HTTP 502");
    }

    #[test]
    fn normalizes_camel_case_reasons() {
        assert_eq!(normalize_code("zoneResourcePoolExhausted"), "ZONE_RESOURCE_POOL_EXHAUSTED");
        assert_eq!(normalize_code("QUOTA_EXCEEDED"), "QUOTA_EXCEEDED");
        assert_eq!(normalize_code("notFound"), "NOT_FOUND");
    }
}
