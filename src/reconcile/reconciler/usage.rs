//! The usage recording of a full pass (`plan/usage.rs` decides, `commit::commit_usage` writes):
//! the open spans kept between passes, read from the store at a run's first pass, and each
//! nodeset's machine type and GPUs, read with its template once a run. Where slurm.conf says
//! slurmdbd, the jobs of restored spans that the pass closes are asked of `sacct` first
//! (`slurm_edge::job_runs`), once.

use super::Reconciler;
use crate::reconcile::commit;
use crate::reconcile::plan::{apply_usage, jobs_to_account, usage_change, OpenJob, OpenUsage, UsageVm};
use crate::reconcile::report::{PassPhases, PassReport, UsageCount};
use crate::reconcile::slurm_edge;
use crate::reconcile::types::*;
use crate::store::{Store, StoreError, USAGE_SEEN_AT};
use chrono::{DateTime, Utc};
use std::num::NonZeroU64;

/// The spans open as the last pass left them, and when that pass began.
#[derive(Debug, Default)]
pub(super) struct Recording {
    /// `None` until a run's first full pass reads them from the store.
    open: Option<OpenUsage>,
    seen_at: Option<DateTime<Utc>>,
    /// slurm.conf's `AccountingStorageType` is slurmdbd (read by the daemon at start).
    slurmdbd: bool,
}

impl Recording {
    /// Whether a job span is open: Slurm's jobs are read even when no node shows one.
    pub(super) fn jobs_open(&self) -> bool {
        self.open.as_ref().is_some_and(|o| !o.jobs.is_empty())
    }
}

/// The open spans on record, as a restarted run takes them over: none seen by it yet.
async fn restore(store: &Store) -> Result<(OpenUsage, Option<DateTime<Utc>>), StoreError> {
    let vms = store
        .open_vm_spans()
        .await?
        .into_iter()
        .filter_map(|s| {
            let id = s.instance_id.parse::<u64>().ok().and_then(NonZeroU64::new)?;
            let model = crate::config::ProvisioningModel::parse(&s.model).unwrap_or_default().as_str();
            Some(UsageVm {
                id,
                node: s.node,
                nodeset: s.nodeset,
                model,
                gpus: s.gpus,
                created_at: s.created_at,
                last_seen: s.last_seen,
                restored: true,
                counted_to: None,
            })
        })
        .collect();
    let mut open = OpenUsage { vms, ..Default::default() };
    for j in store.open_job_spans().await? {
        open.jobs.insert((j.job_id, j.node), OpenJob { started_at: j.started_at, restored: true });
    }
    let seen = store.meta(USAGE_SEEN_AT).await?.and_then(|v| v.parse().ok()).map(crate::store::from_ms);
    Ok((open, seen))
}

impl Reconciler {
    /// Whether slurm.conf's `AccountingStorageType` is slurmdbd: then `sacct` says when the jobs
    /// of restored spans ended (module docs). Off until set.
    pub fn set_slurmdbd(&mut self, on: bool) {
        self.recording.slurmdbd = on;
    }

    pub fn slurmdbd(&self) -> bool {
        self.recording.slurmdbd
    }

    /// Records the usage a full pass saw (`observed` as the pass left it, `desired` its nodes) and
    /// puts the seconds it counted in the report. A pass that did not list the VMs, or planned on
    /// an earlier pass's list, records nothing: the next full pass counts the time.
    pub(super) async fn record_usage(
        &mut self,
        desired: &Desired,
        observed: &mut Observed,
        report: &mut PassReport,
    ) {
        if observed.reused || observed.vms.is_none() {
            return;
        }
        let now = report.started_at;
        let t = tokio::time::Instant::now();
        if self.recording.open.is_none() {
            match restore(&self.clients.store).await {
                Ok((open, seen)) => {
                    self.recording.open = Some(open);
                    self.recording.seen_at = seen;
                }
                Err(e) => return report.errors.push(format!("reading the open usage spans: {e}")),
            }
        }
        let Some(open) = self.recording.open.as_mut() else { return };
        let shapes = self.templates.shapes();
        let change = usage_change(&self.clients.plan_cfg, shapes, &desired.nodes, open, observed, now);
        // Spans restored at start whose jobs Slurm no longer shows: asked of slurmdbd, and the
        // change made again with its answer (a pass that would close such a span, only: once a run).
        let ask = if self.recording.slurmdbd && open.jobs.values().any(|j| j.restored) {
            jobs_to_account(open, &change)
        } else {
            Vec::new()
        };
        let change = if ask.is_empty() {
            change
        } else {
            drop(change);
            observed.job_runs = slurm_edge::job_runs::job_runs(&self.clients.slurm, &ask).await;
            usage_change(&self.clients.plan_cfg, shapes, &desired.nodes, open, observed, now)
        };
        if let Err(e) = commit::commit_usage(&self.clients.store, &change, self.recording.seen_at, now).await
        {
            // Read back from the store next pass: what it holds is the truth.
            self.recording.open = None;
            return report.errors.push(format!("recording the usage spans: {e}"));
        }
        self.recording.seen_at = Some(now);
        let seconds = apply_usage(open, &change, now);
        // Every configured nodeset's series, zeros included.
        let mut rows = Vec::new();
        for ns in self.clients.plan_cfg.nodesets.values() {
            for use_ in ["busy", "idle"] {
                let key = (ns.name.clone(), ns.model.as_str(), use_);
                let s = seconds.get(&key).copied().unwrap_or_default();
                rows.push(UsageCount {
                    nodeset: ns.name.clone(),
                    model: ns.model.as_str().into(),
                    use_: use_.into(),
                    vm_seconds: s.vm,
                    gpu_seconds: s.gpu,
                });
            }
        }
        // A nodeset a reload removed still has its VMs' last seconds counted.
        for ((ns, model, use_), s) in seconds {
            if !self.clients.plan_cfg.nodesets.contains_key(&ns) {
                rows.push(UsageCount {
                    nodeset: ns,
                    model: model.into(),
                    use_: use_.into(),
                    vm_seconds: s.vm,
                    gpu_seconds: s.gpu,
                });
            }
        }
        report.usage = rows;
        report.phases.commit_ms += PassPhases::ms(t.elapsed());
    }
}
