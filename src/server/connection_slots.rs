//! Who may hold a connection on the admission listener, so that clients that open
//! connections and never finish them cannot starve the apiserver.
//!
//! A connection passes three gates, each with its own budget:
//!
//! 1. **Per source** ([`ConnectionSlots::admit`]): one source IP holds at most
//!    `max_connections_per_source` connections, handshaking or established; beyond that a
//!    new connection is closed at once (reason `per_source`).
//! 2. **Handshake** ([`Admitted::handshake`]): at most `max_handshakes` TLS handshakes run
//!    at once. When the budget is full, a newcomer sheds the oldest handshake of the
//!    source with the most handshakes in progress (reason `handshake_budget`), so a quiet
//!    client is not shed by a flood from elsewhere. The time a handshake gets is fixed
//!    when it starts ([`handshake_timeout`]): the configured timeout while fewer than half
//!    of the budget are in use, then shrinking linearly to 1 s when the budget is full
//!    (reason `handshake_timeout` when it runs out).
//! 3. **Established** ([`Admitted::establish`]): at most `max_connections` connections
//!    past their handshake; when every slot is taken the new connection is closed (reason
//!    `full`). Established connections are never shed by newcomers: the apiserver's
//!    keep-alive connections stay.
//!
//! Everything a gate needs is under one mutex, held for a few map operations per
//! connection (never across an await).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;

use super::config::Limits;
use super::shed_log::ShedLog;
use crate::metrics::{Metrics, ShedReason};

/// The shortest handshake timeout, when the handshake budget is full: long enough for a
/// client across a data centre, short enough that a flood turns over quickly.
pub const PRESSED_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(1);

/// The budgets of the three gates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotLimits {
    pub per_source: usize,
    pub handshakes: usize,
    pub established: usize,
    pub handshake_timeout: Duration,
}

impl SlotLimits {
    pub fn from_limits(limits: &Limits) -> SlotLimits {
        SlotLimits {
            per_source: limits.max_connections_per_source.max(1),
            handshakes: limits.max_handshakes.max(1),
            established: limits.max_connections.max(1),
            handshake_timeout: limits.tls_handshake_timeout,
        }
    }
}

/// The connection budgets of one listener.
#[derive(Debug)]
pub struct ConnectionSlots {
    limits: SlotLimits,
    inner: Mutex<Inner>,
    metrics: Arc<Metrics>,
    log: ShedLog,
}

#[derive(Debug, Default)]
struct Inner {
    /// Connections held per source; a source with none has no entry.
    sources: HashMap<IpAddr, usize>,
    /// Handshakes in progress by start order; dropping an entry's sender cancels it.
    handshakes: BTreeMap<u64, Handshaking>,
    next_handshake: u64,
    established: usize,
}

#[derive(Debug)]
struct Handshaking {
    source: IpAddr,
    _cancel: oneshot::Sender<()>,
}

impl ConnectionSlots {
    pub fn new(limits: SlotLimits, metrics: Arc<Metrics>) -> Arc<ConnectionSlots> {
        Arc::new(ConnectionSlots {
            limits,
            inner: Mutex::new(Inner::default()),
            metrics,
            log: ShedLog::default(),
        })
    }

    /// Gate 1: a connection from `source`, or `None` (counted as shed) when the source
    /// already holds its share. The connection holds its place until the returned value
    /// is dropped.
    pub fn admit(self: &Arc<Self>, source: IpAddr) -> Option<Admitted> {
        let mut inner = self.lock();
        let held = inner.sources.entry(source).or_insert(0);
        if *held >= self.limits.per_source {
            if *held == 0 {
                inner.sources.remove(&source);
            }
            drop(inner);
            self.shed(ShedReason::PerSource, source);
            return None;
        }
        *held += 1;
        Some(Admitted {
            slots: self.clone(),
            source,
            established: false,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock only means a thread panicked between two counter updates; the
        // counts are still the best there is.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn shed(&self, reason: ShedReason, source: IpAddr) {
        self.metrics.connection_shed(reason);
        self.log.shed(reason, source);
    }

    /// Registers a handshake from `source`, shedding another when the budget is full;
    /// returns its id, the receiver that resolves when it is shed, and its timeout.
    fn start_handshake(&self, source: IpAddr) -> (u64, oneshot::Receiver<()>, Duration) {
        let mut inner = self.lock();
        let shed = if inner.handshakes.len() >= self.limits.handshakes {
            inner.shed_one_handshake()
        } else {
            None
        };
        let timeout = handshake_timeout(
            self.limits.handshake_timeout,
            inner.handshakes.len(),
            self.limits.handshakes,
        );
        let (cancel, cancelled) = oneshot::channel();
        let id = inner.next_handshake;
        inner.next_handshake += 1;
        inner.handshakes.insert(
            id,
            Handshaking {
                source,
                _cancel: cancel,
            },
        );
        self.metrics.handshakes_in_progress(inner.handshakes.len());
        drop(inner);
        if let Some(victim) = shed {
            self.shed(ShedReason::HandshakeBudget, victim);
        }
        (id, cancelled, timeout)
    }

    fn end_handshake(&self, id: u64) {
        let mut inner = self.lock();
        inner.handshakes.remove(&id);
        self.metrics.handshakes_in_progress(inner.handshakes.len());
    }
}

impl Inner {
    /// Cancels the oldest handshake of the source with the most handshakes in progress and
    /// returns that source. Linear in the handshake budget, which is small.
    fn shed_one_handshake(&mut self) -> Option<IpAddr> {
        let mut per_source: HashMap<IpAddr, usize> = HashMap::new();
        for handshake in self.handshakes.values() {
            *per_source.entry(handshake.source).or_insert(0) += 1;
        }
        let most = per_source.values().copied().max()?;
        // Among sources with as many, the one whose handshake is oldest.
        let victim = self
            .handshakes
            .iter()
            .find(|(_, handshake)| per_source.get(&handshake.source) == Some(&most))
            .map(|(&id, _)| id)?;
        // Removing the entry drops its sender: the handshake's task sees it and stops.
        self.handshakes.remove(&victim).map(|shed| shed.source)
    }
}

/// The time a handshake gets when `in_progress` others are running: `configured` below
/// half the budget, then linearly less down to [`PRESSED_HANDSHAKE_TIMEOUT`] (never more
/// than `configured`) when the budget is full.
pub fn handshake_timeout(configured: Duration, in_progress: usize, budget: usize) -> Duration {
    let floor = configured.min(PRESSED_HANDSHAKE_TIMEOUT);
    let half = budget / 2;
    if in_progress < half || budget <= 1 {
        return configured;
    }
    let span = budget - half;
    let used = in_progress.min(budget) - half;
    // Budgets are small: the ratio of two of them is exact enough as an f64.
    #[allow(clippy::cast_precision_loss)]
    let pressure = used as f64 / span as f64;
    configured.saturating_sub((configured.saturating_sub(floor)).mul_f64(pressure))
}

/// A handshake's place in the budget, given back when dropped.
struct Registered<'a> {
    slots: &'a ConnectionSlots,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.slots.end_handshake(self.id);
    }
}

/// A connection that passed gate 1; dropping it gives its places back.
#[derive(Debug)]
pub struct Admitted {
    slots: Arc<ConnectionSlots>,
    source: IpAddr,
    established: bool,
}

impl Admitted {
    /// Gate 2: runs `handshake` within the handshake budget and its timeout; `Err` says
    /// why it was shed (already counted).
    pub async fn handshake<F: Future>(&self, handshake: F) -> Result<F::Output, ShedReason> {
        let (id, cancelled, timeout) = self.slots.start_handshake(self.source);
        // Leaves the budget however this future ends, dropped included.
        let _registered = Registered {
            slots: &self.slots,
            id,
        };
        let outcome = tokio::select! {
            _ = cancelled => Err(ShedReason::HandshakeBudget),
            done = tokio::time::timeout(timeout, handshake) => {
                done.map_err(|_| ShedReason::HandshakeTimeout)
            }
        };
        // A budget shed was counted by the connection that caused it.
        if outcome.as_ref().err() == Some(&ShedReason::HandshakeTimeout) {
            self.slots.shed(ShedReason::HandshakeTimeout, self.source);
        }
        outcome
    }

    /// Gate 3: takes an established slot, or `Err(Full)` (counted) when none is free.
    pub fn establish(&mut self) -> Result<(), ShedReason> {
        if self.established {
            return Ok(());
        }
        let mut inner = self.slots.lock();
        if inner.established >= self.slots.limits.established {
            drop(inner);
            self.slots.shed(ShedReason::Full, self.source);
            return Err(ShedReason::Full);
        }
        inner.established += 1;
        self.established = true;
        Ok(())
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut inner = self.slots.lock();
        if self.established {
            inner.established = inner.established.saturating_sub(1);
        }
        if let Some(held) = inner.sources.get_mut(&self.source) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                inner.sources.remove(&self.source);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(per_source: usize, handshakes: usize, established: usize) -> Arc<ConnectionSlots> {
        ConnectionSlots::new(
            SlotLimits {
                per_source,
                handshakes,
                established,
                handshake_timeout: Duration::from_secs(10),
            },
            Arc::new(Metrics::new()),
        )
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    fn shed_count(slots: &ConnectionSlots, reason: ShedReason) -> bool {
        slots.metrics.encode().contains(&format!(
            "graft_connections_shed_total{{reason=\"{}\"}} 1",
            reason.as_str()
        ))
    }

    #[test]
    fn one_source_holds_at_most_its_share() {
        let slots = slots(2, 8, 8);
        let first = slots.admit(ip(1));
        let second = slots.admit(ip(1));
        assert!(first.is_some() && second.is_some());
        assert!(slots.admit(ip(1)).is_none(), "third from the same source");
        assert!(
            slots.admit(ip(2)).is_some(),
            "another source is not affected"
        );
        drop(first);
        assert!(
            slots.admit(ip(1)).is_some(),
            "a place given back is free again"
        );
        assert!(shed_count(&slots, ShedReason::PerSource));
    }

    #[test]
    fn established_slots_are_never_taken_back() {
        let slots = slots(8, 8, 1);
        let mut kept = slots.admit(ip(1)).expect("admitted");
        assert_eq!(kept.establish(), Ok(()));
        let mut late = slots.admit(ip(2)).expect("admitted");
        assert_eq!(late.establish(), Err(ShedReason::Full));
        drop(kept);
        assert_eq!(late.establish(), Ok(()));
        assert!(shed_count(&slots, ShedReason::Full));
    }

    #[tokio::test]
    async fn a_full_budget_sheds_the_busiest_sources_oldest_handshake() {
        let slots = slots(8, 3, 8);
        let flood: Vec<_> = (0..2)
            .map(|_| slots.admit(ip(1)).expect("admitted"))
            .collect();
        let quiet = slots.admit(ip(2)).expect("admitted");
        let (oldest_flood, _, _) = slots.start_handshake(ip(1));
        let (quiet_id, mut quiet_cancelled, _) = slots.start_handshake(ip(2));
        let (_, _, _) = slots.start_handshake(ip(1));
        // Full: the newcomer sheds the flood's oldest, not the quiet source's.
        let _newcomer = slots.start_handshake(ip(3));
        let inner = slots.lock();
        assert!(!inner.handshakes.contains_key(&oldest_flood));
        assert!(inner.handshakes.contains_key(&quiet_id));
        drop(inner);
        assert!(
            quiet_cancelled
                .try_recv()
                .is_err_and(|error| { error == tokio::sync::oneshot::error::TryRecvError::Empty })
        );
        assert!(shed_count(&slots, ShedReason::HandshakeBudget));
        drop((flood, quiet));
    }

    #[tokio::test]
    async fn a_shed_handshake_stops_at_once() {
        let slots = slots(8, 1, 8);
        let first = slots.admit(ip(1)).expect("admitted");
        let second = slots.admit(ip(1)).expect("admitted");
        let (started, start) = oneshot::channel::<()>();
        let stalled = tokio::spawn(async move {
            first
                .handshake(async move {
                    let _ = started.send(());
                    std::future::pending::<()>().await;
                })
                .await
        });
        let _ = start.await;
        let done = second.handshake(async {}).await;
        assert_eq!(done, Ok(()));
        assert_eq!(stalled.await.ok(), Some(Err(ShedReason::HandshakeBudget)));
    }

    #[tokio::test]
    async fn a_handshake_that_runs_out_of_time_is_counted() {
        let slots = ConnectionSlots::new(
            SlotLimits {
                per_source: 8,
                handshakes: 8,
                established: 8,
                handshake_timeout: Duration::from_millis(20),
            },
            Arc::new(Metrics::new()),
        );
        let admitted = slots.admit(ip(1)).expect("admitted");
        let done = admitted.handshake(std::future::pending::<()>()).await;
        assert_eq!(done, Err(ShedReason::HandshakeTimeout));
        assert!(shed_count(&slots, ShedReason::HandshakeTimeout));
        assert_eq!(slots.lock().handshakes.len(), 0);
    }

    #[test]
    fn the_handshake_timeout_shrinks_from_half_full_to_full() {
        let configured = Duration::from_secs(10);
        assert_eq!(handshake_timeout(configured, 0, 64), configured);
        assert_eq!(handshake_timeout(configured, 31, 64), configured);
        assert_eq!(handshake_timeout(configured, 32, 64), configured);
        assert_eq!(
            handshake_timeout(configured, 48, 64),
            Duration::from_millis(5500)
        );
        assert_eq!(
            handshake_timeout(configured, 64, 64),
            Duration::from_secs(1)
        );
        assert_eq!(
            handshake_timeout(configured, 100, 64),
            Duration::from_secs(1)
        );
        let short = Duration::from_millis(300);
        assert_eq!(
            handshake_timeout(short, 64, 64),
            short,
            "never above configured"
        );
    }
}
