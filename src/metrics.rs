//! Prometheus metrics: the text exposition format served over HTTP at `daemon.metrics_listen`.
//!
//! Two kinds of numbers, kept apart on purpose:
//! - **State** (nodes by state, requests by phase, MIGs, pending outbox/inbox, backoffs) is counted from
//!   the store at scrape time, so a metric can never disagree with `slurm-dws status` or `nodes`, and
//!   a restarted daemon reports the truth at once instead of counting from zero.
//! - **Activity** (GCE calls and errors, pass durations, config reloads) lives in memory and is reset
//!   by a restart, as Prometheus counters may be.
//!
//! The exposition is written by hand (a few dozen lines); every metric carries `# HELP` and `# TYPE`,
//! and docs/operations.md lists them all with their meaning.

use crate::gce::{self, ErrorClass, MethodStats};
use crate::model::{MigState, NodeState, RequestPhase};
use crate::reconcile::{PassOutcome, PassReport};
use crate::store::Store;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// Upper bounds (seconds) of the pass-duration histogram: a quiet pass takes milliseconds, a pass that
/// waits on slow GCE operations can take minutes.
pub const PASS_BUCKETS: &[f64] = &[0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0];

/// The daemon's in-memory metrics. Cheap to clone (shared).
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    /// Nodesets of the running config: their series are always present, zeros included.
    nodesets: Vec<String>,
    /// The GCE client of the running reconciler (its counters), and the counts of clients it replaced.
    gce: Option<gce::Client>,
    gce_base: BTreeMap<String, MethodStats>,
    /// Pass-duration histogram: counts per bucket (not cumulative), +Inf last.
    pass_buckets: Vec<u64>,
    pass_sum: f64,
    passes_by_outcome: BTreeMap<String, u64>,
    /// Spot nodes found preempted since the daemon started.
    preempted: u64,
    /// Nodesets made unschedulable (jobs fall back to other partitions), and exclusive nodes
    /// released at their job's end, since start.
    fallbacks: u64,
    released_nodes: u64,
    /// Passes planned on the last observation (a hook's, `inbox-first`), and reads passes skipped,
    /// by read, since start.
    inbox_first: u64,
    skipped_reads: BTreeMap<String, u64>,
    last_pass: Option<PassReport>,
    reloads: BTreeMap<&'static str, u64>,
    last_reload_ok: Option<bool>,
    started_at: DateTime<Utc>,
    /// With several controllers: this daemon's controller and whether it is in charge.
    role: Option<(String, bool)>,
    /// VM and GPU seconds since start by (nodeset, model, use), from each pass's usage
    /// (`PassReport::usage`): every configured nodeset's busy and idle from the first full pass.
    usage: BTreeMap<(String, String, String), (f64, f64)>,
}

impl Metrics {
    pub fn new(nodesets: Vec<String>, gce: gce::Client, started_at: DateTime<Utc>) -> Metrics {
        Metrics {
            inner: Arc::new(Mutex::new(Inner {
                nodesets,
                gce: Some(gce),
                gce_base: BTreeMap::new(),
                pass_buckets: vec![0; PASS_BUCKETS.len() + 1],
                pass_sum: 0.0,
                passes_by_outcome: BTreeMap::new(),
                preempted: 0,
                fallbacks: 0,
                released_nodes: 0,
                inbox_first: 0,
                skipped_reads: BTreeMap::new(),
                last_pass: None,
                reloads: BTreeMap::new(),
                last_reload_ok: None,
                started_at,
                role: None,
                usage: BTreeMap::new(),
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a finished pass.
    pub fn observe_pass(&self, report: &PassReport) {
        let mut m = self.lock();
        let secs = report.duration_ms as f64 / 1000.0;
        let i = PASS_BUCKETS.iter().position(|b| secs <= *b).unwrap_or(PASS_BUCKETS.len());
        m.pass_buckets[i] += 1;
        m.pass_sum += secs;
        *m.passes_by_outcome.entry(report.outcome.as_str().to_string()).or_default() += 1;
        m.preempted += report.preempted as u64;
        m.fallbacks += report.fallbacks as u64;
        m.released_nodes += report.released_nodes as u64;
        m.inbox_first += u64::from(report.reused_observation_ms.is_some());
        for u in &report.usage {
            let e = m.usage.entry((u.nodeset.clone(), u.model.clone(), u.use_.clone())).or_default();
            e.0 += u.vm_seconds;
            e.1 += u.gpu_seconds;
        }
        for read in report.skipped_reads.keys() {
            *m.skipped_reads.entry(read.clone()).or_default() += 1;
        }
        m.last_pass = Some(report.clone());
    }

    /// A config reload replaced the reconciler: keep counting GCE calls across it.
    pub fn reloaded(&self, nodesets: Vec<String>, gce: gce::Client) {
        let mut m = self.lock();
        if let Some(old) = m.gce.replace(gce) {
            for (method, s) in old.stats() {
                let base = m.gce_base.entry(method).or_default();
                base.calls += s.calls;
                for (class, n) in s.errors_by_class {
                    *base.errors_by_class.entry(class).or_default() += n;
                }
            }
        }
        m.nodesets = nodesets;
        *m.reloads.entry("ok").or_default() += 1;
        m.last_reload_ok = Some(true);
    }

    /// With several controllers: whether this daemon's `controller` is the one in charge now.
    pub fn role(&self, controller: &str, in_charge: bool) {
        self.lock().role = Some((controller.to_string(), in_charge));
    }

    /// A config reload was refused (the running config stays).
    pub fn reload_failed(&self) {
        let mut m = self.lock();
        *m.reloads.entry("error").or_default() += 1;
        m.last_reload_ok = Some(false);
    }

    /// GCE calls and errors by method since start, across reloads.
    pub fn gce_stats(&self) -> BTreeMap<String, MethodStats> {
        let m = self.lock();
        let mut all = m.gce_base.clone();
        for (method, s) in m.gce.as_ref().map(|c| c.stats()).unwrap_or_default() {
            let e = all.entry(method).or_default();
            e.calls += s.calls;
            for (class, n) in s.errors_by_class {
                *e.errors_by_class.entry(class).or_default() += n;
            }
        }
        all
    }

    /// The whole exposition: the store's counts at `now` and the in-memory activity.
    pub async fn render(
        &self,
        store: &Store,
        now: DateTime<Utc>,
    ) -> Result<String, crate::store::StoreError> {
        let counts = store.counts().await?;
        let backoffs = store.backoffs().await?;
        let step_failures = store.step_failures().await?;
        let gce = self.gce_stats();
        let m = self.lock();
        let mut w = Writer::default();

        w.family("slurm_dws_build_info", "gauge", "Always 1; the version of the running daemon.");
        w.sample("slurm_dws_build_info", &[("version", env!("CARGO_PKG_VERSION"))], 1.0);
        w.family("slurm_dws_start_time_seconds", "gauge", "When the daemon started (Unix time).");
        w.sample("slurm_dws_start_time_seconds", &[], m.started_at.timestamp() as f64);
        if let Some((controller, in_charge)) = &m.role {
            w.family(
                "slurm_dws_controller_role",
                "gauge",
                "With several SlurmctldHost entries: 1 for this daemon's role (in_charge acts, standby does not).",
            );
            for role in ["in_charge", "standby"] {
                let value = f64::from(u8::from((role == "in_charge") == *in_charge));
                w.sample("slurm_dws_controller_role", &[("controller", controller), ("role", role)], value);
            }
        }

        // Nodes: every (configured nodeset, state) pair, zeros included, so `sum by (state)` and alerts on
        // a state that is absent work; a nodeset removed from the config still shows while it has nodes.
        let mut nodes: BTreeMap<(String, String), i64> = BTreeMap::new();
        for ns in &m.nodesets {
            for s in NodeState::ALL {
                nodes.insert((ns.clone(), s.as_str().to_string()), 0);
            }
        }
        for (ns, state, n) in &counts.nodes {
            nodes.insert((ns.clone(), state.clone()), *n);
        }
        w.family("slurm_dws_nodes", "gauge", "Nodes slurm-dws tracks, by nodeset and slurm-dws state.");
        for ((ns, state), n) in &nodes {
            w.sample("slurm_dws_nodes", &[("nodeset", ns), ("state", state)], *n as f64);
        }

        let mut phases: BTreeMap<String, i64> =
            RequestPhase::ALL.iter().map(|p| (p.as_str().to_string(), 0)).collect();
        phases.extend(counts.requests_by_phase.iter().cloned());
        w.family(
            "slurm_dws_requests",
            "gauge",
            "Resize-request groups by slurm-dws phase (done = finished and cleaned up; kept as history).",
        );
        for (phase, n) in &phases {
            w.sample("slurm_dws_requests", &[("phase", phase)], *n as f64);
        }
        w.family(
            "slurm_dws_requests_open",
            "gauge",
            "Resize-request groups not done, by nodeset and GCE state (\"\" = not yet seen in GCE).",
        );
        for (ns, state, n) in &counts.open_requests_by_gce_state {
            w.sample("slurm_dws_requests_open", &[("nodeset", ns), ("gce_state", state)], *n as f64);
        }
        w.family(
            "slurm_dws_oldest_queued_request_age_seconds",
            "gauge",
            "Age of the oldest resize request GCE still queues (ACCEPTED); 0 when none.",
        );
        let age = counts.oldest_queued.map_or(0, |t| (now - t).num_seconds().max(0));
        w.sample("slurm_dws_oldest_queued_request_age_seconds", &[], age as f64);

        let mut migs: BTreeMap<String, i64> =
            MigState::ALL.iter().map(|s| (s.as_str().to_string(), 0)).collect();
        migs.extend(counts.migs_by_state.iter().cloned());
        w.family("slurm_dws_migs", "gauge", "Managed instance groups slurm-dws owns, by state.");
        for (state, n) in &migs {
            w.sample("slurm_dws_migs", &[("state", state)], *n as f64);
        }

        w.family(
            "slurm_dws_outbox_pending",
            "gauge",
            "GCE mutations recorded but not yet known to have taken effect, by kind (the next pass resends them).",
        );
        let outbox: i64 = counts.outbox_pending.iter().map(|(_, n)| n).sum();
        for (kind, n) in &counts.outbox_pending {
            w.sample("slurm_dws_outbox_pending", &[("kind", kind)], *n as f64);
        }
        w.family("slurm_dws_outbox_pending_total", "gauge", "All pending GCE mutations (the outbox depth).");
        w.sample("slurm_dws_outbox_pending_total", &[], outbox as f64);
        w.family("slurm_dws_inbox_pending", "gauge", "Hook calls recorded but not yet processed by a pass.");
        w.sample("slurm_dws_inbox_pending", &[], counts.inbox_pending as f64);

        let max = crate::reconcile::gce_edge::step_retry::MAX_STEP_ATTEMPTS;
        let given_up = step_failures.iter().filter(|f| f.failed >= max).count();
        w.family(
            "slurm_dws_gce_steps_failing",
            "gauge",
            "GCE steps whose last attempts failed (an Operation DONE with an error): each retried with a new requestId after a backoff.",
        );
        w.sample("slurm_dws_gce_steps_failing", &[], (step_failures.len() - given_up) as f64);
        w.family(
            "slurm_dws_gce_steps_given_up",
            "gauge",
            "GCE steps slurm-dws gave up on after failing too many times in a row; a restart or reload retries them.",
        );
        w.sample("slurm_dws_gce_steps_given_up", &[], given_up as f64);

        let active: Vec<_> = backoffs.iter().filter(|b| b.until > now).collect();
        w.family(
            "slurm_dws_backoffs_active",
            "gauge",
            "Nodesets in a capacity/quota backoff: no new resize request for them until it ends.",
        );
        w.sample("slurm_dws_backoffs_active", &[], active.len() as f64);
        w.family("slurm_dws_backoff_remaining_seconds", "gauge", "Time left in a nodeset's backoff.");
        for b in &active {
            let left = (b.until - now).num_milliseconds() as f64 / 1000.0;
            w.sample("slurm_dws_backoff_remaining_seconds", &[("nodeset", &b.nodeset)], left);
        }
        w.family(
            "slurm_dws_backoff_level",
            "gauge",
            "Capacity failures in a row behind a nodeset's backoff.",
        );
        for b in &active {
            w.sample("slurm_dws_backoff_level", &[("nodeset", &b.nodeset)], f64::from(b.level));
        }

        w.family(
            "slurm_dws_gce_calls_total",
            "counter",
            "Compute Engine API HTTP requests by method id (each retry counts, as GCE's quota does).",
        );
        for (method, s) in &gce {
            w.sample("slurm_dws_gce_calls_total", &[("method", method)], s.calls as f64);
        }
        w.family(
            "slurm_dws_gce_errors_total",
            "counter",
            "Failed Compute Engine API requests by method id and error class.",
        );
        for (method, s) in &gce {
            for (class, n) in &s.errors_by_class {
                w.sample(
                    "slurm_dws_gce_errors_total",
                    &[("method", method), ("class", class_name(*class))],
                    *n as f64,
                );
            }
        }

        w.family("slurm_dws_pass_duration_seconds", "histogram", "Wall-clock duration of reconcile passes.");
        let mut cumulative = 0;
        for (i, bound) in PASS_BUCKETS.iter().enumerate() {
            cumulative += m.pass_buckets[i];
            w.sample(
                "slurm_dws_pass_duration_seconds_bucket",
                &[("le", &fmt_f64(*bound))],
                cumulative as f64,
            );
        }
        cumulative += m.pass_buckets[PASS_BUCKETS.len()];
        w.sample("slurm_dws_pass_duration_seconds_bucket", &[("le", "+Inf")], cumulative as f64);
        w.sample("slurm_dws_pass_duration_seconds_sum", &[], m.pass_sum);
        w.sample("slurm_dws_pass_duration_seconds_count", &[], cumulative as f64);
        w.family("slurm_dws_passes_total", "counter", "Reconcile passes by outcome (ok, degraded).");
        for (outcome, n) in &m.passes_by_outcome {
            w.sample("slurm_dws_passes_total", &[("outcome", outcome)], *n as f64);
        }
        w.family(
            "slurm_dws_preemptions_total",
            "counter",
            "Spot nodes whose VM GCE preempted, since the daemon started (each has a preempted event).",
        );
        w.sample("slurm_dws_preemptions_total", &[], m.preempted as f64);
        for (name, help, gpu) in [
            (
                "slurm_dws_vm_seconds_total",
                "Seconds of VM life of the nodes' VMs (GCE bills from creation to deletion), by nodeset, provisioning model and use (busy: a job ran on the node; idle: booting, waiting for a job or for SuspendTime), since the daemon started.",
                false,
            ),
            (
                "slurm_dws_gpu_seconds_total",
                "GPU seconds of the nodes' VMs (VM seconds times the machine type's GPUs), by nodeset, provisioning model and use, since the daemon started.",
                true,
            ),
        ] {
            w.family(name, "counter", help);
            for ((nodeset, model, use_), (vm, gpus)) in &m.usage {
                let labels = [("nodeset", nodeset.as_str()), ("model", model.as_str()), ("use", use_.as_str())];
                w.sample(name, &labels, if gpu { *gpus } else { *vm });
            }
        }
        w.family(
            "slurm_dws_fallbacks_total",
            "counter",
            "Times a nodeset that could not get capacity had its powered-down nodes drained, so that jobs fall back to their other partitions.",
        );
        w.sample("slurm_dws_fallbacks_total", &[], m.fallbacks as f64);
        w.family(
            "slurm_dws_exclusive_releases_total",
            "counter",
            "Nodes of exclusive nodesets powered down (VM deleted) as soon as their job ended.",
        );
        w.sample("slurm_dws_exclusive_releases_total", &[], m.released_nodes as f64);
        w.family(
            "slurm_dws_inbox_first_passes_total",
            "counter",
            "Passes a hook woke that planned on the last full observation (a full pass follows each).",
        );
        w.sample("slurm_dws_inbox_first_passes_total", &[], m.inbox_first as f64);
        w.family(
            "slurm_dws_skipped_reads_total",
            "counter",
            "Reads passes did not make, by read (vms, migs, slurm_nodes, reservations, resize_requests): what each planned from instead is in its report's skipped_reads.",
        );
        for (read, n) in &m.skipped_reads {
            w.sample("slurm_dws_skipped_reads_total", &[("read", read)], *n as f64);
        }
        if let Some(p) = &m.last_pass {
            w.family("slurm_dws_last_pass_duration_seconds", "gauge", "Duration of the last reconcile pass.");
            w.sample("slurm_dws_last_pass_duration_seconds", &[], p.duration_ms as f64 / 1000.0);
            w.family(
                "slurm_dws_last_pass_timestamp_seconds",
                "gauge",
                "When the last reconcile pass started.",
            );
            w.sample(
                "slurm_dws_last_pass_timestamp_seconds",
                &[],
                p.started_at.timestamp_millis() as f64 / 1000.0,
            );
            w.family(
                "slurm_dws_last_pass_iteration",
                "gauge",
                "Number of the last reconcile pass (survives restarts).",
            );
            w.sample("slurm_dws_last_pass_iteration", &[], p.iteration as f64);
            w.family(
                "slurm_dws_gce_calls_in_flight",
                "gauge",
                "GCE steps still waiting for GCE's answer in the background when the last pass ended (the pass report's in_flight).",
            );
            w.sample("slurm_dws_gce_calls_in_flight", &[], p.in_flight.len() as f64);
            w.family(
                "slurm_dws_gce_call_in_flight_oldest_seconds",
                "gauge",
                "Age of the oldest GCE call in flight when the last pass ended (0 when none): a call hanging.",
            );
            let oldest = p.in_flight.iter().map(|c| c.age_secs).max().unwrap_or(0);
            w.sample("slurm_dws_gce_call_in_flight_oldest_seconds", &[], oldest as f64);
            w.family("slurm_dws_last_pass_ok", "gauge", "1 if the last pass had no error, else 0.");
            w.sample("slurm_dws_last_pass_ok", &[], if p.outcome == PassOutcome::Ok { 1.0 } else { 0.0 });
            w.family(
                "slurm_dws_degraded",
                "gauge",
                "1 while reconcile passes are degraded (GCE or Slurm unreadable, or a step failed), else 0.",
            );
            w.sample("slurm_dws_degraded", &[], if p.outcome == PassOutcome::Degraded { 1.0 } else { 0.0 });
            if let Some(since) = p.degraded_since {
                w.family(
                    "slurm_dws_degraded_since_timestamp_seconds",
                    "gauge",
                    "When the first degraded pass of the current degraded spell started.",
                );
                w.sample(
                    "slurm_dws_degraded_since_timestamp_seconds",
                    &[],
                    since.timestamp_millis() as f64 / 1000.0,
                );
            }
        }

        w.family("slurm_dws_config_reloads_total", "counter", "SIGHUP config reloads by result (ok, error).");
        for (result, n) in &m.reloads {
            w.sample("slurm_dws_config_reloads_total", &[("result", result)], *n as f64);
        }
        if let Some(ok) = m.last_reload_ok {
            w.family("slurm_dws_config_last_reload_ok", "gauge", "1 if the last SIGHUP reload was applied.");
            w.sample("slurm_dws_config_last_reload_ok", &[], if ok { 1.0 } else { 0.0 });
        }
        Ok(w.out)
    }
}

fn class_name(c: ErrorClass) -> &'static str {
    c.as_str()
}

/// Prometheus float formatting: integers without a fraction, otherwise Rust's shortest round-trip form.
fn fmt_f64(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Builds the text exposition.
#[derive(Default)]
struct Writer {
    out: String,
}

impl Writer {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {}", help.replace('\\', "\\\\").replace('\n', "\\n"));
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let v = v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
                let _ = write!(self.out, "{k}=\"{v}\"");
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {}", fmt_f64(value));
    }
}

#[derive(Clone)]
struct Ctx {
    metrics: Metrics,
    store: Store,
}

/// Binds `addr` (a bind failure is a start-up error: the admin asked for metrics there).
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

/// Serves `GET /metrics` on `listener` until `shutdown` resolves, then finishes the scrapes in flight.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Metrics,
    store: Store,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let app = Router::new()
        .route("/metrics", get(scrape))
        .route("/", get(|| async { "slurm-dws: metrics at /metrics\n" }))
        .with_state(Ctx { metrics, store });
    if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(shutdown).await {
        tracing::error!(error = %e, "metrics server stopped");
    }
}

async fn scrape(State(ctx): State<Ctx>) -> Response {
    #[allow(clippy::disallowed_methods)] // an edge: a scrape reports the present
    let now = Utc::now();
    match ctx.metrics.render(&ctx.store, now).await {
        Ok(text) => {
            ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response()
        }
        Err(e) => {
            tracing::warn!(error = %e, "metrics: cannot read the store");
            (StatusCode::SERVICE_UNAVAILABLE, format!("cannot read the state store: {e}\n")).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_escapes_labels_and_formats_numbers() {
        let mut w = Writer::default();
        w.family("x", "gauge", "a \\ b");
        w.sample("x", &[("a", "q\"uo\\te\n")], 2.0);
        w.sample("x", &[], 0.25);
        assert_eq!(w.out, "# HELP x a \\\\ b\n# TYPE x gauge\nx{a=\"q\\\"uo\\\\te\\n\"} 2\nx 0.25\n");
    }

    #[test]
    fn histogram_buckets_by_upper_bound() {
        let c = gce::Client::new(
            gce::ClientOptions {
                endpoint: "http://127.0.0.1:1/".into(),
                project: "p".into(),
                calls_per_minute: 0,
                reads_per_minute: 0,
                writes_per_minute: 0,
                request_timeout: std::time::Duration::from_secs(1),
                retry_deadline: std::time::Duration::from_secs(1),
            },
            gce::Credentials::None,
        )
        .unwrap();
        let started = DateTime::from_timestamp(1_795_000_000, 0).unwrap();
        let m = Metrics::new(vec!["a".into()], c, started);
        for ms in [5, 10, 11, 200_000] {
            let mut report: PassReport = serde_json::from_value(serde_json::json!({
                "iteration": 1, "trigger": "interval", "started_at": "2026-01-01T00:00:00Z", "duration_ms": ms,
                "outcome": "ok", "hook_calls_ingested": 0, "rounds": 0, "requests_created": 0,
                "gce_steps": [], "slurm_commands": 0, "events": 0, "errors": [], "next_pass_in_secs": 1,
            }))
            .unwrap();
            assert_eq!(report.preempted, 0, "a report stored before preemptions were counted reads as none");
            report.preempted = usize::from(ms == 11) * 2;
            m.observe_pass(&report);
        }
        let inner = m.lock();
        assert_eq!(inner.preempted, 2, "slurm_dws_preemptions_total adds each pass's preempted nodes");
        // 5 ms and 10 ms fall in le=0.01 (upper bounds are inclusive), 11 ms in le=0.025, 200 s in +Inf.
        assert_eq!(inner.pass_buckets[0], 2);
        assert_eq!(inner.pass_buckets[1], 1);
        assert_eq!(inner.pass_buckets[PASS_BUCKETS.len()], 1);
        assert!((inner.pass_sum - 200.026).abs() < 1e-9);
    }
}
