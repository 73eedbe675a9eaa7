//! Bounded waits for the real-Slurm tests, whose timeouts say what was awaited and what was seen.

use crate::stack::Stack;
use std::time::{Duration, Instant};

/// Calls `f` every `every` until it returns `Some`, and returns that value. Once `secs` seconds have
/// passed without one, panics with `on_timeout("timed out after {secs}s waiting for {what}")`:
/// `on_timeout` (run only then) adds what the caller knows, such as a seed to rerun with or
/// [`Stack::state_dump`]; `|m| m` adds nothing.
#[track_caller]
pub fn poll<T>(
    what: &str,
    secs: u64,
    every: Duration,
    on_timeout: impl FnOnce(String) -> String,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            panic!("{}", on_timeout(format!("timed out after {secs}s waiting for {what}")));
        }
        std::thread::sleep(every);
    }
}

impl Stack {
    /// [`poll`]s `f` every 200 ms for at most `secs` seconds; a timeout's panic names this stack's
    /// Slurm and prints [`Stack::state_dump`] with every event.
    #[track_caller]
    pub fn wait<T>(&self, what: &str, secs: u64, f: impl FnMut() -> Option<T>) -> T {
        let on_timeout = |m: String| format!("{m} on {}\n{}", self.cluster.slurm(), self.state_dump(None));
        poll(what, secs, Duration::from_millis(200), on_timeout, f)
    }

    /// The stack's state, for a failure message: Slurm's jobs, nodes and the reasons of the nodes it
    /// has down, slurm-dws's nodes and events (the last `events_tail` lines of them when given), the
    /// last 30 lines of the daemon's log and of slurmctld's.
    pub fn state_dump(&self, events_tail: Option<usize>) -> String {
        let events = self.cli(&["events"]);
        let (events_header, events) = match events_tail {
            Some(n) => ("events (tail)", last_lines(&events, n)),
            None => ("events", events),
        };
        format!(
            "--- jobs ---\n{}\n--- nodes ---\n{}\n--- node reasons ---\n{}\n--- slurm-dws nodes ---\n{}\n--- {events_header} ---\n{events}\n--- daemon log ---\n{}\n--- slurmctld ---\n{}",
            self.cluster.scontrol(&["show", "job"]).unwrap_or_default(),
            self.cluster.node_states().map(|m| format!("{m:?}")).unwrap_or_default(),
            self.cluster.node_reasons().unwrap_or_else(|e| e.to_string()),
            self.cli(&["nodes"]),
            last_lines(&self.daemon_log(), 30),
            self.cluster.slurmctld_log_tail(30)
        )
    }
}

/// The last `n` lines of `s`.
fn last_lines(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_returns_the_first_value() {
        let mut polls = 0;
        let v = poll(
            "the third poll",
            5,
            Duration::from_millis(1),
            |m| m,
            || {
                polls += 1;
                (polls == 3).then_some(polls)
            },
        );
        assert_eq!(v, 3);
    }

    #[test]
    #[should_panic(expected = "soak seed 7: timed out after 0s waiting for nothing\nrerun: SOAK_SEED=7")]
    fn a_timeout_panics_with_what_on_timeout_makes_of_the_message() {
        poll(
            "nothing",
            0,
            Duration::from_millis(1),
            |m| format!("soak seed 7: {m}\nrerun: SOAK_SEED=7"),
            || None::<()>,
        );
    }
}
