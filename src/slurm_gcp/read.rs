//! The walk of config.yaml into what the import keeps, every problem collected on the way.

use super::yaml::{Value, Yaml};
use super::{topology_distance_of, Cluster, ImportedPlacement, Nodeset, Problem};
use crate::config::{MAX_RUN_DURATION, MIN_RUN_DURATION};

/// Walks the document, collecting problems instead of stopping at the first.
pub(super) struct Reader {
    pub(super) problems: Vec<Problem>,
}

impl Reader {
    fn bad(&mut self, line: Option<usize>, key: &str, message: impl Into<String>) {
        self.problems.push(Problem { line, key: key.to_string(), message: message.into() });
    }

    /// A required string.
    fn string(&mut self, parent: &Yaml, key: &str, path: &str) -> Option<String> {
        match parent.get(key) {
            Some(Yaml { value: Value::Str(s), .. }) if !s.is_empty() => Some(s.clone()),
            Some(v @ Yaml { line, .. }) => {
                let what = if matches!(v.value, Value::Str(_)) { "empty" } else { v.kind() };
                self.bad(Some(*line), path, format!("is {what}; expected a non-empty string"));
                None
            }
            None => {
                self.bad(Some(parent.line), path, "is missing");
                None
            }
        }
    }

    /// An optional string (absent, null and "" are `None`).
    fn opt_string(&mut self, parent: &Yaml, key: &str, path: &str) -> Option<String> {
        match parent.get(key) {
            None | Some(Yaml { value: Value::Null, .. }) => None,
            Some(Yaml { value: Value::Str(s), .. }) => (!s.is_empty()).then(|| s.clone()),
            Some(v) => {
                let (line, kind) = (v.line, v.kind());
                self.bad(Some(line), path, format!("is {kind}; expected a string"));
                None
            }
        }
    }

    /// A non-negative integer, `default` when absent.
    fn count(&mut self, parent: &Yaml, key: &str, path: &str, default: u64) -> u64 {
        match parent.get(key) {
            None | Some(Yaml { value: Value::Null, .. }) => default,
            Some(Yaml { value: Value::Int(n), .. }) if *n >= 0 => *n as u64,
            // Terraform numbers are floats to YAML when they went through arithmetic.
            Some(Yaml { value: Value::Float(f), .. }) if *f >= 0.0 && f.fract() == 0.0 => *f as u64,
            Some(v) => {
                let (line, kind) = (v.line, v.kind());
                self.bad(Some(line), path, format!("is {kind}; expected a whole number of at least 0"));
                default
            }
        }
    }

    /// A boolean, `None` when absent.
    fn boolean(&mut self, parent: &Yaml, key: &str, path: &str) -> Option<bool> {
        match parent.get(key) {
            None | Some(Yaml { value: Value::Null, .. }) => None,
            Some(Yaml { value: Value::Bool(b), .. }) => Some(*b),
            // Terraform's yamlencode of a string variable "true"/"false".
            Some(Yaml { value: Value::Str(s), .. }) if s == "true" || s == "false" => Some(s == "true"),
            Some(v) => {
                let (line, kind) = (v.line, v.kind());
                self.bad(Some(line), path, format!("is {kind}; expected true or false"));
                None
            }
        }
    }

    /// A list of strings (absent or null: empty).
    fn strings(&mut self, parent: &Yaml, key: &str, path: &str) -> Vec<String> {
        match parent.get(key) {
            None | Some(Yaml { value: Value::Null, .. }) => Vec::new(),
            Some(Yaml { value: Value::Seq(items), .. }) => {
                let mut out = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    match &item.value {
                        Value::Str(s) => out.push(s.clone()),
                        _ => self.bad(
                            Some(item.line),
                            &format!("{path}[{i}]"),
                            format!("is {}; expected a string", item.kind()),
                        ),
                    }
                }
                out
            }
            Some(v) => {
                let (line, kind) = (v.line, v.kind());
                self.bad(Some(line), path, format!("is {kind}; expected a list of strings"));
                Vec::new()
            }
        }
    }

    /// The entries of a mapping keyed by name (absent or null: none).
    fn named<'a>(&mut self, parent: &'a Yaml, key: &str) -> Vec<(&'a str, &'a Yaml)> {
        match parent.get(key) {
            None | Some(Yaml { value: Value::Null, .. }) => Vec::new(),
            Some(Yaml { value: Value::Map(entries), .. }) => {
                let mut out = Vec::new();
                for (name, v) in entries {
                    if matches!(v.value, Value::Map(_)) {
                        out.push((name.as_str(), v));
                    } else {
                        let kind = v.kind();
                        self.bad(
                            Some(v.line),
                            &format!("{key}.{name}"),
                            format!("is {kind}; expected a mapping"),
                        );
                    }
                }
                out
            }
            Some(v) => {
                let (line, kind) = (v.line, v.kind());
                self.bad(Some(line), key, format!("is {kind}; expected a mapping of name to settings"));
                Vec::new()
            }
        }
    }

    pub(super) fn read(&mut self, doc: &Yaml) -> Cluster {
        let mut c = Cluster::default();
        if !matches!(doc.value, Value::Map(_)) {
            self.bad(Some(doc.line), "(top level)", format!(
                "is {}; a slurm-gcp config.yaml is a mapping (slurm_cluster_name, project, nodeset, partitions, ...)",
                doc.kind()
            ));
            return c;
        }
        if let Some(name) = self.string(doc, "slurm_cluster_name", "slurm_cluster_name") {
            if crate::config::is_cluster_name(&name) {
                c.cluster_name = name;
            } else {
                let line = doc.get("slurm_cluster_name").map(|v| v.line);
                self.bad(line, "slurm_cluster_name", format!(
                    "{name:?} must match [a-z][a-z0-9]{{0,9}} (slurm-gcp's own rule; it starts every node name)"
                ));
            }
        }
        c.project = self.string(doc, "project", "project").unwrap_or_default();
        c.bin_dir = self.opt_string(doc, "slurm_bin_dir", "slurm_bin_dir").unwrap_or_else(|| {
            // slurm-gcp's own default when it fills the config in.
            "/usr/local/bin".into()
        });
        let hybrid = self.boolean(doc, "hybrid", "hybrid").unwrap_or(false);
        c.conf = (!hybrid).then(|| "/usr/local/etc/slurm/slurm.conf".to_string());
        c.credentials = match self.opt_string(doc, "google_app_cred_path", "google_app_cred_path") {
            Some(path) if path.starts_with('/') => path,
            Some(path) => {
                let line = doc.get("google_app_cred_path").map(|v| v.line);
                self.bad(
                    line,
                    "google_app_cred_path",
                    format!("{path:?} is not an absolute path (slurm-dws reads the key file from anywhere)"),
                );
                String::new()
            }
            None => "auto".into(),
        };
        if hybrid {
            c.notes.push(
                "hybrid = true: slurm.conf is wherever your own controller keeps it; set [slurm] conf if \
                 Slurm's commands do not find it by default."
                    .into(),
            );
        }
        if let Some(cp) = doc.get("cloud_parameters").filter(|v| matches!(v.value, Value::Map(_))) {
            let set: Vec<String> = match &cp.value {
                Value::Map(entries) => entries
                    .iter()
                    .filter(|(_, v)| !matches!(v.value, Value::Null | Value::Bool(false)))
                    .map(|(k, v)| format!("{k}={}", scalar_text(v)))
                    .collect(),
                _ => Vec::new(),
            };
            if !set.is_empty() {
                c.notes.push(format!(
                    "cloud_parameters ({}) are slurm.conf settings: `slurm-dws check-config --print-slurm-conf` \
                     prints the ones slurm-dws needs (ResumeRate=0, SuspendRate=0, ResumeTimeout=65533 on \
                     DWS partitions, ...); keep your others (topology, scheduler parameters) by hand.",
                    set.join(", ")
                ));
            }
        }
        if let Some(Yaml { value: Value::Map(ev), .. }) = doc.get("endpoint_versions") {
            for (api, v) in ev {
                if let Value::Str(version) = &v.value {
                    if api == "compute" && version != "v1" {
                        c.notes.push(format!(
                            "endpoint_versions.compute = {version:?}: slurm-dws calls the Compute API v1 \
                             ([gcp] endpoint)."
                        ));
                    }
                }
            }
        }

        let partitions = self.read_partitions(doc, &mut c.notes);
        let mut regions: Vec<(String, String)> = Vec::new();
        if let Some(region) = self.opt_string(doc, "region", "region") {
            regions.push((region, "region".into()));
        }
        let project = c.project.clone();
        for (name, ns) in self.named(doc, "nodeset") {
            if let Some(n) = self.read_nodeset(name, ns, &project, &partitions, &mut regions, &mut c.notes) {
                c.nodesets.push(n);
            }
        }
        for (name, ns) in self.named(doc, "nodeset_tpu") {
            let kind = self.opt_string(ns, "node_type", &format!("nodeset_tpu.{name}.node_type"));
            c.notes.push(format!(
                "nodeset_tpu {name}{}: not imported; slurm-dws provisions VMs through regional \
                 MIGs (flex, standard, spot), not TPU nodes. Its nodes need slurm-gcp's own scripts.",
                kind.map(|k| format!(" ({k})")).unwrap_or_default()
            ));
        }
        for (name, _) in self.named(doc, "nodeset_dyn") {
            c.notes.push(format!(
                "nodeset_dyn {name}: not imported; dynamic nodes register themselves with slurmctld \
                 (slurmd -Z) and need no power-saving program."
            ));
        }
        if c.nodesets.is_empty() && self.problems.is_empty() {
            self.bad(
                doc.get("nodeset").map(|v| v.line),
                "nodeset",
                format!(
                    "no nodeset has dws_flex.enabled = true, so slurm-dws would have nothing to manage{}",
                    if c.notes.iter().any(|n| n.starts_with("nodeset ")) {
                        " (the nodesets found are listed as not imported)"
                    } else {
                        ""
                    }
                ),
            );
        }
        c.region = match regions.first() {
            Some((region, _)) => {
                if let Some((other, from)) = regions.iter().find(|(r, _)| r != region) {
                    self.bad(
                        None,
                        from,
                        format!(
                        "is in region {other:?} but {} is in {region:?}: one slurm-dws config manages one \
                         region (import once per region and give each its own state_dir and socket)",
                        regions[0].1
                    ),
                    );
                }
                region.clone()
            }
            None => {
                if !c.nodesets.is_empty() {
                    self.bad(
                        None,
                        "region",
                        "cannot tell the region: no top-level region, and no flex \
                         nodeset's subnetwork, instance_template or zone_policy_allow names one",
                    );
                }
                String::new()
            }
        };
        c
    }

    /// Partition name → its VM nodesets, in file order; notes what slurm-dws does not write.
    fn read_partitions(&mut self, doc: &Yaml, notes: &mut Vec<String>) -> Vec<(String, Vec<String>)> {
        let mut out = Vec::new();
        for (name, p) in self.named(doc, "partitions") {
            let path = format!("partitions.{name}");
            let nodesets = self.strings(p, "partition_nodeset", &format!("{path}.partition_nodeset"));
            if self.boolean(p, "enable_job_exclusive", &format!("{path}.enable_job_exclusive")) == Some(true)
            {
                notes.push(format!(
                    "partition {name}: enable_job_exclusive = true is not carried over: put \
                     OverSubscribe=EXCLUSIVE on its PartitionName line (slurm-dws already sizes one resize \
                     request per job)."
                ));
            }
            if let Some(Yaml { value: Value::Map(conf), .. }) = p.get("partition_conf") {
                if !conf.is_empty() {
                    let kv: Vec<String> =
                        conf.iter().map(|(k, v)| format!("{k}={}", scalar_text(v))).collect();
                    notes.push(format!(
                        "partition {name}: partition_conf is not carried over; add `{}` to its PartitionName \
                         line by hand (check-config --print-slurm-conf writes Nodes=, ResumeTimeout= and State= only).",
                        kv.join(" ")
                    ));
                }
            }
            out.push((name.to_string(), nodesets));
        }
        out
    }

    fn read_nodeset(
        &mut self,
        key: &str,
        ns: &Yaml,
        project: &str,
        partitions: &[(String, Vec<String>)],
        regions: &mut Vec<(String, String)>,
        top_notes: &mut Vec<String>,
    ) -> Option<Nodeset> {
        let path = |k: &str| format!("nodeset.{key}.{k}");
        let name =
            self.opt_string(ns, "nodeset_name", &path("nodeset_name")).unwrap_or_else(|| key.to_string());
        let flex = ns.get("dws_flex");
        let enabled = match flex {
            Some(f) => self.boolean(f, "enabled", &path("dws_flex.enabled")).unwrap_or(false),
            None => false,
        };
        let zones_given = self.strings(ns, "zone_policy_allow", &path("zone_policy_allow"));
        let reservation = self.reservation(ns, &path, project, &zones_given);
        if enabled && reservation.is_some() {
            top_notes.push(format!(
                "nodeset {name}: dws_flex.enabled and a reservation: DWS Flex Start VMs cannot consume a \
                 reservation, so it is imported as a reservation nodeset (provisioning_model = \"reservation\")."
            ));
        }
        if !enabled && reservation.is_none() {
            top_notes.push(format!(
                "nodeset {name}: not imported; dws_flex is not enabled, and this import maps flex nodesets \
                 only: write it by hand with provisioning_model = \"standard\" or \"spot\", or give it its own \
                 provisioning (docs/migrating-from-slurm-gcp.md, \"Nodesets slurm-dws does not take\")."
            ));
            return None;
        }
        // A reservation nodeset has no run duration: its VMs live until the reservation ends.
        let flex = flex.filter(|_| reservation.is_none());
        if !crate::config::is_nodeset_name(&name) {
            self.bad(
                Some(ns.line),
                &path("nodeset_name"),
                format!("{name:?} must match [a-z0-9]{{1,14}} (it is the middle of every node name)"),
            );
        }
        let mut n = Nodeset { name: name.clone(), reservation, ..Nodeset::default() };
        n.instance_template =
            self.string(ns, "instance_template", &path("instance_template")).unwrap_or_default();
        n.zones = self.strings(ns, "zone_policy_allow", &path("zone_policy_allow"));
        n.zones.sort();
        n.zones.dedup();
        if n.zones.is_empty() {
            let line = ns.get("zone_policy_allow").map_or(ns.line, |v| v.line);
            self.bad(Some(line), &path("zone_policy_allow"), "is empty: slurm-dws needs the zones listed \
                 (a zone_policy_deny alone cannot be resolved without asking GCE); list them in the nodeset's zones");
        }
        for (source, link) in [
            ("subnetwork", self.opt_string(ns, "subnetwork", &path("subnetwork"))),
            (
                "subnetwork_self_link",
                self.opt_string(ns, "subnetwork_self_link", &path("subnetwork_self_link")),
            ),
            ("instance_template", Some(n.instance_template.clone())),
            ("region", self.opt_string(ns, "region", &path("region"))),
        ] {
            let region = link.as_deref().and_then(|l| {
                if source == "region" {
                    Some(l.to_string())
                } else {
                    l.split_once("/regions/")
                        .map(|(_, rest)| rest.split('/').next().unwrap_or("").to_string())
                }
            });
            if let Some(region) = region.filter(|r| !r.is_empty()) {
                regions.push((region, path(source)));
            }
        }
        if let Some(zone) = n.zones.first() {
            if let Some((region, _)) = zone.rsplit_once('-') {
                regions.push((region.to_string(), path("zone_policy_allow")));
            }
        }
        n.node_count_static = self.count(ns, "node_count_static", &path("node_count_static"), 0);
        n.node_count_dynamic_max =
            self.count(ns, "node_count_dynamic_max", &path("node_count_dynamic_max"), 0);

        if let Some(flex) = flex {
            let mrd_path = path("dws_flex.max_run_duration");
            let mrd = self.count(flex, "max_run_duration", &mrd_path, MAX_RUN_DURATION);
            n.max_run_duration = mrd.clamp(MIN_RUN_DURATION, MAX_RUN_DURATION);
            if mrd != n.max_run_duration {
                n.notes.push(format!(
                    "dws_flex.max_run_duration was {mrd}: GCE takes run durations of {MIN_RUN_DURATION}..{MAX_RUN_DURATION} \
                     seconds (10 minutes to 7 days), so it is {}.",
                    n.max_run_duration
                ));
            }
            n.use_job_duration = match self.boolean(
                flex,
                "use_job_duration",
                &path("dws_flex.use_job_duration"),
            ) {
                Some(b) => b,
                None => {
                    n.notes.push(
                        "dws_flex.use_job_duration was not set: slurm-gcp's default, false, is kept (slurm-dws's \
                         own default is true)."
                            .into(),
                    );
                    false
                }
            };
            if self.boolean(flex, "use_bulk_insert", &path("dws_flex.use_bulk_insert")) == Some(true) {
                n.notes.push(
                    "dws_flex.use_bulk_insert = true: slurm-dws asks for flex VMs through MIG resize requests \
                     instead, and slurm-gcp made this nodeset's instance template without FLEX_START in that \
                     case: point instance_template at a template with scheduling.provisioningModel FLEX_START."
                        .into(),
                );
            }
        }
        if let Some(shape) = self.opt_string(ns, "zone_target_shape", &path("zone_target_shape")) {
            if shape != "ANY_SINGLE_ZONE" {
                n.notes.push(format!(
                    "zone_target_shape {shape:?}: slurm-dws's MIGs always use ANY_SINGLE_ZONE (a resize \
                     request's VMs come from one zone)."
                ));
            }
        }
        n.node_conf = self.node_conf(ns, &path("node_conf"), &mut n.notes);
        let in_partitions: Vec<&str> =
            partitions.iter().filter(|(_, list)| list.contains(&name)).map(|(p, _)| p.as_str()).collect();
        match in_partitions.split_first() {
            Some((first, rest)) => {
                n.partition = Some(first.to_string());
                if !rest.is_empty() {
                    n.notes.push(format!(
                        "also in partition{} {}: slurm-dws writes each nodeset into one partition; add its \
                         nodes to the others' PartitionName lines by hand.",
                        if rest.len() == 1 { "" } else { "s" },
                        rest.join(", ")
                    ));
                }
            }
            None => n
                .notes
                .push(format!("in no partition: slurm-dws gives it a partition of its own name, {name}.")),
        }
        for (k, what) in [("maintenance_interval", "a maintenance interval")] {
            if let Some(v) = self.opt_string(ns, k, &path(k)) {
                n.notes.push(format!("{k} = {v:?}: not carried over; slurm-dws does not set {what}."));
            }
        }
        n.placement = self.placement(ns, &path, &mut n.notes);
        if self.boolean(ns, "enable_maintenance_reservation", &path("enable_maintenance_reservation"))
            != Some(true)
        {
            n.notes.push(
                "enable_maintenance_reservation is not true: slurm-dws reserves a node over a maintenance window \
                 GCE announces for its VM by default (maintenance_reservation = true; set it false to opt out)."
                    .into(),
            );
        }
        if self.boolean(ns, "enable_opportunistic_maintenance", &path("enable_opportunistic_maintenance"))
            == Some(true)
        {
            n.notes.push(
                "enable_opportunistic_maintenance = true: not carried over; slurm-dws does not do opportunistic \
                 maintenance."
                    .into(),
            );
        }
        Some(n)
    }

    /// `[nodeset.reservation]` from slurm-gcp's `reservation_name` (`R`, or
    /// `projects/P/reservations/R`, optionally with `/reservationBlocks/B[/reservationSubBlocks/S]`:
    /// GCE's affinity form, which has no zone) or `future_reservation` (`F`, or
    /// `projects/P/zones/Z/futureReservations/F`): as the full URL slurm-dws takes, in the nodeset's
    /// one zone (a reservation is zonal). A form it cannot place stops the import, naming the key.
    fn reservation(
        &mut self,
        ns: &Yaml,
        path: &dyn Fn(&str) -> String,
        project: &str,
        zones: &[String],
    ) -> Option<(&'static str, String)> {
        let name =
            self.opt_string(ns, "reservation_name", &path("reservation_name")).filter(|s| !s.is_empty());
        let future =
            self.opt_string(ns, "future_reservation", &path("future_reservation")).filter(|s| !s.is_empty());
        let (key, value) = match (name, future) {
            (None, None) => return None,
            (Some(n), _) => ("reservation_name", n),
            (None, Some(f)) => ("future_reservation", f),
        };
        let line = ns.get(key).map(|v| v.line);
        let [zone] = zones else {
            self.bad(line, &path(key), format!(
                "{value:?}: a reservation is zonal, so the nodeset needs exactly one zone in zone_policy_allow \
                 (it has {})", zones.len()
            ));
            return None;
        };
        let url = if key == "reservation_name" {
            let rest = value.strip_prefix("https://www.googleapis.com/compute/v1/").unwrap_or(&value);
            match rest.strip_prefix("projects/").and_then(|r| r.split_once("/reservations/")) {
                Some((p, r)) => format!("projects/{p}/zones/{zone}/reservations/{r}"),
                None if !rest.contains('/') => format!("projects/{project}/zones/{zone}/reservations/{rest}"),
                None => rest.to_string(),
            }
        } else if value.contains('/') {
            value.clone()
        } else {
            format!("projects/{project}/zones/{zone}/futureReservations/{value}")
        };
        let parsed = if key == "reservation_name" {
            crate::config::parse_reservation_url(&url).map(|_| ())
        } else {
            crate::config::parse_future_reservation_url(&url).map(|_| ())
        };
        match parsed {
            Ok(()) => Some((if key == "reservation_name" { "name" } else { "future_reservation" }, url)),
            Err(why) => {
                self.bad(line, &path(key), format!("{value:?}: {why}"));
                None
            }
        }
    }

    /// `[nodeset.placement]` from slurm-gcp's placement keys. slurm-gcp (since May 2026) gives a flex
    /// nodeset with `enable_placement` a HIGH_THROUGHPUT workload policy on its MIGs, with the
    /// nodeset's `accelerator_topology` (A4X) or a distance from `placement_max_distance`: slurm-dws
    /// creates and owns the same policy. A value no policy can take stops the import, naming the key.
    fn placement(
        &mut self,
        ns: &Yaml,
        path: &dyn Fn(&str) -> String,
        notes: &mut Vec<String>,
    ) -> Option<ImportedPlacement> {
        let enabled = self.boolean(ns, "enable_placement", &path("enable_placement"));
        let accel = self.opt_string(ns, "accelerator_topology", &path("accelerator_topology"));
        let distance = match ns.get("placement_max_distance") {
            None | Some(Yaml { value: Value::Null, .. }) => None,
            Some(Yaml { value: Value::Int(d), line }) => Some((*d, *line)),
            Some(Yaml { value: Value::Float(f), line }) if f.fract() == 0.0 => Some((*f as i64, *line)),
            Some(v) => {
                let (line, kind) = (v.line, v.kind());
                self.bad(
                    Some(line),
                    &path("placement_max_distance"),
                    format!("is {kind}; expected 1, 2 or 3"),
                );
                return None;
            }
        };
        if let Some(a) = accel {
            if !crate::config::is_accelerator_topology(&a) {
                let line = ns.get("accelerator_topology").map(|v| v.line);
                self.bad(
                    line,
                    &path("accelerator_topology"),
                    format!("{a:?} is not an accelerator topology a workload policy takes (AxB or AxBxC, e.g. \"1x72\")"),
                );
                return None;
            }
            if let Some((d, _)) = distance.filter(|_| enabled == Some(true)) {
                notes.push(format!(
                    "placement_max_distance = {d}: not carried over; a workload policy with an                      acceleratorTopology (A4X, A4X Max) takes no distance: its VMs share one NVLink domain."
                ));
            }
            notes.push(format!(
                "accelerator_topology = {a:?}: slurm-dws creates a HIGH_THROUGHPUT workload policy with this                  acceleratorTopology for the nodeset's MIGs (GCE requires one for A4X MIGs of more than one VM)."
            ));
            return Some(ImportedPlacement::AcceleratorTopology(a));
        }
        if enabled != Some(true) {
            if let Some((d, _)) = distance {
                notes.push(format!(
                    "placement_max_distance = {d}: not carried over; enable_placement is not true, so                      slurm-gcp placed nothing either."
                ));
            }
            return None;
        }
        let mapped = match distance {
            None => {
                notes.push(
                    "enable_placement = true without placement_max_distance: slurm-dws asks for                      max_topology_distance = \"CLUSTER\" (a request's VMs anywhere in one GCE cluster, the                      loosest distance); BLOCK or SUBBLOCK place closer and may wait longer for capacity."
                        .into(),
                );
                crate::config::TopologyDistance::Cluster
            }
            Some((d, line)) => match topology_distance_of(d) {
                Some(t) => {
                    notes.push(format!(
                        "enable_placement = true, placement_max_distance = {d}: max_topology_distance = {:?}                          (1 = SUBBLOCK, 2 = BLOCK, 3 = CLUSTER).",
                        t.as_str()
                    ));
                    t
                }
                None => {
                    self.bad(
                        Some(line),
                        &path("placement_max_distance"),
                        format!("is {d}; expected 1, 2 or 3"),
                    );
                    return None;
                }
            },
        };
        notes.push(
            "[nodeset.placement]: workload policies are for A4X Max, A4X, A4, A3 Ultra, A3 Mega, A3 High              (8 GPUs) and H4D, and with flex-start for A4 and A3 Ultra only; `slurm-dws check-config --online`              says whether this nodeset's template takes one (remove the table if not)."
                .into(),
        );
        Some(ImportedPlacement::Distance(mapped))
    }

    /// slurm-gcp's `node_conf` mapping as one line of NodeName= parameters.
    fn node_conf(&mut self, ns: &Yaml, path: &str, notes: &mut Vec<String>) -> String {
        let entries = match ns.get("node_conf") {
            None | Some(Yaml { value: Value::Null, .. }) => return String::new(),
            Some(Yaml { value: Value::Map(entries), .. }) => entries,
            Some(v) => {
                let (line, kind) = (v.line, v.kind());
                self.bad(Some(line), path, format!("is {kind}; expected a mapping of NodeName= parameters"));
                return String::new();
            }
        };
        let mut out = Vec::new();
        for (k, v) in entries {
            let text = scalar_text(v);
            let lower = k.to_ascii_lowercase();
            if lower == "nodename" || lower == "state" {
                notes.push(format!(
                    "node_conf {k}={text}: not carried over; slurm-dws writes NodeName= and State=CLOUD."
                ));
            } else if text.contains(char::is_whitespace)
                || text.contains('#')
                || k.contains(char::is_whitespace)
            {
                notes.push(format!(
                    "node_conf {k}={text:?}: not carried over (spaces or '#'); add it by hand."
                ));
            } else {
                out.push(format!("{k}={text}"));
            }
        }
        out.join(" ")
    }
}

/// A scalar as slurm.conf would take it (`YES`, `2-00:00:00`, `10`); collections as YAML-ish text.
fn scalar_text(v: &Yaml) -> String {
    match &v.value {
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Int(n) => n.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Str(s) => s.clone(),
        Value::Seq(items) => items.iter().map(scalar_text).collect::<Vec<_>>().join(","),
        Value::Map(_) => "{...}".into(),
    }
}
