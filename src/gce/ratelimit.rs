//! Client-side rate limits: token buckets shared by every call of a `Client` — one for reads, one
//! for writes, one for all calls — that slow down by themselves when GCE answers "rate limit".
//!
//! GCE's API rate limits are per project per minute and counted apart for reads (`get`, `list`,
//! `aggregatedList`, `listManagedInstances`, operation `wait`) and writes (every mutation)
//! (docs/gce-facts.md, "Rate limits"). slurm-dws stays under its configured share of each instead of
//! discovering the limit through 403 `rateLimitExceeded`. Each bucket holds ten seconds' worth of
//! calls, so a burst (one pass creating several MIGs) goes out at once while the per-minute rate
//! holds. Waiters reserve their token before sleeping, so callers are served in arrival order and
//! nobody starves.
//!
//! When GCE answers 403 `rateLimitExceeded` or 429 anyway (other tools share the project's quota),
//! the bucket of that kind halves its rate and drops its burst ([`TokenBucket::throttle`]); after a
//! minute (GCE's quota window) without another such answer it doubles back, a minute at a time, up to
//! the configured rate. The daemon then slows down instead of failing step after step.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Seconds of calls the bucket can hold (the burst size).
const BURST_SECONDS: f64 = 10.0;
/// How long a throttled rate holds before it doubles back: GCE's quotas are per minute.
const THROTTLE_WINDOW: Duration = Duration::from_secs(60);
/// The lowest a throttled bucket goes, as a fraction of its configured rate.
const MIN_FACTOR: f64 = 1.0 / 64.0;

/// What a call counts against: GCE counts reads and writes in separate per-minute quotas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallKind {
    Read,
    Write,
}

/// The bucket's arithmetic, separate from the clock and from sleeping.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    /// The configured rate, tokens per second.
    base_rate: f64,
    /// The fraction of `base_rate` in force (1 unless GCE said "rate limit" lately).
    factor: f64,
    /// When the rate was last lowered or raised back.
    changed: Instant,
    /// May go negative: each waiter reserves a token it will own after its wait.
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket for `calls_per_minute` (> 0).
    pub fn new(calls_per_minute: u32, now: Instant) -> Self {
        let base_rate = f64::from(calls_per_minute.max(1)) / 60.0;
        let mut b = Self { base_rate, factor: 1.0, changed: now, tokens: 0.0, last: now };
        b.tokens = b.capacity();
        b
    }

    /// Tokens per second in force.
    pub fn rate(&self) -> f64 {
        self.base_rate * self.factor
    }

    /// The calls per minute in force (the configured rate, or less while throttled).
    pub fn per_minute(&self) -> f64 {
        self.rate() * 60.0
    }

    fn capacity(&self) -> f64 {
        (self.rate() * BURST_SECONDS).max(1.0)
    }

    /// Takes one token at `now` and returns how long the caller must wait before using it.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        self.recover(now);
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.rate()).min(self.capacity());
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate())
        }
    }

    /// GCE answered "rate limit" at `now`: halve the rate (down to [`MIN_FACTOR`] of the configured
    /// one) and give up the burst. Several answers within a second of each other count once: they
    /// are the same burst being refused.
    pub fn throttle(&mut self, now: Instant) {
        let recent =
            self.factor < 1.0 && now.saturating_duration_since(self.changed) < Duration::from_secs(1);
        if !recent {
            self.factor = (self.factor / 2.0).max(MIN_FACTOR);
        }
        self.changed = now;
        self.tokens = self.tokens.min(0.0);
    }

    /// A minute without a "rate limit" answer doubles a throttled rate back, up to the configured one.
    fn recover(&mut self, now: Instant) {
        while self.factor < 1.0 && now.saturating_duration_since(self.changed) >= THROTTLE_WINDOW {
            self.factor = (self.factor * 2.0).min(1.0);
            self.changed += THROTTLE_WINDOW;
        }
    }
}

/// The client's per-minute budgets; 0 = unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Budgets {
    /// All calls together.
    pub total: u32,
    pub reads: u32,
    pub writes: u32,
}

/// The shared limiter: a `None` bucket is unlimited.
#[derive(Debug)]
pub struct RateLimiter {
    total: Option<Mutex<TokenBucket>>,
    reads: Option<Mutex<TokenBucket>>,
    writes: Option<Mutex<TokenBucket>>,
}

fn bucket(per_minute: u32) -> Option<Mutex<TokenBucket>> {
    (per_minute > 0).then(|| Mutex::new(TokenBucket::new(per_minute, Instant::now())))
}

fn lock(b: &Mutex<TokenBucket>) -> std::sync::MutexGuard<'_, TokenBucket> {
    b.lock().unwrap_or_else(|p| p.into_inner())
}

impl RateLimiter {
    /// One bucket per non-zero budget.
    pub fn new(budgets: Budgets) -> Self {
        Self { total: bucket(budgets.total), reads: bucket(budgets.reads), writes: bucket(budgets.writes) }
    }

    fn of_kind(&self, kind: CallKind) -> Option<&Mutex<TokenBucket>> {
        match kind {
            CallKind::Read => self.reads.as_ref(),
            CallKind::Write => self.writes.as_ref(),
        }
    }

    /// Waits until the caller may send one request of `kind` (a token of its kind and one of the
    /// total, the longer wait of the two).
    pub async fn acquire(&self, kind: CallKind) {
        let now = Instant::now();
        let wait = [self.of_kind(kind), self.total.as_ref()]
            .into_iter()
            .flatten()
            .map(|b| lock(b).reserve(now))
            .max()
            .unwrap_or_default();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }

    /// GCE refused a call of `kind` for its rate limit: that kind's bucket slows down (the total's
    /// when the kind has no budget of its own).
    pub fn throttle(&self, kind: CallKind) {
        let now = Instant::now();
        if let Some(b) = self.of_kind(kind).or(self.total.as_ref()) {
            let mut b = lock(b);
            b.throttle(now);
            tracing::warn!(
                kind = ?kind,
                calls_per_minute = b.per_minute().round() as u64,
                "GCE answered rateLimitExceeded: slowing this kind of call down for a while"
            );
        }
    }

    /// The calls per minute in force for `kind` (`None`: unlimited).
    pub fn per_minute(&self, kind: CallKind) -> Option<f64> {
        self.of_kind(kind).or(self.total.as_ref()).map(|b| lock(b).per_minute())
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

    #[test]
    fn a_rate_limit_answer_halves_the_rate_and_a_quiet_minute_doubles_it_back() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(600, t0); // 10/s
        b.throttle(t0);
        assert_eq!(b.per_minute().round(), 300.0);
        // The burst is gone: the next call waits for a token at the halved rate (5/s).
        assert_eq!(b.reserve(t0), Duration::from_millis(200));
        // A second refusal of the same burst counts once; a later one halves again.
        b.throttle(t0 + Duration::from_millis(500));
        assert_eq!(b.per_minute().round(), 300.0);
        let t1 = t0 + Duration::from_secs(2);
        b.throttle(t1);
        assert_eq!(b.per_minute().round(), 150.0);
        // Never below 1/64 of the configured rate.
        for i in 0..20 {
            b.throttle(t1 + Duration::from_secs(2 * (i + 1)));
        }
        assert!((b.per_minute() - 600.0 / 64.0).abs() < 1e-9, "{}", b.per_minute());
        // Quiet minutes double it back, one a minute, up to the configured rate.
        let last = t1 + Duration::from_secs(40);
        b.reserve(last + Duration::from_secs(61));
        assert!((b.per_minute() - 600.0 / 32.0).abs() < 1e-9, "{}", b.per_minute());
        b.reserve(last + Duration::from_secs(3600));
        assert_eq!(b.per_minute().round(), 600.0);
    }

    /// The limiter sleeps on tokio's clock, so paused time shows its pacing exactly, without waiting.
    #[tokio::test(start_paused = true)]
    async fn limiter_paces_calls_on_the_clock() {
        let limiter = RateLimiter::new(Budgets { total: 600, reads: 0, writes: 0 }); // 10/s, burst 100
        let start = Instant::now();
        for _ in 0..100 {
            limiter.acquire(CallKind::Read).await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "the burst goes out at once");
        for _ in 0..5 {
            limiter.acquire(CallKind::Write).await;
        }
        // Then 5 more at 10/s (the clock's resolution is a millisecond).
        let took = start.elapsed();
        assert!(took.abs_diff(Duration::from_millis(500)) <= Duration::from_millis(5), "took {took:?}");
        let unlimited = RateLimiter::new(Budgets::default());
        let t = Instant::now();
        for _ in 0..10_000 {
            unlimited.acquire(CallKind::Read).await;
        }
        assert_eq!(t.elapsed(), Duration::ZERO);
    }

    /// Reads and writes have budgets of their own: a storm of reads does not delay a write.
    #[tokio::test(start_paused = true)]
    async fn reads_and_writes_are_paced_apart() {
        let limiter = RateLimiter::new(Budgets { total: 0, reads: 60, writes: 60 }); // 1/s each, burst 10
        let start = Instant::now();
        for _ in 0..15 {
            limiter.acquire(CallKind::Read).await;
        }
        assert_eq!(start.elapsed(), Duration::from_secs(5), "reads beyond the burst wait");
        let t = Instant::now();
        limiter.acquire(CallKind::Write).await;
        assert_eq!(t.elapsed(), Duration::ZERO, "a write has its own bucket");
        limiter.throttle(CallKind::Write);
        assert_eq!(limiter.per_minute(CallKind::Write).map(f64::round), Some(30.0));
        assert_eq!(limiter.per_minute(CallKind::Read).map(f64::round), Some(60.0));
    }
}
