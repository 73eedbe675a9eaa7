//! Where access tokens come from: gcp_auth's chain, a key file, the metadata server, or a test.
//!
//! Tokens and keys are secrets: [`AccessToken`] and every source here print `<redacted>` in
//! `Debug`, and no code path logs them. `Credentials::None` (no `Authorization` header at all)
//! exists only for the simulator and is refused by `Client::new` unless the endpoint is plain
//! HTTP on a loopback address.

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::{Mutex, OnceCell};
use tokio::time::Instant;

use super::error::GceError;

/// OAuth scope for the Compute API.
pub const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// Environment variable that overrides the metadata server's `host[:port]`, as in Google's
/// own client libraries (tests point it at 127.0.0.1).
pub const METADATA_HOST_ENV: &str = "GCE_METADATA_HOST";

const DEFAULT_METADATA_HOST: &str = "metadata.google.internal";

/// How the client authenticates. The config's `gcp.credentials` is this type (`config` reads
/// `auto`, `metadata`, `none` or a path into it; [`fmt::Display`] prints that spelling back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    /// Application Default Credentials, gcp_auth's chain: `GOOGLE_APPLICATION_CREDENTIALS`, gcloud's
    /// application-default credentials, the metadata server, `gcloud auth print-access-token`.
    Auto,
    /// Only the metadata server of the VM we run on (the controller VM's service account).
    Metadata,
    /// No token at all: only for an `http://` loopback endpoint (the simulator).
    None,
    /// A service-account key file (JSON).
    KeyFile(PathBuf),
}

/// The config file's spelling: `auto`, `metadata`, `none`, or the key file's path (not a secret).
impl fmt::Display for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::Auto => f.write_str("auto"),
            Credentials::Metadata => f.write_str("metadata"),
            Credentials::None => f.write_str("none"),
            Credentials::KeyFile(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A bearer token. Its `Debug` never shows the secret.
#[derive(Clone)]
pub struct AccessToken {
    secret: String,
}

impl AccessToken {
    /// Wraps a token string.
    pub fn new(secret: impl Into<String>) -> Self {
        Self { secret: secret.into() }
    }

    /// The token, for the `Authorization` header and nothing else.
    pub fn secret(&self) -> &str {
        &self.secret
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccessToken(<redacted>)")
    }
}

/// A boxed future, so [`TokenSource`] stays object-safe without extra crates.
pub type TokenFuture<'a> = Pin<Box<dyn Future<Output = Result<AccessToken, GceError>> + Send + 'a>>;

/// Anything that can hand out a currently valid access token. Implementations cache: the
/// client asks before every HTTP request.
pub trait TokenSource: fmt::Debug + Send + Sync {
    /// A token valid for at least the next minute or so.
    fn token(&self) -> TokenFuture<'_>;
}

/// Builds the token source for `creds`; `Ok(None)` means "send no Authorization header".
/// A key file is read now, so a bad path or key fails at start-up, not at the first call.
pub fn token_source(creds: &Credentials) -> Result<Option<Arc<dyn TokenSource>>, GceError> {
    Ok(match creds {
        Credentials::None => None,
        Credentials::Auto => Some(Arc::new(GcpAuthSource { provider: OnceCell::new() })),
        Credentials::KeyFile(path) => {
            let sa = gcp_auth::CustomServiceAccount::from_file(path)
                .map_err(|e| GceError::Auth(format!("service-account key file {}: {e}", path.display())))?;
            let provider: Arc<dyn gcp_auth::TokenProvider> = Arc::new(sa);
            Some(Arc::new(GcpAuthSource { provider: OnceCell::new_with(Some(provider)) }))
        }
        Credentials::Metadata => Some(Arc::new(MetadataTokenSource::new(MetadataServer::from_env()?))),
    })
}

/// A gcp_auth provider (the ADC chain, found lazily on first use, or a key file).
struct GcpAuthSource {
    provider: OnceCell<Arc<dyn gcp_auth::TokenProvider>>,
}

impl fmt::Debug for GcpAuthSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GcpAuthSource")
            .field("initialized", &self.provider.initialized())
            .finish_non_exhaustive()
    }
}

impl TokenSource for GcpAuthSource {
    fn token(&self) -> TokenFuture<'_> {
        Box::pin(async move {
            let provider = self
                .provider
                .get_or_try_init(gcp_auth::provider)
                .await
                .map_err(|e| GceError::Auth(format!("no usable credentials: {e}")))?;
            let token = provider
                .token(&[SCOPE])
                .await
                .map_err(|e| GceError::Auth(format!("cannot get an access token: {e}")))?;
            Ok(AccessToken::new(token.as_str()))
        })
    }
}

/// The GCE metadata server (`http://metadata.google.internal/computeMetadata/v1/`).
#[derive(Debug, Clone)]
pub struct MetadataServer {
    base: String,
    http: reqwest::Client,
}

#[derive(Deserialize)]
struct MetadataToken {
    access_token: String,
    #[serde(default)]
    expires_in: u64,
}

impl MetadataServer {
    /// The server at `http://{host}/computeMetadata/v1/`, `host` being `$GCE_METADATA_HOST`
    /// or `metadata.google.internal`.
    pub fn from_env() -> Result<Self, GceError> {
        let host = std::env::var(METADATA_HOST_ENV)
            .ok()
            .filter(|h| !h.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_METADATA_HOST.to_string());
        Self::new(&format!("http://{}/computeMetadata/v1/", host.trim()))
    }

    /// The server at `base` (ending with `/computeMetadata/v1/`).
    pub fn new(base: &str) -> Result<Self, GceError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| GceError::Auth(format!("metadata client: {e}")))?;
        let mut base = base.to_string();
        if !base.ends_with('/') {
            base.push('/');
        }
        Ok(Self { base, http })
    }

    async fn get(&self, path: &str) -> Result<reqwest::Response, GceError> {
        let url = format!("{}{path}", self.base);
        let resp = self
            .http
            .get(&url)
            .header("Metadata-Flavor", "Google")
            .send()
            .await
            .map_err(|e| GceError::Auth(format!("metadata server {url}: {e}")))?;
        if !resp.status().is_success() {
            return Err(GceError::Auth(format!("metadata server {url}: HTTP {}", resp.status().as_u16())));
        }
        Ok(resp)
    }

    /// The project this VM belongs to (`project/project-id`).
    pub async fn project_id(&self) -> Result<String, GceError> {
        let text = self
            .get("project/project-id")
            .await?
            .text()
            .await
            .map_err(|e| GceError::Auth(format!("metadata project-id: {e}")))?;
        let id = text.trim();
        if id.is_empty() {
            return Err(GceError::Auth("metadata server returned an empty project id".into()));
        }
        Ok(id.to_string())
    }

    /// A fresh token of the default service account, and how long it lives.
    async fn fetch_token(&self) -> Result<(AccessToken, Duration), GceError> {
        let tok: MetadataToken = self
            .get("instance/service-accounts/default/token")
            .await?
            .json()
            .await
            .map_err(|e| GceError::Auth(format!("metadata token: {e}")))?;
        Ok((AccessToken::new(tok.access_token), Duration::from_secs(tok.expires_in)))
    }
}

/// Refresh this long before expiry (or at half-life, for short-lived tokens).
const REFRESH_MARGIN: Duration = Duration::from_secs(300);

/// Tokens from the metadata server, cached until shortly before they expire.
pub struct MetadataTokenSource {
    server: MetadataServer,
    /// The cached token and the instant from which it must be refreshed. A tokio mutex: one
    /// refresh at a time, and callers queue behind it instead of all asking the server.
    cache: Mutex<Option<(AccessToken, Instant)>>,
}

impl MetadataTokenSource {
    /// A caching source over `server`.
    pub fn new(server: MetadataServer) -> Self {
        Self { server, cache: Mutex::new(None) }
    }
}

impl fmt::Debug for MetadataTokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetadataTokenSource")
            .field("server", &self.server.base)
            .field("cache", &"<redacted>")
            .finish()
    }
}

impl TokenSource for MetadataTokenSource {
    fn token(&self) -> TokenFuture<'_> {
        Box::pin(async move {
            let mut cache = self.cache.lock().await;
            if let Some((tok, refresh_at)) = cache.as_ref() {
                if Instant::now() < *refresh_at {
                    return Ok(tok.clone());
                }
            }
            let (tok, lifetime) = self.server.fetch_token().await?;
            let margin = REFRESH_MARGIN.min(lifetime / 2);
            *cache = Some((tok.clone(), Instant::now() + (lifetime - margin)));
            Ok(tok)
        })
    }
}

/// A fixed token, for tests and for tools that obtained one elsewhere.
#[derive(Clone)]
pub struct StaticToken(pub AccessToken);

impl fmt::Debug for StaticToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StaticToken(<redacted>)")
    }
}

impl TokenSource for StaticToken {
    fn token(&self) -> TokenFuture<'_> {
        let tok = self.0.clone();
        Box::pin(async move { Ok(tok) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::{http::HeaderMap, routing::get, Router};

    #[test]
    fn debug_never_shows_secrets() {
        let t = AccessToken::new("ya29.very-secret");
        assert_eq!(format!("{t:?}"), "AccessToken(<redacted>)");
        let s = StaticToken(t.clone());
        assert!(!format!("{s:?}").contains("very-secret"));
        let m = MetadataTokenSource::new(MetadataServer::new("http://127.0.0.1:1/").unwrap());
        assert!(format!("{m:?}").contains("<redacted>"));
        assert_eq!(t.secret(), "ya29.very-secret");
    }

    #[test]
    fn missing_key_file_fails_at_construction() {
        let err = token_source(&Credentials::KeyFile("/nonexistent/key.json".into())).unwrap_err();
        assert!(matches!(err, GceError::Auth(_)), "{err:?}");
        assert!(err.to_string().contains("/nonexistent/key.json"));
        assert!(token_source(&Credentials::None).unwrap().is_none());
    }

    #[test]
    fn key_file_debug_does_not_leak_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key.json");
        // A syntactically valid key whose private key is not real: loading must either fail
        // without echoing it, or succeed with a redacted Debug.
        std::fs::write(
            &path,
            r#"{"type":"service_account","project_id":"p","private_key_id":"k",
               "private_key":"-----BEGIN PRIVATE KEY-----\nSECRETSECRET\n-----END PRIVATE KEY-----\n",
               "client_email":"sa@p.iam.gserviceaccount.com","client_id":"1",
               "token_uri":"https://oauth2.googleapis.com/token"}"#,
        )
        .unwrap();
        match token_source(&Credentials::KeyFile(path)) {
            Ok(src) => assert!(!format!("{src:?}").contains("SECRETSECRET")),
            Err(e) => assert!(!e.to_string().contains("SECRETSECRET"), "{e}"),
        }
    }

    /// A fake metadata server on 127.0.0.1 that counts token fetches.
    async fn fake_metadata(expires_in: u64) -> (String, Arc<AtomicUsize>) {
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        let app = Router::new()
            .route(
                "/computeMetadata/v1/instance/service-accounts/default/token",
                get(move |headers: HeaderMap| {
                    let h = h.clone();
                    async move {
                        if headers.get("metadata-flavor").map(|v| v.as_bytes()) != Some(b"Google") {
                            return (axum::http::StatusCode::FORBIDDEN, String::new());
                        }
                        let n = h.fetch_add(1, Ordering::SeqCst);
                        (
                            axum::http::StatusCode::OK,
                            format!(r#"{{"access_token":"tok-{n}","expires_in":{expires_in},"token_type":"Bearer"}}"#),
                        )
                    }
                }),
            )
            .route(
                "/computeMetadata/v1/project/project-id",
                get(|| async { "my-project\n" }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (addr.to_string(), hits)
    }

    #[tokio::test]
    async fn metadata_token_is_cached_until_near_expiry() {
        let (host, hits) = fake_metadata(3600).await;
        let src = MetadataTokenSource::new(
            MetadataServer::new(&format!("http://{host}/computeMetadata/v1/")).unwrap(),
        );
        for _ in 0..5 {
            assert_eq!(src.token().await.unwrap().secret(), "tok-0");
        }
        assert_eq!(hits.load(Ordering::SeqCst), 1);

        // A token that lives 0 s is refreshed on every call.
        let (host, hits) = fake_metadata(0).await;
        let src = MetadataTokenSource::new(
            MetadataServer::new(&format!("http://{host}/computeMetadata/v1/")).unwrap(),
        );
        assert_eq!(src.token().await.unwrap().secret(), "tok-0");
        assert_eq!(src.token().await.unwrap().secret(), "tok-1");
        assert_eq!(hits.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn metadata_host_comes_from_the_environment() {
        let (host, _) = fake_metadata(3600).await;
        // Only this test reads the variable.
        std::env::set_var(METADATA_HOST_ENV, &host);
        let server = MetadataServer::from_env().unwrap();
        std::env::remove_var(METADATA_HOST_ENV);
        assert_eq!(server.project_id().await.unwrap(), "my-project");
        let src = token_source(&Credentials::Metadata).unwrap().unwrap();
        // Built after the variable was removed: points at the real (absent) server.
        assert!(format!("{src:?}").contains(DEFAULT_METADATA_HOST));
    }

    #[tokio::test]
    async fn metadata_errors_are_auth_errors() {
        let src = MetadataTokenSource::new(MetadataServer::new("http://127.0.0.1:1/x/").unwrap());
        let err = src.token().await.unwrap_err();
        assert!(matches!(err, GceError::Auth(_)), "{err:?}");
    }
}
