//! Offline validation: turns a [`RawConfig`] into a [`Config`], filling defaults and naming the key of every problem.
//!
//! All checks run and every problem is collected, so an admin fixes a file in one round trip.
//! Nothing here touches the network: whether the project or template exists is for
//! `check-config` with credentials, not for loading the file.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::forms::*;
use super::raw::{RawConfig, RawDwsFlex, RawNodeset, RawPlacement, RawReservation, Val};
use super::{
    is_accelerator_topology, parse_policy_url, Config, ConfigError, Credentials, Daemon, DwsFlex, Gcp,
    NodeAddr, Nodeset, Placement, Problem, ProvisioningModel, Reconcile, ReservedCapacity, Slurm, Topology,
    TopologyDistance, TopologyKind, MAX_RUN_DURATION, MIN_RUN_DURATION,
};

/// Default `gcp.endpoint`: the real Compute v1 API.
pub const DEFAULT_ENDPOINT: &str = "https://compute.googleapis.com/compute/v1/";
/// Largest `node_count_static + node_count_dynamic_max` of one nodeset.
pub const MAX_NODES_PER_NODESET: u32 = 100_000;

/// Where a byte offset falls: 1-based (line, column).
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

/// Turn a toml/serde error into a [`ConfigError::Parse`], guessing the key path from the
/// position: the nearest table header above it and the key on its line.
pub(super) fn parse_error(text: &str, origin: &Path, e: &toml::de::Error) -> ConfigError {
    let message = e
        .message()
        .trim()
        .replace("unknown field", "unknown key")
        .replace("missing field", "missing key")
        .lines()
        .collect::<Vec<_>>()
        .join("; ");
    let (line, column, key) = match e.span() {
        Some(span) => {
            let (line, col) = line_col(text, span.start);
            (Some(line), Some(col), key_at(text, line, &message))
        }
        None => (None, None, None),
    };
    ConfigError::Parse { file: origin.to_path_buf(), line, column, key, message }
}

/// Key path (`nodeset[1].dws_flex.bogus`) of the error reported on 1-based `line`.
fn key_at(text: &str, line: usize, message: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut nodesets = 0usize;
    let mut section = String::new();
    let header = |h: &str, nodesets: usize| -> String {
        let mut parts: Vec<String> = h.split('.').map(|p| p.trim().trim_matches('"').to_string()).collect();
        if parts[0] == "nodeset" && nodesets > 0 {
            parts[0] = format!("nodeset[{}]", nodesets - 1);
        }
        parts.join(".")
    };
    for l in lines.iter().take(line.saturating_sub(1)) {
        let t = l.trim();
        if let Some(h) = t.strip_prefix("[[").and_then(|t| t.split("]]").next()) {
            if h.trim() == "nodeset" {
                nodesets += 1;
            }
            section = header(h, nodesets);
        } else if let Some(h) = t.strip_prefix('[').and_then(|t| t.split(']').next()) {
            section = header(h, nodesets);
        }
    }
    let here = lines.get(line.checked_sub(1)?)?.trim();
    let field = message.strip_prefix("unknown key `").and_then(|m| m.split('`').next()).map(str::to_string);
    if here.starts_with('[') {
        // The header itself is wrong (e.g. `[bogus]`): its own path is the key.
        let h = here.trim_start_matches('[').split(']').next()?;
        let count = nodesets + usize::from(here.starts_with("[[") && h.trim() == "nodeset");
        return Some(header(h, count));
    }
    let key = field.or_else(|| here.split_once('=').map(|(k, _)| k.trim().trim_matches('"').to_string()))?;
    Some(if section.is_empty() { key } else { format!("{section}.{key}") })
}

mod pricing_keys;
mod reservation_keys;
/// Collects problems while resolving.
struct Checker<'a> {
    text: &'a str,
    problems: Vec<Problem>,
}

impl Checker<'_> {
    fn line<T>(&self, v: &Val<T>) -> Option<usize> {
        v.as_ref().map(|s| line_col(self.text, s.span().start).0)
    }

    fn bad<T>(&mut self, key: &str, v: &Val<T>, message: impl Into<String>) {
        let line = self.line(v);
        self.problems.push(Problem { key: key.to_string(), line, message: message.into() });
    }

    /// The value, or a "required" problem.
    fn required<T: Clone>(&mut self, key: &str, v: &Val<T>) -> Option<T> {
        match v {
            Some(s) => Some(s.get_ref().clone()),
            None => {
                self.bad(key, v, "is required");
                None
            }
        }
    }

    /// An absolute path, or `default`.
    fn abs_path(&mut self, key: &str, v: &Val<String>, default: &str) -> PathBuf {
        let p = PathBuf::from(get(v, default.to_string()));
        if !p.is_absolute() {
            self.bad(
                key,
                v,
                format!(
                    "{:?} must be an absolute path (hooks run in slurmctld's working directory)",
                    p.display().to_string()
                ),
            );
        }
        p
    }

    /// An optional program: an absolute path to an executable file. Checked on this host when the
    /// config is loaded (the one check that is not offline): a hook must not learn at 3 a.m. that
    /// the program it hands nodes to is gone.
    fn program(&mut self, key: &str, v: &Val<String>) -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let p = PathBuf::from(v.as_ref()?.get_ref());
        let problem = if !p.is_absolute() {
            Some("must be an absolute path (slurmctld runs hooks with no PATH)".to_string())
        } else {
            match std::fs::metadata(&p) {
                Err(e) => Some(format!("cannot be run: {e}")),
                Ok(m) if !m.is_file() => Some("is not a regular file".to_string()),
                Ok(m) if m.permissions().mode() & 0o111 == 0 => Some("is not executable".to_string()),
                Ok(_) => None,
            }
        };
        if let Some(why) = problem {
            self.bad(key, v, format!("{:?} {why}", p.display().to_string()));
        }
        Some(p)
    }

    /// A number of seconds that must be at least `min`.
    fn at_least(&mut self, key: &str, v: &Val<u64>, default: u64, min: u64, why: &str) -> u64 {
        let n = get(v, default);
        if n < min {
            self.bad(key, v, format!("{n} is below the minimum {min} ({why})"));
        }
        n
    }
}

fn get<T: Clone>(v: &Val<T>, default: T) -> T {
    v.as_ref().map_or(default, |s| s.get_ref().clone())
}

/// Validate `raw` (parsed from `text`, read from `origin`) and fill every default.
pub(super) fn resolve(raw: RawConfig, text: &str, origin: &Path) -> Result<Config, ConfigError> {
    let mut ck = Checker { text, problems: Vec::new() };

    let cluster_name = ck.required("cluster_name", &raw.cluster_name).unwrap_or_default();
    if raw.cluster_name.is_some() && !is_cluster_name(&cluster_name) {
        ck.bad(
            "cluster_name",
            &raw.cluster_name,
            format!("{cluster_name:?} must match [a-z][a-z0-9]{{0,9}} (it starts every node and MIG name)"),
        );
    }
    let state_dir = ck.abs_path("state_dir", &raw.state_dir, "/var/lib/slurm-dws");
    let socket = ck.abs_path("socket", &raw.socket, "/run/slurm-dws/slurm-dws.sock");
    // Unset: derived from state_dir, whose own check already covers a relative path.
    let log_file = match raw.log_file {
        Some(_) => ck.abs_path("log_file", &raw.log_file, ""),
        None => state_dir.join("slurm-dws.log"),
    };

    let gcp = resolve_gcp(&mut ck, raw.gcp.unwrap_or_default());
    let slurm = resolve_slurm(&mut ck, raw.slurm.unwrap_or_default());
    let reconcile = resolve_reconcile(&mut ck, raw.reconcile.unwrap_or_default());
    let daemon = resolve_daemon(&mut ck, raw.daemon.unwrap_or_default());
    let pricing = pricing_keys::resolve_pricing(&mut ck, raw.pricing.unwrap_or_default());

    let raw_nodesets = raw.nodeset.unwrap_or_default();
    if raw_nodesets.is_empty() {
        ck.bad::<()>(
            "nodeset",
            &None,
            "at least one [[nodeset]] is required (slurm-dws has no nodes to manage otherwise)",
        );
    }
    let mut nodesets: Vec<Nodeset> = Vec::with_capacity(raw_nodesets.len());
    for (i, rn) in raw_nodesets.into_iter().enumerate() {
        let name_line = ck.line(&rn.name);
        // A bad region is reported once, not again for every zone and template.
        let region = if is_region(&gcp.region) { gcp.region.as_str() } else { "" };
        let ns = resolve_nodeset(&mut ck, i, rn, &cluster_name, region);
        if let Some(first) = nodesets.iter().position(|n| !ns.name.is_empty() && n.name == ns.name) {
            ck.problems.push(Problem {
                key: format!("nodeset[{i}].name"),
                line: name_line,
                message: format!(
                    "duplicate nodeset {:?} (also nodeset[{first}]); names must be unique",
                    ns.name
                ),
            });
        }
        nodesets.push(ns);
    }

    if !ck.problems.is_empty() {
        let mut problems = ck.problems;
        problems.sort_by_key(|p| (p.line.is_none(), p.line));
        return Err(ConfigError::Invalid { file: origin.to_path_buf(), problems });
    }
    Ok(Config {
        source: origin.to_path_buf(),
        cluster_name,
        state_dir,
        socket,
        log_file,
        gcp,
        slurm,
        reconcile,
        daemon,
        nodesets,
        pricing,
    })
}

fn resolve_gcp(ck: &mut Checker, g: super::raw::RawGcp) -> Gcp {
    let project = ck.required("gcp.project", &g.project).unwrap_or_default();
    if g.project.is_some() && !is_project_id(&project) {
        ck.bad(
            "gcp.project",
            &g.project,
            format!("{project:?} is not a project id (lowercase letters, digits, '-', '.', ':')"),
        );
    }
    let region = ck.required("gcp.region", &g.region).unwrap_or_default();
    if g.region.is_some() && !is_region(&region) {
        ck.bad("gcp.region", &g.region, format!("{region:?} is not a region name like \"us-central1\""));
    }

    let mut endpoint = get(&g.endpoint, DEFAULT_ENDPOINT.to_string());
    let url = match parse_http_url(&endpoint) {
        Ok(url) => Some(url),
        Err(why) => {
            ck.bad("gcp.endpoint", &g.endpoint, format!("{endpoint:?} {why}"));
            None
        }
    };
    if !endpoint.ends_with('/') {
        endpoint.push('/');
    }
    // A token must never cross a network in clear text (the GCE client refuses it too; saying it
    // here makes it exit 2 at load instead of a daemon that fails to start). With credentials
    // "none" the credentials rule below says it instead.
    let no_token = g.credentials.as_ref().is_some_and(|c| c.get_ref() == "none");
    if let Some(u) = &url {
        if u.scheme == "http" && !u.loopback && !no_token {
            ck.bad(
                "gcp.endpoint",
                &g.endpoint,
                format!("{endpoint:?}: plain http:// is only allowed on a loopback address (a simulator); use https://"),
            );
        }
    }

    let cred = get(&g.credentials, "auto".to_string());
    let credentials = match cred.as_str() {
        "auto" => Credentials::Auto,
        "metadata" => Credentials::Metadata,
        "none" => {
            if let Some(url) = &url {
                if !(url.scheme == "http" && url.loopback) {
                    ck.bad(
                        "gcp.credentials",
                        &g.credentials,
                        format!(
                            "\"none\" sends requests without a token, which is only allowed with an \
                             http:// endpoint on a loopback address (the simulator), not {endpoint:?}"
                        ),
                    );
                }
            }
            Credentials::None
        }
        path if path.starts_with('/') => Credentials::KeyFile(PathBuf::from(path)),
        other => {
            ck.bad(
                "gcp.credentials",
                &g.credentials,
                format!("{other:?} must be auto, metadata, none, or an absolute path to a service-account key file"),
            );
            Credentials::Auto
        }
    };

    let calls_per_minute = get(&g.calls_per_minute, 1200);
    if calls_per_minute == 0 {
        ck.bad("gcp.calls_per_minute", &g.calls_per_minute, "0 would block every call; the minimum is 1");
    }
    // Reads are most of the calls (every pass lists); writes come in bursts (a resume of many jobs).
    let read_calls_per_minute = get(&g.read_calls_per_minute, (calls_per_minute / 4 * 3).max(1));
    let write_calls_per_minute = get(&g.write_calls_per_minute, (calls_per_minute / 2).max(1));
    for (key, v, n) in [
        ("gcp.read_calls_per_minute", &g.read_calls_per_minute, read_calls_per_minute),
        ("gcp.write_calls_per_minute", &g.write_calls_per_minute, write_calls_per_minute),
    ] {
        if n == 0 {
            ck.bad(key, v, "0 would block every such call; the minimum is 1");
        }
    }
    let request_timeout =
        ck.at_least("gcp.request_timeout", &g.request_timeout, 30, 1, "a call needs time to complete");
    let retry_deadline = get(&g.retry_deadline, 120);
    if retry_deadline < request_timeout {
        ck.bad(
            "gcp.retry_deadline",
            &g.retry_deadline,
            format!("{retry_deadline} is shorter than gcp.request_timeout ({request_timeout}), so not even one call could finish"),
        );
    }
    Gcp {
        project,
        region,
        endpoint,
        credentials,
        calls_per_minute,
        read_calls_per_minute,
        write_calls_per_minute,
        request_timeout,
        retry_deadline,
    }
}

fn resolve_slurm(ck: &mut Checker, s: super::raw::RawSlurm) -> Slurm {
    let bin_dir = ck.abs_path("slurm.bin_dir", &s.bin_dir, "/usr/bin");
    let conf = s.conf.is_some().then(|| ck.abs_path("slurm.conf", &s.conf, ""));
    let node_addr = match get(&s.node_addr, "none".to_string()).as_str() {
        "none" => NodeAddr::None,
        "internal_ip" => NodeAddr::InternalIp,
        other => {
            ck.bad("slurm.node_addr", &s.node_addr, format!("{other:?} must be none or internal_ip"));
            NodeAddr::None
        }
    };
    let command_timeout =
        ck.at_least("slurm.command_timeout", &s.command_timeout, 30, 1, "scontrol needs time to answer");
    let delegate_resume = ck.program("slurm.delegate_resume", &s.delegate_resume);
    let delegate_suspend = ck.program("slurm.delegate_suspend", &s.delegate_suspend);
    let delegate_resume_fail = ck.program("slurm.delegate_resume_fail", &s.delegate_resume_fail);
    let kind = match TopologyKind::parse(&get(&s.topology, "none".to_string())) {
        Some(k) => k,
        None => {
            let v = get(&s.topology, String::new());
            ck.bad("slurm.topology", &s.topology, format!("{v:?} must be none, tree or block"));
            TopologyKind::None
        }
    };
    let file = match get(&s.topology_file, String::new()) {
        f if f.is_empty() => None,
        _ => Some(ck.abs_path("slurm.topology_file", &s.topology_file, "")),
    };
    Slurm {
        bin_dir,
        conf,
        node_addr,
        command_timeout,
        delegate_resume,
        delegate_suspend,
        delegate_resume_fail,
        topology: Topology { kind, file },
    }
}

fn resolve_reconcile(ck: &mut Checker, r: super::raw::RawReconcile) -> Reconcile {
    let interval = ck.at_least("reconcile.interval", &r.interval, 30, 1, "0 would run passes back to back");
    let orphan_grace = get(&r.orphan_grace, 300);
    let mig_gc_grace = get(&r.mig_gc_grace, 300);
    let backoff_initial = ck.at_least(
        "reconcile.backoff_initial",
        &r.backoff_initial,
        60,
        1,
        "a capacity backoff must last some time",
    );
    let backoff_max = get(&r.backoff_max, 1800);
    if backoff_max < backoff_initial {
        ck.bad(
            "reconcile.backoff_max",
            &r.backoff_max,
            format!("{backoff_max} is below reconcile.backoff_initial ({backoff_initial})"),
        );
    }
    let admin_comment_interval = get(&r.admin_comment_interval, 300);
    if admin_comment_interval == 0 {
        ck.bad("reconcile.admin_comment_interval", &r.admin_comment_interval, "minimum 1 (production: 300)");
    }
    Reconcile { interval, orphan_grace, mig_gc_grace, backoff_initial, backoff_max, admin_comment_interval }
}

fn resolve_daemon(ck: &mut Checker, d: super::raw::RawDaemon) -> Daemon {
    let metrics_listen = d.metrics_listen.as_ref().and_then(|s| {
        let text = s.get_ref();
        match text.parse::<SocketAddr>() {
            Ok(addr) => Some(addr),
            Err(_) => {
                ck.bad(
                    "daemon.metrics_listen",
                    &d.metrics_listen,
                    format!("{text:?} must be an IP address and port, e.g. \"127.0.0.1:9464\""),
                );
                None
            }
        }
    });
    let user = get(&d.service_user, "slurm".to_string());
    let valid_user = user.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !user.starts_with('-');
    if !valid_user {
        ck.bad("daemon.service_user", &d.service_user, format!("{user:?} is not a user name"));
    }
    let history_days = ck.at_least(
        "daemon.history_days",
        &d.history_days,
        30,
        1,
        "a day of history is the least explain needs",
    );
    let readers = get(&d.readers, String::new());
    let valid_group = readers.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !readers.starts_with('-');
    if !valid_group {
        ck.bad("daemon.readers", &d.readers, format!("{readers:?} is not a group name"));
    }
    let controller = get(&d.controller, String::new());
    if controller.chars().any(|c| c.is_whitespace() || matches!(c, '(' | ')' | ',' | '=')) {
        ck.bad("daemon.controller", &d.controller, format!("{controller:?} is not a host name"));
    }
    let shared_state_dir = get(&d.shared_state_dir, String::new());
    if !shared_state_dir.is_empty() && !Path::new(&shared_state_dir).is_absolute() {
        ck.bad(
            "daemon.shared_state_dir",
            &d.shared_state_dir,
            format!("{shared_state_dir:?} must be an absolute path"),
        );
    }
    Daemon {
        metrics_listen,
        service_user: (!user.is_empty()).then_some(user),
        history_days,
        readers: (!readers.is_empty()).then_some(readers),
        controller: (!controller.is_empty()).then_some(controller),
        shared_state_dir: (!shared_state_dir.is_empty()).then(|| PathBuf::from(shared_state_dir)),
    }
}

fn resolve_nodeset(ck: &mut Checker, i: usize, n: RawNodeset, cluster: &str, region: &str) -> Nodeset {
    let key = |k: &str| format!("nodeset[{i}].{k}");
    let name = ck.required(&key("name"), &n.name).unwrap_or_default();
    if n.name.is_some() && !is_nodeset_name(&name) {
        ck.bad(
            &key("name"),
            &n.name,
            format!("{name:?} must match [a-z0-9]{{1,14}} (lowercase: it is part of node and MIG names)"),
        );
    }

    // `region`: the nodeset's own region, by default gcp.region (a bad one is reported once, not
    // again for every zone and the template).
    let (region, region_key) = match &n.region {
        None => (region.to_string(), "gcp.region".to_string()),
        Some(r) if is_region(r.get_ref()) => (r.get_ref().clone(), key("region")),
        Some(r) => {
            let why = format!("{:?} is not a region name like \"us-east5\"", r.get_ref());
            ck.bad(&key("region"), &n.region, why);
            (String::new(), key("region"))
        }
    };
    let region = region.as_str();

    let instance_template = ck.required(&key("instance_template"), &n.instance_template).unwrap_or_default();
    if n.instance_template.is_some() {
        if let Err(why) = check_template(&instance_template, region, &region_key) {
            ck.bad(&key("instance_template"), &n.instance_template, why);
        }
    }

    let zones = ck.required(&key("zones"), &n.zones).unwrap_or_default();
    if n.zones.is_some() && zones.is_empty() {
        ck.bad(&key("zones"), &n.zones, format!("must list at least one zone of {region_key}"));
    }
    for (j, z) in zones.iter().enumerate() {
        let in_region = z
            .strip_prefix(region)
            .and_then(|s| s.strip_prefix('-'))
            .is_some_and(|s| s.len() == 1 && s.chars().all(|c| c.is_ascii_lowercase()));
        if !in_region && !region.is_empty() {
            ck.bad(
                &key("zones"),
                &n.zones,
                format!(
                    "{z:?} is not a zone of {region_key} {region:?} (expected {region}-a, {region}-b, ...)"
                ),
            );
        } else if zones[..j].contains(z) {
            ck.bad(&key("zones"), &n.zones, format!("{z:?} is listed twice"));
        }
    }

    let node_count_static = get(&n.node_count_static, 0);
    let node_count_dynamic_max = get(&n.node_count_dynamic_max, 0);
    let total = u64::from(node_count_static) + u64::from(node_count_dynamic_max);
    let count_val =
        if n.node_count_dynamic_max.is_some() { &n.node_count_dynamic_max } else { &n.node_count_static };
    if total == 0 {
        ck.bad(
            &key("node_count_dynamic_max"),
            count_val,
            "node_count_static + node_count_dynamic_max is 0: a nodeset needs at least one node",
        );
    } else if total > u64::from(MAX_NODES_PER_NODESET) {
        ck.bad(
            &key("node_count_dynamic_max"),
            count_val,
            format!(
                "node_count_static + node_count_dynamic_max is {total}, above {MAX_NODES_PER_NODESET}: \
                 more nodes than one Slurm cluster schedules well, and slurmctld allocates state for \
                 every one of them even while powered down; split it into several nodesets"
            ),
        );
    } else if is_nodeset_name(&name) && is_cluster_name(cluster) {
        let last = format!("{cluster}-{name}-{}", total - 1);
        if !is_rfc1035(&last) {
            ck.bad(
                &key("name"),
                &n.name,
                format!("node name {last:?} would not be a valid VM name (RFC 1035, at most 63 characters)"),
            );
        }
    }

    let partition = get(&n.partition, name.clone());
    let partition_ok = !partition.is_empty()
        && !partition.eq_ignore_ascii_case("default")
        && partition.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    // A default partition is the nodeset's name: only judge it when that name is itself valid
    // (a nodeset called "default" would still collide with Slurm's keyword).
    if !partition_ok && (n.partition.is_some() || is_nodeset_name(&name)) {
        ck.bad(
            &key("partition"),
            &n.partition,
            format!("{partition:?} must be letters, digits, '_', '-', '.' and not DEFAULT (Slurm's keyword)"),
        );
    }

    let node_conf = get(&n.node_conf, String::new());
    let lower = node_conf.to_ascii_lowercase();
    if node_conf.contains(['\n', '\r', '#']) {
        ck.bad(
            &key("node_conf"),
            &n.node_conf,
            "must be one line of NodeName= parameters, with no '#' (slurm.conf would cut it there)",
        );
    } else if lower.contains("nodename=") || lower.contains("state=") {
        ck.bad(
            &key("node_conf"),
            &n.node_conf,
            "must not set NodeName= or State=: slurm-dws writes those (State=CLOUD)",
        );
    }

    let raw_flex = n.dws_flex.unwrap_or_default();
    let provisioning_model = resolve_provisioning_model(ck, i, &n.provisioning_model, &raw_flex.enabled);
    if get(&raw_flex.capacity_advice, false) && !provisioning_model.is_flex() {
        ck.bad(
            &format!("nodeset[{i}].dws_flex.capacity_advice"),
            &raw_flex.capacity_advice,
            format!(
                "true asks GCE's advice for DWS Flex Start capacity, but this nodeset is {}",
                provisioning_model.as_str()
            ),
        );
    }
    let mut dws_flex = resolve_dws_flex(ck, i, raw_flex);
    dws_flex.enabled = provisioning_model.is_flex();
    let reservation = reservation_keys::resolve_reservation(ck, i, n.reservation, provisioning_model, &zones);
    Nodeset {
        name,
        region: region.to_string(),
        instance_template,
        zones,
        node_count_static,
        node_count_dynamic_max,
        partition,
        node_conf,
        provisioning_model,
        exclusive: get(&n.exclusive, false),
        fallback_after: get(&n.fallback_after, 0),
        maintenance_reservation: get(&n.maintenance_reservation, true),
        dws_flex,
        placement: n.placement.and_then(|p| resolve_placement(ck, i, p, region)),
        reservation,
    }
}

/// `[nodeset.placement]`: one way or the other, never both; the values' forms (what GCE accepts
/// for the machine type is checked online).
fn resolve_placement(ck: &mut Checker, i: usize, p: RawPlacement, region: &str) -> Option<Placement> {
    let key = |k: &str| format!("nodeset[{i}].placement.{k}");
    let distance = p.max_topology_distance.as_ref().map(|v| v.get_ref().clone());
    let accel = p.accelerator_topology.as_ref().map(|v| v.get_ref().clone());
    if let Some(url) = p.workload_policy.as_ref().map(|v| v.get_ref().clone()) {
        if distance.is_some() || accel.is_some() {
            let other = if distance.is_some() { "max_topology_distance" } else { "accelerator_topology" };
            ck.bad(
                &key("workload_policy"),
                &p.workload_policy,
                format!(
                    "{url:?} is given with {other}: use an existing policy (workload_policy) or one \
                     slurm-dws creates (max_topology_distance / accelerator_topology), not both"
                ),
            );
            return None;
        }
        match parse_policy_url(&url) {
            Err(why) => ck.bad(&key("workload_policy"), &p.workload_policy, why),
            Ok((_, r, _)) if !region.is_empty() && r != region => ck.bad(
                &key("workload_policy"),
                &p.workload_policy,
                format!(
                    "{url:?} is in region {r:?}: a MIG takes a workload policy of its own region {region:?}"
                ),
            ),
            Ok(_) => {}
        }
        return Some(Placement::Existing { url });
    }
    let max_topology_distance = distance.as_deref().and_then(|d| {
        let parsed = TopologyDistance::parse(d);
        if parsed.is_none() {
            ck.bad(
                &key("max_topology_distance"),
                &p.max_topology_distance,
                format!("{d:?} must be CLUSTER, BLOCK or SUBBLOCK"),
            );
        }
        parsed
    });
    if let Some(a) = &accel {
        if !is_accelerator_topology(a) {
            ck.bad(
                &key("accelerator_topology"),
                &p.accelerator_topology,
                format!("{a:?} must be like 1x72 (AxB or AxBxC, positive integers)"),
            );
        }
    }
    if distance.is_none() && accel.is_none() {
        ck.bad::<()>(
            &format!("nodeset[{i}].placement"),
            &None,
            "is empty: give workload_policy, or max_topology_distance and/or accelerator_topology \
             (or remove the table for no placement)",
        );
        return None;
    }
    Some(Placement::Owned { max_topology_distance, accelerator_topology: accel })
}

/// `provisioning_model`: "flex" unless `dws_flex.enabled = false` says otherwise (then "standard":
/// spot, which GCE may preempt at any time, is only ever chosen by name). "flex" is the only value
/// `dws_flex.enabled = true` allows; a contradiction names both keys.
fn resolve_provisioning_model(
    ck: &mut Checker,
    i: usize,
    model: &Val<String>,
    enabled: &Val<bool>,
) -> ProvisioningModel {
    let key = format!("nodeset[{i}].provisioning_model");
    let flex_enabled = enabled.as_ref().map(|v| *v.get_ref());
    let Some(spelled) = model.as_ref().map(|v| v.get_ref().clone()) else {
        return match flex_enabled {
            Some(false) => ProvisioningModel::Standard,
            _ => ProvisioningModel::Flex,
        };
    };
    let Some(m) = ProvisioningModel::parse(&spelled) else {
        ck.bad(
            &key,
            model,
            format!("{spelled:?} must be one of \"flex\", \"standard\", \"spot\", \"reservation\""),
        );
        return ProvisioningModel::Flex;
    };
    match (m.is_flex(), flex_enabled) {
        (false, Some(true)) => ck.bad(
            &key,
            model,
            format!(
                "{spelled:?} contradicts nodeset[{i}].dws_flex.enabled = true: DWS Flex Start is the \
                 \"flex\" model (set dws_flex.enabled = false, or drop it)"
            ),
        ),
        (true, Some(false)) => ck.bad(
            &key,
            model,
            format!(
                "\"flex\" contradicts nodeset[{i}].dws_flex.enabled = false (choose \"standard\" or \"spot\", \
                 or drop dws_flex.enabled)"
            ),
        ),
        _ => {}
    }
    m
}

fn resolve_dws_flex(ck: &mut Checker, i: usize, f: RawDwsFlex) -> DwsFlex {
    let key = |k: &str| format!("nodeset[{i}].dws_flex.{k}");
    let max_run_duration = get(&f.max_run_duration, MAX_RUN_DURATION);
    let range_ok = (MIN_RUN_DURATION..=MAX_RUN_DURATION).contains(&max_run_duration);
    if !range_ok {
        ck.bad(
            &key("max_run_duration"),
            &f.max_run_duration,
            format!(
                "{max_run_duration} is outside {MIN_RUN_DURATION}..{MAX_RUN_DURATION} \
                 (the run durations GCE accepts: 10 minutes to 7 days)"
            ),
        );
    }
    let boot_allowance = get(&f.boot_allowance, 600);
    if boot_allowance > MAX_RUN_DURATION - MIN_RUN_DURATION {
        ck.bad(
            &key("boot_allowance"),
            &f.boot_allowance,
            format!(
                "{boot_allowance} is above {} (7 days minus the 10-minute minimum run), \
                 so no job could get a run duration GCE accepts",
                MAX_RUN_DURATION - MIN_RUN_DURATION
            ),
        );
    }
    let queue_timeout = get(&f.queue_timeout, 0);
    if queue_timeout != 0 && queue_timeout < 60 {
        ck.bad(
            &key("queue_timeout"),
            &f.queue_timeout,
            format!("{queue_timeout} must be 0 (wait for ever) or at least 60: requests take that long just to be accepted"),
        );
    }
    let eol_grace = get(&f.eol_grace, 600);
    if range_ok && eol_grace >= max_run_duration {
        ck.bad(
            &key("eol_grace"),
            &f.eol_grace,
            format!("{eol_grace} must be below max_run_duration ({max_run_duration}), or nodes would be reserved away as soon as they come up"),
        );
    }
    DwsFlex {
        enabled: get(&f.enabled, true),
        max_run_duration,
        use_job_duration: get(&f.use_job_duration, true),
        boot_allowance,
        queue_timeout,
        eol_grace,
        capacity_advice: get(&f.capacity_advice, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        for (url, ok, loopback) in [
            ("https://compute.googleapis.com/compute/v1/", true, false),
            ("http://127.0.0.1:8080/compute/v1/", true, true),
            ("http://127.9.9.9/compute/v1", true, true),
            ("http://[::1]:9000/compute/v1/", true, true),
            ("http://localhost:1/x/", true, true),
            ("http://10.0.0.1/", true, false),
            ("ftp://x/", false, false),
            ("https:///compute/v1/", false, false),
            ("http://h:0/", false, false),
            ("http://h:99999/", false, false),
            ("http://u:p@h/", false, false),
            ("http://[::1/", false, false),
            ("https://h/a b", false, false),
        ] {
            let got = parse_http_url(url);
            assert_eq!(got.is_ok(), ok, "{url}: {:?}", got.as_ref().err());
            if let Ok(u) = got {
                assert_eq!(u.loopback, loopback, "{url}");
            }
        }
    }

    #[test]
    fn templates() {
        let r = "us-central1";
        for (t, ok) in [
            ("projects/p/global/instanceTemplates/t1", true),
            ("projects/p/regions/us-central1/instanceTemplates/t1", true),
            ("global/instanceTemplates/t1", true),
            ("https://www.googleapis.com/compute/v1/projects/p/global/instanceTemplates/t", true),
            ("https://compute.googleapis.com/compute/v1/projects/p/regions/us-central1/instanceTemplates/t", true),
            ("projects/p/regions/europe-west4/instanceTemplates/t1", false),
            ("projects/p/zones/us-central1-a/instanceTemplates/t1", false),
            ("projects//global/instanceTemplates/t1", false),
            ("projects/p/global/instanceTemplates/T1", false),
            ("t1", false),
            ("https://example.com/projects/p/global/instanceTemplates/t", false),
        ] {
            assert_eq!(check_template(t, r, "gcp.region").is_ok(), ok, "{t}: {:?}", check_template(t, r, "gcp.region"));
        }
    }

    #[test]
    fn names() {
        assert!(is_cluster_name("hpc") && is_cluster_name("a123456789"));
        assert!(!is_cluster_name("a1234567890") && !is_cluster_name("1a") && !is_cluster_name(""));
        assert!(!is_cluster_name("Hpc") && !is_cluster_name("h-p"));
        assert!(is_nodeset_name("a3u") && is_nodeset_name("0") && is_nodeset_name("abcdefghijklmn"));
        assert!(!is_nodeset_name("abcdefghijklmno") && !is_nodeset_name("A3U"));
        assert!(!is_nodeset_name("a-b") && !is_nodeset_name(""));
        assert!(is_region("us-central1") && is_region("northamerica-northeast2"));
        assert!(!is_region("us-central") && !is_region("us-central1-a") && !is_region("uscentral1"));
        assert!(is_rfc1035("a") && is_rfc1035("hpc-a3u-12") && !is_rfc1035("-a"));
        assert!(!is_rfc1035("a-") && !is_rfc1035("1a") && !is_rfc1035(&"a".repeat(64)));
    }

    #[test]
    fn key_paths_from_positions() {
        let text = "cluster_name = \"x\"\n[gcp]\nproject = 1\n[[nodeset]]\nname = \"a\"\n[[nodeset]]\nname = \"b\"\n[nodeset.dws_flex]\nbogus = 1\n[bogus]\n";
        assert_eq!(key_at(text, 3, "invalid type").as_deref(), Some("gcp.project"));
        assert_eq!(key_at(text, 7, "x").as_deref(), Some("nodeset[1].name"));
        assert_eq!(
            key_at(text, 9, "unknown key `bogus`, expected").as_deref(),
            Some("nodeset[1].dws_flex.bogus")
        );
        assert_eq!(key_at(text, 10, "unknown key `bogus`").as_deref(), Some("bogus"));
        assert_eq!(key_at(text, 1, "x").as_deref(), Some("cluster_name"));
    }
}
