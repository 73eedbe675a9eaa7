//! Security: who may read the state, what may be logged, and where a token may go.
//! - The state directory is 0700 and the database (and its WAL and SHM files) 0600, whether a hook
//!   or the daemon creates them, and an existing lax directory or file is tightened.
//! - No private key, key id or access token content appears in any log, event or CLI output: the
//!   daemon runs with a service-account key whose private key carries a marker, getting a token (with
//!   a marker too) from a local token endpoint, against the simulator, logging at `trace`.
//! - A broken key file is refused at start-up without quoting it.
//! - `credentials = "none"` is refused unless the endpoint is plain http on a loopback address, by
//!   the config and again by the GCE client.
//!   (The socket's refusal of other users is in the socket part.)

use super::common::{World, BIN};
use super::tally::{runtime, Kind, Tally};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub fn run() -> Vec<Tally> {
    let mut t = Tally::new("security", Kind::Security);
    permissions(&mut t);
    no_secrets_in_logs(&mut t);
    broken_key_files(&mut t);
    credentials_none(&mut t);
    vec![t]
}

fn mode(p: &Path) -> Option<u32> {
    std::fs::metadata(p).ok().map(|m| m.permissions().mode() & 0o777)
}

fn check_private(t: &mut Tally, state: &Path, when: &str) {
    t.check(mode(state) == Some(0o700), || {
        format!("{when}: state dir mode {:?}", mode(state).map(|m| format!("{m:o}")))
    });
    let db = state.join(slurm_dws::store::DB_FILE);
    t.check(mode(&db) == Some(0o600), || {
        format!("{when}: database mode {:?}", mode(&db).map(|m| format!("{m:o}")))
    });
    for ext in ["db-wal", "db-shm"] {
        let p = db.with_extension(ext);
        if let Some(m) = mode(&p) {
            t.check(m == 0o600, || format!("{when}: {ext} mode {m:o}"));
        }
    }
}

fn permissions(t: &mut Tally) {
    let rt = runtime();
    // Created by a hook (the usual first touch on a new install: slurmctld resumes a node).
    let w = rt.block_on(World::new(&[("a", 0, 16, "")], ""));
    assert!(w.hook("resume", "hpc-a-0", None).status.success());
    check_private(t, &w.state_dir(), "created by a hook");
    // Created by the daemon, and while it holds the WAL open.
    let mut w = rt.block_on(World::new(&[("a", 0, 16, "")], ""));
    w.start_daemon();
    check_private(t, &w.state_dir(), "created by the daemon");
    assert!(w.hook("resume", "hpc-a-0", None).status.success());
    w.wait_for("hpc-a-0 up", 60, || {
        (w.node_states().get("hpc-a-0").map(String::as_str) == Some("up")).then_some(())
    });
    check_private(t, &w.state_dir(), "with the daemon running");
    w.kill_daemon();
    // Left lax by an admin (or an old version): tightened on the next open.
    let w = rt.block_on(World::new(&[("a", 0, 16, "")], ""));
    std::fs::create_dir_all(w.state_dir()).unwrap();
    std::fs::set_permissions(w.state_dir(), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(w.hook("resume", "hpc-a-0", None).status.success());
    let db = w.state_dir().join(slurm_dws::store::DB_FILE);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(w.hook("resume", "hpc-a-1", None).status.success());
    check_private(t, &w.state_dir(), "left 0755/0644 before a hook ran");
}

/// A local OAuth token endpoint that hands out `token` and counts requests.
async fn token_server(token: String, hits: Arc<AtomicUsize>) -> String {
    use axum::routing::post;
    let app = axum::Router::new().route(
        "/token",
        post(move || {
            let token = token.clone();
            let hits = hits.clone();
            async move {
                hits.fetch_add(1, Ordering::SeqCst);
                axum::Json(
                    serde_json::json!({"access_token": token, "expires_in": 3600, "token_type": "Bearer"}),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/token")
}

/// A PKCS#8 RSA key from openssl, or None when openssl is not installed.
fn rsa_key(dir: &Path) -> Option<String> {
    let path = dir.join("key.pem");
    let ok = Command::new("openssl")
        .args(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out"])
        .arg(&path)
        .stderr(Stdio::null())
        .status()
        .ok()?
        .success();
    ok.then(|| std::fs::read_to_string(&path).ok()).flatten()
}

fn no_secrets_in_logs(t: &mut Tally) {
    let rt = runtime();
    let mut w = rt.block_on(World::new(&[("a", 0, 16, "")], ""));
    let Some(pem) = rsa_key(w.path()) else {
        t.skipped.push(
            "openssl not installed: the daemon was not run with a real key (broken keys still are)".into(),
        );
        return;
    };
    let marker = format!("CAMPAIGNSECRET{:x}", rand::random::<u64>());
    let hits = Arc::new(AtomicUsize::new(0));
    let token = format!("ya29.{marker}-token");
    let token_uri = rt.block_on(token_server(token.clone(), hits.clone()));
    // PEM parsers skip text around the BEGIN/END block: the marker rides inside the private key.
    let key = serde_json::json!({
        "type": "service_account",
        "project_id": "test-project",
        "private_key_id": format!("{marker}-keyid"),
        "private_key": format!("{marker}-in-the-private-key\n{pem}"),
        "client_email": "slurm-dws@test-project.iam.gserviceaccount.com",
        "client_id": "1",
        "token_uri": token_uri,
    });
    let key_path = w.path().join("sa-key.json");
    std::fs::write(&key_path, key.to_string()).unwrap();
    std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let text = std::fs::read_to_string(&w.config)
        .unwrap()
        .replace("credentials = \"none\"", &format!("credentials = \"{}\"", key_path.display()));
    std::fs::write(&w.config, text).unwrap();
    // A line from the middle of the key's base64 body: key material itself.
    let body_line = pem.lines().nth(5).unwrap_or("").to_string();

    for (i, format) in ["text", "json"].iter().enumerate() {
        let log = w.path().join(format!("daemon-trace-{format}.log"));
        let child = Command::new(BIN)
            .args(["--config", w.config.to_str().unwrap(), "--log-format", format, "daemon"])
            .env("SLURM_DWS_LOG", "trace")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        w.daemon = Some(child);
        let sock = w.path().join("slurm-dws.sock");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::os::unix::net::UnixStream::connect(&sock).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let node = format!("hpc-a-{i}");
        assert!(w.hook("resume", &node, None).status.success());
        let up = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            w.wait_for("a node up with key-file credentials", 60, || {
                (w.node_states().get(&node).map(String::as_str) == Some("up")).then_some(())
            })
        }));
        t.check(up.is_ok(), || {
            format!(
                "with key-file credentials the daemon did not bring {node} up: {}",
                std::fs::read_to_string(&log)
                    .unwrap_or_default()
                    .lines()
                    .rev()
                    .take(5)
                    .collect::<Vec<_>>()
                    .join(" | ")
            )
        });
        let _ = w.cli(&["reconcile", "--json"]);
        w.kill_daemon();
    }
    t.check(hits.load(Ordering::SeqCst) > 0, || {
        "the daemon never fetched a token: the key was not used".into()
    });

    // Everything an operator or a log pipeline can see.
    let mut seen: Vec<(String, String)> = Vec::new();
    for f in ["daemon-trace-text.log", "daemon-trace-json.log", "slurm-dws.log"] {
        seen.push((f.into(), std::fs::read_to_string(w.path().join(f)).unwrap_or_default()));
    }
    for args in [
        &["events", "--json"][..],
        &["status", "--json"],
        &["nodes", "--json"],
        &["requests", "--json"],
        &["migs", "--json"],
        &["explain", "hpc-a-0", "--json"],
        &["events"],
        &["status"],
        &["check-config"],
    ] {
        let out = w.cli(args);
        seen.push((
            format!("slurm-dws {args:?}"),
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        ));
    }
    for (what, text) in &seen {
        for (secret, name) in [
            (&marker, "the key's marker"),
            (&token, "the access token"),
            (&body_line, "private key material"),
        ] {
            t.check(secret.is_empty() || !text.contains(secret.as_str()), || {
                format!("{name} appears in {what}")
            });
        }
    }
    println!(
        "  secrets: {} outputs ({} bytes) searched for the key marker, the token and key material",
        seen.len(),
        seen.iter().map(|(_, s)| s.len()).sum::<usize>()
    );
}

fn broken_key_files(t: &mut Tally) {
    let rt = runtime();
    let w = rt.block_on(World::new(&[("a", 0, 16, "")], ""));
    let marker = format!("CAMPAIGNSECRET{:x}", rand::random::<u64>());
    let cases: Vec<(&str, String)> = vec![
        (
            "a key whose PEM body is not a key",
            serde_json::json!({"type": "service_account", "private_key": format!("-----BEGIN PRIVATE KEY-----\n{marker}\n-----END PRIVATE KEY-----\n"),
                "client_email": "a@b.c", "token_uri": "http://127.0.0.1:1/token", "private_key_id": "x"}).to_string(),
        ),
        ("a PEM file instead of JSON", format!("-----BEGIN PRIVATE KEY-----\n{marker}\n-----END PRIVATE KEY-----\n")),
        ("JSON with the marker where a string belongs", format!("{{\"type\": \"service_account\", \"private_key\": {{\"{marker}\": 1}}}}")),
        ("truncated JSON", format!("{{\"private_key\": \"{marker}")),
    ];
    for (what, content) in cases {
        let key = w.path().join("broken-key.json");
        std::fs::write(&key, content).unwrap();
        let text = std::fs::read_to_string(&w.config)
            .unwrap()
            .replace("credentials = \"none\"", &format!("credentials = \"{}\"", key.display()));
        let cfg = w.path().join("broken-key.toml");
        std::fs::write(&cfg, text).unwrap();
        let mut cmd = Command::new(BIN);
        cmd.args(["--config", cfg.to_str().unwrap(), "daemon"]).env("SLURM_DWS_LOG", "trace");
        let out = super::resume_files::run_with_deadline(cmd, Duration::from_secs(20));
        t.tried += 1;
        let Some(out) = out else {
            t.fail(format!("daemon with {what}: still running after 20 s (it should refuse to start)"));
            continue;
        };
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() || !err.contains("broken-key.json") {
            t.fail(format!(
                "daemon with {what}: exit {:?}, stderr {:?}",
                out.status.code(),
                err.lines().last()
            ));
        }
        t.check(!err.contains(&marker), || {
            format!("daemon with {what}: the key's content is in its error output")
        });
    }
}

fn credentials_none(t: &mut Tally) {
    use slurm_dws::config::Config;
    use slurm_dws::gce::{Client, ClientOptions, Credentials};
    let w = World::with_endpoint("http://127.0.0.1:9/compute/v1/", &[("a", 0, 16, "")], "");
    let base = std::fs::read_to_string(&w.config).unwrap();
    // (endpoint, the config allows it, the GCE client allows it). The client parses URLs as a
    // browser does, so `2130706433`, `0x7f000001` and `127.1` really are 127.0.0.1 to it; the
    // config refuses those spellings anyway (it only knows dotted quads, [::1] and localhost).
    let endpoints: &[(&str, bool, bool)] = &[
        ("http://127.0.0.1:8080/compute/v1/", true, true),
        ("http://127.0.0.2/compute/v1/", true, true),
        ("http://[::1]:8080/compute/v1/", true, true),
        ("http://localhost:8080/compute/v1/", true, true),
        ("https://127.0.0.1/compute/v1/", false, false),
        ("https://compute.googleapis.com/compute/v1/", false, false),
        ("http://10.0.0.1/compute/v1/", false, false),
        ("http://0.0.0.0/compute/v1/", false, false),
        ("http://127.0.0.1@10.0.0.1/compute/v1/", false, false),
        ("http://127.0.0.1.nip.io/compute/v1/", false, false),
        ("http://localhost.evil.example/compute/v1/", false, false),
        ("http://localhost./compute/v1/", false, false),
        ("http://2130706433/compute/v1/", false, true),
        ("http://0x7f000001/compute/v1/", false, true),
        ("http://127.1/compute/v1/", false, true),
        ("http://[::ffff:10.0.0.1]/compute/v1/", false, false),
        ("http://[fe80::1]/compute/v1/", false, false),
    ];
    for (endpoint, allowed, client_allowed) in endpoints {
        let text = base.replace("http://127.0.0.1:9/compute/v1/", endpoint);
        let loaded = Config::from_toml_str(&text, Path::new("/c.toml"));
        t.tried += 1;
        match (&loaded, allowed) {
            (Ok(_), true) => {}
            (Err(e), false) if e.first_line().contains("gcp.") => {}
            (Ok(_), false) => {
                t.fail(format!("credentials = \"none\" with {endpoint} was accepted by the config"))
            }
            (Err(e), _) => t.fail(format!("credentials = \"none\" with {endpoint}: {}", e.first_line())),
        }
        // The GCE client refuses it on its own, whatever the config said.
        t.tried += 1;
        let opts = ClientOptions {
            endpoint: endpoint.to_string(),
            project: "p".into(),
            calls_per_minute: 0,
            reads_per_minute: 0,
            writes_per_minute: 0,
            request_timeout: Duration::from_secs(1),
            retry_deadline: Duration::from_secs(1),
        };
        let client = Client::new(opts, Credentials::None);
        if client.is_ok() != *client_allowed {
            t.fail(format!("gce::Client::new with credentials None and {endpoint}: {:?}", client.err()));
        }
    }
    // Through the binary: the daemon and check-config exit 2 naming the key.
    let text = base.replace("http://127.0.0.1:9/compute/v1/", "https://compute.googleapis.com/compute/v1/");
    let cfg = w.path().join("none-remote.toml");
    std::fs::write(&cfg, text).unwrap();
    for sub in ["daemon", "check-config"] {
        t.tried += 1;
        let mut cmd = Command::new(BIN);
        cmd.args(["--config", cfg.to_str().unwrap(), sub]);
        match super::resume_files::run_with_deadline(cmd, Duration::from_secs(20)) {
            None => t.fail(format!("{sub} with credentials none and a remote endpoint kept running")),
            Some(out) => {
                if let Some(p) = super::tally::refusal_problem(&out, 2, &["gcp.credentials", "loopback"]) {
                    t.fail(format!("{sub} with credentials none and a remote endpoint: {p}"));
                }
            }
        }
    }
}
