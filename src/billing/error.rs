//! [`BillingError`]: what can go wrong asking the Cloud Billing Catalog API, with Google's own words
//! kept (the `error.message` of its answer), and which failures are worth another attempt.

use std::time::Duration;

/// A failed Catalog API call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BillingError {
    /// The client's own settings are wrong (an endpoint that is not `https://`, ...).
    InvalidArgument(String),
    /// No access token could be had.
    Auth(String),
    /// The request did not get an answer (connection refused, timeout, ...).
    Transport { path: String, message: String, timeout: bool },
    /// Google answered with an error: HTTP status, its `error.status` (`PERMISSION_DENIED`) and
    /// `error.message` ("Cloud Billing API has not been used in project ... or it is disabled").
    Api { path: String, http: u16, status: String, message: String, retry_after: Option<Duration> },
    /// The answer was not the JSON the reference describes.
    Decode { path: String, message: String },
    /// A list went on for more pages than any catalog has (a bound against a token loop).
    TooManyPages { path: String, pages: usize },
    /// `services.list` has no service of this display name.
    NoSuchService(String),
}

impl BillingError {
    /// Worth another attempt: no answer, 429, 5xx.
    pub fn is_retryable(&self) -> bool {
        match self {
            BillingError::Transport { .. } => true,
            BillingError::Api { http, .. } => *http == 429 || *http >= 500,
            _ => false,
        }
    }

    /// The server's `Retry-After`, when it gave one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            BillingError::Api { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The error of an HTTP answer whose status is not a success: Google's
    /// `{"error": {"code", "message", "status"}}` when the body is that, else the body's start.
    pub fn from_response(path: &str, http: u16, body: &[u8], retry_after: Option<Duration>) -> Self {
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Body {
            error: Inner,
        }
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Inner {
            message: String,
            status: String,
        }
        let parsed: Body = serde_json::from_slice(body).unwrap_or_default();
        let message = if parsed.error.message.is_empty() {
            let text = String::from_utf8_lossy(body);
            text.chars().take(300).collect::<String>().trim().to_string()
        } else {
            parsed.error.message
        };
        BillingError::Api { path: path.to_string(), http, status: parsed.error.status, message, retry_after }
    }
}

impl std::fmt::Display for BillingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BillingError::InvalidArgument(m) => write!(f, "{m}"),
            BillingError::Auth(m) => write!(f, "Cloud Billing credentials: {m}"),
            BillingError::Transport { path, message, timeout: true } => {
                write!(f, "Cloud Billing GET {path}: timed out: {message}")
            }
            BillingError::Transport { path, message, .. } => write!(f, "Cloud Billing GET {path}: {message}"),
            BillingError::Api { path, http, status, message, .. } if status.is_empty() => {
                write!(f, "Cloud Billing GET {path}: HTTP {http}: {message}")
            }
            BillingError::Api { path, http, status, message, .. } => {
                write!(f, "Cloud Billing GET {path}: HTTP {http} {status}: {message}")
            }
            BillingError::Decode { path, message } => {
                write!(
                    f,
                    "Cloud Billing GET {path}: the answer is not what the API reference describes: {message}"
                )
            }
            BillingError::TooManyPages { path, pages } => {
                write!(f, "Cloud Billing GET {path}: still more pages after {pages}; gave up")
            }
            BillingError::NoSuchService(name) => {
                write!(f, "the Cloud Billing catalog lists no service named {name:?}")
            }
        }
    }
}

impl std::error::Error for BillingError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn googles_words_are_kept_and_retries_are_for_transient_failures() {
        let body = br#"{"error": {"code": 403, "message": "Cloud Billing API has not been used in project 12 before or it is disabled.", "status": "PERMISSION_DENIED"}}"#;
        let e = BillingError::from_response("/v1/services", 403, body, None);
        assert!(!e.is_retryable());
        assert_eq!(
            e.to_string(),
            "Cloud Billing GET /v1/services: HTTP 403 PERMISSION_DENIED: Cloud Billing API has not been used \
             in project 12 before or it is disabled."
        );
        let e = BillingError::from_response(
            "/v1/x",
            503,
            b"upstream connect error",
            Some(Duration::from_secs(3)),
        );
        assert!(e.is_retryable());
        assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
        assert!(e.to_string().ends_with("HTTP 503: upstream connect error"), "{e}");
        assert!(BillingError::from_response("/v1/x", 429, b"{}", None).is_retryable());
        let t = BillingError::Transport { path: "/v1/x".into(), message: "refused".into(), timeout: false };
        assert!(t.is_retryable());
        assert!(!BillingError::TooManyPages { path: "/v1/x".into(), pages: 3 }.is_retryable());
    }
}
