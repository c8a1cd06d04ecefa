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

mod watcher;

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

    /// The observer's clock: the latest time of a taken observation.
    pub fn now(&self) -> Millis {
        self.now
    }

    /// The workspace's record, as persisted and reported.
    pub fn record(&self) -> &FreshnessRecord {
        &self.record
    }

    /// Sets the record's pending summary: the pending batch plus the one
    /// in flight.
    pub fn refresh_pending(&mut self) {
        self.record.pending = self.pending_summary();
    }

    pub fn policy(&self) -> &FreshnessPolicy {
        &self.policy
    }

    pub fn set_policy(&mut self, policy: FreshnessPolicy) {
        self.root = WorkspaceRoot::new(&policy.workspace_root);
        self.policy = policy;
    }

    pub fn pending_paths(&self) -> &PendingPaths {
        &self.pending
    }

    pub(crate) fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    #[cfg(test)]
    pub(crate) fn watcher(&self) -> &WatcherSlot {
        &self.watcher
    }

    /// The live (attached) lifetime of `session`, if any.
    pub fn current_lifetime(&self, session: &str) -> Option<SessionKey> {
        match self.sessions.known(session) {
            Known::Live(lifetime) => self.sessions.key(lifetime),
            Known::Detached(_) | Known::Ended | Known::Unknown => None,
        }
    }

    /// Whether `session` names a live, attached lifetime (started, not
    /// ended, not detached).
    pub fn is_live(&self, session: &str) -> bool {
        matches!(self.sessions.known(session), Known::Live(_))
    }

    /// The process that owns `session`'s lifetime, if one does (the shell
    /// watches it and reports [`Input::OwnerExited`]).
    pub fn owner(&self, session: &SessionKey) -> Option<OwnerPid> {
        if !self.sessions.is_current(session) {
            return None;
        }
        self.sessions.owner(session.lifetime)
    }

    /// Whether any lifetime is still owned by `pid` (else its watch can go).
    pub fn owns_any(&self, pid: OwnerPid) -> bool {
        !self.sessions.owned_by(pid).is_empty()
    }

    /// The open connections that carry `session`'s lifetime: a notice for
    /// it counts as delivered only when one of them received it.
    pub fn carriers(&self, session: &SessionKey) -> Vec<ConnectionId> {
        if !self.sessions.is_current(session) {
            return Vec::new();
        }
        self.sessions.carriers(session.lifetime).collect()
    }

    /// Whether a `session_start{session}` from `instance` would be taken
    /// (see [`crate::freshness::Freshness::admits_session`]).
    pub fn admits_session(&self, session: &str, instance: &str) -> bool {
        self.sessions.admits(session, instance)
    }

    /// Whether `session` may make its watcher attempt now (see
    /// [`crate::freshness::Freshness::watcher_attempt_allowed`]).
    pub fn watcher_attempt_allowed(&self, session: &SessionKey) -> bool {
        self.attempt_opener(session).is_some()
    }

    /// Whether a verified watcher owns the workspace's freshness.
    pub fn watcher_owns_freshness(&self) -> bool {
        self.watcher.is_verified()
    }

    /// Whether a watcher runs that edits wait for (verifying, verified or
    /// restarting): the shell then compares a shell command's changes with
    /// the tree as it was at the command's call, not with the manifest of
    /// the last sync (the watcher applied what changed since).
    pub fn watcher_takes_edits(&self) -> bool {
        self.watcher.takes_edits()
    }

    /// Whether a shell command's probe is open (running or comparing).
    pub fn shell_commands_open(&self) -> bool {
        !self.probes.is_empty()
    }

    /// The sync occupying the workspace as far as the observer was told
    /// (running, or draining).
    pub fn current_flight(&self) -> Option<FlightId> {
        self.flight.id()
    }

    /// The workspace-relative paths the running flight `id` took (what its
    /// sync must cover), sorted; `None` when they are not known file by file
    /// (the whole-workspace marker) or `id` is not the running flight.
    pub fn flight_paths(&self, id: FlightId) -> Option<Vec<String>> {
        match &self.flight {
            FlightSlot::Running(flight)
                if flight.id == id && !flight.paths.is_whole_workspace() =>
            {
                Some(flight.paths.paths().map(str::to_string).collect())
            }
            _ => None,
        }
    }

    /// The state frame the observer can fill in; `queued`: whether the
    /// scheduler has a sync queued (its `detail` says so). The backend is
    /// not known here; the shell adds it.
    pub fn state_frame(&self, queued: bool) -> StateFrame {
        let record = &self.record;
        StateFrame {
            workspace: self.policy.workspace_root.clone(),
            status: record.status,
            last_synced_at: record.last_synced_at.map(Millis::get),
            stale_since: record.stale_since.map(Millis::get),
            last_error: record.last_error.clone(),
            edit_epoch: record.edit_epoch,
            syncing: matches!(self.flight, FlightSlot::Running(_)),
            watcher: record.watcher.as_ref().map(|watcher| WatcherFacts {
                mode: watcher.mode.clone(),
                state: watcher.state.clone(),
                pid: watcher.pid,
                since: watcher.since.map(Millis::get),
            }),
            backend: None,
            detail: self.detail(queued),
            warnings: Vec::new(),
            progress: None,
        }
    }

    fn detail(&self, queued: bool) -> Option<String> {
        match &self.flight {
            FlightSlot::Running(flight) => Some(match flight.pid {
                Some(pid) => format!("sync {} running (pid {pid})", flight.id.get()),
                None => format!("sync {} starting", flight.id.get()),
            }),
            FlightSlot::Draining(id, DrainCause::Cancelled) => {
                Some(format!("sync {} cancelled, stopping", id.get()))
            }
            FlightSlot::Draining(id, DrainCause::Superseded) => Some(format!(
                "sync {} superseded by the watcher, finishing",
                id.get()
            )),
            FlightSlot::Idle if self.deferred_claim.is_some() => Some(
                "synced; fresh once the changes of a running shell command are compared"
                    .to_string(),
            ),
            FlightSlot::Idle if queued && self.watcher.is_verifying() => {
                Some("a sync waits for the watcher's verification".to_string())
            }
            FlightSlot::Idle if self.watcher.is_retiring() => {
                Some("the watcher is being stopped; lazy mode has taken over".to_string())
            }
            FlightSlot::Idle if queued => Some("a sync is queued".to_string()),
            FlightSlot::Idle if self.watcher.is_restarting() => Some(
                "the watcher is restarting: its start-up reconcile applies edits its observer \
                 could not see"
                    .to_string(),
            ),
            FlightSlot::Idle if self.watcher.is_verified() && self.awaiting.needs_restart() => {
                Some(format!(
                    "the watcher has not yet applied {} edited file(s); it restarts to apply \
                     those its observer could not see once they are written",
                    self.awaiting.len()
                ))
            }
            FlightSlot::Idle if self.watcher.is_verified() && !self.awaiting.is_empty() => {
                Some(format!(
                    "the watcher has not yet applied {} edited file(s)",
                    self.awaiting.len()
                ))
            }
            FlightSlot::Idle if self.restored && self.record.status == FreshnessStatus::Unknown => {
                Some("restored from disk; unknown until a sync completes".to_string())
            }
            FlightSlot::Idle => None,
        }
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

    /// The live lifetime of `name`, starting one without an instance when
    /// the name was never seen (the scheduler and the notices hear of it).
    fn live_or_implicit(&mut self, name: &str, out: &mut Vec<Envelope>) -> Option<Lifetime> {
        let unknown = self.sessions.known(name) == Known::Unknown;
        let key = self.sessions.live_or_implicit(name)?;
        if unknown {
            self.opened(key, out);
        }
        Some(key)
    }

    /// Tells the scheduler and the notices that lifetime `key` began.
    fn opened(&mut self, key: Lifetime, out: &mut Vec<Envelope>) {
        out.push(Envelope::Scheduler(ToScheduler::LifetimeOpened {
            lifetime: key,
        }));
        if let Some(session) = self.sessions.key(key) {
            out.push(Envelope::Notices(ToNotices::LifetimeOpened { session }));
        }
    }

    /// Moves the observer's clock to `now` and settles edits whose deadline
    /// passed.
    fn catch_up(&mut self, now: Millis) {
        self.now = now;
        self.edits.expire(now);
    }

    /// What a modifying call edited: `None` when it named only paths CGC
    /// does not index (`not_indexed`, decided by the shell by CGC's own
    /// rules — the graph holds nothing of them) or outside the workspace.
    fn call_target(&self, paths: &[String], not_indexed: usize) -> Option<EditTarget> {
        if paths.is_empty() && not_indexed > 0 {
            return None;
        }
        self.edit_target(paths)
    }

    /// Where a modifying call's `paths` land: `None` when every one is
    /// outside the workspace. A call with no paths at all may have touched
    /// anything, so it counts (the conservative reading).
    fn edit_target(&self, paths: &[String]) -> Option<EditTarget> {
        if paths.is_empty() {
            return Some(EditTarget::Unknown);
        }
        let inside: Vec<String> = paths
            .iter()
            .filter_map(|path| match self.root.place(path) {
                PathPlacement::Inside(relative) => Some(relative),
                PathPlacement::Outside => None,
            })
            .collect();
        (!inside.is_empty()).then_some(EditTarget::Paths(inside))
    }

    /// Spec, "Conservative drift observation without probing" and "Dirty
    /// after observed edits": an observed edit marks the workspace possibly
    /// stale from its first edit on, offers the one-time staleness notice,
    /// and (autoSync) arms the batching window — without starting anything.
    fn observe_edit(
        &mut self,
        key: Lifetime,
        tool: &str,
        target: EditTarget,
        out: &mut Vec<Envelope>,
    ) {
        let now = self.now;
        self.record.edit_epoch = self.record.edit_epoch.saturating_add(1);
        let id = self.record.edit_epoch;
        self.edits
            .record_call(key, tool, now, self.policy.settle_ms, Some(id));
        self.drift_from(key, tool, target, out);
    }

    /// What an observed edit of live lifetime `key` does, once counted.
    fn drift_from(
        &mut self,
        key: Lifetime,
        tool: &str,
        target: EditTarget,
        out: &mut Vec<Envelope>,
    ) {
        let now = self.now;
        if self.watcher.takes_edits() {
            self.await_watcher(&target);
        }
        if self.watcher.is_verified() {
            // Spec, "Verified watcher owns freshness": the watcher applies
            // this edit when it lands; no stale episode opens and no sync
            // starts, but `fresh` waits until the watcher reports the edit
            // applied. The edit is still counted and tracked until settled,
            // so that the lazy path has the whole picture if the watcher
            // goes away.
            return;
        }
        self.mark_drift(target);
        out.push(Envelope::Notices(ToNotices::Offer {
            audience: Audience::One(key),
            condition: NoticeCondition::PossiblyStale,
            text: OfferText::PossiblyStale {
                tool: tool.to_string(),
                auto_sync: self.policy.auto_sync,
            },
        }));
        out.push(Envelope::Scheduler(ToScheduler::DriftObserved {
            editor: key,
            queue_at: self
                .policy
                .auto_sync
                .then(|| now.plus(self.policy.batch_ms)),
        }));
    }

    /// An edit observed while a watcher runs: it waits for the watcher's
    /// word that it was applied. While the watcher is verified the record
    /// is `syncing` until then — the watcher is applying it: no stale
    /// episode, no notice and no sync (spec, "Verified watcher owns
    /// freshness"); only a wait longer than `freshness.watcherApplyMs`
    /// opens one (`open_lag_episode_if_due`). Before verification the lazy
    /// drift goes on as well; an edit made during CGC's start-up reconcile
    /// (a first start or a restart) may be missed by it (the observer is
    /// scheduled only after the reconcile): it waits as unobserved, which
    /// calls for a restart (`drift_observer/watcher.rs`) unless the watcher
    /// reports that path applied first.
    fn await_watcher(&mut self, target: &EditTarget) {
        let observable = matches!(self.watcher, WatcherSlot::Verified(_));
        let now = self.now;
        match target {
            EditTarget::Unknown => self.awaiting.mark_unknown(now),
            EditTarget::Paths(paths) => {
                for path in paths {
                    self.awaiting.insert(path.clone(), observable, now);
                }
            }
        }
        if self.watcher.is_verified() && !self.awaiting.is_empty() {
            self.watcher_applying();
        }
    }

    /// A shell tool's result: the command's probe is compared now (an
    /// unknown or ended name's too: the command ran). Under a running
    /// watcher too: its observer sees the changes, but only the comparison
    /// says which files must wait for its word that they are applied.
    fn shell_result(
        &mut self,
        now: Millis,
        session: &str,
        tool: &str,
        out: &mut Vec<Envelope>,
    ) -> bool {
        self.catch_up(now);
        let probe = match self.sessions.known(session) {
            Known::Live(key) => self.probes.result(key, tool),
            Known::Detached(_) | Known::Ended | Known::Unknown => self.probes.orphan_result(tool),
        };
        out.push(Envelope::Shell(Effect::ProbeWorkspace { probe }));
        true
    }

    /// The comparison for `probe` answered. Changes are an edit of the
    /// command's session, settled at once (the command ended); for a name
    /// that is not live any more, an orphan edit. Then a deferred claim
    /// may be made.
    fn probe_answered(
        &mut self,
        now: Millis,
        probe: ProbeId,
        changes: TreeChanges,
        out: &mut Vec<Envelope>,
    ) -> bool {
        let Some(answered) = self.probes.answer(probe) else {
            return false;
        };
        self.catch_up(now);
        let target = match changes {
            TreeChanges::Unchanged => None,
            TreeChanges::Paths(paths) if paths.is_empty() => None,
            TreeChanges::Paths(paths) => self.edit_target(&paths),
            TreeChanges::WholeWorkspace => Some(EditTarget::Unknown),
        };
        if let Some(target) = target {
            self.record.edit_epoch = self.record.edit_epoch.saturating_add(1);
            self.await_if_unseen_by_observer(answered.called_at, &target);
            let live = answered
                .session
                .and_then(|lifetime| self.sessions.key(lifetime))
                .filter(|key| self.sessions.is_current(key));
            match live {
                Some(key) => self.drift_from(key.lifetime, &answered.tool, target, out),
                None if self.watcher.is_verified() => self.await_watcher(&target),
                None => {
                    if self.watcher.takes_edits() {
                        self.await_watcher(&target);
                    }
                    self.mark_drift(target);
                    out.push(Envelope::Scheduler(ToScheduler::DriftUnpaid));
                }
            }
        }
        self.claim_deferred(out);
        true
    }

    /// Claims `fresh` for a success that covered every edit but waited for
    /// shell commands: once no probe is open, if no edit was observed since
    /// and nothing is pending. Any edit since drops the claim (that edit's
    /// drift queued its own sync).
    fn claim_deferred(&mut self, out: &mut Vec<Envelope>) {
        let Some(epoch) = self.deferred_claim else {
            return;
        };
        if epoch != self.record.edit_epoch
            || !self.flight.is_idle()
            || !self.pending.is_empty()
            || self.watcher.is_verified()
        {
            self.deferred_claim = None;
            return;
        }
        if !self.probes.is_empty() {
            return;
        }
        self.deferred_claim = None;
        out.push(Envelope::Scheduler(ToScheduler::FreshClaimed));
        self.record.status = FreshnessStatus::Fresh;
        self.record.stale_since = None;
        let text = notice_text::sync_completed(&self.policy.workspace_root);
        offer_to_all(NoticeCondition::SyncCompleted, text, out);
    }

    /// An edit under the name of a session that already ended: counted,
    /// unsettled until `settleMs` (no result can settle it), the record made
    /// possibly stale — and nothing else: no session, no budget, no notice,
    /// no automatic sync now (there is no live session to pay for one; the
    /// next lifetime to start pays for it, or the next live drift or a
    /// person's `sync` covers it).
    fn observe_orphan_edit(&mut self, target: EditTarget, out: &mut Vec<Envelope>) {
        let now = self.now;
        self.record.edit_epoch = self.record.edit_epoch.saturating_add(1);
        self.edits.record_orphan(now, self.policy.settle_ms);
        if self.watcher.takes_edits() {
            self.await_watcher(&target);
        }
        if self.watcher.is_verified() {
            return;
        }
        self.mark_drift(target);
        out.push(Envelope::Scheduler(ToScheduler::DriftUnpaid));
    }

    /// What every observed edit does to the record: its paths join the
    /// pending batch, the episode's `stale_since` is set if open, and the
    /// status drops to possibly stale — unless a sync is running, whose
    /// completion then decides (it may miss this edit).
    fn mark_drift(&mut self, target: EditTarget) {
        let now = self.now;
        match target {
            EditTarget::Unknown => self.pending.mark_whole_workspace(),
            EditTarget::Paths(paths) => {
                for path in paths {
                    self.pending.insert(path);
                }
            }
        }
        self.record.stale_since.get_or_insert(now);
        match &mut self.flight {
            FlightSlot::Running(flight) => flight.note_edit(now),
            FlightSlot::Idle | FlightSlot::Draining(..) => {
                self.record.status = FreshnessStatus::PossiblyStale;
            }
        }
    }

    /// A `session_start`: registers it (making room by ending the oldest
    /// detached lifetime when the table is full), and closes what a
    /// replacement ended.
    fn session_started(
        &mut self,
        now: Millis,
        name: String,
        instance: &str,
        connection: Option<ConnectionId>,
        owner: Option<OwnerPid>,
        out: &mut Vec<Envelope>,
    ) -> bool {
        let mut taken = false;
        if let Some(oldest) = self.sessions.oldest_detached_if_full(&name, instance) {
            self.catch_up(now);
            self.sessions.end(&oldest.name);
            self.close_lifetime(oldest, false, out);
            taken = true;
        }
        match self.sessions.register(&name, instance, connection, owner) {
            Registration::Unchanged | Registration::Refused => taken,
            Registration::Started { started, replaced } => {
                self.catch_up(now);
                self.opened(started, out);
                if let Some(old) = replaced {
                    let old = SessionKey {
                        name: name.clone(),
                        lifetime: old,
                    };
                    self.close_lifetime(old, false, out);
                }
                // Drift no sync covered — a session that ended before its
                // automatic sync started, or work pending in a record
                // restored after a restart — is this lifetime's first
                // drift: it pays for the sync the staleness notice promised
                // (if the scheduler has nothing queued or running).
                if self.policy.auto_sync
                    && self.deferred_claim.is_none()
                    && !self.watcher.is_verified()
                    && matches!(
                        self.record.status,
                        FreshnessStatus::PossiblyStale | FreshnessStatus::Unknown
                    )
                {
                    out.push(Envelope::Scheduler(ToScheduler::InheritDrift {
                        payer: started,
                        due_at: now.plus(self.policy.batch_ms),
                    }));
                }
                out.push(Envelope::Shell(Effect::SessionOpened {
                    session: SessionKey {
                        name,
                        lifetime: started,
                    },
                    reattached: false,
                }));
                if self.policy.auto_sync && !self.watcher.is_verified() {
                    out.push(Envelope::Shell(Effect::WarmWorker));
                }
                true
            }
            Registration::Reattached(lifetime) => {
                self.catch_up(now);
                out.push(Envelope::Scheduler(ToScheduler::LifetimeReattached {
                    lifetime,
                }));
                out.push(Envelope::Notices(ToNotices::LifetimeReattached {
                    lifetime,
                }));
                // Work the detach left undone is picked up again: drift not
                // yet covered queues an automatic sync this lifetime pays.
                if self.policy.auto_sync
                    && self.record.status == FreshnessStatus::PossiblyStale
                    && !self.watcher.is_verified()
                {
                    out.push(Envelope::Scheduler(ToScheduler::DriftObserved {
                        editor: lifetime,
                        queue_at: Some(now.plus(self.policy.batch_ms)),
                    }));
                }
                out.push(Envelope::Shell(Effect::SessionOpened {
                    session: SessionKey { name, lifetime },
                    reattached: true,
                }));
                true
            }
        }
    }

    /// A session lifetime's work stops: it ended (shutdown, replaced by a
    /// new instance, or made room for another) or was detached (`detached`:
    /// every connection that carried it closed). Its edits are settled, its
    /// running shell commands compared, its watcher is gone; the scheduler
    /// drops or cancels the automatic sync it pays for, the notices keep or
    /// drop its ledger. The shell is told to stop the lifetime's children.
    /// Ends the live lifetimes of `names` (a `session_shutdown`, or their
    /// owner process exited); returns whether any was live.
    fn end_sessions(
        &mut self,
        now: Millis,
        names: impl IntoIterator<Item = String>,
        out: &mut Vec<Envelope>,
    ) -> bool {
        let mut ended = false;
        for name in names {
            let Some(lifetime) = self.sessions.end(&name) else {
                continue;
            };
            if !ended {
                // Sessions and edit settling are independent state: the
                // order of this and the `end` above does not matter.
                self.catch_up(now);
                ended = true;
            }
            self.close_lifetime(SessionKey { name, lifetime }, false, out);
        }
        ended
    }

    fn close_lifetime(&mut self, session: SessionKey, detached: bool, out: &mut Vec<Envelope>) {
        self.end_lifetime(session.lifetime, out);
        out.push(Envelope::Scheduler(ToScheduler::LifetimeClosed {
            lifetime: session.lifetime,
            detached,
        }));
        out.push(Envelope::Notices(ToNotices::LifetimeClosed {
            lifetime: session.lifetime,
            detached,
        }));
        out.push(Envelope::Shell(Effect::SessionClosed { session, detached }));
    }

    fn end_lifetime(&mut self, key: Lifetime, out: &mut Vec<Envelope>) {
        self.edits.end_session(key);
        for probe in self.probes.end_session(key) {
            out.push(Envelope::Shell(Effect::ProbeWorkspace { probe }));
        }
        if self
            .watcher
            .running()
            .is_some_and(|watcher| watcher.owner == key)
        {
            self.watcher_gone();
        }
    }

    /// The scheduler cancelled `flight` (its payer's lifetime ended): it
    /// claims nothing; what it took is pending again.
    fn cancelled(&mut self, id: FlightId) {
        if !matches!(&self.flight, FlightSlot::Running(flight) if flight.id == id) {
            return;
        }
        if let FlightSlot::Running(flight) = std::mem::take(&mut self.flight) {
            self.record.status = self.status_without_claim(&flight);
            self.pending.merge(flight.paths);
            self.flight = FlightSlot::Draining(flight.id, DrainCause::Cancelled);
        }
    }

    // ---- syncs --------------------------------------------------------

    /// The scheduler decided sync `id` from `from_epoch`: snapshots the
    /// unsettled edits and the pending batch, and asks the shell to start
    /// it.
    fn start(
        &mut self,
        id: FlightId,
        from_epoch: u64,
        named: Option<Lifetime>,
        manual: bool,
        allowance: SyncAllowance,
        out: &mut Vec<Envelope>,
    ) {
        self.record.sync_generation = id.get();
        self.deferred_claim = None;
        let flight = Flight::start(
            id,
            from_epoch,
            &self.edits,
            self.pending.take(),
            self.record.status,
        );
        self.record.status = FreshnessStatus::Syncing;
        out.push(Envelope::Shell(Effect::StartSync {
            flight: id,
            session: named.and_then(|key| self.sessions.key(key)),
            manual,
            allowance,
        }));
        self.flight = FlightSlot::Running(Box::new(flight));
    }

    /// The scheduler settled sync `id`: what it means for the record.
    #[allow(clippy::too_many_arguments)]
    fn settle(
        &mut self,
        now: Millis,
        id: FlightId,
        ending: Ending,
        from_epoch: u64,
        payer: Option<Lifetime>,
        another_attempt: bool,
        out: &mut Vec<Envelope>,
    ) -> bool {
        match &self.flight {
            FlightSlot::Running(flight) if flight.id == id => {}
            FlightSlot::Draining(draining, _) if *draining == id => {
                // The scheduler settled it before it heard that the flight
                // drains (a watcher took over): it claims nothing.
                self.catch_up(now);
                self.flight = FlightSlot::Idle;
                return true;
            }
            _ => return false,
        }
        self.catch_up(now);
        let FlightSlot::Running(flight) = std::mem::take(&mut self.flight) else {
            return false;
        };
        match ending {
            Ending::Declined(reason) => self.settle_declined(*flight, reason, out),
            Ending::OverBudget(_) => {
                // The scheduler told the payer (the budget notice); the
                // graph was not touched by this class of work.
                self.record.status = self.status_without_claim(&flight);
                self.pending.merge(flight.paths);
            }
            Ending::Outcome(SyncOutcome::Succeeded) => {
                self.settle_succeeded(*flight, from_epoch, payer, out)
            }
            Ending::Outcome(SyncOutcome::NotApplied { detail }) => {
                self.settle_not_applied(*flight, detail, out)
            }
            Ending::Outcome(SyncOutcome::Failed { error }) => {
                self.settle_failed(*flight, error, another_attempt, out)
            }
            Ending::Outcome(SyncOutcome::TimedOut { error }) => {
                self.settle_failed(*flight, format!("timed out: {error}"), another_attempt, out)
            }
            Ending::Outcome(SyncOutcome::Busy { holder }) => self.settle_busy(*flight, holder, out),
            Ending::Outcome(SyncOutcome::Cancelled) => {
                self.record.status = self.status_without_claim(&flight);
                self.pending.merge(flight.paths);
            }
        }
        true
    }

    /// Spec, "Fresh after a completed sync" and "No false freshness": a
    /// success claims `fresh` only when it covers every observed edit — the
    /// epoch it started from is still the current one, and nothing was
    /// unsettled at its start. Otherwise the sync's time is recorded, the
    /// record stays possibly stale from the first uncovered edit, and the
    /// scheduler queues exactly one follow-up.
    fn settle_succeeded(
        &mut self,
        flight: Flight,
        from_epoch: u64,
        payer: Option<Lifetime>,
        out: &mut Vec<Envelope>,
    ) {
        let now = self.now;
        self.record.last_synced_at = Some(now);
        self.record.last_error = None;
        if from_epoch == flight.epoch_at_start() && flight.covers_every_edit(self.record.edit_epoch)
        {
            if !self.probes.is_empty() {
                // A shell command ran during the sync (or still runs): what
                // it changed is known only when its comparison answers. No
                // claim until then; "unchanged" makes it.
                self.deferred_claim = Some(self.record.edit_epoch);
                self.record.status = FreshnessStatus::PossiblyStale;
                self.record.stale_since.get_or_insert(now);
                return;
            }
            self.record.status = FreshnessStatus::Fresh;
            self.record.stale_since = None;
            let text = notice_text::sync_completed(&self.policy.workspace_root);
            offer_to_all(NoticeCondition::SyncCompleted, text, out);
            return;
        }
        self.record.status = FreshnessStatus::PossiblyStale;
        let first_uncovered = flight
            .first_uncovered_at()
            .or(self.record.stale_since)
            .unwrap_or(now);
        self.record.stale_since = Some(first_uncovered);
        if flight.had_unsettled_edits() {
            self.pending.merge(flight.paths);
        }
        out.push(Envelope::Scheduler(ToScheduler::FollowUp {
            payer,
            due_at: max(now, first_uncovered.plus(self.policy.batch_ms)),
        }));
    }

    /// A sync that applied nothing never claims `fresh`. Retrying would
    /// apply nothing again (the scheduler dropped its queue); the next
    /// drift or a request may try again.
    fn settle_not_applied(&mut self, flight: Flight, detail: String, out: &mut Vec<Envelope>) {
        self.record.status = FreshnessStatus::PossiblyStale;
        let text = notice_text::sync_not_applied(&self.policy.workspace_root, &detail);
        self.record.last_error = Some(detail);
        self.pending.merge(flight.paths);
        offer_to_all(NoticeCondition::SyncNotApplied, text, out);
    }

    /// Spec, "Errors are contained": the failure is recorded and surfaced
    /// (the scheduler decided whether another attempt follows). The status
    /// is decided by [`DriftObserver::status_without_claim`].
    fn settle_failed(
        &mut self,
        flight: Flight,
        error: String,
        another_attempt: bool,
        out: &mut Vec<Envelope>,
    ) {
        self.record.status = self.status_without_claim(&flight);
        self.pending.merge(flight.paths);
        let text = notice_text::sync_failed(&self.policy.workspace_root, &error, another_attempt);
        self.record.last_error = Some(error);
        offer_to_all(NoticeCondition::SyncFailed, text, out);
    }

    /// Spec, "Sync skipped when busy": nothing was indexed, the state says
    /// skipped-as-busy, a one-time notice names the holder (the scheduler
    /// refunded the slot and retries nothing in a loop).
    fn settle_busy(&mut self, flight: Flight, holder: String, out: &mut Vec<Envelope>) {
        self.record.status = FreshnessStatus::SkippedBusy;
        let text = notice_text::sync_skipped_busy(&self.policy.workspace_root, &holder);
        self.record.last_error = Some(format!("the graph database is held by {holder}"));
        self.pending.merge(flight.paths);
        offer_to_all(NoticeCondition::SyncSkippedBusy, text, out);
    }

    /// The shell did not start the sync (e.g. no index, and creating one
    /// needs consent). Nothing ran; asking again would be declined again.
    fn settle_declined(&mut self, flight: Flight, reason: String, out: &mut Vec<Envelope>) {
        self.record.status = self.status_without_claim(&flight);
        let text = notice_text::sync_declined(&self.policy.workspace_root, &reason);
        self.record.last_error = Some(reason);
        self.pending.merge(flight.paths);
        offer_to_all(NoticeCondition::SyncDeclinedUnindexed, text, out);
    }

    /// The status after a sync that ended without a claim (failed, timed
    /// out, cancelled, declined):
    /// - an uncovered edit exists: `possibly_stale`;
    /// - no process ever ran (declined, a spawn that failed, cancelled
    ///   before spawning): the graph was not touched, so the status the
    ///   sync replaced comes back;
    /// - a process ran and stopped part-way: it may have left the graph
    ///   between states, so `possibly_stale` — except that `unknown` stays
    ///   `unknown` (a failed sync adds no knowledge). Never `fresh`.
    fn status_without_claim(&self, flight: &Flight) -> FreshnessStatus {
        if self.record.stale_since.is_some() {
            FreshnessStatus::PossiblyStale
        } else if flight.pid.is_none() {
            flight.status_before
        } else if flight.status_before == FreshnessStatus::Unknown {
            FreshnessStatus::Unknown
        } else {
            FreshnessStatus::PossiblyStale
        }
    }

    /// Work not yet covered: the pending batch plus the one in flight.
    fn pending_summary(&self) -> PendingSummary {
        match &self.flight {
            FlightSlot::Running(flight) => self.pending.union_summary(&flight.paths),
            FlightSlot::Idle | FlightSlot::Draining(..) => self.pending.summary(),
        }
    }
}

/// Offers the notice for `condition` to every attached lifetime: a sync's
/// or the watcher's outcome concerns everyone working in the workspace.
fn offer_to_all(condition: NoticeCondition, text: String, out: &mut Vec<Envelope>) {
    out.push(Envelope::Notices(ToNotices::Offer {
        audience: Audience::AllAttached,
        condition,
        text: OfferText::Ready(text),
    }));
}
