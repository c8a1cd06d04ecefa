//! Shell commands whose effect on the workspace is not known yet.
//!
//! A shell tool (`freshness.shellTools`, e.g. `bash`) may change any file,
//! or none. Its call opens a *probe*; its result asks the shell to compare
//! the tree with the manifest of the last successful sync
//! ([`super::Effect::ProbeWorkspace`]); the answer
//! ([`super::Input::ProbeAnswered`]) closes the probe and, when something
//! changed, is an observed edit of those paths — settled at once, since a
//! command's writes are complete when its result arrives.
//!
//! A probe is open from the call until the answer. While any probe is open
//! no sync claims `fresh` (a success waits for the last answer: the claim is
//! deferred, see `settle_succeeded`), and a due automatic sync waits while a
//! command runs within `settleMs` of its call or a comparison is under way,
//! as it waits for an edit being written. A command that outlives `settleMs`
//! no longer holds back a sync, but still holds back its claim.
//!
//! Results are matched to calls first-in first-out per (session, tool). A
//! result with no open call (a session that ended, a harness that sends no
//! call) still asks for a comparison: the command ran. At most
//! [`MAX_RUNNING_PROBES`] calls wait per session and tool; the oldest one
//! past that is compared at once. When a session ends, its running commands
//! are compared at once too — nothing will report them later.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::session::Lifetime;
use super::time::Millis;

/// The most shell calls waiting for their results per (session, tool).
pub const MAX_RUNNING_PROBES: usize = 64;

/// Identifies one probe; answers naming any other id are stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProbeId(pub u64);

impl ProbeId {
    /// The number behind the id.
    pub const fn get(self) -> u64 {
        self.0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProbeState {
    /// The command runs; `settles_by` = call + `settleMs`.
    Running { settles_by: Millis },
    /// The shell compares the tree with the manifest.
    Comparing,
}

/// An open probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Probe {
    /// The lifetime whose command it is; `None` for a result under a name
    /// that was not live.
    pub(crate) session: Option<Lifetime>,
    pub(crate) tool: String,
    /// When the command was called; `None` for a result with no call seen.
    pub(crate) called_at: Option<Millis>,
    state: ProbeState,
}

/// Every open probe.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProbeTracker {
    next: u64,
    probes: BTreeMap<ProbeId, Probe>,
    /// Running probes by session and tool, oldest call first.
    running: BTreeMap<Lifetime, BTreeMap<String, VecDeque<ProbeId>>>,
    /// Running probes by settle deadline.
    deadlines: BTreeSet<(Millis, ProbeId)>,
    /// How many probes are comparing.
    comparing: usize,
}

impl ProbeTracker {
    fn fresh_id(&mut self) -> ProbeId {
        self.next = self.next.saturating_add(1);
        ProbeId(self.next)
    }

    /// A shell call of `tool` by `session` at `now`. Returns a probe that
    /// must be compared now: the oldest waiting call, dropped from a full
    /// queue.
    pub(crate) fn open(
        &mut self,
        session: Lifetime,
        tool: &str,
        now: Millis,
        settle_ms: u64,
    ) -> Option<ProbeId> {
        let id = self.fresh_id();
        let settles_by = now.plus(settle_ms);
        self.probes.insert(
            id,
            Probe {
                session: Some(session),
                tool: tool.to_string(),
                called_at: Some(now),
                state: ProbeState::Running { settles_by },
            },
        );
        self.deadlines.insert((settles_by, id));
        let queue = self
            .running
            .entry(session)
            .or_default()
            .entry(tool.to_string())
            .or_default();
        queue.push_back(id);
        let dropped = if queue.len() > MAX_RUNNING_PROBES {
            queue.pop_front()
        } else {
            None
        };
        dropped.inspect(|&dropped| self.start_comparing(dropped))
    }

    /// The result of `session`'s oldest running call of `tool`: its probe
    /// is compared now. With no such call, a new probe is opened for it.
    pub(crate) fn result(&mut self, session: Lifetime, tool: &str) -> ProbeId {
        let oldest = self.running.get_mut(&session).and_then(|calls| {
            let queue = calls.get_mut(tool)?;
            let oldest = queue.pop_front();
            if queue.is_empty() {
                calls.remove(tool);
            }
            oldest
        });
        if self.running.get(&session).is_some_and(BTreeMap::is_empty) {
            self.running.remove(&session);
        }
        match oldest {
            Some(id) => {
                self.start_comparing(id);
                id
            }
            None => self.comparing_probe(Some(session), tool),
        }
    }

    /// A result of `tool` under a name that is not live: compared now.
    pub(crate) fn orphan_result(&mut self, tool: &str) -> ProbeId {
        self.comparing_probe(None, tool)
    }

    fn comparing_probe(&mut self, session: Option<Lifetime>, tool: &str) -> ProbeId {
        let id = self.fresh_id();
        self.probes.insert(
            id,
            Probe {
                session,
                tool: tool.to_string(),
                called_at: None,
                state: ProbeState::Comparing,
            },
        );
        self.comparing += 1;
        id
    }

    fn start_comparing(&mut self, id: ProbeId) {
        if let Some(probe) = self.probes.get_mut(&id) {
            if let ProbeState::Running { settles_by } = probe.state {
                self.deadlines.remove(&(settles_by, id));
                probe.state = ProbeState::Comparing;
                self.comparing += 1;
            }
        }
    }

    /// `session` ended: its running commands are compared now. Returns
    /// their probes.
    pub(crate) fn end_session(&mut self, session: Lifetime) -> Vec<ProbeId> {
        let Some(calls) = self.running.remove(&session) else {
            return Vec::new();
        };
        let ids: Vec<ProbeId> = calls.into_values().flatten().collect();
        for &id in &ids {
            self.start_comparing(id);
        }
        ids
    }

    /// The answer about probe `id` arrived: the probe closes. `None` when
    /// `id` is not open (stale), or is still running (an answer must follow
    /// a comparison the machine asked for).
    pub(crate) fn answer(&mut self, id: ProbeId) -> Option<Probe> {
        if self.probes.get(&id)?.state != ProbeState::Comparing {
            return None;
        }
        self.comparing = self.comparing.saturating_sub(1);
        self.probes.remove(&id)
    }

    /// Whether no probe is open.
    pub(crate) fn is_empty(&self) -> bool {
        self.probes.is_empty()
    }

    /// Whether a comparison is under way (its answer will come).
    pub(crate) fn is_comparing(&self) -> bool {
        self.comparing > 0
    }

    /// Whether a command runs within its settle window at `now`.
    pub(crate) fn runs_unsettled(&self, now: Millis) -> bool {
        self.deadlines
            .last()
            .is_some_and(|(deadline, _)| *deadline > now)
    }

    /// When the last running command's settle window ends.
    pub(crate) fn all_settled_by(&self) -> Option<Millis> {
        self.deadlines.last().map(|(deadline, _)| *deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::freshness::session::Sessions;

    fn lifetimes() -> (Lifetime, Lifetime) {
        let mut sessions = Sessions::default();
        (
            sessions.live_or_implicit("a").unwrap(),
            sessions.live_or_implicit("b").unwrap(),
        )
    }

    #[test]
    fn results_match_calls_first_in_first_out() {
        let (a, b) = lifetimes();
        let mut probes = ProbeTracker::default();
        assert_eq!(probes.open(a, "bash", Millis(0), 1_000), None);
        assert_eq!(probes.open(a, "bash", Millis(5), 1_000), None);
        assert_eq!(probes.open(b, "bash", Millis(6), 1_000), None);
        assert!(probes.runs_unsettled(Millis(999)));
        assert_eq!(probes.all_settled_by(), Some(Millis(1_006)));
        let first = probes.result(a, "bash");
        assert_eq!(first, ProbeId(1));
        assert!(probes.is_comparing());
        assert!(probes.answer(ProbeId(2)).is_none(), "still running");
        assert!(probes.answer(first).is_some());
        assert!(probes.answer(first).is_none(), "answered once");
        assert!(!probes.is_comparing());
        assert!(!probes.is_empty());
        assert_eq!(probes.end_session(a), vec![ProbeId(2)]);
        assert!(probes.answer(ProbeId(2)).is_some());
        let third = probes.result(b, "bash");
        assert!(probes.answer(third).is_some());
        assert!(probes.is_empty());
        assert!(!probes.runs_unsettled(Millis(0)));
    }

    #[test]
    fn a_result_without_a_call_is_compared_all_the_same() {
        let (a, _) = lifetimes();
        let mut probes = ProbeTracker::default();
        let id = probes.result(a, "bash");
        assert!(probes.is_comparing());
        let probe = probes.answer(id).unwrap();
        assert_eq!(probe.session, Some(a));
        let orphan = probes.orphan_result("bash");
        assert_eq!(probes.answer(orphan).unwrap().session, None);
    }

    #[test]
    fn a_full_queue_compares_its_oldest_call() {
        let (a, _) = lifetimes();
        let mut probes = ProbeTracker::default();
        for n in 0..MAX_RUNNING_PROBES as u64 {
            assert_eq!(probes.open(a, "bash", Millis(n), 1_000), None);
        }
        let dropped = probes.open(a, "bash", Millis(100), 1_000);
        assert_eq!(dropped, Some(ProbeId(1)));
        assert!(probes.answer(ProbeId(1)).is_some());
    }

    #[test]
    fn a_command_past_its_settle_window_no_longer_runs_unsettled() {
        let (a, _) = lifetimes();
        let mut probes = ProbeTracker::default();
        probes.open(a, "bash", Millis(0), 1_000);
        assert!(probes.runs_unsettled(Millis(999)));
        assert!(!probes.runs_unsettled(Millis(1_000)));
        assert!(!probes.is_empty(), "still open: its claim waits");
    }
}
