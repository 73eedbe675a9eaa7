//! Errors in Google's JSON format, as the Compute API returns them.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// One HTTP error of the Compute API: `{"error":{"code","message","errors":[{reason,domain,message}],"status"}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: String,
    pub domain: String,
    pub messages: Vec<String>,
    /// `(location, locationType)` of each error, e.g. `("fields", "parameter")`.
    pub location: Option<Box<(String, String)>>,
}

impl ApiError {
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        let domain = match reason {
            "rateLimitExceeded" | "userRateLimitExceeded" | "quotaExceeded" => "usageLimits",
            _ => "global",
        };
        ApiError {
            code,
            reason: reason.to_string(),
            domain: domain.to_string(),
            messages: vec![message.into()],
            location: None,
        }
    }

    /// 400 `badRequest` listing every problem found while validating a request.
    pub fn bad_request(messages: Vec<String>) -> Self {
        ApiError { code: 400, reason: "badRequest".into(), domain: "global".into(), messages, location: None }
    }

    /// 400 `invalid`: a request that is well formed but not acceptable (a value out of range, ...).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(400, "invalid", message)
    }

    pub fn not_found(resource: &str) -> Self {
        Self::new(404, "notFound", format!("The resource '{resource}' was not found"))
    }

    pub fn already_exists(resource: &str) -> Self {
        Self::new(409, "alreadyExists", format!("The resource '{resource}' already exists"))
    }

    pub fn resource_not_ready(resource: &str, why: &str) -> Self {
        Self::new(400, "resourceNotReady", format!("The resource '{resource}' is not ready: {why}"))
    }

    /// The canonical gRPC-style status name Google puts beside the HTTP code.
    pub fn status_name(code: u16) -> &'static str {
        match code {
            400 => "INVALID_ARGUMENT",
            401 => "UNAUTHENTICATED",
            403 => "PERMISSION_DENIED",
            404 => "NOT_FOUND",
            409 => "ALREADY_EXISTS",
            412 => "FAILED_PRECONDITION",
            429 => "RESOURCE_EXHAUSTED",
            500 => "INTERNAL",
            501 => "NOT_IMPLEMENTED",
            503 => "UNAVAILABLE",
            504 => "DEADLINE_EXCEEDED",
            _ => "UNKNOWN",
        }
    }

    pub fn to_json(&self) -> Value {
        let errors: Vec<Value> = self
            .messages
            .iter()
            .map(|m| {
                let mut e = json!({"message": m, "domain": self.domain, "reason": self.reason});
                if let Some((location, kind)) = self.location.as_deref() {
                    e["location"] = json!(location);
                    e["locationType"] = json!(kind);
                }
                e
            })
            .collect();
        json!({"error": {
            "code": self.code,
            "message": self.messages.join(" "),
            "errors": errors,
            "status": Self::status_name(self.code),
        }})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(self.to_json())).into_response()
    }
}

/// An error carried inside an Operation or a resize request's status: `{code, message}`.
pub fn status_error(code: &str, message: &str) -> Value {
    json!({"errors": [{"code": code, "message": message}]})
}
