//! The managed watcher's transitions: how its reports change the
//! workspace's freshness.
//!
//! Spec, "Watcher liveness verification before the fresh claim": a spawned
//! watcher claims nothing until it is verified alive; verified, it records
//! `fresh` and the one-time watcher-start notice; failing before that, it
//! records the honest not-verified state with the failure, a one-time
//! notice, and the lazy drift/sync behaviour resumes — never a `fresh` for
//! it. Spec, "Verified watcher owns freshness": while it runs, session
//! edits open no stale episode. Design §5: a death after verification drops
//! the record to `possibly_stale` at once; the watcher belongs to the
//! session that started it.
//!
//! Catching up with what the observer cannot report. CGC's `cgc watch
//! --sync-on-start` schedules its file observer only after its start-up
//! reconcile returns, so an edit made while it started up may never be
//! applied (the reconcile may have read the file before the edit), and
//! neither may one still being written when it was spawned, nor what a
//! shell command called before its verification changed; an edit that
//! named no path, or a change of an ignore file (read once, at start), is
//! never reported applied either. Such edits wait as *unobserved*. Once
//! the watcher is verified, every observed edit has settled and no shell
//! command is open, the watcher is restarted (`Effect::RestartWatcher`):
//! the new process's start-up reconcile begins after every such edit was
//! written, so its ready line covers them. Edits made during that restart
//! are unobserved again; after [`MAX_WATCHER_RESTARTS`] restarts in a row
//! that did not catch up, the watcher is stopped (`Effect::StopWatcher`)
//! and lazy mode takes over with what waited pending, a one-time notice
//! saying so. Why a restart and not a sync of those files: the watcher
//! holds the embedded database for its whole life, so any sync needs it
//! stopped anyway, and restarting reuses the one path already verified
//! end to end (the ready line after a full reconcile); its cost is one
//! reconcile of the repository (measured in `docs/BENCHMARKS.md`).

use cgc_fresh_proto::{FreshnessStatus, NoticeCondition};

use crate::config::WatchMode;

use super::super::events::{Effect, Input, WatcherDecline};
use super::super::flight::{DrainCause, FlightSlot};
use super::super::messages::{Envelope, ToNotices, ToScheduler};
use super::super::notice_text;
use super::super::pending_paths::PendingPaths;
use super::super::record::WatcherRecord;
use super::super::session::{Lifetime, SessionKey};
use super::super::time::Millis;
use super::super::watcher_slot::{
    state, AwaitingWatcher, RunningWatcher, WatcherSlot, MAX_WATCHER_RESTARTS,
};
use super::super::workspace_path::PathPlacement;
use super::{offer_to_all, DriftObserver, EditTarget};

impl DriftObserver {
    /// Applies one watcher report; returns whether it was taken. A report
    /// naming a session that is not live, a watcher that is not the one
    /// running (another pid, another lifetime), or an attempt the session
    /// may not make, is stale and changes nothing.
    pub(super) fn take_watcher_report(
        &mut self,
        now: Millis,
        report: Input,
        out: &mut Vec<Envelope>,
    ) -> bool {
        match report {
            Input::WatcherStarted { session, mode, pid } => {
                let Some(owner) = self.open_attempt(now, &session) else {
                    return false;
                };
                let watcher = RunningWatcher {
                    owner,
                    mode,
                    pid,
                    restarts: 0,
                    respawned: false,
                };
                self.watcher = WatcherSlot::Verifying(watcher);
                self.awaiting = AwaitingWatcher::default();
                self.restart_covers_since = None;
                if self.edits.has_unsettled() {
                    // An edit still being written may land after the
                    // start-up reconcile read its file: only a later
                    // start-up covers it.
                    self.awaiting.mark_unknown(now);
                }
                self.record.watcher = Some(facts(mode, state::VERIFYING, Some(pid), now));
                true
            }
            Input::WatcherSpawnFailed {
                session,
                mode,
                error,
            } => {
                if self.open_attempt(now, &session).is_none() {
                    return false;
                }
                self.watcher_not_verified(mode, &error, out);
                true
            }
            Input::WatcherVerified { session, pid } => {
                match self.reported_watcher(&session, pid) {
                    Some(watcher) if self.watcher.is_verifying() => {
                        self.catch_up(now);
                        self.watcher_verified(watcher, out);
                        true
                    }
                    Some(watcher) if self.watcher.is_restarting() && watcher.respawned => {
                        self.catch_up(now);
                        self.watcher_caught_up(watcher);
                        true
                    }
                    // Another watcher, or a repeated verification.
                    _ => false,
                }
            }
            Input::WatcherRestarted {
                session,
                previous,
                pid,
            } => {
                let Some(watcher) = self.reported_watcher(&session, previous) else {
                    return false;
                };
                if !self.watcher.is_restarting() || watcher.respawned || previous == pid {
                    return false;
                }
                self.catch_up(now);
                let watcher = RunningWatcher {
                    pid,
                    respawned: true,
                    ..watcher
                };
                self.watcher = WatcherSlot::Restarting(watcher);
                self.record.watcher = Some(facts(watcher.mode, state::RESTARTING, Some(pid), now));
                true
            }
            Input::WatcherFailed {
                session,
                pid,
                error,
            }
            | Input::WatcherDied {
                session,
                pid,
                error,
            } => {
                let Some(watcher) = self.reported_watcher(&session, pid) else {
                    return false;
                };
                self.catch_up(now);
                if self.watcher.is_retiring() {
                    // Stopped as asked; lazy mode already took over.
                    self.watcher_gone();
                    return true;
                }
                let was_verified = self.watcher.is_verified();
                self.watcher = WatcherSlot::Absent;
                self.awaiting = AwaitingWatcher::default();
                self.restart_covers_since = None;
                if was_verified {
                    self.watcher_died(watcher, &error, out);
                } else {
                    self.watcher_not_verified(watcher.mode, &error, out);
                }
                true
            }
            Input::WatcherBusy {
                session,
                mode,
                holder,
            } => {
                if self.open_attempt(now, &session).is_none() {
                    return false;
                }
                self.watcher_skipped_busy(mode, &holder, out);
                true
            }
            Input::WatcherDeclined { session, reason } => {
                if self.open_attempt(now, &session).is_none() {
                    return false;
                }
                self.watcher_declined(&reason, out);
                true
            }
            Input::WatcherStopped { session, pid } => {
                if self.reported_watcher(&session, pid).is_none() {
                    return false;
                }
                self.catch_up(now);
                self.watcher_gone();
                true
            }
            Input::WatcherApplied { session, pid, path } => {
                if self.reported_watcher(&session, pid).is_none() {
                    return false;
                }
                self.catch_up(now);
                self.watcher_applied(&path)
            }
            // Not a watcher report.
            _ => false,
        }
    }

    /// The live session lifetime of `session` if it may make its watcher
    /// attempt now (see [`crate::freshness::Freshness::watcher_attempt_allowed`]).
    pub(crate) fn attempt_opener(&self, session: &SessionKey) -> Option<Lifetime> {
        if !self.sessions.is_current(session) {
            return None;
        }
        let key = session.lifetime;
        let (_, live) = self.sessions.get(key)?;
        (!live.watcher_attempted && self.watcher == WatcherSlot::Absent).then_some(key)
    }

    /// Records `session`'s attempt at `now`, if it may make one.
    fn open_attempt(&mut self, now: Millis, session: &SessionKey) -> Option<Lifetime> {
        let key = self.attempt_opener(session)?;
        self.catch_up(now);
        if let Some((_, live)) = self.sessions.get_mut(key) {
            live.watcher_attempted = true;
        }
        Some(key)
    }

    /// The running watcher, if it is `session`'s live lifetime's and has
    /// process `pid`.
    fn reported_watcher(&self, session: &SessionKey, pid: u32) -> Option<RunningWatcher> {
        if !self.sessions.is_current(session) {
            return None;
        }
        let key = session.lifetime;
        self.watcher
            .running()
            .copied()
            .filter(|watcher| watcher.owner == key && watcher.pid == pid)
    }

    /// The watcher is verified (its start-up reconcile is done and its
    /// observer scheduled): it owns freshness from now on. The stale
    /// episode's lazy pending work is over (the reconcile covered edits
    /// made before it started), a queued sync is dropped, and a running one
    /// drains: it runs to its end (stopping it part-way could leave the
    /// graph between states) and its outcome no longer counts. The record
    /// is `fresh` unless an edit made while it started up has not been
    /// reported applied: the reconcile may have read that file before the
    /// edit, and the observer was not yet scheduled to see it: the
    /// watcher is applying it (`syncing`, no stale episode) until it
    /// reports every such path — by a restart when it cannot see them.
    fn watcher_verified(&mut self, watcher: RunningWatcher, out: &mut Vec<Envelope>) {
        let now = self.now;
        self.watcher = WatcherSlot::Verified(watcher);
        self.record.watcher = Some(facts(watcher.mode, state::VERIFIED, Some(watcher.pid), now));
        // The lazy episode is over either way (its notices are forgotten
        // below): the watcher covers what waits.
        self.record.stale_since = None;
        if self.awaiting.is_empty() {
            self.record.status = FreshnessStatus::Fresh;
        } else {
            self.watcher_applying();
        }
        self.record.last_error = None;
        self.pending = PendingPaths::new();
        out.push(Envelope::Scheduler(ToScheduler::WatcherTookOver));
        if let FlightSlot::Running(flight) = &self.flight {
            self.flight = FlightSlot::Draining(flight.id, DrainCause::Superseded);
        }
        // The stale episode the unconfirmed offers belonged to is over.
        out.push(Envelope::Notices(ToNotices::EpisodeOver));
        let text = notice_text::watcher_started(&self.policy.workspace_root, watcher.pid);
        offer_to_all(NoticeCondition::WatcherStarted, text, out);
    }

    /// The watcher never got verified (it exited or failed first, or could
    /// not be spawned): the honest not-verified state, with the failure
    /// recorded. A sync that is running decides the status itself when it
    /// ends; an automatic sync that waited for the verification may start.
    fn watcher_not_verified(&mut self, mode: WatchMode, error: &str, out: &mut Vec<Envelope>) {
        let now = self.now;
        self.record.watcher = Some(facts(mode, state::NOT_VERIFIED, None, now));
        if !matches!(self.flight, FlightSlot::Running(_)) {
            self.record.status = FreshnessStatus::NotVerified;
        }
        self.record.last_error = Some(format!(
            "the watcher failed before it was verified: {error}"
        ));
        let text = notice_text::watcher_not_verified(&self.policy.workspace_root, error);
        offer_to_all(NoticeCondition::WatcherNotVerified, text, out);
    }

    /// The verified watcher exited: nothing keeps the graph current any
    /// more, and it may have missed changes before it went. The record drops
    /// to `possibly_stale` now, with the whole workspace pending; this opens
    /// a drift episode like a first edit does, so (autoSync) an automatic
    /// sync paid by the watcher's session follows after `batchMs`.
    fn watcher_died(&mut self, watcher: RunningWatcher, error: &str, out: &mut Vec<Envelope>) {
        let now = self.now;
        self.record.watcher = Some(facts(watcher.mode, state::DIED, None, now));
        self.record.status = FreshnessStatus::PossiblyStale;
        self.record.stale_since = Some(now);
        self.record.last_error = Some(format!("the watcher exited: {error}"));
        self.pending.mark_whole_workspace();
        // The scheduler queues the sync and offers the notice, which says
        // whether a sync follows.
        out.push(Envelope::Scheduler(ToScheduler::WatcherDied {
            owner: watcher.owner,
            queue_at: self
                .policy
                .auto_sync
                .then(|| now.plus(self.policy.batch_ms)),
            error: error.to_string(),
        }));
    }

    /// The lock probe turned the watcher away: nothing was spawned, the
    /// state says skipped-as-busy (unless a running sync will decide it),
    /// and lazy mode goes on.
    fn watcher_skipped_busy(&mut self, mode: WatchMode, holder: &str, out: &mut Vec<Envelope>) {
        let now = self.now;
        self.record.watcher = Some(facts(mode, state::SKIPPED_BUSY, None, now));
        if !matches!(self.flight, FlightSlot::Running(_)) {
            self.record.status = FreshnessStatus::SkippedBusy;
        }
        self.record.last_error = Some(format!(
            "the watcher did not start: the graph database is held by {holder}"
        ));
        let text = notice_text::watcher_skipped_busy(&self.policy.workspace_root, holder);
        offer_to_all(NoticeCondition::WatcherSkippedBusy, text, out);
    }

    /// `auto` declined the watcher: the status is unchanged (nothing ran),
    /// the watcher facts and a one-time notice say why.
    fn watcher_declined(&mut self, reason: &WatcherDecline, out: &mut Vec<Envelope>) {
        let now = self.now;
        let workspace = &self.policy.workspace_root;
        let (word, condition, text) = match reason {
            WatcherDecline::Backend(answer) => (
                state::DECLINED_BACKEND,
                NoticeCondition::WatcherDeclinedBackend,
                notice_text::watcher_declined_backend(workspace, answer),
            ),
            WatcherDecline::Unindexed => (
                state::DECLINED_UNINDEXED,
                NoticeCondition::WatcherDeclinedUnindexed,
                notice_text::watcher_declined_unindexed(workspace),
            ),
        };
        self.record.watcher = Some(facts(WatchMode::Auto, word, None, now));
        offer_to_all(condition, text, out);
    }

    /// The watcher was stopped on purpose, or its session ended: its facts
    /// are cleared, with no notice. If it owned freshness, nothing observes
    /// changes for it any more and it may have missed the last ones: the
    /// record is `possibly_stale` from now, the whole workspace pending.
    /// Lazy mode goes on; the next drift or a request syncs.
    pub(super) fn watcher_gone(&mut self) {
        let was_verified = self.watcher.is_verified();
        self.watcher = WatcherSlot::Absent;
        self.awaiting = AwaitingWatcher::default();
        self.restart_covers_since = None;
        self.record.watcher = None;
        if was_verified {
            self.record.status = FreshnessStatus::PossiblyStale;
            self.record.stale_since = Some(self.now);
            self.pending.mark_whole_workspace();
        }
    }
}

impl DriftObserver {
    /// The restarted watcher printed its ready line: its start-up
    /// reconcile read every file after the edits that called for the
    /// restart. `fresh` unless something made during this start-up waits
    /// (that calls for the next restart).
    fn watcher_caught_up(&mut self, watcher: RunningWatcher) {
        let now = self.now;
        let caught_up = !self.awaiting.needs_restart();
        let watcher = RunningWatcher {
            restarts: if caught_up { 0 } else { watcher.restarts },
            respawned: false,
            ..watcher
        };
        self.watcher = WatcherSlot::Verified(watcher);
        self.restart_covers_since = None;
        self.record.watcher = Some(facts(watcher.mode, state::VERIFIED, Some(watcher.pid), now));
        if self.awaiting.is_empty() {
            self.close_watcher_wait();
            self.record.last_error = None;
        }
    }

    /// Restarts the verified watcher when something waits that its
    /// observer cannot report, once nothing is being written any more
    /// (every observed edit settled, no shell command open): a file still
    /// being written could be read by the new reconcile before the write.
    /// Past [`MAX_WATCHER_RESTARTS`] restarts in a row it is stopped
    /// instead. Run after every message the observer took, before it tells the
    /// scheduler its gate.
    pub(super) fn restart_watcher_if_due(&mut self, out: &mut Vec<Envelope>) {
        let WatcherSlot::Verified(watcher) = self.watcher else {
            return;
        };
        if !self.awaiting.needs_restart()
            || self.edits.has_unsettled()
            || !self.probes.is_empty()
            || !self.flight.is_idle()
        {
            // A sync still finishing may hold the embedded database.
            return;
        }
        let Some(session) = self.sessions.key(watcher.owner) else {
            return;
        };
        let now = self.now;
        if watcher.restarts >= MAX_WATCHER_RESTARTS {
            self.retire_watcher(watcher, session, out);
            return;
        }
        let watcher = RunningWatcher {
            restarts: watcher.restarts.saturating_add(1),
            respawned: false,
            ..watcher
        };
        // Everything that waits was written before the new process
        // starts: its start-up reconcile reads it. The wait goes on from
        // the oldest of those edits.
        self.restart_covers_since = [self.restart_covers_since, self.awaiting.oldest()]
            .into_iter()
            .flatten()
            .min()
            .or(Some(now));
        self.awaiting = AwaitingWatcher::default();
        self.watcher = WatcherSlot::Restarting(watcher);
        self.record.watcher = Some(facts(
            watcher.mode,
            state::RESTARTING,
            Some(watcher.pid),
            now,
        ));
        self.watcher_applying();
        out.push(Envelope::Shell(Effect::RestartWatcher {
            session,
            pid: watcher.pid,
        }));
    }

    /// Restarting did not catch up: the watcher is stopped and lazy mode
    /// takes over now. What waited is pending (the whole workspace when an
    /// edit named no path), an automatic sync is queued — it starts once
    /// the watcher has exited — and the person is told once.
    fn retire_watcher(
        &mut self,
        watcher: RunningWatcher,
        session: SessionKey,
        out: &mut Vec<Envelope>,
    ) {
        let now = self.now;
        self.watcher = WatcherSlot::Retiring(watcher);
        self.restart_covers_since = None;
        self.record.watcher = Some(facts(watcher.mode, state::STOPPING, Some(watcher.pid), now));
        let reason = format!(
            "edits kept arriving while it started up (restarted {} times in a row)",
            watcher.restarts
        );
        self.record.last_error = Some(format!("the watcher was stopped: {reason}"));
        let awaiting = std::mem::take(&mut self.awaiting);
        match awaiting.paths() {
            Some(paths) => {
                for path in paths {
                    self.pending.insert(path.clone());
                }
            }
            None => self.pending.mark_whole_workspace(),
        }
        self.record.status = FreshnessStatus::PossiblyStale;
        self.record.stale_since.get_or_insert(now);
        // The scheduler queues the sync (it starts once the watcher has
        // exited: the gate says it is retiring) and offers the notice,
        // which says whether a sync follows.
        out.push(Envelope::Scheduler(ToScheduler::WatcherRetired {
            owner: watcher.owner,
            queue_at: self
                .policy
                .auto_sync
                .then(|| now.plus(self.policy.batch_ms)),
            reason,
        }));
        out.push(Envelope::Shell(Effect::StopWatcher {
            session,
            pid: watcher.pid,
        }));
    }

    /// A shell command called at `called_at` (`None`: not seen) changed
    /// `target`: if the watcher's observer was not yet scheduled when it
    /// was called (the watcher was starting up, or restarting), some of its
    /// writes may never be reported applied; they wait as unobserved.
    pub(super) fn await_if_unseen_by_observer(
        &mut self,
        called_at: Option<Millis>,
        target: &EditTarget,
    ) {
        if !self.watcher.takes_edits() {
            return;
        }
        let verified_since = match self.watcher {
            WatcherSlot::Verified(_) => self.record.watcher.as_ref().and_then(|facts| facts.since),
            _ => None,
        };
        let observed = called_at
            .zip(verified_since)
            .is_some_and(|(called, since)| since <= called);
        if observed {
            return;
        }
        match target {
            EditTarget::Unknown => self.awaiting.mark_unknown(self.now),
            EditTarget::Paths(paths) => {
                for path in paths {
                    self.awaiting.insert(path.clone(), false, self.now);
                }
            }
        }
    }

    /// The watcher applied `path`: it waits no more; once nothing waits
    /// for a verified watcher, the record is `fresh` again. Whether the
    /// record changed.
    fn watcher_applied(&mut self, path: &str) -> bool {
        let PathPlacement::Inside(relative) = self.root.place(path) else {
            return false;
        };
        if !self.awaiting.applied(&relative) {
            return false;
        }
        // Not while restarting: only the new ready line may claim.
        if matches!(self.watcher, WatcherSlot::Verified(_)) && self.awaiting.is_empty() {
            self.close_watcher_wait();
        }
        true
    }

    /// The verified watcher is applying edits (they wait for its word):
    /// `syncing`, with no stale episode — unless one is open already,
    /// because the watcher took longer than `freshness.watcherApplyMs`.
    pub(super) fn watcher_applying(&mut self) {
        if self.record.stale_since.is_none() {
            self.record.status = FreshnessStatus::Syncing;
        }
    }

    /// Nothing waits for the verified watcher any more: `fresh`, and a
    /// stale episode its lag had opened is over.
    fn close_watcher_wait(&mut self) {
        self.record.status = FreshnessStatus::Fresh;
        self.record.stale_since = None;
    }

    /// When the verified watcher's oldest wait began: an edit it has not
    /// applied yet, or one its restart is to cover.
    fn watcher_wait_began(&self) -> Option<Millis> {
        match self.watcher {
            WatcherSlot::Verified(_) => self.awaiting.oldest(),
            WatcherSlot::Restarting(_) => [self.restart_covers_since, self.awaiting.oldest()]
                .into_iter()
                .flatten()
                .min(),
            WatcherSlot::Absent | WatcherSlot::Verifying(_) | WatcherSlot::Retiring(_) => None,
        }
    }

    /// When the verified watcher's wait opens a stale episode if it has
    /// not ended: `freshness.watcherApplyMs` after it began. `None` while
    /// nothing waits or an episode is open already, and while a sync the
    /// watcher superseded still runs (its end is reported by itself, and
    /// the bound is checked then).
    pub(super) fn watcher_lag_deadline(&self) -> Option<Millis> {
        if self.record.stale_since.is_some() || !self.flight.is_idle() {
            return None;
        }
        self.watcher_wait_began()
            .map(|began| began.plus(self.policy.watcher_apply_ms))
    }

    /// Spec, "Verified watcher owns freshness", read with honesty: an edit
    /// the watcher is applying opens no stale episode, but one it has not
    /// applied within `freshness.watcherApplyMs` does — `possibly_stale`
    /// since that edit, with the one-time staleness notice to every live
    /// session. The watcher keeps owning freshness (no lazy sync could take
    /// an embedded database from it); its report that it applied the
    /// edits ends the episode. Run after every message the observer took.
    pub(super) fn open_lag_episode_if_due(&mut self, out: &mut Vec<Envelope>) {
        let Some(due) = self.watcher_lag_deadline() else {
            return;
        };
        if due > self.now {
            return;
        }
        let began = self.watcher_wait_began().unwrap_or(self.now);
        self.record.status = FreshnessStatus::PossiblyStale;
        self.record.stale_since = Some(began);
        let text = notice_text::watcher_lagging(
            &self.policy.workspace_root,
            self.awaiting.len().max(1),
            self.policy.watcher_apply_ms,
        );
        offer_to_all(NoticeCondition::PossiblyStale, text, out);
    }
}

/// The record's watcher facts.
fn facts(mode: WatchMode, word: &str, pid: Option<u32>, now: Millis) -> WatcherRecord {
    WatcherRecord {
        mode: mode.as_str().to_string(),
        state: word.to_string(),
        pid,
        since: Some(now),
    }
}
