//! The `slurm-dws:` AdminComment of the jobs waiting in a queued request group: the expected-start
//! line (`crate::waiting`), written in the first pass a job waits, then refreshed at most every
//! `reconcile.admin_comment_interval` (one `scontrol update` per job whose line changed, never per
//! node), cleared in the first pass after the job's group is no longer queued (it started, or
//! failed over to another partition).

use crate::config::Config;
use crate::reconcile::types::{Desired, ObservedCapacity};
use crate::slurm::Slurm;
use crate::store::RequestWait;
use crate::waiting;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet};

/// What this process last wrote, the jobs whose line it could not write, and when it last
/// refreshed.
#[derive(Debug, Default)]
pub struct AdminComments {
    written: BTreeMap<u32, String>,
    failed: BTreeSet<u32>,
    refreshed_at: Option<DateTime<Utc>>,
}

/// The lines due at `now`: `(job, text)` to set (an empty text clears), given what was written
/// and which jobs' lines could not be written, and whether this is a refresh. Pure: the refresh
/// interval and the clearing rule live here (table-tested).
///
/// A job that starts waiting gets its line at once, whenever the last refresh was: a user who
/// looks at a job queued a minute ago sees why. Its later changes wait for a refresh (every
/// `interval`), and so does a line Slurm did not take (no retry every pass).
pub fn due(
    written: &BTreeMap<u32, String>,
    failed: &BTreeSet<u32>,
    refreshed_at: Option<DateTime<Utc>>,
    wanted: &BTreeMap<u32, String>,
    interval: u64,
    now: DateTime<Utc>,
) -> (Vec<(u32, String)>, bool) {
    let mut out = Vec::new();
    // Cleared at once: a job whose group is no longer queued.
    for job in written.keys().filter(|j| !wanted.contains_key(j)) {
        out.push((*job, String::new()));
    }
    let refresh = refreshed_at.is_none_or(|t| (now - t).num_seconds() >= interval as i64);
    for (job, line) in wanted {
        let new = !written.contains_key(job) && !failed.contains(job);
        if (refresh || new) && written.get(job) != Some(line) {
            out.push((*job, line.clone()));
        }
    }
    (out, refresh)
}

/// The line for each job waiting in a queued group of `desired` (a job in several groups: the
/// longest wait).
pub fn wanted(
    cfg: &Config,
    desired: &Desired,
    waits: &BTreeMap<String, Vec<RequestWait>>,
    capacity: &BTreeMap<String, ObservedCapacity>,
    now: DateTime<Utc>,
) -> BTreeMap<u32, String> {
    let mut out: BTreeMap<u32, (i64, String)> = BTreeMap::new();
    let mut memo = waiting::SimilarMemo::default();
    for r in desired.requests.values().filter(|r| waiting::is_queued(r)) {
        let Some(job) = r.job_id else { continue };
        let Some(ns) = cfg.nodesets.iter().find(|n| n.name == r.nodeset) else { continue };
        if !ns.provisioning_model.uses_resize_requests() {
            continue;
        }
        let waited = waiting::waited(r, now);
        if ns.provisioning_model.is_reservation() {
            // Reserved capacity: the wait is for units of the reservation, not for GCE's capacity.
            let line = match capacity.get(&r.nodeset) {
                Some(c) => waiting::reserved_summary(
                    waited,
                    c.reservation.as_deref().unwrap_or("the reservation"),
                    c.free(),
                    c.count,
                    r.nodes.len(),
                ),
                None => waiting::reserved_summary(waited, "the reservation", 0, 0, r.nodes.len()),
            };
            if out.get(&job).is_none_or(|(w, _)| waited > *w) {
                out.insert(job, (waited, line));
            }
            continue;
        }
        let similar = memo.get(waits, &r.nodeset, r.nodes.len() as u32, r.run_duration);
        let score = r.zone_choice.as_ref().and_then(|c| c.obtainability);
        let line = waiting::summary(waited, &ns.region, similar, score);
        if out.get(&job).is_none_or(|(w, _)| waited > *w) {
            out.insert(job, (waited, line));
        }
    }
    out.into_iter().map(|(j, (_, l))| (j, l)).collect()
}

/// The line of a job waiting for a reservation nodeset's window to open, by the nodeset's
/// partition (only the nodesets whose window has not opened at `now`). A partition shared by
/// several such nodesets gets the soonest window.
pub fn window_lines(
    cfg: &Config,
    capacity: &BTreeMap<String, ObservedCapacity>,
    now: DateTime<Utc>,
) -> BTreeMap<String, String> {
    let mut soonest: BTreeMap<String, (DateTime<Utc>, String)> = BTreeMap::new();
    for ns in &cfg.nodesets {
        let Some(c) = capacity.get(&ns.name) else { continue };
        let Some(start) = c.window_start.filter(|s| now < *s) else { continue };
        let what = ns.reservation.as_ref().map(|r| r.source.url()).unwrap_or_default();
        let line = waiting::window_summary(&what, start, (start - now).num_seconds());
        if soonest.get(&ns.partition).is_none_or(|(s, _)| start < *s) {
            soonest.insert(ns.partition.clone(), (start, line));
        }
    }
    soonest.into_iter().map(|(p, (_, l))| (p, l)).collect()
}

impl AdminComments {
    /// Sets and clears what is due. Best effort: a failure is logged, not a degraded pass (the line
    /// is a courtesy to users); a line that failed is tried at the next refresh, a clear is not
    /// retried (the job has moved on).
    pub async fn refresh(
        &mut self,
        cfg: &Config,
        slurm: &Slurm,
        waits: &BTreeMap<String, Vec<RequestWait>>,
        desired: &Desired,
        capacity: &BTreeMap<String, ObservedCapacity>,
        now: DateTime<Utc>,
    ) {
        let mut wanted = wanted(cfg, desired, waits, capacity, now);
        // Jobs held by a reservation nodeset's window: they never resumed a node, so only Slurm
        // knows them (one squeue, only while a window is closed).
        let held = window_lines(cfg, capacity, now);
        if !held.is_empty() {
            let partitions: Vec<String> = held.keys().cloned().collect();
            match slurm.pending_jobs_in(&partitions).await {
                Ok(jobs) => {
                    for j in jobs {
                        let Some(line) = j.partition.split(',').find_map(|p| held.get(p)) else { continue };
                        wanted.entry(j.job_id).or_insert_with(|| line.clone());
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not list the jobs waiting for a reservation's window")
                }
            }
        }
        let (todo, refreshed) = due(
            &self.written,
            &self.failed,
            self.refreshed_at,
            &wanted,
            cfg.reconcile.admin_comment_interval,
            now,
        );
        if refreshed {
            self.refreshed_at = Some(now);
        }
        self.failed.retain(|job| wanted.contains_key(job));
        for (job, text) in todo {
            let sent = slurm.set_admin_comment(job, &text).await;
            if let Err(e) = &sent {
                tracing::warn!(job, error = %e, "could not set the job's slurm-dws AdminComment");
            }
            if text.is_empty() {
                self.written.remove(&job);
            } else if sent.is_ok() {
                self.failed.remove(&job);
                self.written.insert(job, text);
            } else {
                self.failed.insert(job);
            }
        }
    }

    /// Whether any job carries a line now (the daemon then reads the wait history each pass).
    pub fn any_written(&self) -> bool {
        !self.written.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    #[test]
    fn refreshed_at_most_every_interval_and_cleared_at_once() {
        let t0 = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap();
        let m = |v: &[(u32, &str)]| v.iter().map(|(j, s)| (*j, s.to_string())).collect::<BTreeMap<_, _>>();
        let none = BTreeSet::new();
        // First time: every line, once per job.
        let (todo, r) = due(&m(&[]), &none, None, &m(&[(1, "a"), (2, "b")]), 300, t0);
        assert_eq!((todo.len(), r), (2, true));
        // 4 minutes later: nothing new is written, even if a line changed...
        let (todo, r) = due(
            &m(&[(1, "a"), (2, "b")]),
            &none,
            Some(t0),
            &m(&[(1, "a2"), (2, "b")]),
            300,
            t0 + Duration::minutes(4),
        );
        assert_eq!((todo, r), (vec![], false));
        // ...but a job that started is cleared at once.
        let (todo, _) =
            due(&m(&[(1, "a"), (2, "b")]), &none, Some(t0), &m(&[(1, "a")]), 300, t0 + Duration::minutes(1));
        assert_eq!(todo, vec![(2, String::new())]);
        // 5 minutes: only the changed line.
        let (todo, r) = due(
            &m(&[(1, "a"), (2, "b")]),
            &none,
            Some(t0),
            &m(&[(1, "a2"), (2, "b")]),
            300,
            t0 + Duration::minutes(5),
        );
        assert_eq!((todo, r), (vec![(1, "a2".to_string())], true));
    }

    #[test]
    fn a_job_that_starts_waiting_gets_its_line_in_its_first_pass() {
        let t0 = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap();
        let m = |v: &[(u32, &str)]| v.iter().map(|(j, s)| (*j, s.to_string())).collect::<BTreeMap<_, _>>();
        let none = BTreeSet::new();
        // Job 1 was written at t0; job 2 starts waiting 10 s later: its line goes out at once, job
        // 1's changed line waits for the refresh.
        let (todo, r) = due(
            &m(&[(1, "a")]),
            &none,
            Some(t0),
            &m(&[(1, "a2"), (2, "b")]),
            300,
            t0 + Duration::seconds(10),
        );
        assert_eq!((todo, r), (vec![(2, "b".to_string())], false));
        // A line Slurm did not take is not tried again before the refresh...
        let failed = BTreeSet::from([2]);
        let (todo, _) = due(
            &m(&[(1, "a")]),
            &failed,
            Some(t0),
            &m(&[(1, "a"), (2, "b")]),
            300,
            t0 + Duration::seconds(20),
        );
        assert_eq!(todo, vec![]);
        // ...and is at the refresh.
        let (todo, r) = due(
            &m(&[(1, "a")]),
            &failed,
            Some(t0),
            &m(&[(1, "a"), (2, "b")]),
            300,
            t0 + Duration::seconds(300),
        );
        assert_eq!((todo, r), (vec![(2, "b".to_string())], true));
    }

    #[test]
    fn a_job_held_for_a_window_is_told_when_it_opens() {
        let text = "cluster_name = \"hpc\"\n[gcp]\nproject = \"p\"\nregion = \"us-central1\"\n\
            [[nodeset]]\nname = \"a\"\ninstance_template = \"projects/p/global/instanceTemplates/t\"\n\
            zones = [\"us-central1-a\"]\nnode_count_dynamic_max = 4\nprovisioning_model = \"reservation\"\n\
            partition = \"gpu\"\n[nodeset.reservation]\n\
            future_reservation = \"projects/p/zones/us-central1-a/futureReservations/f\"\n";
        let cfg = Config::from_toml_str(text, "t.toml".as_ref()).unwrap();
        let now = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap();
        let start = now + Duration::minutes(125);
        let capacity = |start| {
            BTreeMap::from([(
                "a".to_string(),
                ObservedCapacity { window_start: Some(start), count: 4, ..Default::default() },
            )])
        };
        let lines = window_lines(&cfg, &capacity(start), now);
        assert_eq!(
            lines.get("gpu").map(String::as_str),
            Some(
                "slurm-dws: waiting for the window of projects/p/zones/us-central1-a/futureReservations/f, \
                 which opens at 2027-01-15T10:05:00Z (in 2h05m)"
            )
        );
        // Open: nothing to tell (the job resumes nodes, and its group's line takes over).
        assert!(window_lines(&cfg, &capacity(now - Duration::minutes(1)), now).is_empty());
        assert!(window_lines(&cfg, &BTreeMap::new(), now).is_empty());
    }
}
