//! The daemon as an operator meets it, against the simulator: Prometheus metrics scraped over loopback
//! HTTP agree with the store and with what GCE (the simulator) counted; SIGHUP reloads the config without
//! dropping work and refuses what it cannot take; `--log-format json` writes one JSON object per line
//! with structured fields.

mod common;

use common::World;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A loopback port nobody listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One Prometheus text exposition, as `name{labels}` (labels as written) → value.
#[derive(Debug, Clone, PartialEq)]
struct Scrape(BTreeMap<String, f64>);

impl Scrape {
    fn parse(text: &str) -> Scrape {
        let mut m = BTreeMap::new();
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
            let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("bad line {line}"));
            m.insert(series.to_string(), value.parse().unwrap_or_else(|_| panic!("bad value in {line}")));
        }
        Scrape(m)
    }
    fn get(&self, series: &str) -> f64 {
        *self.0.get(series).unwrap_or_else(|| panic!("no series {series} in\n{:#?}", self.0.keys()))
    }
    fn opt(&self, series: &str) -> Option<f64> {
        self.0.get(series).copied()
    }
    /// Every series of metric `name`, with its labels part.
    fn family(&self, name: &str) -> BTreeMap<String, f64> {
        self.0
            .iter()
            .filter_map(|(k, v)| {
                let rest = k.strip_prefix(name)?;
                (rest.is_empty() || rest.starts_with('{')).then(|| (rest.to_string(), *v))
            })
            .collect()
    }
}

async fn scrape_text(port: u16) -> String {
    let resp =
        reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await.expect("metrics endpoint answers");
    assert_eq!(resp.status(), 200);
    let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    resp.text().await.unwrap()
}

async fn scrape(port: u16) -> Scrape {
    Scrape::parse(&scrape_text(port).await)
}

fn count_by(items: &[Value], keys: &[&str]) -> BTreeMap<Vec<String>, f64> {
    let mut m: BTreeMap<Vec<String>, f64> = BTreeMap::new();
    for i in items {
        let k = keys.iter().map(|k| i[*k].as_str().unwrap_or_default().to_string()).collect();
        *m.entry(k).or_default() += 1.0;
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::disallowed_methods)] // waits for a real daemon's store to hold still
async fn metrics_agree_with_the_store_and_the_simulator() {
    let port = free_port();
    let mut w = World::new(
        &[("a", 1, 4, "max_run_duration = 3600"), ("b", 0, 4, "")],
        &format!("[daemon]\nmetrics_listen = \"127.0.0.1:{port}\"\n"),
    )
    .await;
    // Nodeset b is out of capacity (a backoff follows); the first two aggregated lists fail with a 503 and
    // are retried by the client (two retryable errors, four calls in all counting the retries).
    w.capacity(json!({"match": "hpc-b-", "fail": {"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": "no capacity"}}))
        .await;
    w.sim_post(
        "faults",
        json!({"method": "instances.aggregatedList", "status": 503, "probability": 1.0, "count": 2}),
    )
    .await;
    w.start_daemon();
    assert!(w
        .hook("resume", "hpc-a-[1-2]", Some(&common::resume_file(&[(7, "hpc-a-[1-2]")], "hpc-a-[1-2]")))
        .status
        .success());
    assert!(w
        .hook("resume", "hpc-b-0", Some(&common::resume_file(&[(8, "hpc-b-0")], "hpc-b-0")))
        .status
        .success());
    w.wait_for("a-0 (static), a-1, a-2 up and b backing off", 60, || {
        let s = w.node_states();
        let up =
            ["hpc-a-0", "hpc-a-1", "hpc-a-2"].iter().all(|n| s.get(*n).map(String::as_str) == Some("up"));
        let backoff = !w.cli_json(&["status"])["backoffs"].as_array().unwrap().is_empty();
        (up && backoff).then_some(())
    });

    // The store moves while passes run: compare a scrape with CLI reads taken just before and just after
    // it, and accept the comparison only when those two reads agree (the state did not move meanwhile).
    let deadline = Instant::now() + Duration::from_secs(60);
    let (m, nodes, requests, status, calls_before, calls_after) = loop {
        let calls_before = w.sim_calls().await;
        let before = (w.nodes(), w.cli_json(&["requests"]), w.cli_json(&["status"]));
        let m = scrape(port).await;
        let after = (w.nodes(), w.cli_json(&["requests"]), w.cli_json(&["status"]));
        let calls_after = w.sim_calls().await;
        let same_pass = before.2["last_pass"]["iteration"] == after.2["last_pass"]["iteration"]
            && !after.2["daemon"]["pass_running"].as_bool().unwrap_or(true);
        if before.0 == after.0 && before.1 == after.1 && same_pass {
            break (m, after.0, after.1, after.2, calls_before, calls_after);
        }
        assert!(Instant::now() < deadline, "the store never held still for a scrape");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };

    // Nodes by (nodeset, state): every configured pair is present, zeros included.
    let want = count_by(&nodes, &["nodeset", "state"]);
    for ns in ["a", "b"] {
        for st in ["powered_down", "resume_pending", "requested", "up", "suspending"] {
            let got = m.get(&format!("slurm_dws_nodes{{nodeset=\"{ns}\",state=\"{st}\"}}"));
            assert_eq!(
                got,
                want.get(&vec![ns.to_string(), st.to_string()]).copied().unwrap_or(0.0),
                "{ns}/{st}"
            );
        }
    }
    assert_eq!(m.get("slurm_dws_nodes{nodeset=\"a\",state=\"up\"}"), 3.0);

    // Requests by phase (every phase present), and open requests by GCE state.
    let requests = requests.as_array().unwrap().clone();
    let phases = count_by(&requests, &["phase"]);
    for ph in ["planned", "mig_ready", "active", "succeeded", "failed", "done"] {
        let got = m.get(&format!("slurm_dws_requests{{phase=\"{ph}\"}}"));
        assert_eq!(got, phases.get(&vec![ph.to_string()]).copied().unwrap_or(0.0), "phase {ph}");
    }
    let open: Vec<Value> = requests.iter().filter(|r| r["phase"] != "done").cloned().collect();
    let by_gce = count_by(&open, &["nodeset", "state"]);
    let got_open = m.family("slurm_dws_requests_open");
    assert_eq!(got_open.len(), by_gce.len(), "{got_open:?} vs {by_gce:?}");
    for (k, n) in &by_gce {
        assert_eq!(
            m.get(&format!("slurm_dws_requests_open{{nodeset=\"{}\",gce_state=\"{}\"}}", k[0], k[1])),
            *n
        );
    }

    // Backoffs, outbox, inbox: as `status` shows them.
    let backoffs = status["backoffs"].as_array().unwrap();
    assert_eq!(m.get("slurm_dws_backoffs_active"), backoffs.len() as f64);
    assert_eq!(backoffs[0]["nodeset"], "b");
    let left = m.get("slurm_dws_backoff_remaining_seconds{nodeset=\"b\"}");
    assert!(left > 0.0 && left <= 60.0, "backoff_initial is 60 s: {left}");
    assert_eq!(m.get("slurm_dws_backoff_level{nodeset=\"b\"}"), backoffs[0]["level"].as_f64().unwrap());
    assert_eq!(m.get("slurm_dws_outbox_pending_total"), status["pending_work"]["outbox"].as_f64().unwrap());
    assert_eq!(m.get("slurm_dws_inbox_pending"), status["pending_work"]["inbox"].as_f64().unwrap());

    // GCE calls: the client counts what it sent, the simulator what it received; a scrape taken between
    // two reads of the simulator's counts lies between them, method by method.
    let calls = m.family("slurm_dws_gce_calls_total");
    assert!(!calls.is_empty());
    let by_method = calls_after["by_method"].as_object().unwrap();
    for method in by_method.keys() {
        let got = m.opt(&format!("slurm_dws_gce_calls_total{{method=\"{method}\"}}")).unwrap_or(0.0);
        let lo = common::count(&calls_before, method) as f64;
        let hi = common::count(&calls_after, method) as f64;
        assert!(lo <= got && got <= hi, "{method}: metrics {got}, simulator between {lo} and {hi}");
    }
    assert_eq!(calls.len(), by_method.len(), "a method the simulator never saw: {calls:?}");
    assert_eq!(
        m.get("slurm_dws_gce_calls_total{method=\"regionInstanceGroupManagers.insert\"}"),
        requests.len() as f64,
        "one MIG per group: static a-0, job 7's a-[1-2], job 8's b-0"
    );
    assert_eq!(
        m.get("slurm_dws_gce_errors_total{method=\"instances.aggregatedList\",class=\"retryable\"}"),
        2.0,
        "the two injected 503s"
    );

    // Passes: the histogram counts them all, the last one is the one `status` reports.
    let count = m.get("slurm_dws_pass_duration_seconds_count");
    assert!(count >= 1.0);
    assert_eq!(m.get("slurm_dws_pass_duration_seconds_bucket{le=\"+Inf\"}"), count);
    let outcomes: f64 = m.family("slurm_dws_passes_total").values().sum();
    assert_eq!(outcomes, count);
    let last = &status["last_pass"];
    assert_eq!(m.get("slurm_dws_last_pass_iteration"), last["iteration"].as_f64().unwrap());
    assert_eq!(m.get("slurm_dws_last_pass_duration_seconds"), last["duration_ms"].as_f64().unwrap() / 1000.0);
    assert_eq!(m.get("slurm_dws_build_info{version=\"0.1.0\"}"), 1.0);
    w.stop_daemon();
}

fn write_config(w: &World, f: impl FnOnce(String) -> String) {
    let text = std::fs::read_to_string(&w.config).unwrap();
    std::fs::write(&w.config, f(text)).unwrap();
}

fn sighup(w: &World) {
    let pid = w.daemon.as_ref().expect("daemon running").id() as i32;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGHUP).unwrap();
}

const NODESET_C: &str = r#"
[[nodeset]]
name = "c"
instance_template = "projects/test-project/regions/us-central1/instanceTemplates/c-flex"
zones = ["us-central1-a"]
node_count_static = 1
node_count_dynamic_max = 2
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_config_without_dropping_work() {
    let port = free_port();
    let mut w =
        World::new(&[("a", 0, 4, "")], &format!("[daemon]\nmetrics_listen = \"127.0.0.1:{port}\"\n")).await;
    // Capacity for nodeset a is held: its request stays queued (ACCEPTED) across the reload.
    w.capacity(json!({"match": "hpc-a-", "hold": true})).await;
    w.start_daemon();
    let pid = w.daemon.as_ref().unwrap().id();
    assert!(w
        .hook("resume", "hpc-a-[0-1]", Some(&common::resume_file(&[(11, "hpc-a-[0-1]")], "hpc-a-[0-1]")))
        .status
        .success());
    let queued = w.wait_for("a's request queued in GCE", 30, || {
        let r = w.cli_json(&["requests", "--active"]);
        r.as_array()
            .unwrap()
            .iter()
            .find(|r| r["state"] == "ACCEPTED")
            .map(|r| r["name"].as_str().unwrap().to_string())
    });

    // 1. A nodeset added: its static node is provisioned by the same process, at once. (Its template
    // exists in the project: the daemon reads it on reload and would refuse the nodeset on a 404.)
    w.sim_post("templates", devcluster::stack::flex_template("c-flex")).await;
    write_config(&w, |t| t + NODESET_C);
    sighup(&w);
    w.wait_for("the reload logged", 20, || w.daemon_log().contains("config reloaded (SIGHUP)").then_some(()));
    assert!(w.daemon_log().contains("nodeset c added"), "{}", common::tail(&w.daemon_log(), 20));
    w.wait_for("static hpc-c-0 up after the reload", 30, || {
        (w.node_states().get("hpc-c-0").map(String::as_str) == Some("up")).then_some(())
    });
    assert_eq!(w.daemon.as_ref().unwrap().id(), pid, "same process");
    let m = scrape(port).await;
    assert_eq!(m.get("slurm_dws_config_reloads_total{result=\"ok\"}"), 1.0);
    assert_eq!(m.get("slurm_dws_config_last_reload_ok"), 1.0);
    assert_eq!(m.get("slurm_dws_nodes{nodeset=\"c\",state=\"up\"}"), 1.0, "new nodesets show in metrics");

    // 2. Refused: state_dir moved (needs a restart) and a file that does not parse. The running config stays.
    let good = std::fs::read_to_string(&w.config).unwrap();
    write_config(&w, |t| t.replacen("/state\"", "/state2\"", 1));
    sighup(&w);
    w.wait_for("state_dir change refused", 20, || {
        w.daemon_log().contains("cannot change on reload: state_dir").then_some(())
    });
    std::fs::write(&w.config, "cluster_name = \n").unwrap();
    sighup(&w);
    w.wait_for("broken file refused", 20, || {
        (w.daemon_log().matches("config reload refused").count() == 2).then_some(())
    });
    std::fs::write(&w.config, &good).unwrap();
    let m = scrape(port).await;
    assert_eq!(m.get("slurm_dws_config_reloads_total{result=\"error\"}"), 2.0);
    assert_eq!(m.get("slurm_dws_config_last_reload_ok"), 0.0);
    assert!(!w.path().join("state2").exists(), "the refused state_dir was never used");

    // 3. The work queued before the reloads is still the same request, and completes when capacity comes.
    w.sim_delete("capacity").await;
    w.wait_for("a-0, a-1 up", 60, || {
        let s = w.node_states();
        (s["hpc-a-0"] == "up" && s["hpc-a-1"] == "up").then_some(())
    });
    let reqs = w.cli_json(&["requests"]);
    let a: Vec<&Value> = reqs.as_array().unwrap().iter().filter(|r| r["nodeset"] == "a").collect();
    assert_eq!(a.len(), 1, "one request for a, before and after the reloads: {reqs}");
    assert_eq!(a[0]["name"], queued.as_str());
    assert_eq!(w.sim_migs().await.len(), 2, "one MIG for a, one for c");
    assert_eq!(w.daemon.as_ref().unwrap().id(), pid, "never restarted");
    assert!(w.stop_daemon().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_one_object_per_line_with_structured_fields() {
    let w = World::new(&[("a", 0, 4, "")], "").await;
    let log = std::fs::File::create(w.path().join("daemon.json.log")).unwrap();
    let mut child = Command::new(common::BIN)
        .args(["--config", w.config.to_str().unwrap(), "--log-format", "json", "daemon"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let sock = w.path().join("slurm-dws.sock");
    w.wait_for("the daemon's socket", 20, || std::os::unix::net::UnixStream::connect(&sock).ok());
    assert!(w
        .hook("resume", "hpc-a-[0-1]", Some(&common::resume_file(&[(5, "hpc-a-[0-1]")], "hpc-a-[0-1]")))
        .status
        .success());
    w.wait_for("nodes up", 30, || {
        let s = w.node_states();
        (s.get("hpc-a-0").map(String::as_str) == Some("up")).then_some(())
    });
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM)
        .unwrap();
    assert!(child.wait().unwrap().success());

    let text = std::fs::read_to_string(w.path().join("daemon.json.log")).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON object ({e}): {l}")))
        .collect();
    assert!(lines
        .iter()
        .all(|l| l["timestamp"].is_string() && l["level"].is_string() && l["target"].is_string()));
    let pass = lines.iter().find(|l| l["message"] == "reconcile pass").expect("a pass line");
    assert!(pass["iteration"].is_u64() && pass["duration_ms"].is_u64(), "{pass}");
    // Events carry the nodes as a field (the same story as `slurm-dws events`).
    let ev = lines
        .iter()
        .find(|l| {
            l["target"] == "slurm_dws::event" && l["node"].as_str().is_some_and(|n| n.contains("hpc-a-"))
        })
        .unwrap_or_else(|| panic!("no event line with a node field:\n{text}"));
    assert!(ev["kind"].is_string() && ev["event_id"].is_u64(), "{ev}");
    // ... and the job, MIG and resize request behind them, so a log search by any of them works.
    let planned = lines
        .iter()
        .find(|l| l["kind"] == "request_planned")
        .unwrap_or_else(|| panic!("no request_planned event line:\n{text}"));
    let req = &w.cli_json(&["requests"])[0];
    assert_eq!(planned["job"], 5, "{planned}");
    assert_eq!(planned["mig"], req["mig"], "{planned}");
    assert_eq!(planned["request"], req["name"], "{planned}");
    let events = w.cli_json(&["events"]);
    let logged: Vec<String> = lines
        .iter()
        .filter(|l| l["target"] == "slurm_dws::event")
        .map(|l| l["message"].as_str().unwrap().to_string())
        .collect();
    for e in events.as_array().unwrap() {
        assert!(logged.contains(&e["message"].as_str().unwrap().to_string()), "event not in the log: {e}");
    }
    assert!(lines.iter().any(|l| l["message"] == "slurm-dws daemon stopping"));
}

/// A local user who is neither root nor the service user nor a reader: reads of the private store are
/// refused with a message that says so (not "no database"), by the daemon it asked, and so are
/// mutating requests over the socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_users_are_told_permission_denied() {
    if !nix::unistd::geteuid().is_root() {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI runs as root: this test must run there");
        eprintln!("SKIP other_users_are_told_permission_denied: needs root to run a command as nobody");
        return;
    }
    let mut w = World::new(&[("a", 0, 2, "")], "").await;
    use std::os::unix::fs::PermissionsExt;
    // The config is world-readable (as /etc/slurm-dws is); the state directory stays 0700.
    std::fs::set_permissions(w.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    w.start_daemon();
    let as_nobody = |args: &[&str]| {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(common::BIN);
        cmd.arg("--config").arg(&w.config).args(args);
        cmd.uid(65534).gid(65534); // std drops supplementary groups when root sets a uid
        cmd.output().unwrap()
    };
    for args in [&["status"][..], &["nodes"], &["events"], &["explain", "hpc-a-0"]] {
        let out = as_nobody(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("permission denied reading")
                && err.contains("uid 65534 may not read the state (root and the service user may;"),
            "{args:?}: {err}"
        );
    }
    for args in [&["reconcile"][..], &["gc"][..]] {
        let out = as_nobody(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("permission denied: uid 65534"), "{args:?}: {err}");
    }
    // Text logs to a file carry no terminal colour codes (journald would store them verbatim).
    assert!(w.daemon_log().contains("refused: not root or the service user"));
    assert!(!w.daemon_log().contains('\x1b'), "ANSI escapes in a non-terminal log");
}

/// A pass that cannot read Slurm is loud: `status` says DEGRADED with the reason and since when and
/// exits 1; a `degraded` event and the `slurm_dws_degraded` gauge record it; the log says it once,
/// not once per pass; when Slurm answers again a `recovered` event, the gauge back at 0 and exit 0.
/// With the daemon down `status` exits 1 as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_degraded_pass_is_loud_in_status_events_metrics_and_once_in_the_log() {
    let port = free_port();
    let mut w =
        World::new(&[("a", 0, 4, "")], &format!("[daemon]\nmetrics_listen = \"127.0.0.1:{port}\"\n")).await;
    w.healthy_slurm();
    w.start_daemon();
    let iteration = |w: &World| w.cli_json(&["status"])["last_pass"]["iteration"].as_u64().unwrap_or(0);
    w.wait_for("a healthy pass", 30, || {
        let s = w.cli_json(&["status"]);
        (s["last_pass"]["outcome"] == "ok").then_some(())
    });
    let out = w.cli(&["status"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("health:        ok"));
    assert_eq!(scrape(port).await.get("slurm_dws_degraded"), 0.0);

    // slurmctld stops answering.
    w.break_slurm();
    let s = w.wait_for("a degraded pass", 30, || {
        let s = w.cli_json(&["status"]);
        (s["last_pass"]["outcome"] == "degraded").then_some(s)
    });
    assert_eq!(s["healthy"], false, "{s}");
    let since = s["degraded"]["since"].as_str().unwrap().to_string();
    assert!(s["degraded"]["reasons"].to_string().contains("Unable to contact slurm controller"), "{s}");
    // Three more passes, all degraded: one log line, one event, since unchanged.
    let first = iteration(&w);
    w.wait_for("three more passes", 30, || (iteration(&w) >= first + 3).then_some(()));
    let out = w.cli_columns(80, &["status"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains(&format!("health:        DEGRADED since {since}")), "{text}");
    // Each reason is a line of its own under health, wrapped to the terminal (80 columns here).
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("- reading Slurm's nodes:") && words.contains("Unable to contact slurm controller"),
        "{text}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("DEGRADED since"), "one line on stderr");
    assert_eq!(w.cli_json(&["status"])["degraded"]["since"].as_str(), Some(since.as_str()));
    let events = w.cli_json(&["events"]);
    let kinds: Vec<&str> = events.as_array().unwrap().iter().filter_map(|e| e["kind"].as_str()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "degraded").count(), 1, "{events}");
    let m = scrape(port).await;
    assert_eq!(m.get("slurm_dws_degraded"), 1.0);
    assert!(m.get("slurm_dws_passes_total{outcome=\"degraded\"}") >= 4.0);
    assert!(m.opt("slurm_dws_degraded_since_timestamp_seconds").is_some());
    let log = w.daemon_log();
    assert_eq!(log.matches("reconcile passes are DEGRADED").count(), 1, "once per change:\n{log}");
    // (The start-up's word on the controllers, which this test's Slurm cannot give, is not a pass's.)
    let warnings =
        log.lines().filter(|l| l.contains(" WARN ") && !l.contains("slurm_dws::daemon::role")).count();
    assert_eq!(warnings, 1, "the errors are not warned once per pass:\n{log}");

    // Slurm answers again.
    w.healthy_slurm();
    w.wait_for("a healthy pass again", 30, || {
        (w.cli_json(&["status"])["last_pass"]["outcome"] == "ok").then_some(())
    });
    assert_eq!(w.cli(&["status"]).status.code(), Some(0));
    let events = w.cli_json(&["events"]).to_string();
    assert!(
        events.contains("\"recovered\"") && events.contains(&format!("degraded since {since}")),
        "{events}"
    );
    assert_eq!(scrape(port).await.get("slurm_dws_degraded"), 0.0);
    assert_eq!(w.daemon_log().matches("reconcile passes recovered").count(), 1);

    // The daemon down: status still prints, and exits 1.
    assert!(w.stop_daemon().success());
    let out = w.cli(&["status"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("DOWN: the daemon is not running"));
}

/// Under systemd: `READY=1`, then `WATCHDOG=1` from the pass loop (after passes and while it waits,
/// every half of `WATCHDOG_USEC`), and log lines led by their syslog priority for journald (WARN `<4>`,
/// INFO `<6>`), as systemd's `JOURNAL_STREAM` says stderr is the journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::disallowed_methods)] // counts a real daemon's pings over 4 s of real time
async fn under_systemd_the_pass_loop_pings_the_watchdog_and_lines_carry_their_priority() {
    use std::os::unix::fs::MetadataExt;
    // No Slurm in this world: its passes are degraded, which the daemon warns about once.
    let w = World::new(&[("a", 0, 4, "")], "").await;
    let notify_path = w.path().join("notify.sock");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let journal_path = w.path().join("journal.txt");
    let journal = std::fs::File::create(&journal_path).unwrap();
    let meta = journal.metadata().unwrap();
    // WATCHDOG_PID must be the daemon's own pid: the shell's, which exec keeps.
    let mut daemon = Command::new("sh")
        .args(["-c", r#"WATCHDOG_PID=$$ exec "$0" "$@""#, common::BIN, "--config"])
        .arg(&w.config)
        .arg("daemon")
        .env("NOTIFY_SOCKET", &notify_path)
        .env("WATCHDOG_USEC", "1000000")
        .env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()))
        .env_remove("SLURM_DWS_LOG")
        .stdout(Stdio::null())
        .stderr(journal)
        .spawn()
        .unwrap();
    let mut messages = Vec::new();
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    while start.elapsed() < Duration::from_secs(4) {
        let n = notify.recv(&mut buf).expect("the daemon notifies");
        messages.push(String::from_utf8_lossy(&buf[..n]).trim_end().to_string());
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(daemon.id() as i32), nix::sys::signal::Signal::SIGTERM)
        .unwrap();
    assert!(daemon.wait().unwrap().success());
    assert_eq!(messages.first().map(String::as_str), Some("READY=1"), "{messages:?}");
    let pings = messages.iter().filter(|m| *m == "WATCHDOG=1").count();
    // Passes come every 2 s here: at least 5 pings in 4 s means the loop pings while it waits too.
    assert!(pings >= 5, "WATCHDOG=1 every 0.5 s: {messages:?}");
    let log = std::fs::read_to_string(&journal_path).unwrap();
    assert!(log.lines().all(|l| l.starts_with('<')), "every line has its priority:\n{log}");
    assert!(log.lines().any(|l| l.starts_with("<6>") && l.contains("slurm-dws daemon ready")), "{log}");
    assert!(
        log.lines().any(|l| l.starts_with("<4>") && l.contains("reconcile passes are DEGRADED")),
        "{log}"
    );
    assert!(!log.contains('\u{1b}'), "no colours in the journal:\n{log}");
}

/// A `SLURM_DWS_LOG` that names no level is refused (exit 2, naming it) instead of logging at a level
/// nobody asked for; `status` with a config that no longer loads exits 1 (a health check), naming
/// the problem.
#[test]
fn a_bad_log_filter_is_refused_and_status_calls_a_broken_config_unhealthy() {
    let w = World::with_endpoint("http://127.0.0.1:9/compute/v1/", &[("a", 0, 4, "")], "");
    for filter in ["verbose", "slurm_dws=loud", ""] {
        let out = Command::new(common::BIN)
            .arg("--config")
            .arg(&w.config)
            .arg("daemon")
            .env("SLURM_DWS_LOG", filter)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{filter:?}: {err}");
        assert!(
            err.contains(&format!("bad SLURM_DWS_LOG '{filter}'")) && err.trim().lines().count() == 1,
            "{err}"
        );
    }
    // Listing options are checked before the state is read: bad usage is exit 2 even with no database.
    assert_eq!(w.cli(&["nodes"]).status.code(), Some(1), "no database yet");
    for args in [&["nodes", "-o", "bogus"][..], &["events", "--sort", "bogus"], &["nodes", "-s", "-o", "mig"]]
    {
        let out = w.cli(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("unknown field"), "{args:?}");
    }
    let text = std::fs::read_to_string(&w.config).unwrap();
    std::fs::write(&w.config, text.replace("interval = 2", "interval = \"soon\"")).unwrap();
    let out = w.cli(&["status"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("BROKEN config") && err.contains("reconcile.interval"), "{err}");
    // The same config is bad input for every other command.
    assert_eq!(w.cli(&["nodes"]).status.code(), Some(2));
}

/// `daemon.readers`: a member of the group (here `nobody`, whose primary group is `nogroup`) cannot open
/// the database, and reads the same listings through the daemon; it still may not change anything;
/// with the daemon down it is told why it cannot read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_of_readers_read_through_the_daemon_and_change_nothing() {
    if !nix::unistd::geteuid().is_root() {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "CI runs as root: this test must run there");
        eprintln!("SKIP members_of_readers_read_through_the_daemon_and_change_nothing: needs root");
        return;
    }
    let mut w =
        World::new(&[("a", 0, 4, "")], "[daemon]\nreaders = \"nogroup\"\n[pricing]\ncatalog = true\n").await;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(w.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    w.start_daemon();
    let rf = common::resume_file(&[(7, "hpc-a-0")], "hpc-a-0");
    assert!(w.hook("resume", "hpc-a-0", Some(&rf)).status.success());
    w.wait_for("hpc-a-0 up", 30, || {
        (w.node_states().get("hpc-a-0").map(String::as_str) == Some("up")).then_some(())
    });
    let config = w.config.clone();
    let as_nobody = |args: &[&str]| {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(common::BIN);
        cmd.arg("--config").arg(&config).args(args);
        cmd.uid(65534).gid(65534);
        cmd.output().unwrap()
    };
    assert!(
        std::fs::File::open(w.state_dir().join("slurm-dws.db")).is_ok()
            && !as_nobody(&["check-config"]).stdout.is_empty(),
        "root reads the file; nobody reads the config"
    );
    let json = |args: &[&str]| -> Value {
        let out = as_nobody(args);
        assert!(
            out.status.success() || args[0] == "status",
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    };
    for args in [
        &["nodes", "-o", "name,state,job_id,mig,resize_request", "--json"][..],
        &["nodes", "--summarize", "--json"],
        &["requests", "-o", "name,mig,nodes,job_id,created_at", "--json"],
        &["migs", "-o", "name,nodeset,created_at", "--json"],
        &["events", "--node", "hpc-a-0", "-o", "time,kind,message", "--json"],
    ] {
        let read_by_nobody = json(args);
        assert_eq!(read_by_nobody, w.cli_json(&args[..args.len() - 1]), "{args:?}");
        assert!(!read_by_nobody.as_array().unwrap().is_empty(), "{args:?}");
    }
    // `usage`: the spans, and the catalog cache in state_dir (which nobody cannot read), through the daemon.
    std::fs::write(
        w.state_dir().join(slurm_dws::usage::CATALOG_CACHE),
        r#"{"fetched_at":"2026-03-01T00:00:00Z","currency":"USD","per_hour":{"e2-standard-4":{"flex":0.2}}}"#,
    )
    .unwrap();
    let usage = ["usage", "--since", "2000-01-01T00:00:00Z", "--until", "2100-01-01T00:00:00Z", "--json"];
    let read_by_nobody = json(&usage);
    assert_eq!(read_by_nobody, w.cli_json(&usage[..usage.len() - 1]));
    assert!(
        read_by_nobody["catalog"].as_str().unwrap().contains("1 list prices fetched 2026-03-01"),
        "{read_by_nobody}"
    );
    let status = json(&["status", "--json"]);
    assert_eq!(
        (status["daemon"]["running"].clone(), status["nodes"]["up"].clone()),
        (json!(true), json!(1)),
        "{status}"
    );
    let story = as_nobody(&["explain", "hpc-a-0"]);
    assert!(story.status.success() && String::from_utf8_lossy(&story.stdout).contains("Job 7"));
    for args in [&["reconcile"][..], &["gc"][..]] {
        let out = as_nobody(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("permission denied: uid 65534"), "{args:?}");
    }
    assert!(w.stop_daemon().success());
    let out = as_nobody(&["nodes"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("the daemon cannot read it for you") && err.contains("daemon.readers"), "{err}");
}

/// `daemon.history_days`: the daemon prunes events older than that after its first pass, and keeps
/// the recent ones; the log says what it deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::disallowed_methods)] // stamps the seeded events relative to the real present
async fn the_daemon_prunes_history_older_than_history_days() {
    let mut w = World::new(&[("a", 0, 4, "")], "[daemon]\nhistory_days = 2\n").await;
    let store = slurm_dws::store::Store::open(&w.state_dir()).await.unwrap();
    let now = chrono::Utc::now();
    let mut tx = store.begin().await.unwrap();
    for days in [30, 3] {
        let at = now - chrono::Duration::days(days);
        tx.add_event(at, "resume", &["hpc-a-0".to_string()], &format!("{days} days old")).await.unwrap();
    }
    tx.add_event(now - chrono::Duration::days(1), "resume", &["hpc-a-0".to_string()], "1 day old")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    store.close().await;
    w.start_daemon();
    w.wait_for("the old events pruned", 30, || {
        let events = w.cli_json(&["events", "--node", "hpc-a-0"]);
        let left: Vec<&str> =
            events.as_array().unwrap().iter().filter_map(|e| e["message"].as_str()).collect();
        (left == ["1 day old"]).then_some(())
    });
    let log = w.daemon_log();
    assert!(
        log.contains("pruned the history older than daemon.history_days") && log.contains("events=2"),
        "{log}"
    );
}
