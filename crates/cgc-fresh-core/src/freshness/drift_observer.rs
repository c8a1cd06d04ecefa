//! `DriftObserver`: sessions and their lifetimes, edit epochs, pending
//! paths, shell-command probes, the managed watcher's effect, and the
//! [`FreshnessRecord`] — of which it is the only writer.
//!
//! It sees every harness event and watcher report, and tells the
//! [`super::SyncScheduler`] what it needs to decide when a sync starts
//! (drift and its payer, the [`Gate`]), and the [`super::Notices`] what to
//! offer to whom. A `fresh` claim is a compare-and-set on the edit epoch:
//! the scheduler's start names the epoch it decided on, and a success
//! claims `fresh` only if that epoch is still the current one (and no edit
//! was unsettled at the start). The managed watcher's transitions are in
//! the `watcher` submodule.

mod edits;
mod queries;
mod sessions;
mod syncs;
mod watcher;

use syncs::offer_to_all;

use std::cmp::max;

use cgc_fresh_proto::{FreshnessStatus, NoticeCondition, StateFrame, WatcherFacts};

use super::budget::SyncAllowance;
use super::epoch::EditTracker;
use super::events::{Effect, Input, SyncOutcome, TreeChanges};
use super::flight::{DrainCause, Flight, FlightId, FlightSlot};
use super::messages::{
    Audience, Ending, Envelope, Gate, OfferText, ToNotices, ToObserver, ToScheduler,
};
use super::notice_text;
use super::pending_paths::PendingPaths;
use super::policy::FreshnessPolicy;
use super::probe::{ProbeId, ProbeTracker};
use super::record::{FreshnessRecord, PendingSummary};
use super::session::{ConnectionId, Known, Lifetime, OwnerPid, Registration, SessionKey, Sessions};
use super::time::Millis;
use super::watcher_slot::{AwaitingWatcher, WatcherSlot};
use super::workspace_path::{PathPlacement, WorkspaceRoot};

/// What the drift observer of one workspace knows.
#[derive(Debug, Clone)]
pub struct DriftObserver {
    policy: FreshnessPolicy,
    root: WorkspaceRoot,
    record: FreshnessRecord,
    restored: bool,
    sessions: Sessions,
    edits: EditTracker,
    /// Shell commands whose effect is not known yet.
    probes: ProbeTracker,
    /// A sync succeeded covering every edit while a shell command was still
    /// open: `fresh` is claimed when the last probe answers "unchanged",
    /// provided the edit epoch is still this one.
    deferred_claim: Option<u64>,
    pending: PendingPaths,
    /// The running sync's snapshot (what its success may claim), as the
    /// scheduler's messages told it.
    flight: FlightSlot,
    /// The managed watcher, if one runs.
    watcher: WatcherSlot,
    /// Edits observed since the watcher was started that it has not
    /// reported applied: while any waits, `fresh` is not claimed.
    awaiting: AwaitingWatcher,
    /// While the watcher restarts: when the oldest edit its new start-up
    /// reconcile is to cover began to wait (the bound of
    /// `freshness.watcherApplyMs` counts from it).
    restart_covers_since: Option<Millis>,
    now: Millis,
}

/// What a modifying tool call touched inside the workspace.
enum EditTarget {
    /// These workspace-relative paths.
    Paths(Vec<String>),
    /// The call named no path: it may have touched anything.
    Unknown,
}

impl DriftObserver {
    /// An observer for the workspace of `policy`. With a `restored` record
    /// (read back from disk after a restart) the persisted times, error and
    /// edit epoch are kept, but the status is `unknown` — never `fresh` —
    /// until a sync completes; pending work from before the restart is kept
    /// as "whole workspace". A watcher never survives the service, so its
    /// facts are dropped.
    pub fn new(policy: FreshnessPolicy, restored: Option<FreshnessRecord>, now: Millis) -> Self {
        let was_restored = restored.is_some();
        let (record, pending) = match restored {
            None => (FreshnessRecord::unknown(), PendingPaths::new()),
            Some(record) => {
                let pending = if record.pending.is_empty() {
                    PendingPaths::new()
                } else {
                    PendingPaths::whole_workspace()
                };
                let mut record = record.unobserved();
                record.pending = pending.summary();
                (record, pending)
            }
        };
        DriftObserver {
            root: WorkspaceRoot::new(&policy.workspace_root),
            policy,
            record,
            restored: was_restored,
            sessions: Sessions::default(),
            edits: EditTracker::default(),
            probes: ProbeTracker::default(),
            deferred_claim: None,
            pending,
            flight: FlightSlot::Idle,
            watcher: WatcherSlot::Absent,
            awaiting: AwaitingWatcher::default(),
            restart_covers_since: None,
            now,
        }
    }

    /// Applies one message at `now` (never earlier than the latest time
    /// seen). After every harness input and every settled flight it tells
    /// the scheduler the [`Gate`], asking it to start due work when the
    /// message was taken.
    pub fn handle(&mut self, now: Millis, message: ToObserver) -> Vec<Envelope> {
        let now = max(now, self.now);
        let mut out = Vec::new();
        let taken = match message {
            ToObserver::Input(input) => self.take(now, input, &mut out),
            ToObserver::SyncStarted {
                flight,
                from_epoch,
                named,
                manual,
                allowance,
            } => {
                self.start(flight, from_epoch, named, manual, allowance, &mut out);
                return out;
            }
            ToObserver::SyncSpawned { flight, pid } => {
                if let FlightSlot::Running(running) = &mut self.flight {
                    if running.id == flight {
                        running.pid = Some(pid);
                    }
                }
                return out;
            }
            ToObserver::SyncCancelled { flight } => {
                self.cancelled(flight);
                return out;
            }
            ToObserver::SyncSettled {
                flight,
                ending,
                from_epoch,
                payer,
                another_attempt,
            } => self.settle(
                now,
                flight,
                ending,
                from_epoch,
                payer,
                another_attempt,
                &mut out,
            ),
            ToObserver::FlightFreed { flight } => {
                if self.flight.id() != Some(flight) {
                    return out;
                }
                self.catch_up(now);
                self.flight = FlightSlot::Idle;
                true
            }
        };
        if taken {
            self.restart_watcher_if_due(&mut out);
            self.open_lag_episode_if_due(&mut out);
        }
        out.push(Envelope::Scheduler(ToScheduler::Readiness {
            gate: self.gate(),
            recheck: taken,
        }));
        out
    }

    /// What the scheduler needs to know to start a due automatic sync.
    fn gate(&self) -> Gate {
        let settled_by = self
            .edits
            .all_settled_by()
            .into_iter()
            .chain(self.probes.all_settled_by())
            .max();
        Gate {
            epoch: self.record.edit_epoch,
            unsettled: self.edits.has_unsettled() || self.probes.runs_unsettled(self.now),
            settled_by,
            awaiting_answer: self.watcher.is_verifying() || self.probes.is_comparing(),
            watcher_verified: self.watcher.is_verified(),
            watcher_retiring: self.watcher.is_retiring(),
            observer_due_at: [self.watcher_restart_deadline(), self.watcher_lag_deadline()]
                .into_iter()
                .flatten()
                .min(),
        }
    }

    /// When a watcher restart that waits for edits to settle may be due
    /// (`restart_watcher_if_due`); a shell command's result will come by
    /// itself.
    fn watcher_restart_deadline(&self) -> Option<Millis> {
        if !self.watcher.is_verified()
            || self.watcher.is_restarting()
            || !self.awaiting.needs_restart()
            || !self.probes.is_empty()
            || !self.flight.is_idle()
        {
            return None;
        }
        self.edits.all_settled_by()
    }

    // ---- inputs -------------------------------------------------------

    /// Applies `input`; returns whether it was taken (and due work may run).
    fn take(&mut self, now: Millis, input: Input, out: &mut Vec<Envelope>) -> bool {
        match input {
            Input::SessionStarted {
                session,
                instance,
                reason: _,
                connection,
                owner,
            } => self.session_started(now, session, &instance, connection, owner, out),
            Input::OwnerExited { pid } => {
                let owned = self.sessions.owned_by(pid);
                self.end_sessions(now, owned, out)
            }
            Input::SessionEnded { session } => self.end_sessions(now, [session], out),
            Input::ConnectionClosed { connection } => {
                let detached = self.sessions.connection_closed(connection);
                if detached.is_empty() {
                    return false;
                }
                self.catch_up(now);
                for lifetime in detached {
                    if let Some(key) = self.sessions.key(lifetime) {
                        self.close_lifetime(key, true, out);
                    }
                }
                true
            }
            Input::ToolCall { session, tool, .. } if self.policy.is_shell(&tool) => {
                let Some(key) = self.live_or_implicit(&session, out) else {
                    // Its result is compared all the same (`shell_result`).
                    return false;
                };
                self.catch_up(now);
                if let Some(dropped) = self.probes.open(key, &tool, now, self.policy.settle_ms) {
                    out.push(Envelope::Shell(Effect::ProbeWorkspace { probe: dropped }));
                }
                true
            }
            Input::ToolCall {
                session,
                tool,
                paths,
                not_indexed,
            } => {
                if !self.policy.is_modifying(&tool) {
                    return false;
                }
                let Some(key) = self.live_or_implicit(&session, out) else {
                    // The session ended, yet an edit in the workspace is
                    // reported under its name (a harness still writing, or
                    // two harnesses claiming one session) — or a new name
                    // while MAX_LIVE_SESSIONS are live: the file changed
                    // all the same. It cannot revive the session, spend a
                    // budget or raise a notice — but "fresh" must not stand.
                    let Some(target) = self.call_target(&paths, not_indexed) else {
                        return false;
                    };
                    self.catch_up(now);
                    self.observe_orphan_edit(target, out);
                    return true;
                };
                self.catch_up(now);
                match self.call_target(&paths, not_indexed) {
                    Some(target) => self.observe_edit(key, &tool, target, out),
                    None => self
                        .edits
                        .record_call(key, &tool, now, self.policy.settle_ms, None),
                }
                true
            }
            Input::ToolResult {
                session,
                tool,
                ok: _,
            } if self.policy.is_shell(&tool) => self.shell_result(now, &session, &tool, out),
            Input::ProbeAnswered { probe, changes } => {
                self.probe_answered(now, probe, changes, out)
            }
            Input::ToolResult {
                session,
                tool,
                ok: _,
            } => {
                // A failed tool may still have written part of its edit; it
                // counted at its call and settles now either way.
                let Known::Live(key) = self.sessions.known(&session) else {
                    return false;
                };
                self.catch_up(now);
                self.edits.record_result(key, &tool);
                true
            }
            Input::Wake => {
                self.catch_up(now);
                true
            }
            Input::SyncRequested { session } => {
                let requester = match session.as_deref().map(|name| self.sessions.known(name)) {
                    None | Some(Known::Unknown) | Some(Known::Detached(_)) => None,
                    Some(Known::Live(key)) => Some(key),
                    Some(Known::Ended) => return false,
                };
                self.catch_up(now);
                if self.watcher.is_verified() {
                    // The verified watcher keeps the graph current: the
                    // request joins it (a sync would find nothing to do, or
                    // our own watcher holding the embedded database).
                    return false;
                }
                if let FlightSlot::Running(flight) = &self.flight {
                    if flight.covers_every_edit(self.record.edit_epoch) {
                        // The running sync already covers every observed
                        // edit: the request joins it instead of queueing a
                        // second run that would find nothing new.
                        return false;
                    }
                }
                out.push(Envelope::Scheduler(ToScheduler::SyncRequested {
                    requester,
                    epoch: self.record.edit_epoch,
                }));
                true
            }
            watcher_report @ (Input::WatcherStarted { .. }
            | Input::WatcherSpawnFailed { .. }
            | Input::WatcherVerified { .. }
            | Input::WatcherFailed { .. }
            | Input::WatcherDied { .. }
            | Input::WatcherBusy { .. }
            | Input::WatcherDeclined { .. }
            | Input::WatcherStopped { .. }
            | Input::WatcherRestarted { .. }
            | Input::WatcherApplied { .. }) => self.take_watcher_report(now, watcher_report, out),
            // The scheduler's (runner reports) and the notices' (deliveries).
            Input::SyncBusy { .. }
            | Input::SyncDeclined { .. }
            | Input::SyncOverBudget { .. }
            | Input::SyncStrategyFellBack { .. }
            | Input::SyncSpawned { .. }
            | Input::SyncFinished { .. }
            | Input::NoticeDelivered { .. } => false,
        }
    }

    /// Moves the observer's clock to `now` and settles edits whose deadline
    /// passed.
    fn catch_up(&mut self, now: Millis) {
        self.now = now;
        self.edits.expire(now);
    }

    // ---- syncs --------------------------------------------------------
}
