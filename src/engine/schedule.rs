//! The schedule of looks: which candidate policy the evaluation looks at next.
//!
//! A policy that did not match may match what a later policy wrote, one that matched
//! and changed nothing may change it, and one that failed under `Ignore` (leaving no
//! trace) may succeed on it. Like the apiserver's reinvocation, such policies get
//! another look, so one review reaches the state a second review would: the object's
//! version counts changes, a candidate's `seen` is the version it last looked at, and
//! a policy that applied (or was audited) is done. A policy kept out by a condition
//! whose inputs nothing wrote (its `blocked`) stays out.
//!
//! A policy whose label selector the object fails at the start is blocked up front, as
//! its first look would leave it (`LabelCheck`), and looked at only if the labels
//! change; a `podControllers` policy reads the template's labels instead. While the
//! labels are as the request has them, a pass walks only the candidates not blocked up
//! front (`Walk`), which with hundreds of policies for other applications is a fraction
//! of the candidates.

use super::MAX_PASSES;
use super::matching::{Blocker, LabelCheck};
use super::versions::EditedObject;
use crate::policy::CompiledPolicy;

/// One look the schedule asks for: the candidate (its place in the schedule), the
/// policy, and the version of the object it was last looked at, if any.
pub(super) struct Look<'c> {
    pub candidate: usize,
    pub policy: &'c CompiledPolicy,
    pub since: Option<usize>,
}

/// The candidates, where the evaluation stands with each, and the passes over them.
pub(super) struct Schedule<'c> {
    standings: Vec<Standing<'c>>,
    walk: Walk,
    selector_changes: SelectorChanges,
    /// Passes begun so far, and whether the current one looked at any policy.
    passes: usize,
    looked: bool,
}

impl<'c> Schedule<'c> {
    /// The candidates in evaluation order, each blocked up front where `gate` says its
    /// labels keep it out (`gated` says whether the gate applies to a policy).
    pub fn new(
        candidates: impl Iterator<Item = &'c CompiledPolicy>,
        mut gate: LabelCheck<'_>,
        gated: impl Fn(&CompiledPolicy) -> bool,
        version: usize,
    ) -> Schedule<'c> {
        // Sized once: a large set has hundreds of candidates for a pod.
        let mut standings: Vec<Standing<'c>> =
            Vec::with_capacity(candidates.size_hint().1.unwrap_or_default());
        standings.extend(candidates.map(|policy| {
            let blocked = if gated(policy) {
                gate.blocks(policy)
            } else {
                None
            };
            Standing {
                policy,
                seen: blocked.map(|_| version),
                blocked,
                done: false,
            }
        }));
        let walk = Walk::new(&standings);
        Schedule {
            standings,
            walk,
            selector_changes: SelectorChanges::default(),
            passes: 0,
            looked: false,
        }
    }

    /// The policies blocked up front by their labels, in order.
    pub fn blocked_up_front(&self) -> impl Iterator<Item = &'c CompiledPolicy> + '_ {
        self.standings
            .iter()
            .filter(|standing| standing.blocked.is_some())
            .map(|standing| standing.policy)
    }

    /// The policy of candidate `candidate`.
    pub fn policy(&self, candidate: usize) -> Option<&'c CompiledPolicy> {
        self.standings
            .get(candidate)
            .map(|standing| standing.policy)
    }

    /// The next look to take with the object at `version`, or `None` when a pass looked
    /// at nothing or the last pass is over.
    pub fn next(&mut self, version: usize, edited: &EditedObject<'_, '_>) -> Option<Look<'c>> {
        loop {
            let Some(i) = self.walk.next(self.standings.len()) else {
                self.passes += 1;
                if self.passes >= MAX_PASSES || !self.looked {
                    return None;
                }
                self.looked = false;
                self.walk.restart();
                continue;
            };
            let standing = self.standings.get_mut(i)?;
            if standing.done || standing.seen == Some(version) {
                continue;
            }
            let since = standing.seen.replace(version);
            if let Some(blocker) = standing.blocked
                && let Some(since) = since
                && !self
                    .selector_changes
                    .may_have_changed(blocker, (since, version), edited)
            {
                continue;
            }
            self.looked = true;
            // What kept it out is looked at afresh.
            standing.blocked = None;
            return Some(Look {
                candidate: i,
                policy: standing.policy,
                since,
            });
        }
    }

    /// The request itself is not the policy's: it is never looked at again.
    pub fn not_for_request(&mut self, candidate: usize) {
        if let Some(standing) = self.standings.get_mut(candidate) {
            standing.done = true;
        }
    }

    /// The object does not match the policy because of `blocker`: looked at again only
    /// when what `blocker` reads changes.
    pub fn not_matched(&mut self, candidate: usize, blocker: Blocker<'c>) {
        if let Some(standing) = self.standings.get_mut(candidate) {
            standing.blocked = Some(blocker);
        }
    }

    /// The policy matched: done when it applied or was audited; otherwise (it changed
    /// nothing, or failed under Ignore) looked at again after a later change.
    pub fn matched(&mut self, candidate: usize, done: bool) {
        if let Some(standing) = self.standings.get_mut(candidate) {
            standing.done = done;
        }
    }

    /// Candidate `candidate` changed the labels: from it on, every candidate is walked,
    /// those blocked up front included.
    pub fn labels_changed(&mut self, candidate: usize) {
        self.walk.everything_after(candidate);
    }
}

/// The order a pass walks the candidates in: every candidate, or, while the labels are
/// as the request has them, those not blocked up front by the label gate (which would
/// only be found still blocked). Once the labels change, every candidate from then on.
struct Walk {
    /// The candidates not blocked up front, in order; `None` once every one is walked.
    unblocked: Option<Vec<usize>>,
    /// Where the walk is: an index into `unblocked`, or a candidate once every one is.
    at: usize,
}

impl Walk {
    fn new(standings: &[Standing<'_>]) -> Walk {
        let unblocked = standings
            .iter()
            .enumerate()
            .filter(|(_, standing)| standing.blocked.is_none())
            .map(|(i, _)| i)
            .collect();
        Walk {
            unblocked: Some(unblocked),
            at: 0,
        }
    }

    fn restart(&mut self) {
        self.at = 0;
    }

    /// The next candidate to walk, of `count`.
    fn next(&mut self, count: usize) -> Option<usize> {
        let next = match &self.unblocked {
            Some(unblocked) => *unblocked.get(self.at)?,
            None => self.at,
        };
        self.at += 1;
        (next < count).then_some(next)
    }

    /// From candidate `i` on, every candidate is walked, in this pass and the next.
    fn everything_after(&mut self, i: usize) {
        if self.unblocked.take().is_some() {
            self.at = i + 1;
        }
    }
}

/// Where the evaluation stands with one candidate policy.
#[derive(Clone, Copy)]
struct Standing<'c> {
    policy: &'c CompiledPolicy,
    /// The version of the object it was last looked at (or found still blocked) at: what
    /// kept it out is compared between that version and the object now.
    seen: Option<usize>,
    /// What kept it out then: it stays out while nothing that condition reads changes.
    blocked: Option<Blocker<'c>>,
    /// Applied or audited, or not for the request: never looked at again.
    done: bool,
}

/// Whether the labels or the annotations changed between a version and the object now,
/// asked once per version instead of once per blocked policy: with hundreds of
/// candidates, most are blocked by a selector, and most since the same version.
#[derive(Default)]
struct SelectorChanges {
    /// The version the object is at now.
    now: usize,
    /// Per version since: whether the labels, and the annotations, changed.
    since: Vec<[Option<bool>; 2]>,
}

impl SelectorChanges {
    /// Whether what `blocker` reads changed between the object's `versions` (since, now:
    /// the object as it is).
    #[inline]
    fn may_have_changed(
        &mut self,
        blocker: Blocker<'_>,
        (since, now): (usize, usize),
        edited: &EditedObject<'_, '_>,
    ) -> bool {
        let changed = || blocker.may_have_changed(edited.at(since), edited.subject.view());
        let kind = match blocker {
            Blocker::Labels => 0,
            Blocker::Annotations => 1,
            Blocker::Name
            | Blocker::Field(_)
            | Blocker::MatchCel
            | Blocker::Excluded
            | Blocker::Template => return changed(),
        };
        if self.now != now {
            self.now = now;
            self.since.clear();
        }
        if self.since.len() <= since {
            self.since.resize(since + 1, [None; 2]);
        }
        let Some(slot) = self
            .since
            .get_mut(since)
            .and_then(|kinds| kinds.get_mut(kind))
        else {
            return changed();
        };
        *slot.get_or_insert_with(changed)
    }
}
