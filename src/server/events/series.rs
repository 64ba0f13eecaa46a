//! Aggregation of repeated Events into series, as client-go's events recorder
//! (`k8s.io/client-go/tools/events`) does it. Pure: every decision is a function of what
//! was seen and the time passed in.
//!
//! Two notices are the same Event when their reason and the object they regard are the
//! same (the note is not compared, as in client-go). The first is created; the second
//! starts a series (`series.count: 2`, one patch); further repeats only count, and a
//! series whose count moved is patched at most once per [`REFRESH`] and once more when it
//! ends. A series ends [`TTL`] after its last repeat; a later repeat creates a new Event.

use std::collections::HashMap;

use k8s_openapi::chrono::{DateTime, TimeDelta, Utc};

use super::notice::{Notice, Reason, Regarding, event_name};

/// How long after its last repeat an Event can still be counted (client-go's 6 minutes).
pub const TTL: TimeDelta = TimeDelta::minutes(6);

/// The least time between two patches of one series' count.
pub const REFRESH: TimeDelta = TimeDelta::minutes(1);

/// Which Events are the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub reason: Reason,
    pub regarding: Regarding,
}

/// One write to the Events API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Create the Event `name` for `notice`, at `time`.
    Create {
        key: Key,
        name: String,
        notice: Notice,
        time: DateTime<Utc>,
    },
    /// Patch the series of the Event `name` (in the namespace of `key.regarding`).
    Series {
        key: Key,
        name: String,
        count: i32,
        last_observed: DateTime<Utc>,
    },
}

impl Write {
    pub fn key(&self) -> &Key {
        match self {
            Write::Create { key, .. } | Write::Series { key, .. } => key,
        }
    }
}

#[derive(Debug)]
struct Entry {
    name: String,
    count: i32,
    /// The count the API has.
    written: i32,
    last_observed: DateTime<Utc>,
    last_written: DateTime<Utc>,
}

/// The Events recorded within the last [`TTL`], at most `capacity` of them.
#[derive(Debug)]
pub struct Series {
    entries: HashMap<Key, Entry>,
    capacity: usize,
}

impl Series {
    /// Aggregates at most `capacity` distinct Events at a time; beyond that a new
    /// Event is still created but its repeats are not counted.
    pub fn new(capacity: usize) -> Series {
        Series {
            entries: HashMap::new(),
            capacity,
        }
    }

    /// What to write for `notice`, seen at `now`: a create, the patch that starts a
    /// series, or nothing (the repeat is counted and written by [`Series::due`]).
    pub fn observe(&mut self, notice: Notice, now: DateTime<Utc>) -> Option<Write> {
        let key = Key {
            reason: notice.reason,
            regarding: notice.regarding.clone(),
        };
        if let Some(entry) = self.entries.get_mut(&key)
            && now - entry.last_observed < TTL
        {
            entry.count = entry.count.saturating_add(1);
            entry.last_observed = now;
            if entry.written > 1 {
                return None;
            }
            entry.written = entry.count;
            entry.last_written = now;
            return Some(Write::Series {
                name: entry.name.clone(),
                count: entry.count,
                last_observed: now,
                key,
            });
        }
        let name = event_name(
            &key.regarding,
            now.timestamp_nanos_opt().unwrap_or_default(),
        );
        if self.entries.len() < self.capacity || self.entries.contains_key(&key) {
            self.entries.insert(
                key.clone(),
                Entry {
                    name: name.clone(),
                    count: 1,
                    written: 1,
                    last_observed: now,
                    last_written: now,
                },
            );
        }
        Some(Write::Create {
            key,
            name,
            notice,
            time: now,
        })
    }

    /// The series patches due at `now`: counts that moved since their last write at
    /// least [`REFRESH`] ago, and the final count of a series that ended. Ended series
    /// are forgotten.
    pub fn due(&mut self, now: DateTime<Utc>) -> Vec<Write> {
        let mut writes = Vec::new();
        self.entries.retain(|key, entry| {
            let ended = now - entry.last_observed >= TTL;
            if entry.count > entry.written && (ended || now - entry.last_written >= REFRESH) {
                entry.written = entry.count;
                entry.last_written = now;
                writes.push(Write::Series {
                    key: key.clone(),
                    name: entry.name.clone(),
                    count: entry.count,
                    last_observed: entry.last_observed,
                });
            }
            !ended
        });
        writes
    }

    /// Forgets the Event of a write the API refused, so its next repeat creates it anew
    /// rather than patching an Event that may not exist.
    pub fn forget(&mut self, key: &Key) {
        self.entries.remove(key);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
#[path = "series_tests.rs"]
mod tests;
