//! A token bucket: the events task's writes to the API, at most `burst` at once and
//! `per_second` on average. Pure: the caller passes the time.
//!
//! One sequential caller needs no more than this; a crate such as `governor` would bring
//! its clocks and lock-free state for nothing here.

use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct TokenBucket {
    per_second: f64,
    burst: f64,
    tokens: f64,
    updated: Instant,
}

impl TokenBucket {
    /// A full bucket at `now`. `per_second` must be positive (a zero rate would never
    /// write again, so it is raised to one write an hour).
    pub fn new(per_second: f64, burst: u32, now: Instant) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            per_second: per_second.max(1.0 / 3600.0),
            burst,
            tokens: burst,
            updated: now,
        }
    }

    /// Takes a token at `now`, or says how long until one is there.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.burst);
        self.updated = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        Err(Duration::from_secs_f64(
            (1.0 - self.tokens) / self.per_second,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(2.0, 3, start);
        for _ in 0..3 {
            assert_eq!(bucket.take(start), Ok(()));
        }
        let wait = bucket.take(start).expect_err("the burst is spent");
        assert_eq!(wait, Duration::from_millis(500));
        // Half a second brings one token, not more.
        let later = start + Duration::from_millis(500);
        assert_eq!(bucket.take(later), Ok(()));
        assert!(bucket.take(later).is_err());
    }

    #[test]
    fn an_idle_bucket_refills_only_to_its_burst() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(10.0, 2, start);
        let much_later = start + Duration::from_secs(3600);
        assert_eq!(bucket.take(much_later), Ok(()));
        assert_eq!(bucket.take(much_later), Ok(()));
        assert!(bucket.take(much_later).is_err());
    }

    #[test]
    fn a_time_before_the_last_is_no_refill() {
        let start = Instant::now() + Duration::from_secs(1);
        let mut bucket = TokenBucket::new(1.0, 1, start);
        assert_eq!(bucket.take(start), Ok(()));
        assert!(bucket.take(start - Duration::from_secs(1)).is_err());
    }
}
