//! The config file exactly as written: serde structs that reject unknown keys, nothing resolved yet.
//!
//! Every field is optional here, even the required ones, so that validation can report every
//! missing key at once (with the file and key path) instead of serde stopping at the first.
//! Values are wrapped in [`Spanned`] so a validation error can point at the line it came from.

use serde::{Deserialize, Serialize};
use toml::Spanned;

/// A value as read from the file, with its byte span for error messages.
pub type Val<T> = Option<Spanned<T>>;

/// The whole file.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub cluster_name: Val<String>,
    pub state_dir: Val<String>,
    pub socket: Val<String>,
    pub log_file: Val<String>,
    pub gcp: Option<RawGcp>,
    pub slurm: Option<RawSlurm>,
    pub reconcile: Option<RawReconcile>,
    pub daemon: Option<RawDaemon>,
    /// `[[nodeset]]` in the file (singular, as each table is one nodeset).
    pub nodeset: Option<Vec<RawNodeset>>,
    pub pricing: Option<RawPricing>,
}

/// `[pricing]`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawPricing {
    pub currency: Val<String>,
    pub catalog: Val<bool>,
    /// `[pricing.per_hour]`: machine type → its prices.
    pub per_hour: Option<std::collections::BTreeMap<String, RawMachinePrices>>,
}

/// One machine type's entry of `[pricing.per_hour]`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawMachinePrices {
    pub flex: Val<f64>,
    pub spot: Val<f64>,
    pub standard: Val<f64>,
    pub reservation: Val<f64>,
}

/// `[gcp]`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawGcp {
    pub project: Val<String>,
    pub region: Val<String>,
    pub endpoint: Val<String>,
    pub credentials: Val<String>,
    pub calls_per_minute: Val<u32>,
    pub read_calls_per_minute: Val<u32>,
    pub write_calls_per_minute: Val<u32>,
    pub request_timeout: Val<u64>,
    pub retry_deadline: Val<u64>,
}

/// `[slurm]`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawSlurm {
    pub bin_dir: Val<String>,
    pub conf: Val<String>,
    pub node_addr: Val<String>,
    pub command_timeout: Val<u64>,
    pub delegate_resume: Val<String>,
    pub delegate_suspend: Val<String>,
    pub delegate_resume_fail: Val<String>,
    pub topology: Val<String>,
    pub topology_file: Val<String>,
}

/// `[reconcile]`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawReconcile {
    pub interval: Val<u64>,
    pub orphan_grace: Val<u64>,
    pub mig_gc_grace: Val<u64>,
    pub backoff_initial: Val<u64>,
    pub backoff_max: Val<u64>,
    pub admin_comment_interval: Val<u64>,
}

/// `[daemon]`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawDaemon {
    pub metrics_listen: Val<String>,
    pub service_user: Val<String>,
    pub history_days: Val<u64>,
    pub readers: Val<String>,
    pub controller: Val<String>,
    pub shared_state_dir: Val<String>,
}

/// One `[[nodeset]]`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawNodeset {
    pub name: Val<String>,
    pub region: Val<String>,
    pub instance_template: Val<String>,
    pub zones: Val<Vec<String>>,
    pub node_count_static: Val<u32>,
    pub node_count_dynamic_max: Val<u32>,
    pub partition: Val<String>,
    pub node_conf: Val<String>,
    pub provisioning_model: Val<String>,
    pub exclusive: Val<bool>,
    pub fallback_after: Val<u64>,
    pub maintenance_reservation: Val<bool>,
    pub dws_flex: Option<RawDwsFlex>,
    pub placement: Option<RawPlacement>,
    pub reservation: Option<RawReservation>,
}

/// `[nodeset.reservation]`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawReservation {
    pub name: Val<String>,
    pub future_reservation: Val<String>,
    pub eol_grace: Val<u64>,
}

/// `[nodeset.dws_flex]`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawDwsFlex {
    pub enabled: Val<bool>,
    pub max_run_duration: Val<u64>,
    pub use_job_duration: Val<bool>,
    pub boot_allowance: Val<u64>,
    pub queue_timeout: Val<u64>,
    pub eol_grace: Val<u64>,
    pub capacity_advice: Val<bool>,
}

/// `[nodeset.placement]`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawPlacement {
    pub workload_policy: Val<String>,
    pub max_topology_distance: Val<String>,
    pub accelerator_topology: Val<String>,
}

/// Every key of the schema as a dotted path (`nodeset.dws_flex.enabled`).
///
/// Kept next to the structs on purpose: a test checks this list against the structs (through a
/// fully populated config serialized back to TOML) and against `docs/configuration.md`, so the
/// schema, this list and the documentation cannot drift apart.
pub const KEYS: &[&str] = &[
    "cluster_name",
    "state_dir",
    "socket",
    "log_file",
    "gcp.project",
    "gcp.region",
    "gcp.endpoint",
    "gcp.credentials",
    "gcp.calls_per_minute",
    "gcp.read_calls_per_minute",
    "gcp.write_calls_per_minute",
    "gcp.request_timeout",
    "gcp.retry_deadline",
    "slurm.bin_dir",
    "slurm.conf",
    "slurm.node_addr",
    "slurm.command_timeout",
    "slurm.delegate_resume",
    "slurm.delegate_suspend",
    "slurm.delegate_resume_fail",
    "slurm.topology",
    "slurm.topology_file",
    "reconcile.interval",
    "reconcile.orphan_grace",
    "reconcile.mig_gc_grace",
    "reconcile.backoff_initial",
    "reconcile.backoff_max",
    "reconcile.admin_comment_interval",
    "daemon.metrics_listen",
    "daemon.service_user",
    "daemon.history_days",
    "daemon.readers",
    "daemon.controller",
    "daemon.shared_state_dir",
    "nodeset.name",
    "nodeset.region",
    "nodeset.instance_template",
    "nodeset.zones",
    "nodeset.node_count_static",
    "nodeset.node_count_dynamic_max",
    "nodeset.partition",
    "nodeset.node_conf",
    "nodeset.provisioning_model",
    "nodeset.exclusive",
    "nodeset.fallback_after",
    "nodeset.maintenance_reservation",
    "nodeset.dws_flex.enabled",
    "nodeset.dws_flex.max_run_duration",
    "nodeset.dws_flex.use_job_duration",
    "nodeset.dws_flex.boot_allowance",
    "nodeset.dws_flex.queue_timeout",
    "nodeset.dws_flex.eol_grace",
    "nodeset.dws_flex.capacity_advice",
    "nodeset.placement.workload_policy",
    "nodeset.placement.max_topology_distance",
    "nodeset.placement.accelerator_topology",
    "nodeset.reservation.name",
    "nodeset.reservation.future_reservation",
    "nodeset.reservation.eol_grace",
    "pricing.currency",
    "pricing.catalog",
    // `[pricing.per_hour]` is keyed by machine type: its entries are listed with the placeholder
    // [`MACHINE_TYPE`] in the machine type's place.
    "pricing.per_hour.<machine_type>.flex",
    "pricing.per_hour.<machine_type>.spot",
    "pricing.per_hour.<machine_type>.standard",
    "pricing.per_hour.<machine_type>.reservation",
];

/// What stands for the machine type of a `[pricing.per_hour]` entry in [`KEYS`].
pub const MACHINE_TYPE: &str = "<machine_type>";

fn val<T>(v: T) -> Val<T> {
    Some(Spanned::new(0..0, v))
}

fn path_val(p: &std::path::Path) -> Val<String> {
    val(p.display().to_string())
}

/// The resolved config back in file form, every key set to its effective value.
///
/// Built with struct literals (no `..Default::default()`), so a key added to the raw structs
/// does not compile until it is printed here too.
impl From<&super::Config> for RawConfig {
    fn from(c: &super::Config) -> Self {
        RawConfig {
            cluster_name: val(c.cluster_name.clone()),
            state_dir: path_val(&c.state_dir),
            socket: path_val(&c.socket),
            log_file: path_val(&c.log_file),
            gcp: Some(RawGcp {
                project: val(c.gcp.project.clone()),
                region: val(c.gcp.region.clone()),
                endpoint: val(c.gcp.endpoint.clone()),
                credentials: val(c.gcp.credentials.to_string()),
                calls_per_minute: val(c.gcp.calls_per_minute),
                read_calls_per_minute: val(c.gcp.read_calls_per_minute),
                write_calls_per_minute: val(c.gcp.write_calls_per_minute),
                request_timeout: val(c.gcp.request_timeout),
                retry_deadline: val(c.gcp.retry_deadline),
            }),
            slurm: Some(RawSlurm {
                bin_dir: path_val(&c.slurm.bin_dir),
                conf: c.slurm.conf.as_deref().and_then(path_val),
                node_addr: val(c.slurm.node_addr.as_config_str().to_string()),
                command_timeout: val(c.slurm.command_timeout),
                delegate_resume: c.slurm.delegate_resume.as_deref().and_then(path_val),
                delegate_suspend: c.slurm.delegate_suspend.as_deref().and_then(path_val),
                delegate_resume_fail: c.slurm.delegate_resume_fail.as_deref().and_then(path_val),
                topology: val(c.slurm.topology.kind.as_str().to_string()),
                topology_file: c.slurm.topology.file.as_deref().and_then(path_val),
            }),
            reconcile: Some(RawReconcile {
                interval: val(c.reconcile.interval),
                orphan_grace: val(c.reconcile.orphan_grace),
                mig_gc_grace: val(c.reconcile.mig_gc_grace),
                backoff_initial: val(c.reconcile.backoff_initial),
                backoff_max: val(c.reconcile.backoff_max),
                admin_comment_interval: val(c.reconcile.admin_comment_interval),
            }),
            daemon: Some(RawDaemon {
                metrics_listen: c.daemon.metrics_listen.and_then(|a| val(a.to_string())),
                service_user: val(c.daemon.service_user.clone().unwrap_or_default()),
                history_days: val(c.daemon.history_days),
                readers: val(c.daemon.readers.clone().unwrap_or_default()),
                controller: val(c.daemon.controller.clone().unwrap_or_default()),
                shared_state_dir: val(c
                    .daemon
                    .shared_state_dir
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()),
            }),
            nodeset: Some(
                c.nodesets
                    .iter()
                    .map(|n| RawNodeset {
                        name: val(n.name.clone()),
                        region: val(n.region.clone()),
                        instance_template: val(n.instance_template.clone()),
                        zones: val(n.zones.clone()),
                        node_count_static: val(n.node_count_static),
                        node_count_dynamic_max: val(n.node_count_dynamic_max),
                        partition: val(n.partition.clone()),
                        node_conf: val(n.node_conf.clone()),
                        provisioning_model: val(n.provisioning_model.as_str().to_string()),
                        exclusive: val(n.exclusive),
                        fallback_after: val(n.fallback_after),
                        maintenance_reservation: val(n.maintenance_reservation),
                        dws_flex: Some(RawDwsFlex {
                            enabled: val(n.dws_flex.enabled),
                            max_run_duration: val(n.dws_flex.max_run_duration),
                            use_job_duration: val(n.dws_flex.use_job_duration),
                            boot_allowance: val(n.dws_flex.boot_allowance),
                            queue_timeout: val(n.dws_flex.queue_timeout),
                            eol_grace: val(n.dws_flex.eol_grace),
                            capacity_advice: val(n.dws_flex.capacity_advice),
                        }),
                        placement: n.placement.as_ref().map(|p| match p {
                            super::Placement::Existing { url } => RawPlacement {
                                workload_policy: val(url.clone()),
                                max_topology_distance: None,
                                accelerator_topology: None,
                            },
                            super::Placement::Owned { max_topology_distance, accelerator_topology } => {
                                RawPlacement {
                                    workload_policy: None,
                                    max_topology_distance: max_topology_distance
                                        .and_then(|d| val(d.as_str().to_string())),
                                    accelerator_topology: accelerator_topology.clone().and_then(val),
                                }
                            }
                        }),
                        reservation: n.reservation.as_ref().map(|r| RawReservation {
                            name: match &r.source {
                                super::ReservationSource::Reservation(x) => val(x.url()),
                                super::ReservationSource::Future(_) => None,
                            },
                            future_reservation: match &r.source {
                                super::ReservationSource::Future(f) => val(f.url()),
                                super::ReservationSource::Reservation(_) => None,
                            },
                            eol_grace: val(r.eol_grace),
                        }),
                    })
                    .collect(),
            ),
            pricing: Some(RawPricing {
                currency: val(c.pricing.currency.clone()),
                catalog: val(c.pricing.catalog),
                per_hour: Some(
                    c.pricing
                        .per_hour
                        .iter()
                        .map(|(m, p)| {
                            let v = |x: Option<super::pricing::HourPrice>| x.and_then(|x| val(x.get()));
                            (
                                m.clone(),
                                RawMachinePrices {
                                    flex: v(p.flex),
                                    spot: v(p.spot),
                                    standard: v(p.standard),
                                    reservation: v(p.reservation),
                                },
                            )
                        })
                        .collect(),
                ),
            }),
        }
    }
}
