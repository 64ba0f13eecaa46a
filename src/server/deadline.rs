//! How long one request to `/mutate` may take.
//!
//! The apiserver says how long it will wait for this webhook: it calls
//! `/mutate?timeout=10s`, the remaining time of its own deadline rounded up to whole
//! seconds. An answer after that is work nobody reads, and the apiserver reports a bare
//! "context deadline exceeded" instead of graft's reason, so graft answers a little
//! before: by [`SHARE_NUM`]/[`SHARE_DEN`] of the apiserver's timeout, but never later
//! than the server-wide `--request-timeout`, which also bounds requests without the
//! parameter (or with one graft cannot read).

use std::time::Duration;

/// The part of the apiserver's timeout graft uses (nine tenths); the rest covers the
/// response's way back and the apiserver's own work.
pub const SHARE_NUM: u32 = 9;
pub const SHARE_DEN: u32 = 10;
/// The most graft leaves unused of the apiserver's timeout.
pub const MAX_MARGIN: Duration = Duration::from_secs(1);

/// The time budget of a request whose URI query is `query`, under the server-wide `limit`.
pub fn budget(query: Option<&str>, limit: Duration) -> Duration {
    match query.and_then(apiserver_timeout) {
        Some(timeout) => within(timeout).min(limit),
        None => limit,
    }
}

/// The share of the apiserver's `timeout` graft uses. A timeout the share of which
/// does not fit a `Duration` is past any server-wide limit anyway.
fn within(timeout: Duration) -> Duration {
    let Some(share) = timeout.checked_mul(SHARE_NUM) else {
        return Duration::MAX;
    };
    let margin = (timeout - share / SHARE_DEN).min(MAX_MARGIN);
    timeout - margin
}

/// The `timeout` parameter of a query string, as the apiserver writes it (a Go duration).
fn apiserver_timeout(query: &str) -> Option<Duration> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == "timeout")
        .and_then(|(_, value)| parse_go_duration(value))
}

/// Parses what Go's `time.Duration.String` writes: `10s`, `1m30s`, `1.5s`, `250ms`.
/// Zero, unreadable or unrepresentable durations are `None`, so the server-wide limit
/// applies.
fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut rest = text;
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_end);
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        let seconds_per_unit = match unit {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        let value: f64 = number.parse().ok()?;
        total = total.checked_add(Duration::try_from_secs_f64(value * seconds_per_unit).ok()?)?;
        rest = after;
    }
    (!total.is_zero()).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_secs(30);

    #[test]
    fn budgets() {
        let check = |query: Option<&str>, expect: Duration| {
            assert_eq!(budget(query, LIMIT), expect, "{query:?}");
        };
        let ms = Duration::from_millis;
        check(None, LIMIT);
        check(Some(""), LIMIT);
        check(Some("timeout=10s"), ms(9_000));
        check(Some("dryRun=All&timeout=5s"), ms(4_500));
        check(Some("timeout=30s"), ms(29_000));
        check(Some("timeout=1m0s"), LIMIT);
        check(Some("timeout=1s"), ms(900));
        check(Some("timeout=100ms"), ms(90));
        check(Some("timeout=1.5s"), ms(1_350));
        check(Some("timeout=soon"), LIMIT);
        check(Some("timeout=0s"), LIMIT);
        check(Some("timeout=-1s"), LIMIT);
        check(Some("timeout="), LIMIT);
        check(Some("timeout=10"), LIMIT);
        // Any client may send any query: durations past what a `Duration` holds, or
        // whose share overflows, are past the limit.
        check(Some("timeout=3000000000000000000s"), LIMIT);
        check(Some("timeout=4000000000000000h4000000000000000h"), LIMIT);
        check(Some("timeout=18446744073709551615s"), LIMIT);
    }

    #[test]
    fn the_server_limit_is_the_ceiling() {
        assert_eq!(
            budget(Some("timeout=10s"), Duration::from_secs(2)),
            Duration::from_secs(2)
        );
    }
}
