//! Expected start: how long a queued request group has waited, and what similar groups of its
//! nodeset waited before they got capacity (count, median, 90th percentile), in one line for
//! `status`, `requests`, `explain` and the waiting job's AdminComment. Pure: time is a parameter.
//!
//! "Similar" (docs/operations.md, "My job waits for capacity"): a group of the same nodeset that
//! succeeded, whose size is within a factor of two of this one's (`size/2 ≤ s ≤ 2·size`) and whose
//! run duration is within a factor of two too. Its wait is from the group's creation (the resume)
//! to its success.

use crate::model::{GceRequestState, Request};
use crate::store::RequestWait;
use chrono::{DateTime, Utc};

/// The prefix of every AdminComment slurm-dws writes (and the only one it ever clears).
pub const ADMIN_COMMENT_PREFIX: &str = "slurm-dws:";

/// What similar groups waited, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Similar {
    pub count: usize,
    pub median: i64,
    pub p90: i64,
}

/// Whether a group of `w`'s size and run duration is like one of `size` nodes for `run_duration`.
pub fn is_similar(size: u32, run_duration: u64, w: &RequestWait) -> bool {
    let within = |a: u64, b: u64| a <= 2 * b && b <= 2 * a;
    within(u64::from(w.size), u64::from(size)) && within(w.run_duration, run_duration)
}

/// The waits of the groups in `history` (one nodeset's) similar to `size` × `run_duration`: count,
/// median and 90th percentile (nearest rank); `None` when there is none.
pub fn similar(history: &[RequestWait], size: u32, run_duration: u64) -> Option<Similar> {
    let mut waits: Vec<i64> =
        history.iter().filter(|w| is_similar(size, run_duration, w)).map(|w| w.waited).collect();
    if waits.is_empty() {
        return None;
    }
    waits.sort_unstable();
    let rank = |p: f64| waits[((p * waits.len() as f64).ceil() as usize).clamp(1, waits.len()) - 1];
    Some(Similar { count: waits.len(), median: rank(0.5), p90: rank(0.9) })
}

/// [`similar`] for many groups at once: each (nodeset, size, run duration) is computed once (a
/// pass with 2,000 queued groups asks for a handful of distinct shapes).
#[derive(Debug, Default)]
pub struct SimilarMemo<'h> {
    memo: std::collections::HashMap<(&'h str, u32, u64), Option<Similar>>,
}

impl<'h> SimilarMemo<'h> {
    pub fn get(
        &mut self,
        history: &'h std::collections::BTreeMap<String, Vec<RequestWait>>,
        nodeset: &'h str,
        size: u32,
        run_duration: u64,
    ) -> Option<Similar> {
        *self.memo.entry((nodeset, size, run_duration)).or_insert_with(|| {
            similar(history.get(nodeset).map(Vec::as_slice).unwrap_or_default(), size, run_duration)
        })
    }
}

/// A request group still waiting for its capacity: open, its request not (yet) SUCCEEDED.
pub fn is_queued(r: &Request) -> bool {
    r.phase.is_open() && r.gce_state != Some(GceRequestState::Succeeded)
}

/// Seconds `r` has waited at `now`.
pub fn waited(r: &Request, now: DateTime<Utc>) -> i64 {
    (now - r.created_at).num_seconds().max(0)
}

/// A wait in words: `45s`, `12m`, `1h05m`, `2d03h`.
pub fn words(secs: i64) -> String {
    match secs.max(0) {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        s => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// The one-line summary: `slurm-dws: waiting 12m for flex capacity in us-east5; similar requests
/// waited median 20m p90 1h05m (n=14)`, with GCE's obtainability score when capacity advice gave one.
pub fn summary(waited: i64, region: &str, similar: Option<Similar>, score: Option<f64>) -> String {
    let mut line = format!("{ADMIN_COMMENT_PREFIX} waiting {} for flex capacity in {region}", words(waited));
    match similar {
        Some(s) => line.push_str(&format!(
            "; similar requests waited median {} p90 {} (n={})",
            words(s.median),
            words(s.p90),
            s.count
        )),
        None => line.push_str("; no similar request on record yet"),
    }
    if let Some(score) = score {
        line.push_str(&format!("; obtainability {score:.2}"));
    }
    line
}

/// The AdminComment line of a job waiting for a reservation's window to open:
/// `slurm-dws: waiting for the window of R, which opens at 2026-12-01T00:00:00Z (in 2h05m)`.
pub fn window_summary(reservation: &str, start: DateTime<Utc>, in_secs: i64) -> String {
    format!(
        "{ADMIN_COMMENT_PREFIX} waiting for the window of {reservation}, which opens at {} (in {})",
        start.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        words(in_secs)
    )
}

/// The AdminComment line of a job whose group waits whole for units of a reservation:
/// `slurm-dws: waiting 3m for reservation R: 2 of 4 free, the group of 4 waits whole (GCE queues
/// it)`. `count` 0: the reservation was not read.
pub fn reserved_summary(waited: i64, reservation: &str, free: u32, count: u32, group: usize) -> String {
    let state =
        if count == 0 { "its counts not read yet".to_string() } else { format!("{free} of {count} free") };
    let then = if count > 0 && free as usize >= group {
        format!("the group of {group} is being made")
    } else {
        format!("the group of {group} waits whole (GCE queues it until enough is free)")
    };
    format!("{ADMIN_COMMENT_PREFIX} waiting {} for reservation {reservation}: {state}, {then}", words(waited))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(size: u32, run_duration: u64, waited: i64) -> RequestWait {
        RequestWait { size, run_duration, waited, succeeded_at: DateTime::<Utc>::default() }
    }

    #[test]
    fn similar_means_same_size_and_run_duration_within_a_factor_of_two() {
        for (size, rd, wsize, wrd, yes) in [
            (8, 3600, 8, 3600, true),
            (8, 3600, 4, 3600, true),
            (8, 3600, 16, 7200, true),
            (8, 3600, 3, 3600, false),
            (8, 3600, 17, 3600, false),
            (8, 3600, 8, 1799, false),
            (8, 3600, 8, 7201, false),
            (1, 600, 2, 600, true),
        ] {
            assert_eq!(is_similar(size, rd, &w(wsize, wrd, 0)), yes, "{size}x{rd} vs {wsize}x{wrd}");
        }
    }

    #[test]
    fn median_and_p90_are_nearest_rank() {
        assert_eq!(similar(&[], 8, 3600), None);
        assert_eq!(similar(&[w(64, 3600, 5)], 8, 3600), None, "nothing similar");
        let one = similar(&[w(8, 3600, 600)], 8, 3600).unwrap();
        assert_eq!((one.count, one.median, one.p90), (1, 600, 600));
        // 10 waits 60..600 s, out of order, plus one of another size.
        let mut h: Vec<RequestWait> = (1..=10).rev().map(|i| w(8, 3600, i * 60)).collect();
        h.push(w(100, 3600, 99_999));
        let s = similar(&h, 8, 3600).unwrap();
        assert_eq!((s.count, s.median, s.p90), (10, 300, 540));
    }

    #[test]
    fn the_line_reads_as_the_spec_says() {
        let s = Similar { count: 14, median: 1200, p90: 3900 };
        assert_eq!(
            summary(720, "us-east5", Some(s), None),
            "slurm-dws: waiting 12m for flex capacity in us-east5; similar requests waited median 20m p90 1h05m (n=14)"
        );
        assert_eq!(
            summary(30, "us-central1", None, Some(0.25)),
            "slurm-dws: waiting 30s for flex capacity in us-central1; no similar request on record yet; obtainability 0.25"
        );
        assert_eq!((words(59), words(3600), words(90_000)), ("59s".into(), "1h00m".into(), "1d01h".into()));
    }

    #[test]
    fn a_reserved_wait_names_the_reservation_and_what_is_free() {
        assert_eq!(
            reserved_summary(200, "projects/p/zones/z/reservations/r", 2, 4, 4),
            "slurm-dws: waiting 3m for reservation projects/p/zones/z/reservations/r: 2 of 4 free, the group of 4 \
             waits whole (GCE queues it until enough is free)"
        );
        assert!(reserved_summary(5, "r", 0, 0, 2)
            .contains("r: its counts not read yet, the group of 2 waits whole"));
        assert!(reserved_summary(5, "r", 2, 2, 1).ends_with("r: 2 of 2 free, the group of 1 is being made"));
    }
}
