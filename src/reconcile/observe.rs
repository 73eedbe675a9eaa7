//! Observe, the first half of a pass: the hook calls waiting in the inbox, and what GCE and Slurm
//! show now for the desired state on record.
//!
//! Nothing here changes anything. What could not be read is an error in the [`Observation`]
//! (and so in the pass report), and the part it would have shown is `None` in [`Observed`], so the
//! planner concludes nothing from its absence. A VM list GCE answered only in part (a zone that
//! did not answer) names those zones in [`Observed::unreachable_zones`], with an error: the planner
//! concludes nothing about VMs that could be there.

use super::gce_edge;
use super::gce_edge::inflight::STEP_WAIT;
use super::gce_edge::poll::PollSchedule;
use super::plan::{EOL_PREFIX, MAINT_PREFIX, WINDOW_PREFIX};
use super::report::PassPhases;
use super::types::*;
use crate::config::Config;
use crate::gce;
use crate::model::{HookKind, InboxEntry, NodeState};
use crate::naming::{self, Naming};
use crate::slurm::{self, NodeInfo, Slurm};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet};
use tokio::time::Instant;

/// What one pass sees before it decides anything. [`Reconciler::pass_on`](super::Reconciler::pass_on)
/// ingests its inbox and plans from the rest.
#[derive(Debug, Clone)]
pub struct Observation {
    /// When observing began: the pass's start, and the `now` it plans with (in milliseconds, as the
    /// store keeps time, so that the desired state kept between passes equals what is stored).
    pub started_at: DateTime<Utc>,
    /// The same moment on the monotonic clock, for the pass's duration.
    pub(super) started: Instant,
    /// The hook calls not ingested yet, oldest first: the pass ingests exactly these (a call recorded
    /// after this is read by the next pass, which the hook wakes).
    pub inbox: Vec<InboxEntry>,
    pub observed: Observed,
    /// What could not be read; the pass that plans from this is degraded.
    pub errors: Vec<String>,
    /// Resize requests polled, and carried without asking (`poll.rs`).
    pub polls: PollCounts,
    /// How long the reads took (the pass report's `phases`: the read phases and the answer times).
    pub phases: PassPhases,
    /// The reads not made, with why (the pass report's `skipped_reads`).
    pub skipped: BTreeMap<String, String>,
    /// An inbox-first observation: the age of the full observation it reuses.
    pub reused_age: Option<std::time::Duration>,
    /// When the MIG list it holds was read from GCE, and how many passes before this one reused it.
    pub(super) migs_read_at: Instant,
    pub(super) mig_reuses: u32,
}

impl Observation {
    /// An empty observation starting now.
    pub(super) fn begin(now: DateTime<Utc>) -> Observation {
        Observation {
            started_at: now,
            started: Instant::now(),
            inbox: Vec::new(),
            observed: Observed::default(),
            errors: Vec::new(),
            polls: PollCounts::default(),
            phases: PassPhases::default(),
            skipped: BTreeMap::new(),
            reused_age: None,
            migs_read_at: Instant::now(),
            mig_reuses: 0,
        }
    }
}

/// The clients a pass observes through.
pub(super) struct Sources<'a> {
    pub cfg: &'a Config,
    pub naming: &'a Naming,
    pub gce: &'a gce::Client,
    pub slurm: &'a Slurm,
    /// The VM list's recall, kept between passes.
    pub vm_recall: &'a std::sync::Mutex<gce::VmRecall>,
    /// Which regions' workload policies are worth listing, kept between passes.
    pub policy_regions: &'a std::sync::Mutex<gce_edge::policies::PolicyRegions>,
    /// The calendar-mode bookings read lately, kept between passes.
    pub future_reads: &'a std::sync::Mutex<gce_edge::reserved::FutureReads>,
    /// A job span is open (`plan/usage.rs`): Slurm's jobs are read even when no node shows one,
    /// so that its end is seen.
    pub usage_jobs_open: bool,
}

/// Resize-request `get`s in flight at once.
const POLL_CONCURRENCY: usize = 8;

/// What observing found besides the observation itself: how many resize requests were polled and how
/// many carried (not asked this pass; planned from the state they were last seen in).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PollCounts {
    pub polled: usize,
    pub carried: usize,
}

/// GCE's and Slurm's answers for `desired` and the hook calls in `inbox`: one MIG list (unless
/// `reused_migs` is an earlier one nothing could have changed), one VM list,
/// Slurm's nodes and reservations, a `get` of each resize request the poll schedule says is due (at
/// most [`POLL_CONCURRENCY`] at once; the others carried), and one `squeue` for the time limits of the
/// jobs waiting for nodes.
#[allow(clippy::too_many_arguments)]
pub(super) async fn gce_and_slurm(
    src: &Sources<'_>,
    desired: &Desired,
    inbox: &[InboxEntry],
    polls: &mut PollSchedule,
    now: DateTime<Utc>,
    reused_migs: Option<BTreeMap<String, ObservedMig>>,
    errors: &mut Vec<String>,
    phases: &mut PassPhases,
) -> (Observed, PollCounts) {
    let mut o = Observed::default();
    let began = Instant::now();
    let reusing = reused_migs.is_some();
    // The regions in use: their MIGs and workload policies are listed.
    let regions = gce_edge::mig_list_regions(src.cfg, desired);
    let gce_lists = async {
        let migs = async {
            match reused_migs {
                Some(m) => gce_edge::MigLists { migs: m, ..Default::default() },
                None => gce_edge::observe_migs_in(src.gce, src.cfg, src.naming, &regions).await,
            }
        };
        let policies = gce_edge::policies::observe_policies(src.gce, src.cfg, &regions, src.policy_regions);
        let capacity = gce_edge::reserved::observe_capacity(src.gce, src.cfg, src.future_reads, now);
        let (vms, migs, policies, capacity) =
            tokio::join!(gce_edge::observe_vms(src.gce, src.cfg, src.vm_recall), migs, policies, capacity);
        ((((vms, migs), policies), capacity), began.elapsed())
    };
    let slurm_reads = async {
        let names = async {
            if crate::reconcile::bench_baseline() {
                src.slurm.reservations().await.map(|r| r.into_iter().map(|r| r.name).collect::<Vec<_>>())
            } else {
                src.slurm.reservation_names().await
            }
        };
        let nodes = async {
            if crate::reconcile::bench_baseline() {
                src.slurm.nodes().await
            } else {
                src.slurm.node_states().await
            }
        };
        let reads = tokio::join!(nodes, names);
        (reads, began.elapsed())
    };
    let (((((vms, migs), policies), capacity), gce_took), ((nodes, reservations), slurm_took)) =
        tokio::join!(gce_lists, slurm_reads);
    let (capacity, capacity_errors) = capacity;
    errors.extend(capacity_errors);
    o.capacity = capacity;
    let (policies, policy_failures) = policies;
    for (region, e) in &policy_failures {
        errors.push(format!(
            "listing workload policies in {region}: {e}: no policy there is created or deleted this pass"
        ));
    }
    // What the regions that answered show is known; the others' policies are left alone.
    o.policies = Some(policies);
    o.unlisted_policy_regions = policy_failures.into_keys().collect();
    let (mut gce_took, mut slurm_took) = (gce_took, slurm_took);
    match vms {
        Ok((v, unreachable)) => {
            if let Some(why) = unreachable.unscoped {
                // Partial, and GCE does not say where: no absence in it can be believed.
                errors.push(format!(
                    "listing VMs: a partial answer that names no zone ({why}): no VM is judged gone this pass"
                ));
            } else {
                if !unreachable.zones.is_empty() {
                    errors.push(format!(
                        "listing VMs: zone {} unreachable: its VMs are unknown this pass, nothing there is judged gone",
                        unreachable.zones.iter().cloned().collect::<Vec<_>>().join(", ")
                    ));
                }
                o.unreachable_zones = unreachable.zones;
                o.vms = Some(v);
            }
        }
        Err(e) => errors.push(format!("listing VMs: {e}")),
    }
    if migs.listed.is_empty() && !reusing {
        // No region answered: the MIGs are unknown, as with one region.
        for (region, e) in &migs.failed {
            errors.push(format!("listing MIGs in {region}: {e}"));
        }
    } else {
        gce_edge::regions::carry_unlisted(&mut o, migs, desired, src.cfg, errors);
        o.migs_reused = reusing;
    }
    match nodes {
        Ok(n) => o.slurm = Some(slurm_view(n, &src.cfg.cluster_name)),
        Err(e) => errors.push(format!("reading Slurm's nodes: {e}")),
    }
    match reservations {
        Ok(r) => {
            let ours = |n: &String| {
                n.starts_with(EOL_PREFIX) || n.starts_with(MAINT_PREFIX) || n.starts_with(WINDOW_PREFIX)
            };
            o.reservations = Some(r.into_iter().filter(ours).collect())
        }
        Err(e) => errors.push(format!("reading Slurm's reservations: {e}")),
    }
    let wanted = requests_to_poll(desired, o.migs.as_ref());
    let plan = polls.choose(&wanted, desired, o.migs.as_ref(), o.vms.as_ref(), now);
    let mut counts = PollCounts { polled: plan.poll.len(), carried: plan.carried.len() };
    o.requests = plan.carried;
    let polling = Instant::now();
    let polled = poll_requests(src, &o.mig_regions, plan.poll).await;
    gce_took += polling.elapsed();
    for (mig, name, answer) in polled {
        let target_size = o.migs.as_ref().and_then(|m| m.get(&mig)).map(|m| m.target_size);
        let Some(answer) = answer else {
            // No answer within STEP_WAIT: no poll holds a pass. The request is carried in the
            // state last seen (or unknown, as after a failed get) and asked about again next pass.
            tracing::info!(%mig, request = %name, wait_secs = STEP_WAIT.as_secs(), "resize-request poll not answered in time: carried, asked again next pass");
            counts.polled -= 1;
            if let Some(last) = polls.last_seen(&mig, &name) {
                counts.carried += 1;
                o.requests.insert(mig.clone(), last);
            }
            polls.record(&mig, &name, None, target_size, now);
            continue;
        };
        match answer {
            Ok(rr) => {
                polls.record(&mig, &name, Some(&rr), target_size, now);
                o.requests.insert(mig, rr);
            }
            Err(e) => {
                polls.record(&mig, &name, None, target_size, now);
                errors.push(format!("reading resize request {name} in {mig}: {e}"));
            }
        }
    }
    let exclusive = exclusive_jobs(desired, src.cfg);
    // Who runs on our nodes (the usage spans): asked only when a node shows a job or a job span is
    // open; otherwise known to be no one.
    let all = match o.slurm.as_ref() {
        Some(nodes) if src.usage_jobs_open || nodes.values().any(holds_a_job) => true,
        Some(_) => {
            o.jobs = Some(Vec::new());
            false
        }
        None => false,
    };
    slurm_took += read_jobs(src, desired, inbox, exclusive, all, &mut o, errors).await;
    phases.gce_read_ms += PassPhases::ms(gce_took);
    phases.slurm_read_ms += PassPhases::ms(slurm_took);
    (o, counts)
}

/// One `squeue` for the time limits of the jobs waiting for nodes (those of `desired`'s nodes
/// waiting for a request and of `inbox`'s resume calls) and the state of the jobs in `exclusive`,
/// into `o`; how long it took. With `all`, the one `squeue` lists every job, and `o.jobs` gets
/// them (the usage spans) besides.
pub(super) async fn read_jobs(
    src: &Sources<'_>,
    desired: &Desired,
    inbox: &[InboxEntry],
    exclusive: BTreeSet<u32>,
    all: bool,
    o: &mut Observed,
    errors: &mut Vec<String>,
) -> std::time::Duration {
    let jobs = jobs_waiting(desired, inbox);
    let asking = Instant::now();
    if all || !jobs.is_empty() || !exclusive.is_empty() {
        let wanted: Vec<u32> =
            jobs.iter().chain(&exclusive).copied().collect::<BTreeSet<u32>>().into_iter().collect();
        let answer = if all {
            src.slurm.all_jobs().await.map(|infos| {
                o.jobs = Some(infos.iter().map(slurm_job).collect());
                infos.into_iter().filter(|j| wanted.contains(&j.job_id)).collect()
            })
        } else {
            src.slurm.jobs(&wanted).await
        };
        match answer {
            Ok(infos) => {
                if !exclusive.is_empty() {
                    o.exclusive_jobs = Some(
                        infos
                            .iter()
                            .filter(|j| exclusive.contains(&j.job_id))
                            .map(|j| (j.job_id, observed_job(j)))
                            .collect(),
                    );
                }
                o.job_limits = infos.into_iter().map(|j| (j.job_id, job_limit(j.time_limit))).collect()
            }
            Err(e) => errors.push(format!("reading job time limits: {e}")),
        }
    }
    asking.elapsed()
}

/// `get`s of the resize requests in `poll`, [`POLL_CONCURRENCY`] at once, answered in the same order;
/// `None` for one that did not answer within [`STEP_WAIT`] (it is dropped: a read has nothing to
/// keep in flight, and the next pass asks again).
async fn poll_requests(
    src: &Sources<'_>,
    regions: &BTreeMap<String, String>,
    poll: Vec<(String, String)>,
) -> Vec<(String, String, Option<Result<PolledRequest, gce::GceError>>)> {
    let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(POLL_CONCURRENCY));
    let cfg = std::sync::Arc::new(src.cfg.clone());
    let mut set = tokio::task::JoinSet::new();
    let mut out = Vec::new();
    for (i, (mig, name)) in poll.into_iter().enumerate() {
        // A task is made only when it may run: 2,000 requests never make 2,000 futures at once;
        // and finished ones are taken at once (each holds its future until it is joined).
        let permit = sem.clone().acquire_owned().await;
        while let Some(joined) = set.try_join_next() {
            if let Ok(r) = joined {
                out.push(r);
            }
        }
        let (gce, cfg) = (src.gce.clone(), cfg.clone());
        let region = gce_edge::mig_region(&cfg, regions.get(&mig).map(String::as_str), &mig);
        set.spawn(async move {
            let _permit = permit;
            let answer =
                tokio::time::timeout(STEP_WAIT, gce_edge::observe_request(&gce, &cfg, &region, &mig, &name))
                    .await
                    .ok();
            (i, mig, name, answer)
        });
    }
    while let Some(joined) = set.join_next().await {
        if let Ok(r) = joined {
            out.push(r);
        }
    }
    out.sort_by_key(|r| r.0);
    out.into_iter().map(|(_, m, n, a)| (m, n, a)).collect()
}

/// Slurm's nodes of this cluster, as the planner reads them.
pub(super) fn slurm_view(nodes: Vec<NodeInfo>, cluster: &str) -> BTreeMap<String, SlurmNode> {
    let ours = format!("{cluster}-");
    nodes
        .into_iter()
        .filter(|n| n.name.starts_with(&ours))
        .map(|n| {
            let mut state = n.state;
            if state.is_ascii() {
                state.make_ascii_lowercase(); // in place: no copy for each of 10,000 nodes
            } else {
                state = state.to_lowercase();
            }
            let s = SlurmNode { state, flags: n.flags.iter().collect(), reason: n.reason };
            (n.name, s)
        })
        .collect()
}

/// The resize requests to `get`, as (MIG, request name): the request of every group that is active
/// (finished requests are never polled again), and the request an owned MIG the store has no record
/// of would have (database lost, backup controller), so that a request still in flight is adopted
/// and followed rather than its MIG collected. Once adopted, the MIG is on record and is not asked
/// about this way again.
pub(super) fn requests_to_poll(
    desired: &Desired,
    migs: Option<&BTreeMap<String, ObservedMig>>,
) -> Vec<(String, String)> {
    let active =
        desired.requests.values().filter(|r| r.phase.is_polled()).map(|r| (r.mig.clone(), r.name.clone()));
    let unrecorded = migs
        .into_iter()
        .flat_map(|m| m.values())
        .filter(|m| !desired.migs.contains_key(&m.name))
        .map(|m| (m.name.clone(), naming::resize_request_name(&m.tag)));
    active.chain(unrecorded).collect()
}

/// The jobs whose time limits size the next request groups: those of the nodes waiting for a request,
/// and those of the resume calls about to be ingested.
pub(super) fn jobs_waiting(desired: &Desired, inbox: &[InboxEntry]) -> Vec<u32> {
    let pending =
        desired.nodes.values().filter(|n| n.state == NodeState::ResumePending).filter_map(|n| n.job_id);
    let resumed =
        inbox.iter().filter(|e| e.kind == HookKind::Resume).flat_map(|e| e.jobs.iter().map(|(j, _)| *j));
    pending.chain(resumed).collect::<BTreeSet<u32>>().into_iter().collect()
}

/// The jobs the up dynamic nodes of `exclusive` nodesets were resumed for: when one ends, its
/// nodes are released (`plan/release.rs`).
pub(super) fn exclusive_jobs(desired: &Desired, cfg: &Config) -> BTreeSet<u32> {
    let exclusive: BTreeSet<&str> =
        cfg.nodesets.iter().filter(|n| n.exclusive).map(|n| n.name.as_str()).collect();
    if exclusive.is_empty() {
        return BTreeSet::new();
    }
    desired
        .nodes
        .values()
        .filter(|n| n.state == NodeState::Up && !n.is_static && exclusive.contains(n.nodeset.as_str()))
        .filter_map(|n| n.job_id)
        .collect()
}

/// A node Slurm shows running (or finishing) a job.
fn holds_a_job(n: &SlurmNode) -> bool {
    matches!(n.state.as_str(), "allocated" | "mixed" | "completing") || n.has_flag("COMPLETING")
}

/// A job as the usage rule reads it.
fn slurm_job(j: &slurm::JobInfo) -> SlurmJob {
    let time = |s: Option<i64>| s.and_then(|s| DateTime::from_timestamp(s, 0));
    let configuring = j.state == "CONFIGURING" || j.flags.iter().any(|f| f == "CONFIGURING");
    SlurmJob {
        job_id: u64::from(j.job_id),
        state: j.state.to_uppercase(),
        configuring,
        nodes: j.nodes.clone(),
        user: j.user.clone(),
        account: j.account.clone(),
        partition: j.partition.clone(),
        start: time(j.start_time),
        end: time(j.end_time),
    }
}

fn observed_job(j: &slurm::JobInfo) -> ObservedJob {
    let nodes = crate::hostlist::expand(&j.nodes).ok().map(|n| n.into_iter().collect());
    ObservedJob { state: j.state.to_uppercase(), nodes }
}

fn job_limit(t: slurm::TimeLimit) -> JobLimit {
    match t {
        slurm::TimeLimit::Minutes(m) => JobLimit::Minutes(m),
        slurm::TimeLimit::Unlimited => JobLimit::Unlimited,
        _ => JobLimit::Unknown,
    }
}

#[cfg(test)]
#[path = "observe_tests.rs"]
mod tests;
