//! The WARN line about shed connections, at most one per [`INTERVAL`]: a flood sheds
//! thousands of connections a second, and a line for each would bury the log (and cost
//! more than the shedding).

use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::metrics::ShedReason;

/// The shortest time between two lines.
pub const INTERVAL: Duration = Duration::from_secs(10);

/// Counts shed connections by reason and writes them out at most once per [`INTERVAL`].
#[derive(Debug, Default)]
pub struct ShedLog {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    last_line: Option<Instant>,
    /// Shed since the last line, indexed like [`ShedReason::ALL`].
    counts: [u64; ShedReason::ALL.len()],
    /// Where the latest shed connection came from: in a flood, most likely the flood.
    latest_source: Option<IpAddr>,
}

impl ShedLog {
    /// Counts one shed connection; writes the line when the last one is old enough (the
    /// first shed is logged at once). Counts left over when shedding stops are written
    /// with the next line.
    pub fn shed(&self, reason: ShedReason, source: IpAddr) {
        let now = Instant::now();
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.counts[reason.index()] += 1;
        state.latest_source = Some(source);
        if state
            .last_line
            .is_some_and(|last| now.duration_since(last) < INTERVAL)
        {
            return;
        }
        state.last_line = Some(now);
        let counts = std::mem::take(&mut state.counts);
        let latest_source = state.latest_source.take().map(|source| source.to_string());
        drop(state);
        let [handshake_budget, handshake_timeout, per_source, full] = counts;
        tracing::warn!(
            handshake_budget,
            handshake_timeout,
            per_source,
            full,
            latest_source,
            "shedding admission connections (counts since the last such line): a client \
             is opening more connections than the limits allow, see \
             graft_connections_shed_total"
        );
    }

    /// The counts not yet written, for tests.
    #[cfg(test)]
    fn pending(&self) -> [u64; ShedReason::ALL.len()] {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_shed_is_written_and_later_ones_wait() {
        let log = ShedLog::default();
        let source = IpAddr::from([127, 0, 0, 1]);
        log.shed(ShedReason::PerSource, source);
        assert_eq!(
            log.pending(),
            [0, 0, 0, 0],
            "the first line empties the counts"
        );
        log.shed(ShedReason::Full, source);
        log.shed(ShedReason::Full, source);
        log.shed(ShedReason::HandshakeBudget, source);
        assert_eq!(
            log.pending(),
            [1, 0, 0, 2],
            "within the interval: counted only"
        );
    }
}
