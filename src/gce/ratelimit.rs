//! Client-side rate limit: one token bucket shared by every call of a `Client`.
//!
//! GCE's API rate limits are per project per minute; slurm-dws stays under its configured
//! share instead of discovering the limit through 403 `rateLimitExceeded`. The bucket holds
//! ten seconds' worth of calls, so a burst (one pass creating several MIGs) goes out at once
//! while the per-minute rate holds. Waiters reserve their token before sleeping, so callers
//! are served in arrival order and nobody starves.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Seconds of calls the bucket can hold (the burst size).
const BURST_SECONDS: f64 = 10.0;

/// The bucket's arithmetic, separate from the clock and from sleeping.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    /// Tokens per second.
    rate: f64,
    capacity: f64,
    /// May go negative: each waiter reserves a token it will own after its wait.
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket for `calls_per_minute` (> 0).
    pub fn new(calls_per_minute: u32, now: Instant) -> Self {
        let rate = f64::from(calls_per_minute.max(1)) / 60.0;
        let capacity = (rate * BURST_SECONDS).max(1.0);
        Self { rate, capacity, tokens: capacity, last: now }
    }

    /// Takes one token at `now` and returns how long the caller must wait before using it.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.rate).min(self.capacity);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate)
        }
    }
}

/// The shared limiter: `None` inside means unlimited (`calls_per_minute = 0`).
#[derive(Debug)]
pub struct RateLimiter {
    bucket: Option<Mutex<TokenBucket>>,
}

impl RateLimiter {
    /// `calls_per_minute = 0` disables the limit.
    pub fn new(calls_per_minute: u32) -> Self {
        Self {
            bucket: (calls_per_minute > 0)
                .then(|| Mutex::new(TokenBucket::new(calls_per_minute, Instant::now()))),
        }
    }

    /// Waits until the caller may send one request.
    pub async fn acquire(&self) {
        let Some(bucket) = &self.bucket else { return };
        let wait = bucket.lock().unwrap_or_else(|p| p.into_inner()).reserve(Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_steady_rate() {
        let t0 = Instant::now();
        // 60/min = 1/s, burst of 10.
        let mut b = TokenBucket::new(60, t0);
        for _ in 0..10 {
            assert_eq!(b.reserve(t0), Duration::ZERO);
        }
        // The 11th waits one second, the 12th two: reservations queue up.
        assert_eq!(b.reserve(t0), Duration::from_secs(1));
        assert_eq!(b.reserve(t0), Duration::from_secs(2));
        // After 10 s the debt (2) is repaid and 8 tokens are back.
        let t1 = t0 + Duration::from_secs(10);
        for _ in 0..8 {
            assert_eq!(b.reserve(t1), Duration::ZERO);
        }
        assert!(b.reserve(t1) > Duration::ZERO);
    }

    #[test]
    fn tiny_rates_still_allow_one_call() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(1, t0);
        assert_eq!(b.reserve(t0), Duration::ZERO);
        assert_eq!(b.reserve(t0), Duration::from_secs(60));
    }

    #[test]
    fn refill_is_capped_at_capacity() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(600, t0); // 10/s, burst 100
        let later = t0 + Duration::from_secs(3600);
        for _ in 0..100 {
            assert_eq!(b.reserve(later), Duration::ZERO);
        }
        assert!(b.reserve(later) > Duration::ZERO);
    }

    /// The limiter sleeps on tokio's clock, so paused time shows its pacing exactly, without waiting.
    #[tokio::test(start_paused = true)]
    async fn limiter_paces_calls_on_the_clock() {
        let limiter = RateLimiter::new(600); // 10/s, burst 100
        let start = Instant::now();
        for _ in 0..100 {
            limiter.acquire().await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "the burst goes out at once");
        for _ in 0..5 {
            limiter.acquire().await;
        }
        // Then 5 more at 10/s (the clock's resolution is a millisecond).
        let took = start.elapsed();
        assert!(took.abs_diff(Duration::from_millis(500)) <= Duration::from_millis(5), "took {took:?}");
        let unlimited = RateLimiter::new(0);
        let t = Instant::now();
        for _ in 0..10_000 {
            unlimited.acquire().await;
        }
        assert_eq!(t.elapsed(), Duration::ZERO);
    }
}
