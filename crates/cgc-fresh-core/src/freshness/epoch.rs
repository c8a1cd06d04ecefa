//! Observed edits and whether they are settled.
//!
//! Design §4, "Edit epochs": every observed file-modifying tool call
//! increments the workspace's edit epoch. An edit is *settled* when its
//! `tool_result` arrives (or, for harnesses that send none,
//! `freshness.settleMs` after the call). A sync may claim `fresh` only if no
//! edit was observed after, or unsettled at, its start.
//!
//! The epoch counter itself lives in the record; this tracker holds what is
//! still in motion: the unsettled edits, and per (session, tool) the calls
//! waiting for their results. Results are matched to calls first-in
//! first-out. Calls of a modifying tool that were *not* edits (every path
//! outside the workspace) are queued too, as placeholders: otherwise their
//! results would settle a real edit that is still being written.
//!
//! Cost: every frame passes through here, so nothing walks all the
//! unsettled edits. They are indexed by deadline (settling by deadline pops
//! from the front) and by observation time; a harness that floods calls
//! without results is bounded by the per-(session, tool) queue cap, and the
//! edits of calls dropped from a full queue are folded into one aggregate
//! that stays unsettled until the latest of their deadlines — memory stays
//! bounded and nothing is settled early.
//!
//! A queued call is forgotten two settle windows after it was made: by then
//! its edit (if any) settled by deadline, and a harness that never sends
//! results must not grow the queues. A result arriving even later would be
//! matched to a younger call — settling it early; that needs a tool that
//! outlives two settle windows and is accepted.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::session::Lifetime;
use super::time::Millis;

/// An edit's identity: the edit epoch its observation produced.
pub(crate) type EditId = u64;

/// The most calls kept waiting per (session, tool); the oldest is dropped
/// past it (its edit still settles by deadline).
const MAX_WAITING_CALLS: usize = 4_096;

#[derive(Debug, Clone)]
struct UnsettledEdit {
    session: Lifetime,
    observed_at: Millis,
    settles_by: Millis,
}

#[derive(Debug, Clone)]
struct WaitingCall {
    forget_at: Millis,
    edit: Option<EditId>,
}

/// Edits of calls dropped from a full queue, kept as one: unsettled from
/// the earliest observation until the latest deadline.
#[derive(Debug, Clone, Copy)]
struct Overflow {
    observed_at: Millis,
    settles_by: Millis,
}

/// The edits still in motion.
#[derive(Debug, Clone, Default)]
pub(crate) struct EditTracker {
    unsettled: BTreeMap<EditId, UnsettledEdit>,
    /// `unsettled`, ordered by deadline.
    by_deadline: BTreeSet<(Millis, EditId)>,
    /// `unsettled`, ordered by observation time.
    by_observed: BTreeSet<(Millis, EditId)>,
    overflow: Option<Overflow>,
    /// Calls waiting for their results, by session, then by tool (nested,
    /// so that a lookup by `&str` needs no allocation).
    waiting: BTreeMap<Lifetime, BTreeMap<String, VecDeque<WaitingCall>>>,
}

impl EditTracker {
    /// A call of modifying `tool` by `session` at `now`; `edit` is the edit
    /// it was observed as, or `None` for a call that touched nothing in the
    /// workspace.
    pub(crate) fn record_call(
        &mut self,
        session: Lifetime,
        tool: &str,
        now: Millis,
        settle_ms: u64,
        edit: Option<EditId>,
    ) {
        if let Some(id) = edit {
            self.insert(
                id,
                UnsettledEdit {
                    session,
                    observed_at: now,
                    settles_by: now.plus(settle_ms),
                },
            );
        }
        let calls = self.waiting.entry(session).or_default();
        let queue = if let Some(queue) = calls.get_mut(tool) {
            queue
        } else {
            calls.entry(tool.to_string()).or_default()
        };
        let dropped = if queue.len() >= MAX_WAITING_CALLS {
            queue.pop_front()
        } else {
            None
        };
        queue.push_back(WaitingCall {
            forget_at: now.plus(settle_ms.saturating_mul(2)),
            edit,
        });
        if let Some(id) = dropped.and_then(|call| call.edit) {
            // No result can settle it any more: fold it into the aggregate.
            if let Some(edit) = self.remove(id) {
                let merged = match self.overflow {
                    None => Overflow {
                        observed_at: edit.observed_at,
                        settles_by: edit.settles_by,
                    },
                    Some(old) => Overflow {
                        observed_at: old.observed_at.min(edit.observed_at),
                        settles_by: old.settles_by.max(edit.settles_by),
                    },
                };
                self.overflow = Some(merged);
            }
        }
    }

    /// An edit no result will ever settle (its session had ended): it joins
    /// the aggregate and settles `settle_ms` after `now`.
    pub(crate) fn record_orphan(&mut self, now: Millis, settle_ms: u64) {
        let edit = Overflow {
            observed_at: now,
            settles_by: now.plus(settle_ms),
        };
        self.overflow = Some(match self.overflow {
            None => edit,
            Some(old) => Overflow {
                observed_at: old.observed_at.min(edit.observed_at),
                settles_by: old.settles_by.max(edit.settles_by),
            },
        });
    }

    /// The result of `session`'s oldest waiting call of `tool`. Returns
    /// whether it settled an edit.
    pub(crate) fn record_result(&mut self, session: Lifetime, tool: &str) -> bool {
        let Some(calls) = self.waiting.get_mut(&session) else {
            return false;
        };
        let Some(queue) = calls.get_mut(tool) else {
            return false;
        };
        let call = queue.pop_front();
        if queue.is_empty() {
            calls.remove(tool);
            if calls.is_empty() {
                self.waiting.remove(&session);
            }
        }
        call.and_then(|call| call.edit)
            .is_some_and(|id| self.remove(id).is_some())
    }

    fn insert(&mut self, id: EditId, edit: UnsettledEdit) {
        self.by_deadline.insert((edit.settles_by, id));
        self.by_observed.insert((edit.observed_at, id));
        if let Some(old) = self.unsettled.insert(id, edit) {
            self.by_deadline.remove(&(old.settles_by, id));
            self.by_observed.remove(&(old.observed_at, id));
        }
    }

    fn remove(&mut self, id: EditId) -> Option<UnsettledEdit> {
        let edit = self.unsettled.remove(&id)?;
        self.by_deadline.remove(&(edit.settles_by, id));
        self.by_observed.remove(&(edit.observed_at, id));
        Some(edit)
    }

    /// Settles every edit whose deadline is at or before `now`, and forgets
    /// calls older than two settle windows.
    pub(crate) fn expire(&mut self, now: Millis) {
        while let Some(&(deadline, id)) = self.by_deadline.first() {
            if deadline > now {
                break;
            }
            self.remove(id);
        }
        if self.overflow.is_some_and(|o| o.settles_by <= now) {
            self.overflow = None;
        }
        self.waiting.retain(|_, calls| {
            calls.retain(|_, queue| {
                while queue.front().is_some_and(|call| call.forget_at <= now) {
                    queue.pop_front();
                }
                !queue.is_empty()
            });
            !calls.is_empty()
        });
    }

    /// The session ended: its tools are no longer writing, so its edits are
    /// settled, and no result of its calls will come.
    pub(crate) fn end_session(&mut self, session: Lifetime) {
        let ended: Vec<EditId> = self
            .unsettled
            .iter()
            .filter(|(_, edit)| edit.session == session)
            .map(|(id, _)| *id)
            .collect();
        for id in ended {
            self.remove(id);
        }
        // The aggregate has no owner; it settles by its deadline.
        self.waiting.remove(&session);
    }

    /// Whether any observed edit may still be being written.
    pub(crate) fn has_unsettled(&self) -> bool {
        !self.unsettled.is_empty() || self.overflow.is_some()
    }

    /// When the oldest unsettled edit was observed.
    pub(crate) fn earliest_unsettled_at(&self) -> Option<Millis> {
        let indexed = self.by_observed.first().map(|(at, _)| *at);
        let folded = self.overflow.map(|o| o.observed_at);
        indexed.into_iter().chain(folded).min()
    }

    /// When every unsettled edit will have settled by deadline, at the
    /// latest.
    pub(crate) fn all_settled_by(&self) -> Option<Millis> {
        let indexed = self.by_deadline.last().map(|(at, _)| *at);
        let folded = self.overflow.map(|o| o.settles_by);
        indexed.into_iter().chain(folded).max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::freshness::session::Sessions;

    fn two_sessions() -> (Lifetime, Lifetime) {
        let mut sessions = Sessions::default();
        (
            sessions.live_or_implicit("a").unwrap(),
            sessions.live_or_implicit("b").unwrap(),
        )
    }

    #[test]
    fn results_settle_calls_first_in_first_out_per_session_and_tool() {
        let (a, b) = two_sessions();
        let mut edits = EditTracker::default();
        edits.record_call(a, "edit", Millis(0), 1_000, Some(1));
        edits.record_call(a, "edit", Millis(1), 1_000, Some(2));
        edits.record_call(b, "edit", Millis(2), 1_000, Some(3));
        assert!(!edits.record_result(a, "write"), "another tool's result");
        assert!(edits.record_result(a, "edit"));
        assert_eq!(edits.earliest_unsettled_at(), Some(Millis(1)));
        assert!(edits.record_result(b, "edit"));
        assert!(edits.record_result(a, "edit"));
        assert!(!edits.has_unsettled());
        assert!(!edits.record_result(a, "edit"), "no call is waiting");
    }

    #[test]
    fn a_result_of_a_call_outside_the_workspace_does_not_settle_an_edit() {
        let (a, _) = two_sessions();
        let mut edits = EditTracker::default();
        edits.record_call(a, "edit", Millis(0), 1_000, None);
        edits.record_call(a, "edit", Millis(1), 1_000, Some(1));
        assert!(!edits.record_result(a, "edit"));
        assert!(edits.has_unsettled());
        assert!(edits.record_result(a, "edit"));
    }

    #[test]
    fn edits_settle_by_deadline_and_old_calls_are_forgotten() {
        let (a, _) = two_sessions();
        let mut edits = EditTracker::default();
        edits.record_call(a, "edit", Millis(100), 1_000, Some(1));
        assert_eq!(edits.all_settled_by(), Some(Millis(1_100)));
        edits.expire(Millis(1_099));
        assert!(edits.has_unsettled());
        edits.expire(Millis(1_100));
        assert!(!edits.has_unsettled());
        assert_eq!(edits.waiting.len(), 1, "the call waits for a late result");
        edits.expire(Millis(2_100));
        assert!(edits.waiting.is_empty());
    }

    #[test]
    fn ending_a_session_settles_its_edits_only() {
        let (a, b) = two_sessions();
        let mut edits = EditTracker::default();
        edits.record_call(a, "edit", Millis(0), 1_000, Some(1));
        edits.record_call(b, "write", Millis(5), 1_000, Some(2));
        edits.end_session(a);
        assert_eq!(edits.earliest_unsettled_at(), Some(Millis(5)));
        assert!(!edits.record_result(a, "edit"));
    }

    #[test]
    fn a_flood_of_calls_without_results_stays_bounded_and_settles_nothing_early() {
        let (a, _) = two_sessions();
        let mut edits = EditTracker::default();
        let calls = (MAX_WAITING_CALLS * 3) as u64;
        for n in 0..calls {
            edits.record_call(a, "edit", Millis(100 + n), 1_000, Some(n + 1));
        }
        assert!(
            edits.unsettled.len() <= MAX_WAITING_CALLS,
            "{}",
            edits.unsettled.len()
        );
        assert_eq!(edits.by_deadline.len(), edits.unsettled.len());
        assert_eq!(edits.by_observed.len(), edits.unsettled.len());
        // The first call's edit still counts as unsettled...
        assert_eq!(edits.earliest_unsettled_at(), Some(Millis(100)));
        // ...until the latest deadline of everything observed.
        let last_deadline = Millis(100 + calls - 1 + 1_000);
        assert_eq!(edits.all_settled_by(), Some(last_deadline));
        edits.expire(Millis(last_deadline.0 - 1));
        assert!(edits.has_unsettled());
        edits.expire(last_deadline);
        assert!(!edits.has_unsettled());
        assert!(edits.by_deadline.is_empty() && edits.by_observed.is_empty());
    }
}
