//! `slurm-dws repair NODE... [--reason BEHAVIOR] [--description TEXT]`: checked here (nodes of ours,
//! a behaviour GCE knows: else exit 2, nothing changed), recorded by the daemon, carried out by its
//! passes (`reconcile/plan/repair.rs`).

use super::to_json;
use crate::cli::CliError;
use crate::config::Config;
use crate::model::FaultBehavior;
use crate::naming::Naming;
use crate::protocol::{self, Request, Response};
use std::time::Duration;

/// Asks the daemon to repair `nodes` (hostlist expressions); prints what it recorded.
pub async fn repair(
    cfg: &Config,
    nodes: &[String],
    reason: &str,
    description: &str,
    json_out: bool,
) -> Result<String, CliError> {
    let behavior: FaultBehavior = reason.to_ascii_uppercase().parse().map_err(|_| {
        let known: Vec<&str> = FaultBehavior::ALL.iter().map(|b| b.as_str()).collect();
        CliError::usage(format!(
            "--reason {reason}: not a fault behaviour GCE knows (one of {})",
            known.join(", ")
        ))
    })?;
    let naming = Naming::new(cfg);
    let mut names = Vec::new();
    for expr in nodes {
        let expanded = crate::hostlist::expand(expr)
            .map_err(|e| CliError::usage(format!("{expr}: not a hostlist expression: {e}")))?;
        for name in expanded {
            if let Err(e) = naming.parse(&name) {
                return Err(CliError::usage(format!("{name}: not a node of slurm-dws: {e}")));
            }
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    if names.is_empty() {
        return Err(CliError::usage("no node named"));
    }
    let ask = Request::Repair {
        nodes: names.clone(),
        behavior: behavior.as_str().into(),
        description: description.into(),
    };
    let recorded = match protocol::call(&cfg.socket, ask, Duration::from_secs(30)).await {
        Ok(Response::Rows { rows }) => rows,
        Ok(Response::Error { message }) => return Err(CliError::runtime(format!("daemon: {message}"))),
        Ok(other) => return Err(CliError::runtime(format!("daemon sent an unexpected answer: {other:?}"))),
        Err(e) => {
            return Err(CliError::runtime(format!(
                "{e}; is the daemon running? (systemctl status slurm-dws)"
            )))
        }
    };
    let new: Vec<String> = recorded["recorded"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let open: Vec<String> = names.iter().filter(|n| !new.contains(n)).cloned().collect();
    if json_out {
        return Ok(to_json(
            &serde_json::json!({"behavior": behavior.as_str(), "asked": new, "already_open": open}),
        ));
    }
    let mut s = String::new();
    if !new.is_empty() {
        s.push_str(&format!(
            "repair {behavior} asked for {}: the daemon drains them, requeues their jobs, and reports \
             their hosts or replaces their VMs (slurm-dws explain NODE follows it)\n",
            crate::hostlist::compress(&new)
        ));
    }
    if !open.is_empty() {
        s.push_str(&format!(
            "a repair of {} is under way already: the same repair\n",
            crate::hostlist::compress(&open)
        ));
    }
    Ok(s)
}
