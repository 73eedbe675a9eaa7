//! Which resize requests a pass asks GCE about, and what it carries for the others.
//!
//! DWS can keep a request ACCEPTED (queued for capacity) for hours. Polling each one with a `get`
//! every pass would cost 2,000 reads a pass for 2,000 queued requests — over GCE's per-minute read
//! quota, for an answer that rarely changes. So a request is polled every pass only while it is
//! young or moving; once it has been queued for a while it is polled at a growing interval, and the
//! slow polls of all requests together share a per-minute budget, most overdue first. A request not
//! polled in a pass is *carried*: the pass plans with the state it was last seen in, and knows it did
//! not ask (nothing is concluded from not asking; [`PollPlan::carried`] counts them for the report).
//!
//! Whatever the interval, a request is polled at once when the lists every pass makes anyway say
//! something may have changed: a VM of its MIG appears (a request provisions all its VMs at once),
//! its MIG's target size moves (GCE grows it at insert, lowers it on FAILED or CANCELLED), or its MIG
//! is gone; and in the pass after any GCE step on its MIG (a cancel, a resend). A process that starts
//! (or reloads) polls every request once, and spreads their next polls over the interval, so that
//! 2,000 requests do not all fall due again in the same pass.
//!
//! Decisions here are pure functions of the schedule and `now`; the reconciler does the `get`s.

use crate::model::{GceRequestState, RequestPhase};
use crate::reconcile::types::*;
use chrono::{DateTime, Duration, Utc};
use std::collections::{BTreeMap, BTreeSet};

/// A request is polled every pass for this long after its group was created (a fresh request moves:
/// CREATING, ACCEPTED, and often SUCCEEDED within minutes).
pub const FRESH_SECS: i64 = 120;
/// The longest interval between two polls of a queued request.
pub const MAX_INTERVAL_SECS: i64 = 600;
/// Slow polls (of requests queued past [`FRESH_SECS`]) per minute, all requests together. With the
/// lists of a 10,000-VM cluster (about 25 reads a pass) this keeps the daemon's reads well under
/// GCE's default read quota; requests that are due wait their turn, most overdue first.
pub const SLOW_POLLS_PER_MINUTE: f64 = 150.0;

/// What the schedule knows of one request it has polled.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    name: String,
    last: ObservedRequest,
    polled_at: DateTime<Utc>,
    /// The MIG's target size in the list of the pass that polled it.
    target_size: Option<u32>,
    /// The first poll of this request by this process: its next one comes after a part of the
    /// interval only (see [`spread`]).
    first: bool,
}

/// The schedule the reconciler keeps between passes (in memory: a new process polls everything once).
#[derive(Debug, Clone, Default)]
pub struct PollSchedule {
    /// By MIG name.
    entries: BTreeMap<String, Entry>,
    /// Slow polls that may go out now (a token bucket of [`SLOW_POLLS_PER_MINUTE`], one minute's burst).
    tokens: f64,
    refilled_at: Option<DateTime<Utc>>,
}

/// One pass's choice.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PollPlan {
    /// (MIG, request name) to `get` this pass.
    pub poll: Vec<(String, String)>,
    /// The requests not polled, with the state they were last seen in, by MIG.
    pub carried: BTreeMap<String, PolledRequest>,
}

/// How long a request queued since `created` waits between two polls at `now`: every pass while it is
/// fresh, then half its age, at most [`MAX_INTERVAL_SECS`].
pub fn interval(created: DateTime<Utc>, now: DateTime<Utc>) -> Duration {
    let age = (now - created).num_seconds().max(0);
    if age < FRESH_SECS {
        Duration::zero()
    } else {
        Duration::seconds((age / 2).min(MAX_INTERVAL_SECS))
    }
}

impl PollSchedule {
    /// Chooses which of `wanted` (the requests to follow, as (MIG, name), from
    /// `observe::requests_to_poll`) to `get` this pass, given the lists observed (`migs`, `vms`) and
    /// the desired state (each request's age).
    pub fn choose(
        &mut self,
        wanted: &[(String, String)],
        desired: &Desired,
        migs: Option<&BTreeMap<String, ObservedMig>>,
        vms: Option<&BTreeMap<String, ObservedVm>>,
        now: DateTime<Utc>,
    ) -> PollPlan {
        self.refill(now);
        let created: BTreeMap<&str, DateTime<Utc>> = desired
            .requests
            .values()
            .filter(|r| r.phase == RequestPhase::Active)
            .map(|r| (r.mig.as_str(), r.created_at))
            .collect();
        let with_vms: BTreeSet<&str> =
            vms.into_iter().flat_map(|v| v.values()).filter_map(|v| v.mig.as_deref()).collect();
        let keep: BTreeSet<&str> = wanted.iter().map(|(m, _)| m.as_str()).collect();
        self.entries.retain(|m, _| keep.contains(m.as_str()));

        let mut plan = PollPlan::default();
        let mut slow: Vec<(DateTime<Utc>, &String, &String)> = Vec::new();
        for (mig, name) in wanted {
            let Some(e) = self.entries.get(mig).filter(|e| e.name == *name) else {
                plan.poll.push((mig.clone(), name.clone()));
                continue;
            };
            let Some(&created) = created.get(mig.as_str()) else {
                plan.poll.push((mig.clone(), name.clone())); // not a recorded active request: adoption
                continue;
            };
            let observed_mig = migs.map(|m| m.get(mig));
            let signal = e.last.state != GceRequestState::Accepted
                || with_vms.contains(mig.as_str())
                || matches!(observed_mig, Some(None))
                || observed_mig.flatten().is_some_and(|m| Some(m.target_size) != e.target_size);
            let mut every = interval(created, now);
            if e.first {
                every = spread(mig, every);
            }
            if signal || every.is_zero() {
                plan.poll.push((mig.clone(), name.clone()));
            } else if now - e.polled_at >= every {
                slow.push((e.polled_at + every, mig, name));
            } else {
                plan.carried.insert(mig.clone(), PolledRequest::Found(e.last.clone()));
            }
        }
        // Most overdue first, as many as the slow-poll budget allows; the others are carried.
        slow.sort();
        for (_, mig, name) in slow {
            if self.tokens >= 1.0 {
                self.tokens -= 1.0;
                plan.poll.push((mig.clone(), name.clone()));
            } else if let Some(e) = self.entries.get(mig) {
                plan.carried.insert(mig.clone(), PolledRequest::Found(e.last.clone()));
            }
        }
        plan
    }

    /// Records a `get`'s answer (`None`: the get failed; the next pass asks again).
    pub fn record(
        &mut self,
        mig: &str,
        name: &str,
        answer: Option<&PolledRequest>,
        target_size: Option<u32>,
        now: DateTime<Utc>,
    ) {
        match answer {
            Some(PolledRequest::Found(rr)) => {
                let first = !self.entries.contains_key(mig);
                let e =
                    Entry { name: name.to_string(), last: rr.clone(), polled_at: now, target_size, first };
                self.entries.insert(mig.to_string(), e);
            }
            _ => {
                self.entries.remove(mig);
            }
        }
    }

    /// The state `mig`'s request `name` was last seen in, if this schedule polled it.
    pub fn last_seen(&self, mig: &str, name: &str) -> Option<PolledRequest> {
        self.entries.get(mig).filter(|e| e.name == name).map(|e| PolledRequest::Found(e.last.clone()))
    }

    /// Something was sent about `mig` this pass: its request is polled next pass.
    pub fn forget(&mut self, mig: &str) {
        self.entries.remove(mig);
    }

    fn refill(&mut self, now: DateTime<Utc>) {
        let burst = SLOW_POLLS_PER_MINUTE;
        self.tokens = match self.refilled_at {
            None => burst,
            Some(t) => {
                let secs = (now - t).num_milliseconds().max(0) as f64 / 1000.0;
                (self.tokens + secs * SLOW_POLLS_PER_MINUTE / 60.0).min(burst)
            }
        };
        self.refilled_at = Some(now);
    }
}

/// A part of `every` (from 0 to all of it) that depends only on the MIG's name: after a first poll
/// the next comes that much later, so the polls of many requests spread evenly over the interval.
fn spread(mig: &str, every: Duration) -> Duration {
    // FNV-1a: stable across processes and builds (std's hasher is seeded).
    let h =
        mig.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    every * (h % 1000) as i32 / 1000
}

#[cfg(test)]
#[path = "poll_tests.rs"]
mod tests;
