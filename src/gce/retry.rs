//! Backoff for retryable calls: exponential with full jitter, bounded by a deadline.
//!
//! "Full jitter" (delay drawn uniformly from `[0, min(cap, base * 2^attempt)]`) spreads
//! clients that were rate-limited together, so they do not come back together. A server's
//! `Retry-After` wins over our own guess: it knows when it will have room again.

use std::time::Duration;

use rand::Rng;

/// Backoff parameters. The defaults suit GCE's per-minute rate limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Upper bound of the first delay.
    pub initial: Duration,
    /// Upper bound of any one delay.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { initial: Duration::from_millis(500), max: Duration::from_secs(32) }
    }
}

impl Backoff {
    /// The ceiling of the delay before retry number `attempt` (0 = the first retry).
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }

    /// The delay before retry number `attempt`: `Retry-After` when the server gave one (it
    /// may exceed `max`: the server knows best), else full jitter under [`Self::ceiling`].
    /// `unit` is a uniform draw in `[0, 1]`, a parameter so the bounds are testable.
    pub fn delay_with(&self, attempt: u32, retry_after: Option<Duration>, unit: f64) -> Duration {
        if let Some(ra) = retry_after {
            return ra;
        }
        self.ceiling(attempt).mul_f64(unit.clamp(0.0, 1.0))
    }

    /// [`Self::delay_with`] with a random draw.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let unit = rand::thread_rng().gen_range(0.0..=1.0);
        self.delay_with(attempt, retry_after, unit)
    }
}

/// Parses a `Retry-After` header given in seconds. (The HTTP-date form is not used by
/// Google APIs and is ignored, which falls back to our own backoff.)
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceiling_doubles_up_to_max() {
        let b = Backoff { initial: Duration::from_millis(100), max: Duration::from_secs(2) };
        let ceilings: Vec<u128> = (0..8).map(|a| b.ceiling(a).as_millis()).collect();
        assert_eq!(ceilings, [100, 200, 400, 800, 1600, 2000, 2000, 2000]);
        assert_eq!(b.ceiling(u32::MAX), Duration::from_secs(2));
    }

    #[test]
    fn jittered_delay_stays_within_bounds() {
        let b = Backoff::default();
        for attempt in 0..40 {
            for _ in 0..50 {
                let d = b.delay(attempt, None);
                assert!(d <= b.ceiling(attempt), "attempt {attempt}: {d:?}");
            }
        }
        assert_eq!(b.delay_with(3, None, 0.0), Duration::ZERO);
        assert_eq!(b.delay_with(3, None, 1.0), b.ceiling(3));
        assert_eq!(b.delay_with(3, None, 7.0), b.ceiling(3));
    }

    #[test]
    fn jitter_actually_spreads() {
        let b = Backoff::default();
        let draws: std::collections::BTreeSet<Duration> = (0..100).map(|_| b.delay(5, None)).collect();
        assert!(draws.len() > 50, "only {} distinct delays", draws.len());
    }

    #[test]
    fn retry_after_wins() {
        let b = Backoff::default();
        assert_eq!(b.delay(0, Some(Duration::from_secs(90))), Duration::from_secs(90));
        assert_eq!(parse_retry_after(" 7 "), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }
}
