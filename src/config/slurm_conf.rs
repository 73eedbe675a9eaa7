//! The slurm.conf lines a config implies: hooks, power-saving settings, NodeName and PartitionName lines.
//!
//! A pure function of the config, so `check-config --print-slurm-conf` and the shipped
//! `conf/slurm.conf.example` cannot disagree (a test renders the example and compares).

use std::fmt::Write;
use std::ops::Range;
use std::path::Path;

use super::Config;

/// ResumeTimeout of a DWS Flex partition: Slurm's largest value (about 18 hours).
pub const FLEX_RESUME_TIMEOUT: u32 = 65535;

/// `prefix[a-b]` for a contiguous index range (`prefix7` for one index, nothing when empty).
///
/// Deliberately tiny: node indices of one nodeset are always one contiguous range, so this
/// needs none of the general hostlist module's generality.
pub fn compress_range(prefix: &str, indices: Range<u32>) -> Option<String> {
    match indices.len() {
        0 => None,
        1 => Some(format!("{prefix}{}", indices.start)),
        _ => Some(format!("{prefix}[{}-{}]", indices.start, indices.end - 1)),
    }
}

/// The slurm.conf lines for `config`, with the hooks expected in `hook_dir`.
pub fn render_slurm_conf(config: &Config, hook_dir: &Path) -> String {
    let hook = |name: &str| hook_dir.join(name).display().to_string();
    let prefix = |ns: &str| format!("{}-{ns}-", config.cluster_name);
    let file = config
        .source
        .file_name()
        .map_or_else(|| config.source.display().to_string(), |f| f.to_string_lossy().into_owned());
    let mut out = String::new();
    let mut line = |s: &str| {
        out.push_str(s);
        out.push('\n');
    };

    line(&format!(
        "# slurm.conf lines for slurm-dws, cluster {:?}, generated from {file}",
        config.cluster_name
    ));
    line("# by `slurm-dws check-config --print-slurm-conf`. Paste them into slurm.conf and");
    line("# regenerate them whenever a nodeset changes.");
    line("");
    line("# The power-saving hooks. slurmctld runs them with a hostlist; they only record the");
    line("# request durably and return in milliseconds, the slurm-dws daemon does the work.");
    line(&format!("ResumeProgram={}", hook("slurm-dws-resume")));
    line(&format!("SuspendProgram={}", hook("slurm-dws-suspend")));
    line("# A node that missed ResumeTimeout gets the suspend cleanup, and slurm-dws records why.");
    line(&format!("ResumeFailProgram={}", hook("slurm-dws-resume-fail")));
    line("# No rate limits: one call then carries all of a job's nodes, which become one resize");
    line("# request (one MIG, all VMs at once) instead of being split across calls.");
    line("ResumeRate=0");
    line("SuspendRate=0");
    line("# For nodes outside the DWS Flex partitions below, which set a much longer one.");
    line("ResumeTimeout=600");
    line("# Seconds a node stays idle before Slurm powers it down and its VM is deleted.");
    line("SuspendTime=300");
    line("# Time for a VM to be deleted before its node may be resumed under the same name.");
    line("SuspendTimeout=300");
    line("# Without this, powered-down cloud nodes are invisible to sinfo and scontrol (even to");
    line("# root and to slurm-dws itself).");
    line("PrivateData=cloud");
    line("# idle_on_node_suspend: a node suspended while DOWN or DRAINED comes back IDLE, so a");
    line("#   failed resume does not leave it unusable.");
    line("# cloud_reg_addrs: take a node's address from its slurmd's registration (no DNS needed).");
    line("SlurmctldParameters=idle_on_node_suspend,cloud_reg_addrs");
    line("# A node's address changes every time it is re-provisioned: do not cache it.");
    line("CommunicationParameters=NoAddrCache");
    line("# Do not route messages through cloud nodes, most of which are powered down.");
    line("TreeWidth=65533");

    let statics: Vec<String> = config
        .nodesets
        .iter()
        .filter_map(|ns| compress_range(&prefix(&ns.name), ns.static_indices()))
        .collect();
    if statics.is_empty() {
        line("# No static nodes, so no SuspendExcNodes.");
    } else {
        line("# Static nodes are kept provisioned by slurm-dws (and re-provisioned when their run");
        line("# duration ends): Slurm must never power them down.");
        line(&format!("SuspendExcNodes={}", statics.join(",")));
    }

    line("");
    line("# Nodes: {cluster_name}-{nodeset}-{index}, static indices first. State=CLOUD: they exist");
    line("# only while slurm-dws has a VM behind them.");
    for ns in &config.nodesets {
        let flex = if ns.dws_flex.enabled {
            format!("DWS Flex, run duration up to {} s", ns.dws_flex.max_run_duration)
        } else {
            "DWS Flex disabled".to_string()
        };
        let mut desc = format!("# nodeset {}: ", ns.name);
        let kinds: Vec<String> = [
            compress_range("static ", ns.static_indices()),
            compress_range("dynamic ", ns.dynamic_indices()),
        ]
        .into_iter()
        .flatten()
        .collect();
        let _ = write!(desc, "{}; {flex}", kinds.join(", "));
        line(&desc);
        let nodes = compress_range(&prefix(&ns.name), ns.indices()).unwrap_or_default();
        let mut node_line = format!("NodeName={nodes} State=CLOUD");
        if !ns.node_conf.trim().is_empty() {
            let _ = write!(node_line, " {}", ns.node_conf.trim());
        }
        line(&node_line);
    }

    line("");
    line(&format!(
        "# Partitions. ResumeTimeout={FLEX_RESUME_TIMEOUT} (Slurm's largest, about 18 h) on DWS Flex partitions:"
    ));
    line("# capacity can take hours to arrive, and slurm-dws itself notices failed, cancelled or");
    line("# timed-out (queue_timeout) requests and returns the nodes within one pass, so Slurm's");
    line("# timer is only a last resort.");
    let mut partitions: Vec<(&str, Vec<String>, bool)> = Vec::new();
    for ns in &config.nodesets {
        let nodes = compress_range(&prefix(&ns.name), ns.indices()).unwrap_or_default();
        match partitions.iter_mut().find(|(p, _, _)| *p == ns.partition) {
            Some((_, list, flex)) => {
                list.push(nodes);
                *flex |= ns.dws_flex.enabled;
            }
            None => partitions.push((&ns.partition, vec![nodes], ns.dws_flex.enabled)),
        }
    }
    for (name, nodes, flex) in partitions {
        let timeout = if flex { format!(" ResumeTimeout={FLEX_RESUME_TIMEOUT}") } else { String::new() };
        line(&format!("PartitionName={name} Nodes={}{timeout} State=UP", nodes.join(",")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(compress_range("h-a-", 0..0), None);
        assert_eq!(compress_range("h-a-", 3..4).as_deref(), Some("h-a-3"));
        assert_eq!(compress_range("h-a-", 0..16).as_deref(), Some("h-a-[0-15]"));
        assert_eq!(compress_range("h-a-", 2..16).as_deref(), Some("h-a-[2-15]"));
    }
}
