//! What is current about a node, apart from its history: the job and the error `nodes` shows
//! (and `explain` leads with) are the live ones; older ones are history (`explain`, `events`).

use crate::model::{Backoff, Node, NodeState};
use chrono::{DateTime, Utc};

/// The job and the error that still hold for a node now.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Live<'a> {
    /// The job the node was resumed for, while the node still serves it (waiting for a VM, up,
    /// or being suspended); a powered-down node's old job is history.
    pub job_id: Option<u32>,
    /// The last error, while it still explains the node's state: a node waiting for a VM, up or
    /// being suspended; a powered-down node's unless it came from a backoff that has ended (the
    /// failure the nodeset's backoff record names, or a resume refused during a backoff), which is
    /// history.
    pub last_error: Option<&'a str>,
}

/// `node`'s live job and error, with its nodeset's backoff (if any) at `now`.
pub fn live<'a>(node: &'a Node, backoff: Option<&Backoff>, now: DateTime<Utc>) -> Live<'a> {
    let serving = node.state != NodeState::PoweredDown;
    let backoff = backoff.filter(|b| b.nodeset == node.nodeset);
    let backing_off = backoff.is_some_and(|b| !b.ended && b.until > now);
    let of_a_backoff = |e: &str| {
        backoff.is_some_and(|b| b.reason.contains(e))
            || e.starts_with(&format!("nodeset {} is in backoff until", node.nodeset))
    };
    Live {
        job_id: node.job_id.filter(|_| serving),
        last_error: node.last_error.as_deref().filter(|e| serving || backing_off || !of_a_backoff(e)),
    }
}

/// `node`'s job and error that are history now (not live), for `explain`.
pub fn history<'a>(node: &'a Node, live: &Live<'a>) -> (Option<u32>, Option<&'a str>) {
    (
        node.job_id.filter(|_| live.job_id.is_none()),
        node.last_error.as_deref().filter(|_| live.last_error.is_none()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone};

    #[test]
    fn the_live_job_and_error_are_the_ones_that_still_hold() {
        let now = Utc.with_ymd_and_hms(2026, 11, 25, 12, 0, 0).unwrap();
        let backoff = |until: DateTime<Utc>, ended: bool| Backoff {
            nodeset: "a".into(),
            until,
            level: 0,
            reason: "capacity backoff".into(),
            ended,
        };
        let running = backoff(now + Duration::seconds(60), false);
        let mut over = backoff(now - Duration::seconds(600), true);
        over.reason = "capacity backoff after a stockout or quota error: resize request r in MIG m FAILED: ZONE_RESOURCE_POOL_EXHAUSTED: no room".into();
        let stockout = "resize request r in MIG m FAILED: ZONE_RESOURCE_POOL_EXHAUSTED: no room";
        let refused = "nodeset a is in backoff until 2026-11-25T11:50:00Z: capacity backoff";
        let timeout = "Slurm gave up on the node (ResumeTimeout)";
        let cases: Vec<(NodeState, Option<&Backoff>, &str, bool, bool)> = vec![
            // (state, backoff, error, job live, error live)
            (NodeState::Up, None, stockout, true, true),
            (NodeState::Requested, Some(&over), stockout, true, true),
            (NodeState::ResumePending, None, stockout, true, true),
            (NodeState::Suspending, None, timeout, true, true),
            (NodeState::PoweredDown, Some(&running), stockout, false, true),
            (NodeState::PoweredDown, Some(&over), stockout, false, false),
            (NodeState::PoweredDown, Some(&over), refused, false, false),
            (NodeState::PoweredDown, None, refused, false, false),
            // Not a backoff's: it still says why the node is as it is.
            (NodeState::PoweredDown, Some(&over), timeout, false, true),
            (NodeState::PoweredDown, None, timeout, false, true),
        ];
        for (state, b, error_text, job, error) in cases {
            let mut n = crate::reconcile::plan::new_node("hpc-a-1", "a", 1, false, now);
            n.state = state;
            n.job_id = Some(7);
            n.last_error = Some(error_text.into());
            let l = live(&n, b, now);
            assert_eq!(l.job_id.is_some(), job, "{state:?} {b:?}");
            assert_eq!(l.last_error.is_some(), error, "{state:?} {b:?}");
            let (old_job, old_error) = history(&n, &l);
            assert_eq!(old_job.is_some(), !job, "history has what is not live: {state:?}");
            assert_eq!(old_error.is_some(), !error, "{state:?}");
        }
        // Another nodeset's backoff says nothing about this node.
        let mut n = crate::reconcile::plan::new_node("hpc-b-1", "b", 1, false, now);
        n.last_error = Some(stockout.into());
        assert_eq!(live(&n, Some(&over), now).last_error, Some(stockout));
    }
}
