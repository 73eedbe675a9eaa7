//! `slurm-dws reconcile` and `slurm-dws gc`: asked of the daemon over its socket, its report printed.

use super::{rt, to_json, trigger_name};
use crate::cli::table::Table;
use crate::cli::CliError;
use crate::config::Config;
use crate::protocol::{self, Request as Ask, Response};
use crate::reconcile::{GcItemKind, GcReport, PassReport};
use serde_json::Value;
use std::time::Duration;

/// `slurm-dws reconcile` and `slurm-dws gc [--dry-run]`: through the daemon.
pub async fn ask_daemon(cfg: &Config, ask: Ask, json_out: bool) -> Result<String, CliError> {
    let response = match protocol::call(&cfg.socket, ask, Duration::from_secs(600)).await {
        Ok(Response::Error { message }) => return Err(CliError::runtime(format!("daemon: {message}"))),
        Ok(r) => r,
        Err(e) => {
            return Err(CliError::runtime(format!(
                "{e}; is the daemon running? (systemctl status slurm-dws)"
            )))
        }
    };
    // The report goes through a JSON value so that `--json` prints its keys sorted, as every listing.
    let json = |report: Result<Value, serde_json::Error>| report.map(|v| to_json(&v)).map_err(rt);
    match response {
        Response::Pass(p) if json_out => json(serde_json::to_value(&p)),
        Response::Gc(g) if json_out => json(serde_json::to_value(&g)),
        Response::Pass(p) => Ok(render_pass(&p)),
        Response::Gc(g) => Ok(render_gc(&g)),
        other => Err(CliError::runtime(format!("daemon sent an unexpected answer: {other:?}"))),
    }
}

fn render_pass(p: &PassReport) -> String {
    let mut s = format!(
        "pass #{} ({}) took {} ms: {}\n  hook calls ingested: {}\n  request groups created: {}\n  Slurm commands: {}\n  events: {}\n",
        p.iteration, trigger_name(p), p.duration_ms, p.outcome,
        p.hook_calls_ingested, p.requests_created, p.slurm_commands, p.events
    );
    for st in &p.gce_steps {
        s.push_str(&format!(
            "  GCE {} {}: {}\n",
            st.step,
            st.target,
            if st.ok {
                "done".to_string()
            } else {
                format!("FAILED: {}", st.error.as_deref().unwrap_or("?"))
            }
        ));
    }
    for e in &p.errors {
        s.push_str(&format!("  error: {e}\n"));
    }
    s
}

fn render_gc(r: &GcReport) -> String {
    let list = r.items();
    if list.is_empty() {
        return "nothing to delete: every owned MIG is in use or within mig_gc_grace, every VM backs a node\n".into();
    }
    let mut t = Table::new(&["KIND", "NAME", "MIG", "REASON"]);
    for i in list {
        let kind = match i.kind {
            GcItemKind::Mig => "mig",
            GcItemKind::Vm => "vm",
            GcItemKind::Policy => "policy",
        };
        t.push(vec![
            kind.into(),
            i.name.clone(),
            i.mig.clone().unwrap_or_else(|| "-".into()),
            i.reason.clone(),
        ]);
    }
    format!("{}{}", if r.dry_run() { "a pass would delete:\n" } else { "deleted:\n" }, t.render())
}
