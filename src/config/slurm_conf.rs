//! The slurm.conf lines a config implies: hooks, power-saving settings, NodeName and PartitionName
//! lines, for the Slurm version that will read them.
//!
//! A pure function of the config and the Slurm version, so `check-config --print-slurm-conf` and
//! the shipped `conf/slurm.conf.example` cannot disagree (a test renders the example and compares).
//!
//! Each option is checked against the slurm.conf(5) page and release notes of every supported
//! release. Where they differ:
//!
//! | option | 22.05 | 23.02 | 23.11 … 26.05 |
//! |---|---|---|---|
//! | `PrivateData=cloud` | needed: without it powered-down cloud nodes are invisible, even to root | not needed ("cloud nodes show by default"); the word is ignored | same as 23.02 |
//! | `SlurmctldParameters=cloud_reg_addrs` | take the address from the slurmd's registration | same | removed, the default; slurmctld logs "defunct" at every start |
//! | `CommunicationParameters=NoAddrCache` | do not cache node addresses | same | removed; "defunct" error at every start |
//! | partition `ResumeTimeout` | uint16, 65535 is INFINITE (shown so) yet still added as seconds | same | 24.11: same; 25.05 and later: INFINITE never times out, "maximum value is either 65533 or INFINITE" |
//! | partition `OverSubscribe=EXCLUSIVE` | one job per node | same | same; 26.05 takes it and shows it as `Exclusive=NODE OverSubscribe=NO` |
//!
//! So a DWS Flex partition gets `ResumeTimeout=65533` on every release: the largest finite value,
//! about 18 hours, which means the same thing on all of them (65535 was Slurm's INFINITE).
//!
//! Measured on 24.11.5: the 22.05 lines make slurmctld log `The SlurmctldParameters option
//! "cloud_reg_addrs" is defunct` and the same for `NoAddrCache` at every start (docs/slurm-root.md),
//! and a partition `ResumeTimeout=65535` is printed as INFINITE; the lines printed for 24.11 load
//! without an error and `scontrol show partition` says `ResumeTimeout=65533`. Measured on 26.05.5
//! (Debian forky): the lines printed for 25.05 (the same as for 25.11 and 26.05) load without an
//! error, `scontrol show config` says `TopologyPlugin=topology/flat` with no topology.yaml needed
//! (slurm-dws prints no topology lines: a cluster's topology is its own), and the e2e scenarios run
//! on them unchanged.
//! `ResumeProgram`, `SuspendProgram`, `ResumeFailProgram`, `ResumeRate=0` / `SuspendRate=0`
//! (no limit), `SuspendTime`, `SuspendTimeout`, `SlurmctldParameters=idle_on_node_suspend`,
//! `TreeWidth` (at most 65533), `SuspendExcNodes`, `NodeName ... State=CLOUD` and partition
//! `ResumeTimeout` mean the same from 22.05 to 26.05.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::ops::Range;
use std::path::Path;

use super::Config;
use crate::slurm::SlurmVersion;

/// ResumeTimeout of a DWS Flex partition: the largest finite value Slurm takes (about 18 hours).
/// 65535 is Slurm's INFINITE (`scontrol show partition` says `ResumeTimeout=INFINITE`), which
/// 25.05 and later never time out, and 65534 is its "not set".
pub const FLEX_RESUME_TIMEOUT: u32 = 65533;

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

/// What one Slurm release takes of the options that differ (see the module docs).
struct Release {
    /// 22.05: powered-down cloud nodes are hidden without `PrivateData=cloud`.
    needs_private_data_cloud: bool,
    /// 22.05 and 23.02 have `cloud_reg_addrs` and `NoAddrCache`; 23.11 removed both.
    has_address_options: bool,
    /// 25.05+: a partition ResumeTimeout of 65535 (INFINITE) never times out.
    infinite_resume_timeout_is_never: bool,
}

impl Release {
    fn of(version: SlurmVersion) -> Release {
        let release = version.release();
        Release {
            needs_private_data_cloud: release < (23, 2),
            has_address_options: release < (23, 11),
            infinite_resume_timeout_is_never: release >= (25, 5),
        }
    }
}

/// The slurm.conf lines for `config` and the newest Slurm release slurm-dws knows, with the hooks
/// expected in `hook_dir`. See [`render_slurm_conf_for`].
pub fn render_slurm_conf(config: &Config, hook_dir: &Path) -> String {
    render_slurm_conf_for(config, hook_dir, None)
}

/// The slurm.conf lines for `config` and Slurm `version`, with the hooks expected in `hook_dir`.
/// Without a version, the lines are for [`SlurmVersion::LATEST_KNOWN`], and a comment says so. A
/// version newer than slurm-dws knows gets the lines of the newest it knows, also said.
pub fn render_slurm_conf_for(config: &Config, hook_dir: &Path, version: Option<SlurmVersion>) -> String {
    render_slurm_conf_with(config, hook_dir, version, &BTreeMap::new())
}

/// The keys a nodeset's NodeName line gets after `State=CLOUD`: the `derived` ones (from its
/// machine type, `check-config --online`) that its `node_conf` does not set, then `node_conf` as
/// written (verbatim). A key of `node_conf` wins over the derived one of the same name (Slurm's keys are
/// case-insensitive, so is the comparison); none appears twice.
pub fn node_keys(derived: &[(String, String)], node_conf: &str) -> String {
    let written: Vec<String> = node_conf
        .split_whitespace()
        .filter_map(|word| word.split_once('=').map(|(k, _)| k.to_ascii_lowercase()))
        .collect();
    let own = node_conf.trim();
    derived
        .iter()
        .filter(|(k, _)| !written.contains(&k.to_ascii_lowercase()))
        .map(|(k, v)| format!("{k}={v}"))
        .chain((!own.is_empty()).then(|| own.to_string()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// [`render_slurm_conf_for`], each nodeset's NodeName line also carrying the keys `derived` holds
/// for it by name (CPUs, RealMemory, Gres, Features from its machine type), under its `node_conf`
/// (see [`node_keys`]).
pub fn render_slurm_conf_with(
    config: &Config,
    hook_dir: &Path,
    version: Option<SlurmVersion>,
    derived: &BTreeMap<String, Vec<(String, String)>>,
) -> String {
    let hook = |name: &str| hook_dir.join(name).display().to_string();
    let prefix = |ns: &str| format!("{}-{ns}-", config.cluster_name);
    let file = config
        .source
        .file_name()
        .map_or_else(|| config.source.display().to_string(), |f| f.to_string_lossy().into_owned());
    let target = match version {
        Some(v) if v.is_known() => v,
        _ => SlurmVersion::LATEST_KNOWN,
    };
    let release = Release::of(target);
    let named = target.release_name();
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
    match version {
        // A version given as a release (24.11) has no maintenance number to show.
        Some(v) if v.is_known() && v.patch == 0 => line(&format!("# For Slurm {named}.")),
        Some(v) if v.is_known() => line(&format!("# For Slurm {named} ({v}).")),
        Some(v) => {
            line(&format!("# For Slurm {named}, the newest release slurm-dws knows: Slurm {v} is newer,"));
            line("# check them against its slurm.conf(5).");
        }
        None => {
            line(&format!("# For Slurm {named}, the newest release slurm-dws knows: no Slurm version was"));
            line("# given or found (--slurm-version VERSION prints the lines for another).");
        }
    }
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
    if release.needs_private_data_cloud {
        line("# Without this, powered-down cloud nodes are invisible to sinfo and scontrol (even to");
        line("# root and to slurm-dws itself).");
        line("PrivateData=cloud");
    } else {
        line("# No PrivateData=cloud: since 23.02 powered-down cloud nodes are always listed.");
    }
    line("# idle_on_node_suspend: a node suspended while DOWN or DRAINED comes back IDLE, so a");
    line("#   failed resume does not leave it unusable.");
    if release.has_address_options {
        line("# cloud_reg_addrs: take a node's address from its slurmd's registration (no DNS needed).");
        line("SlurmctldParameters=idle_on_node_suspend,cloud_reg_addrs");
        line("# A node's address changes every time it is re-provisioned: do not cache it.");
        line("CommunicationParameters=NoAddrCache");
    } else {
        line("# Since 23.11 a cloud node's address is taken from its slurmd's registration by");
        line("# default: cloud_reg_addrs and NoAddrCache are gone (slurmctld logs an error for each).");
        line("SlurmctldParameters=idle_on_node_suspend");
    }
    line("# Do not route messages through cloud nodes, most of which are powered down.");
    line("TreeWidth=65533");
    topology_lines(config, target, &mut line);

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
    if derived.values().flatten().any(|(k, _)| k == "Gres") {
        line("# Gres=gpu:N needs GresTypes=gpu here and a gres.conf on the nodes (AutoDetect=nvml).");
    }
    for ns in &config.nodesets {
        let flex = if ns.dws_flex.enabled {
            format!("DWS Flex, run duration up to {} s", ns.dws_flex.max_run_duration)
        } else {
            format!("{} VMs, created by name (no run duration)", ns.provisioning_model)
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
        let own = derived.get(&ns.name).map_or(&[][..], Vec::as_slice);
        if !own.is_empty() {
            let from = own.iter().find(|(k, _)| k == "Features").map_or("", |(_, v)| v.as_str());
            line(&format!(
                "# CPUs, RealMemory, Gres, Features: from its template's machine type {from} (node_conf wins)."
            ));
        }
        let keys = node_keys(own, &ns.node_conf);
        if !keys.is_empty() {
            let _ = write!(node_line, " {keys}");
        }
        line(&node_line);
    }

    line("");
    line(&format!(
        "# Partitions. ResumeTimeout={FLEX_RESUME_TIMEOUT} (about 18 h) on DWS Flex partitions: capacity can take"
    ));
    line("# hours to arrive, and slurm-dws itself notices failed, cancelled or timed-out");
    line("# (queue_timeout) requests and returns the nodes within one pass, so Slurm's timer is");
    line("# only a last resort, for when slurm-dws is not running.");
    line(&format!(
        "# {FLEX_RESUME_TIMEOUT} is the largest finite value. 65535 is Slurm's INFINITE (scontrol shows"
    ));
    if release.infinite_resume_timeout_is_never {
        line(&format!("# ResumeTimeout=INFINITE), which Slurm {named} never times out."));
    } else {
        line(&format!(
            "# ResumeTimeout=INFINITE): Slurm {named} still times it out after 65535 s, 25.05 and"
        ));
        line("# later never do.");
    }
    if config.nodesets.iter().any(|n| n.exclusive) {
        line("# OverSubscribe=EXCLUSIVE on partitions of nodesets with exclusive = true: each node runs");
        line("# one job, and slurm-dws deletes its VM as soon as the job it was resumed for ends.");
    }
    // (name, node ranges, any flex nodeset, any exclusive nodeset)
    let mut partitions: Vec<(&str, Vec<String>, bool, bool)> = Vec::new();
    for ns in &config.nodesets {
        let nodes = compress_range(&prefix(&ns.name), ns.indices()).unwrap_or_default();
        match partitions.iter_mut().find(|(p, ..)| *p == ns.partition) {
            Some((_, list, flex, exclusive)) => {
                list.push(nodes);
                *flex |= ns.dws_flex.enabled;
                *exclusive |= ns.exclusive;
            }
            None => partitions.push((&ns.partition, vec![nodes], ns.dws_flex.enabled, ns.exclusive)),
        }
    }
    for (name, nodes, flex, exclusive) in partitions {
        let timeout = if flex { format!(" ResumeTimeout={FLEX_RESUME_TIMEOUT}") } else { String::new() };
        let over = if exclusive { " OverSubscribe=EXCLUSIVE" } else { "" };
        line(&format!("PartitionName={name} Nodes={}{timeout}{over} State=UP", nodes.join(",")));
    }
    out
}

/// `TopologyPlugin` and where its file is, when `[slurm] topology` is set (`crate::topology`).
fn topology_lines(config: &Config, target: SlurmVersion, line: &mut impl FnMut(&str)) {
    let kind = config.slurm.topology.kind;
    let Some(plugin) = kind.plugin() else { return };
    let yaml = (target.major, target.minor) >= (25, 5);
    let file = config
        .slurm
        .topology
        .file
        .clone()
        .unwrap_or_else(|| crate::topology::default_path(config.slurm.conf.as_deref(), yaml));
    line("# Topology from GCE's physical host topology: slurm-dws keeps this file and runs");
    line("# `scontrol reconfigure` when it changes (at most once a minute). Slurm reads it from");
    line(&format!("# slurm.conf's directory: {} must be there (slurm.topology_file).", file.display()));
    if kind == crate::config::TopologyKind::Block && (target.major, target.minor) < (23, 11) {
        line("# topology/block needs Slurm 23.11 or later: use topology = \"tree\" on this release.");
    }
    line(&format!("TopologyPlugin={plugin}"));
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

    fn example() -> Config {
        let text = include_str!("../../conf/slurm-dws.toml");
        Config::from_toml_str(text, Path::new("/etc/slurm-dws/slurm-dws.toml")).unwrap()
    }

    fn settings(text: &str) -> Vec<&str> {
        text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).collect()
    }

    fn v(major: u16, minor: u16, patch: u16) -> Option<SlurmVersion> {
        Some(SlurmVersion::new(major, minor, patch))
    }

    /// The settings that differ by release, and those that must be there on every one.
    #[test]
    fn lines_depend_on_the_slurm_release() {
        let config = example();
        let dir = Path::new("/usr/local/sbin");
        let legacy = ["PrivateData=cloud", "SlurmctldParameters=idle_on_node_suspend,cloud_reg_addrs"];
        let addr_cache = "CommunicationParameters=NoAddrCache";
        let modern = "SlurmctldParameters=idle_on_node_suspend";
        // (version, PrivateData=cloud, cloud_reg_addrs + NoAddrCache)
        let cases = [
            (v(22, 5, 8), true, true),
            (v(23, 2, 7), false, true),
            (v(23, 11, 10), false, false),
            (v(24, 5, 8), false, false),
            (v(24, 11, 5), false, false),
            (v(25, 5, 0), false, false),
            (v(25, 11, 2), false, false),
            (v(26, 5, 5), false, false),
            (v(26, 11, 0), false, false),
            (None, false, false),
        ];
        for (version, private_data, addresses) in cases {
            let text = render_slurm_conf_for(&config, dir, version);
            let lines = settings(&text);
            let has = |l: &str| lines.contains(&l);
            assert_eq!(has(legacy[0]), private_data, "{version:?}\n{text}");
            assert_eq!(has(legacy[1]), addresses, "{version:?}\n{text}");
            assert_eq!(has(addr_cache), addresses, "{version:?}\n{text}");
            assert_eq!(has(modern), !addresses, "{version:?}\n{text}");
            assert!(!text.contains("ResumeTimeout=65535"), "{text}");
            for want in [
                "ResumeProgram=/usr/local/sbin/slurm-dws-resume",
                "SuspendProgram=/usr/local/sbin/slurm-dws-suspend",
                "ResumeFailProgram=/usr/local/sbin/slurm-dws-resume-fail",
                "ResumeRate=0",
                "SuspendRate=0",
                "ResumeTimeout=600",
                "SuspendTime=300",
                "SuspendTimeout=300",
                "TreeWidth=65533",
                "SuspendExcNodes=hpc-a3u-[0-1]",
                "PartitionName=a3u Nodes=hpc-a3u-[0-15] ResumeTimeout=65533 State=UP",
            ] {
                assert!(has(want), "{version:?}: missing {want}\n{text}");
            }
            // Every setting is explained by the comment lines right above it (or above its group).
            let all: Vec<&str> = text.lines().collect();
            for (i, l) in all.iter().enumerate() {
                if !l.is_empty() && !l.starts_with('#') && !l.starts_with("NodeName=") {
                    let above =
                        all[..i].iter().rev().take_while(|p| !p.is_empty()).any(|p| p.starts_with('#'));
                    assert!(above, "{version:?}: {l} has no comment above it");
                }
            }
        }
    }

    /// Derived keys come first, node_conf's as written after them; a key node_conf sets is not
    /// derived (case-insensitively), so none appears twice.
    #[test]
    fn node_conf_wins_over_derived_keys() {
        let derived: Vec<(String, String)> =
            [("CPUs", "224"), ("RealMemory", "2933888"), ("Gres", "gpu:8"), ("Features", "a3-ultragpu-8g")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let table = [
            ("", "CPUs=224 RealMemory=2933888 Gres=gpu:8 Features=a3-ultragpu-8g"),
            ("  Weight=10 ", "CPUs=224 RealMemory=2933888 Gres=gpu:8 Features=a3-ultragpu-8g Weight=10"),
            ("RealMemory=2000000", "CPUs=224 Gres=gpu:8 Features=a3-ultragpu-8g RealMemory=2000000"),
            ("realmemory=2000000 Features=h200", "CPUs=224 Gres=gpu:8 realmemory=2000000 Features=h200"),
            (
                "CPUs=208 RealMemory=1800000 Gres=gpu:8 Features=x",
                "CPUs=208 RealMemory=1800000 Gres=gpu:8 Features=x",
            ),
        ];
        for (node_conf, want) in table {
            assert_eq!(node_keys(&derived, node_conf), want, "{node_conf:?}");
        }
        assert_eq!(node_keys(&[], " CPUs=4 "), "CPUs=4");
        assert_eq!(node_keys(&[], ""), "");

        // In the rendered lines: only the nodeset that has derived keys gets them.
        let config = example();
        let mut shapes = BTreeMap::new();
        shapes.insert("h4d".to_string(), derived[..2].to_vec());
        let text = render_slurm_conf_with(&config, Path::new("/x"), None, &shapes);
        assert!(
            text.lines().any(|l| l == "NodeName=hpc-h4d-[0-63] State=CLOUD CPUs=192 RealMemory=720000"),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l == "NodeName=hpc-a3u-[0-15] State=CLOUD CPUs=208 RealMemory=1800000 Gres=gpu:8"),
            "{text}"
        );
        shapes.insert("a3u".to_string(), derived.clone());
        let text = render_slurm_conf_with(&config, Path::new("/x"), None, &shapes);
        assert!(text.lines().any(|l| l == "NodeName=hpc-a3u-[0-15] State=CLOUD Features=a3-ultragpu-8g CPUs=208 RealMemory=1800000 Gres=gpu:8"), "{text}");
        assert!(text.contains("GresTypes=gpu"), "{text}");
        assert_eq!(
            render_slurm_conf_with(&config, Path::new("/x"), None, &BTreeMap::new()),
            render_slurm_conf_for(&config, Path::new("/x"), None)
        );
    }

    /// The comment lines say which release the lines are for, and why when it was not found.
    #[test]
    fn says_which_release_the_lines_are_for() {
        let config = example();
        let dir = Path::new("/x");
        let header =
            |version| render_slurm_conf_for(&config, dir, version).lines().nth(3).unwrap().to_string();
        assert_eq!(header(v(24, 11, 5)), "# For Slurm 24.11 (24.11.5).");
        assert_eq!(header(v(24, 11, 0)), "# For Slurm 24.11.");
        assert_eq!(header(v(22, 5, 8)), "# For Slurm 22.05 (22.05.8).");
        assert_eq!(header(v(25, 11, 2)), "# For Slurm 25.11 (25.11.2).");
        assert_eq!(header(v(26, 5, 5)), "# For Slurm 26.05 (26.05.5).");
        assert_eq!(
            header(v(26, 11, 1)),
            "# For Slurm 26.05, the newest release slurm-dws knows: Slurm 26.11.1 is newer,"
        );
        assert_eq!(
            header(None),
            "# For Slurm 26.05, the newest release slurm-dws knows: no Slurm version was"
        );
        assert_eq!(render_slurm_conf(&config, dir), render_slurm_conf_for(&config, dir, None));

        let on = |version| render_slurm_conf_for(&config, dir, version);
        assert!(on(v(24, 11, 5)).contains(
            "# ResumeTimeout=INFINITE): Slurm 24.11 still times it out after 65535 s, 25.05 and\n# later never do.\n"
        ));
        assert!(on(v(25, 5, 0)).contains("# ResumeTimeout=INFINITE), which Slurm 25.05 never times out.\n"));
        assert!(on(v(26, 5, 5)).contains("# ResumeTimeout=INFINITE), which Slurm 26.05 never times out.\n"));
        // 25.11 and 26.05 take the lines of 25.05 (measured on 26.05.5), but for the release named.
        let body =
            |version| on(version).lines().skip(5).collect::<Vec<_>>().join("\n").replace("26.05", "25.05");
        assert_eq!(body(v(26, 5, 5)), body(v(25, 5, 0)));
        assert_eq!(body(v(25, 11, 0)).replace("25.11", "25.05"), body(v(25, 5, 0)));
        assert!(on(v(24, 11, 5)).contains("cloud_reg_addrs and NoAddrCache are gone"));
        assert!(on(v(22, 5, 8)).contains("# Without this, powered-down cloud nodes are invisible"));
    }

    /// 22.05's lines are what they were before the version was taken into account, but for the
    /// line that names the release and the partition ResumeTimeout (65535 was Slurm's INFINITE).
    #[test]
    fn slurm_22_05_lines_are_unchanged_but_the_resume_timeout() {
        let text = render_slurm_conf_for(&example(), Path::new("/usr/local/sbin"), v(22, 5, 8));
        let before = [
            "PrivateData=cloud",
            "SlurmctldParameters=idle_on_node_suspend,cloud_reg_addrs",
            "CommunicationParameters=NoAddrCache",
            "TreeWidth=65533",
        ];
        let lines = settings(&text);
        let at: Vec<usize> = before.iter().map(|b| lines.iter().position(|l| l == b).unwrap()).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{text}");
        assert!(text.contains(
            "# Without this, powered-down cloud nodes are invisible to sinfo and scontrol (even to\n\
             # root and to slurm-dws itself).\nPrivateData=cloud\n"
        ));
        assert!(text.contains(
            "# cloud_reg_addrs: take a node's address from its slurmd's registration (no DNS needed).\n\
             SlurmctldParameters=idle_on_node_suspend,cloud_reg_addrs\n\
             # A node's address changes every time it is re-provisioned: do not cache it.\n\
             CommunicationParameters=NoAddrCache\n"
        ));
    }
}
