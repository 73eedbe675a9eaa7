//! Workload policies (`resourcePolicies` with a `workloadPolicy`) and the physical host topology:
//! which machine families take a policy with which provisioning model, where a MIG's VMs land
//! (`resourceStatus.physicalHostTopology`), and a request that cannot be placed within its
//! policy's distance waiting like a stockout.
//!
//! A zone is a grid of blocks × subblocks × hosts (control API `POST /_sim/zones/{zone}/topology`,
//! default [`ZoneShape::default`]), one VM per host. A MIG with a HIGH_THROUGHPUT policy puts all
//! the VMs of one request in one subblock (`SUBBLOCK`, or an `acceleratorTopology`: an NVLink
//! domain), one block (`BLOCK`) or anywhere in the zone's cluster (`CLUSTER`, or no distance); a
//! MIG without a policy spreads its VMs over the blocks.

use super::*;

/// One workload policy.
#[derive(Clone, Debug)]
pub struct Policy {
    pub(super) id: u64,
    pub(super) created: DateTime<Utc>,
    /// The insert body, validated.
    pub(super) body: Value,
}

/// (project, region, name).
pub type PolicyKey = (String, String, String);

/// How close the VMs of one request must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distance {
    Cluster,
    Block,
    Subblock,
}

/// A zone's hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoneShape {
    pub blocks: u32,
    pub subblocks_per_block: u32,
    pub hosts_per_subblock: u32,
}

impl Default for ZoneShape {
    fn default() -> Self {
        ZoneShape { blocks: 4, subblocks_per_block: 4, hosts_per_subblock: 18 }
    }
}

/// (block, subblock, host) indices within a zone.
pub type Slot = (u32, u32, u32);

/// The hosts of one zone and which are taken.
#[derive(Clone, Debug, Default)]
pub struct ZoneHosts {
    pub shape: ZoneShape,
    pub(super) used: BTreeSet<Slot>,
    /// Where the last spread placement stopped (round robin over blocks).
    cursor: u32,
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// `resourceStatus.physicalHostTopology` of a slot: opaque ids, stable for a zone and slot.
pub fn topology_json(zone: &str, (b, s, h): Slot) -> Value {
    let region = zone.rsplit_once('-').map_or(zone, |(r, _)| r);
    json!({
        "cluster": format!("{region}-cluster-{:04x}", fnv(zone) & 0xffff),
        "block": format!("{:016x}", fnv(&format!("{zone}/b{b}"))),
        "subblock": format!("{:016x}", fnv(&format!("{zone}/b{b}/s{s}"))),
        "host": format!("{:016x}", fnv(&format!("{zone}/b{b}/s{s}/h{h}"))),
    })
}

impl ZoneHosts {
    fn free_in(&self, b: Option<u32>, s: Option<u32>) -> Vec<Slot> {
        let sh = self.shape;
        let mut out = Vec::new();
        for bi in 0..sh.blocks {
            if b.is_some_and(|x| x != bi) {
                continue;
            }
            for si in 0..sh.subblocks_per_block {
                if s.is_some_and(|x| x != si) {
                    continue;
                }
                for hi in 0..sh.hosts_per_subblock {
                    if !self.used.contains(&(bi, si, hi)) {
                        out.push((bi, si, hi));
                    }
                }
            }
        }
        out
    }

    /// `n` free slots within `distance` of each other (and of `anchor`, the group a MIG's VMs are
    /// already in), taking the fullest group that fits (best fit); `None`: they do not fit.
    pub(super) fn place(&self, n: usize, distance: Distance, anchor: Option<Slot>) -> Option<Vec<Slot>> {
        let sh = self.shape;
        let groups: Vec<(Option<u32>, Option<u32>)> = match (distance, anchor) {
            (Distance::Cluster, _) => vec![(None, None)],
            (Distance::Block, Some((b, _, _))) => vec![(Some(b), None)],
            (Distance::Block, None) => (0..sh.blocks).map(|b| (Some(b), None)).collect(),
            (Distance::Subblock, Some((b, s, _))) => vec![(Some(b), Some(s))],
            (Distance::Subblock, None) => (0..sh.blocks)
                .flat_map(|b| (0..sh.subblocks_per_block).map(move |s| (Some(b), Some(s))))
                .collect(),
        };
        groups
            .into_iter()
            .map(|(b, s)| self.free_in(b, s))
            .filter(|free| free.len() >= n)
            .min_by_key(Vec::len)
            .map(|free| free.into_iter().take(n).collect())
    }

    /// One free slot, spreading over the blocks; `None` when the zone is full.
    pub(super) fn spread(&mut self) -> Option<Slot> {
        let sh = self.shape;
        for i in 0..sh.blocks.max(1) {
            let b = (self.cursor + i) % sh.blocks.max(1);
            if let Some(slot) = self.free_in(Some(b), None).into_iter().next() {
                self.cursor = b + 1;
                return Some(slot);
            }
        }
        None
    }
}

/// The machine families GCE takes a workload policy for, and with which provisioning models
/// (docs/gce-facts.md, "Workload policies": Google's "About workload policies for MIGs").
/// (machine type prefix, family, flex-start allowed).
///
/// slurm-dws's `check-config` has its own copy (`slurm_dws::gce::placement_rules::POLICY_FAMILIES`)
/// on purpose: the simulator stands in for GCE and depends on nothing of the product. A test there
/// (`src/gce/placement_rules.rs`) keeps the two equal.
pub const POLICY_FAMILIES: &[(&str, &str, bool)] = &[
    ("a4x-max", "A4X Max", false),
    ("a4x-", "A4X", false),
    ("a4-", "A4", true),
    ("a3-ultragpu-", "A3 Ultra", true),
    ("a3-megagpu-", "A3 Mega", false),
    ("a3-highgpu-8g", "A3 High", false),
    ("h4d-", "H4D", false),
];

fn family(machine_type: &str) -> Option<(&'static str, bool)> {
    let mt = last_segment(machine_type);
    POLICY_FAMILIES.iter().find(|(p, _, _)| mt.starts_with(p)).map(|(_, f, flex)| (*f, *flex))
}

impl State {
    pub fn insert_policy(
        &mut self,
        project: &str,
        region: &str,
        body: &Value,
        now: DateTime<Utc>,
    ) -> Result<String, ApiError> {
        let name = body.get("name").and_then(Value::as_str).unwrap_or_default();
        if !is_rfc1035(name) {
            return Err(ApiError::invalid(format!("Invalid value for field 'resource.name': '{name}'.")));
        }
        let Some(wp) = body.get("workloadPolicy") else {
            return Err(ApiError::invalid(
                "The simulator models workload policies only: 'resource.workloadPolicy' is required.",
            ));
        };
        let ty = wp.get("type").and_then(Value::as_str).unwrap_or_default();
        if ty != "HIGH_THROUGHPUT" {
            return Err(ApiError::invalid(format!(
                "Invalid value for field 'resource.workloadPolicy.type': '{ty}'. Only HIGH_THROUGHPUT is supported."
            )));
        }
        if wp.get("maxTopologyDistance").is_some() && wp.get("acceleratorTopology").is_some() {
            return Err(ApiError::invalid(
                "Invalid value for field 'resource.workloadPolicy': specify either maxTopologyDistance or acceleratorTopology, not both.",
            ));
        }
        let key: PolicyKey = (project.to_string(), region.to_string(), name.to_string());
        let path = policy_path(&key);
        if self.policies.contains_key(&key) {
            return Err(ApiError::already_exists(&path));
        }
        let id = new_id();
        self.policies.insert(key, Policy { id, created: now, body: body.clone() });
        let url = format!("{GCE_BASE}{path}");
        Ok(self.new_op(
            project,
            Scope::Region(region.into()),
            "insert",
            url,
            id,
            now,
            Some(now + ms(self.op_latency_ms)),
        ))
    }

    pub fn policy_json(&self, project: &str, region: &str, name: &str) -> Result<Value, ApiError> {
        let key: PolicyKey = (project.to_string(), region.to_string(), name.to_string());
        let p = self.policies.get(&key).ok_or_else(|| ApiError::not_found(&policy_path(&key)))?;
        Ok(render_policy(&key, p))
    }

    pub fn policies_of<'a>(&'a self, project: &'a str, region: &'a str) -> impl Iterator<Item = Value> + 'a {
        self.policies
            .iter()
            .filter(move |(k, _)| k.0 == project && k.1 == region)
            .map(|(k, p)| render_policy(k, p))
    }

    /// Refused while a MIG uses it (GCE: `resourceInUseByAnotherResource`).
    pub fn delete_policy(
        &mut self,
        project: &str,
        region: &str,
        name: &str,
        now: DateTime<Utc>,
    ) -> Result<String, ApiError> {
        let key: PolicyKey = (project.to_string(), region.to_string(), name.to_string());
        let path = policy_path(&key);
        let Some(p) = self.policies.get(&key) else { return Err(ApiError::not_found(&path)) };
        if let Some(m) = self.migs.values().find(|m| m.placement.as_ref().map(|p| &p.0) == Some(&key)) {
            return Err(ApiError::new(
                400,
                "resourceInUseByAnotherResource",
                format!("The resource_policy resource '{path}' is already being used by '{}'", m.key.path()),
            ));
        }
        let id = p.id;
        self.policies.remove(&key);
        Ok(self.new_op(
            project,
            Scope::Region(region.into()),
            "delete",
            format!("{GCE_BASE}{path}"),
            id,
            now,
            Some(now + ms(self.op_latency_ms)),
        ))
    }

    /// A MIG insert's `resourcePolicies.workloadPolicy`: the policy's key and how close its VMs
    /// must be, or GCE's refusal (missing policy, another region, a machine family or provisioning
    /// model GCE does not take one for, A4X without a policy or with one that has no accelerator
    /// topology).
    pub(super) fn mig_policy(
        &self,
        project: &str,
        scope: &Scope,
        body: &Value,
        template: &str,
    ) -> Result<Option<(PolicyKey, Distance)>, ApiError> {
        let Some(url) = body.pointer("/resourcePolicies/workloadPolicy").and_then(Value::as_str) else {
            // A4X and A4X Max MIGs need a policy with an acceleratorTopology. GCE exempts a MIG that
            // makes a single VM for testing; a MIG is created with targetSize 0 here, so the
            // simulator cannot tell and refuses every one (slurm-dws's `check-config --online`
            // refuses such a nodeset before it gets here).
            let mt = self.template_properties(project, template);
            let mt = mt.get("machineType").and_then(Value::as_str).unwrap_or_default();
            if let Some((fam, _)) = family(mt).filter(|(f, _)| f.starts_with("A4X")) {
                return Err(ApiError::invalid(format!(
                    "Invalid value for field 'resource.resourcePolicies.workloadPolicy': ''. {fam} managed instance groups require a workload policy with acceleratorTopology (machine type {})."
                , last_segment(mt))));
            }
            return Ok(None);
        };
        let rest = url.split("/compute/v1/").last().unwrap_or(url);
        let segs: Vec<&str> = rest.split('/').collect();
        let (p, r, n) = match segs.as_slice() {
            ["projects", p, "regions", r, "resourcePolicies", n] => (*p, *r, *n),
            ["regions", r, "resourcePolicies", n] => (project, *r, *n),
            _ => {
                return Err(ApiError::invalid(format!(
                    "Invalid value for field 'resource.resourcePolicies.workloadPolicy': '{url}'."
                )))
            }
        };
        let mig_region = match scope {
            Scope::Region(r) => r.clone(),
            Scope::Zone(z) => z.rsplit_once('-').map_or(z.clone(), |(r, _)| r.to_string()),
            Scope::Global => String::new(),
        };
        if r != mig_region {
            return Err(ApiError::invalid(format!(
                "Invalid value for field 'resource.resourcePolicies.workloadPolicy': '{url}'. The workload policy must be in the same region as the instance group manager ({mig_region})."
            )));
        }
        let key: PolicyKey = (p.to_string(), r.to_string(), n.to_string());
        let policy = self.policies.get(&key).ok_or_else(|| ApiError::not_found(&policy_path(&key)))?;
        let props = self.template_properties(project, template);
        let mt = props.get("machineType").and_then(Value::as_str).unwrap_or("a3-ultragpu-8g");
        let model =
            props.pointer("/scheduling/provisioningModel").and_then(Value::as_str).unwrap_or("STANDARD");
        let Some((fam, flex_ok)) = family(mt) else {
            return Err(ApiError::invalid(format!(
                "Workload policies are not supported for machine type '{mt}': only A4X Max, A4X, A4, A3 Ultra, A3 Mega, A3 High (8 GPUs) and H4D."
            )));
        };
        if model == "FLEX_START" && !flex_ok {
            return Err(ApiError::invalid(format!(
                "Workload policies are not supported for {fam} instances with provisioning model FLEX_START."
            )));
        }
        let wp = policy.body.get("workloadPolicy").cloned().unwrap_or_default();
        let accel = wp.get("acceleratorTopology").and_then(Value::as_str);
        if fam.starts_with("A4X") && accel.is_none() {
            return Err(ApiError::invalid(format!(
                "The workload policy '{}' must specify acceleratorTopology for {fam} instances.",
                policy_path(&key)
            )));
        }
        let distance = match (accel, wp.get("maxTopologyDistance").and_then(Value::as_str)) {
            (Some(_), _) | (_, Some("SUBBLOCK")) => Distance::Subblock,
            (_, Some("BLOCK")) => Distance::Block,
            _ => Distance::Cluster,
        };
        Ok(Some((key, distance)))
    }

    /// Control API: a zone's blocks.
    pub fn set_zone_shape(&mut self, zone: &str, shape: ZoneShape) {
        self.hosts.entry(zone.to_string()).or_default().shape = shape;
    }

    /// The slot of a VM being created: its reservation, else a spread one (`None`: zone full).
    pub(super) fn take_slot(&mut self, ikey: &InstanceKey) -> Option<Slot> {
        if let Some(s) = self.reserved.remove(ikey) {
            return Some(s);
        }
        let hosts = self.hosts.entry(ikey.1.clone()).or_default();
        let s = hosts.spread()?;
        hosts.used.insert(s);
        Some(s)
    }

    /// A VM is gone: its host is free.
    pub(super) fn free_slot(&mut self, zone: &str, slot: Option<Slot>) {
        if let (Some(s), Some(h)) = (slot, self.hosts.get_mut(zone)) {
            h.used.remove(&s);
        }
    }
}

fn policy_path(key: &PolicyKey) -> String {
    format!("projects/{}/regions/{}/resourcePolicies/{}", key.0, key.1, key.2)
}

fn render_policy(key: &PolicyKey, p: &Policy) -> Value {
    let mut o = p.body.clone();
    let obj = o.as_object_mut().expect("validated object");
    obj.insert("kind".into(), json!("compute#resourcePolicy"));
    obj.insert("id".into(), json!(p.id.to_string()));
    obj.insert("creationTimestamp".into(), json!(ts(p.created)));
    obj.insert("selfLink".into(), json!(format!("{GCE_BASE}{}", policy_path(key))));
    obj.insert("region".into(), json!(format!("{GCE_BASE}projects/{}/regions/{}", key.0, key.1)));
    obj.insert("status".into(), json!("READY"));
    o
}

/// What a request that cannot be placed within its policy's distance says while it waits.
pub fn placement_waiting() -> CapacityFailure {
    CapacityFailure {
        code: "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS".into(),
        message: "Waiting for resources: the zone does not have enough resources available within the workload policy's topology distance to fulfill the request. The request stays queued.".into(),
        error_details: None,
    }
}

/// Reserves hosts for `names`, new VMs of the MIG `key` (in `zone`, already holding `vms`), within
/// its policy's distance of each other and of the MIG's VMs; `false`: they cannot be placed now.
/// A MIG without a policy reserves nothing (its VMs are spread when created).
#[allow(clippy::too_many_arguments)]
pub(super) fn reserve(
    hosts: &mut BTreeMap<String, ZoneHosts>,
    reserved: &mut BTreeMap<InstanceKey, Slot>,
    instances: &BTreeMap<InstanceKey, Instance>,
    key: &MigKey,
    zone: &str,
    vms: &BTreeSet<String>,
    placement: &Option<(PolicyKey, Distance)>,
    names: &[String],
) -> bool {
    let Some((_, distance)) = placement else { return true };
    let anchor = vms.iter().find_map(|n| {
        instances.get(&(key.project.clone(), zone.to_string(), n.clone())).and_then(|vm| vm.host)
    });
    let zh = hosts.entry(zone.to_string()).or_default();
    let Some(slots) = zh.place(names.len(), *distance, anchor) else { return false };
    for (n, s) in names.iter().zip(slots) {
        zh.used.insert(s);
        reserved.insert((key.project.clone(), zone.to_string(), n.clone()), s);
    }
    true
}
