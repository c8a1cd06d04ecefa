//! The freshness state machine of one workspace: events in, decisions out.
//!
//! Every rule lives in one place here; the module docs of
//! [`crate::freshness`] map the spec's requirements onto the functions below.
//! The managed watcher's transitions are in the `watcher` submodule.

mod watcher;

use std::cmp::max;

use cgc_fresh_proto::{FreshnessStatus, NoticeCondition, StateFrame, WatcherFacts};

use super::epoch::EditTracker;
use super::events::{Effect, Input, SyncOutcome, TreeChanges};
use super::flight::{DrainCause, Flight, FlightId, FlightSlot, QueuedSync, SyncKind};
use super::notice_text;
use super::pending_paths::PendingPaths;
use super::policy::FreshnessPolicy;
use super::probe::{ProbeId, ProbeTracker};
use super::record::{FreshnessRecord, PendingSummary};
use super::session::{ConnectionId, Known, Lifetime, OwnerPid, Registration, SessionKey, Sessions};
use super::time::Millis;
use super::watcher_slot::{AwaitingWatcher, WatcherSlot};
use super::workspace_path::{PathPlacement, WorkspaceRoot};

/// The freshness of one workspace, with the sessions, edits and syncs that
/// decide it. One per workspace; the shell feeds it every [`Input`] in the
/// order it happened and carries out the returned [`Effect`]s.
#[derive(Debug, Clone)]
pub struct Freshness {
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
    /// Drift whose sync nobody is left to pay for: its payer's lifetime
    /// ended before the sync started (or was cancelled with it), an edit
    /// came under an ended name, or a restored record had pending work.
    /// The next lifetime to start pays for it.
    left_uncovered: bool,
    pending: PendingPaths,
    flight: FlightSlot,
    queued: Option<QueuedSync>,
    /// The live session whose edit most recently opened or continued the
    /// current episode: it pays for the automatic sync.
    last_editor: Option<Lifetime>,
    /// The managed watcher, if one runs.
    watcher: WatcherSlot,
    /// Edits observed since the watcher was started that it has not
    /// reported applied: while any waits, `fresh` is not claimed.
    awaiting: AwaitingWatcher,
    /// When the last sync was started (`freshness.minSyncGapMs` counts
    /// from it).
    last_start: Option<Millis>,
    now: Millis,
}

/// A held notice taken by [`Freshness::take_notices`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakenNotice {
    pub condition: NoticeCondition,
    pub level: cgc_fresh_proto::NoticeLevel,
    pub text: String,
}

/// What a modifying tool call touched inside the workspace.
enum EditTarget {
    /// These workspace-relative paths.
    Paths(Vec<String>),
    /// The call named no path: it may have touched anything.
    Unknown,
}

/// How a sync that occupied the workspace ended.
enum Ending {
    Declined(String),
    Outcome(SyncOutcome),
}

impl Freshness {
    /// A machine for the workspace of `policy`. With a `restored` record
    /// (read back from disk after a restart) the persisted times, error and
    /// edit epoch are kept, but the status is `unknown` — never `fresh` — until
    /// a sync completes; pending work from before the restart is kept as
    /// "whole workspace". A watcher never survives the service, so its facts
    /// are dropped.
    pub fn new(policy: FreshnessPolicy, restored: Option<FreshnessRecord>, now: Millis) -> Self {
        let was_restored = restored.is_some();
        let left_uncovered = restored
            .as_ref()
            .is_some_and(|record| !record.pending.is_empty());
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
        Freshness {
            root: WorkspaceRoot::new(&policy.workspace_root),
            policy,
            record,
            restored: was_restored,
            sessions: Sessions::default(),
            edits: EditTracker::default(),
            probes: ProbeTracker::default(),
            deferred_claim: None,
            left_uncovered,
            pending,
            flight: FlightSlot::Idle,
            queued: None,
            last_editor: None,
            watcher: WatcherSlot::Absent,
            awaiting: AwaitingWatcher::default(),
            last_start: None,
            now,
        }
    }

    /// Takes one observation made at `now` and returns the decisions it
    /// leads to. Time never runs backwards inside the machine: an earlier
    /// `now` than already seen is read as the latest time seen.
    ///
    /// An input naming an ended session, a stale flight, or a tool that does
    /// not modify files changes nothing and returns no effects — with one
    /// exception: an edit in the workspace reported under an ended session's
    /// name still counts (the file changed) and may return
    /// [`Effect::RecordChanged`], and a shell tool's result under such a
    /// name still asks for a comparison ([`Effect::ProbeWorkspace`]) — never
    /// anything else.
    /// `SyncSpawned` and `NoticeDelivered` only update bookkeeping and never
    /// return effects either. Otherwise
    /// everything due by `now` is done too (so a `Wake` is only needed when
    /// nothing else arrives). [`Effect::RecordChanged`] comes last, once,
    /// when the record changed.
    pub fn handle(&mut self, now: Millis, input: Input) -> Vec<Effect> {
        let now = max(now, self.now);
        let before = self.record.clone();
        let mut effects = Vec::new();
        if self.take(now, input, &mut effects) {
            self.restart_watcher_if_due(&mut effects);
            self.start_due_sync(&mut effects);
        }
        self.record.pending = self.pending_summary();
        if self.record != before {
            effects.push(Effect::RecordChanged);
        }
        effects
    }

    /// The one time at which the machine must be woken with
    /// [`Input::Wake`] if nothing else arrives before; `None` while nothing
    /// is waiting on time (idle, or a sync is running — its report will
    /// come; or an automatic sync waits for a watcher's verification —
    /// that report will come). The shell re-reads it after every `handle`
    /// and keeps exactly one one-shot timer armed for it. A returned time
    /// may already have passed only if no input was handled since; waking
    /// then is correct.
    pub fn next_deadline(&self) -> Option<Millis> {
        let restart = self.watcher_restart_deadline();
        match (restart, self.sync_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// When a watcher restart that waits for edits to settle may be due
    /// (`restart_watcher_if_due`); a shell command's result will
    /// come by itself.
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

    /// When the queued sync is due, if one is queued and may start by
    /// time alone.
    fn sync_deadline(&self) -> Option<Millis> {
        if !self.flight.is_idle() || self.watcher.is_retiring() {
            return None;
        }
        let queued = self.queued?;
        let due = match queued.kind {
            SyncKind::Manual { .. } => queued.due_at,
            SyncKind::Automatic { .. }
                if self.watcher.is_verifying() || self.probes.is_comparing() =>
            {
                return None
            }
            SyncKind::Automatic { .. } => self
                .edits
                .all_settled_by()
                .into_iter()
                .chain(self.probes.all_settled_by())
                .fold(queued.due_at, max),
        };
        Some(max(due, self.gap_over_at()))
    }

    /// When the gap after the last sync's start is over
    /// (`freshness.minSyncGapMs`; at once when no sync started yet).
    fn gap_over_at(&self) -> Millis {
        match self.last_start {
            Some(last) => last.plus(self.policy.min_sync_gap_ms),
            None => Millis(0),
        }
    }

    /// The workspace's record, as persisted and reported.
    pub fn record(&self) -> &FreshnessRecord {
        &self.record
    }

    /// The policy in force.
    pub fn policy(&self) -> &FreshnessPolicy {
        &self.policy
    }

    /// Applies a reloaded configuration. Turning `autoSync` off drops a
    /// queued automatic sync (a running one finishes); other values apply
    /// from the next decision on. Re-read [`Freshness::next_deadline`]
    /// afterwards.
    pub fn set_policy(&mut self, policy: FreshnessPolicy) {
        self.root = WorkspaceRoot::new(&policy.workspace_root);
        self.policy = policy;
        if !self.policy.auto_sync
            && matches!(
                self.queued,
                Some(QueuedSync {
                    kind: SyncKind::Automatic { .. },
                    ..
                })
            )
        {
            self.queued = None;
        }
    }

    /// Edited paths not yet taken by a sync.
    pub fn pending_paths(&self) -> &PendingPaths {
        &self.pending
    }

    /// The sync occupying the workspace (running, or cancelled and still
    /// going away).
    pub fn current_flight(&self) -> Option<FlightId> {
        self.flight.id()
    }

    /// The names of the live sessions, sorted.
    pub fn live_sessions(&self) -> impl Iterator<Item = &str> {
        self.sessions.live_names()
    }

    /// Whether `session` names a live, attached lifetime (started, not
    /// ended, not detached).
    pub fn is_live(&self, session: &str) -> bool {
        matches!(self.sessions.known(session), Known::Live(_))
    }

    /// The live (attached) lifetime of `session`, if any.
    pub fn current_lifetime(&self, session: &str) -> Option<SessionKey> {
        match self.sessions.known(session) {
            Known::Live(lifetime) => self.sessions.key(lifetime),
            Known::Detached(_) | Known::Ended | Known::Unknown => None,
        }
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

    /// Takes the notices offered to `session`'s live lifetime that no
    /// connection of it received yet, oldest condition first; they count as
    /// delivered from now on (a hook that takes them prints them). `None`
    /// when `session` has no live lifetime.
    pub fn take_notices(&mut self, session: &str) -> Option<(SessionKey, Vec<TakenNotice>)> {
        let key = self.current_lifetime(session)?;
        let (_, live) = self.sessions.get_mut(key.lifetime)?;
        let taken = live
            .ledger
            .take_held()
            .into_iter()
            .map(|(condition, text)| TakenNotice {
                condition,
                level: notice_text::level(condition),
                text,
            })
            .collect();
        Some((key, taken))
    }

    /// The open connections that carry `session`'s lifetime: a notice for
    /// it counts as delivered only when one of them received it.
    pub fn carriers(&self, session: &SessionKey) -> Vec<ConnectionId> {
        if !self.sessions.is_current(session) {
            return Vec::new();
        }
        self.sessions.carriers(session.lifetime).collect()
    }

    /// Automatic syncs `session` spawned (net of busy refunds); `None` when
    /// the session is not live.
    pub fn automatic_syncs_spawned(&self, session: &str) -> Option<u32> {
        match self.sessions.known(session) {
            Known::Live(key) => self
                .sessions
                .get(key)
                .map(|(_, live)| live.budget.spawned()),
            Known::Detached(_) | Known::Ended | Known::Unknown => None,
        }
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

    /// Whether a verified watcher owns the workspace's freshness: edits
    /// open no stale episode and no sync is started while it runs.
    pub fn watcher_owns_freshness(&self) -> bool {
        self.watcher.is_verified()
    }

    /// Whether a `session_start{session}` from `instance` would be taken;
    /// `false` only when [`super::MAX_LIVE_SESSIONS`] lifetimes are live and this
    /// would be another (the input is then ignored: the shell says so to
    /// the client instead of applying it).
    pub fn admits_session(&self, session: &str, instance: &str) -> bool {
        self.sessions.admits(session, instance)
    }

    /// Whether `session` may make its watcher attempt now: it is live, has
    /// not attempted in this lifetime (one attempt per session; a failed or
    /// declined attempt is not retried), and no watcher runs for the
    /// workspace. An attempt reported when this is false is ignored.
    pub fn watcher_attempt_allowed(&self, session: &SessionKey) -> bool {
        self.attempt_opener(session).is_some()
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

    /// The state frame this machine can fill in. The backend is not known
    /// here; the shell adds it.
    pub fn state_frame(&self) -> StateFrame {
        StateFrame {
            workspace: self.policy.workspace_root.clone(),
            status: self.record.status,
            last_synced_at: self.record.last_synced_at.map(Millis::get),
            stale_since: self.record.stale_since.map(Millis::get),
            last_error: self.record.last_error.clone(),
            edit_epoch: self.record.edit_epoch,
            syncing: matches!(self.flight, FlightSlot::Running(_)),
            watcher: self.record.watcher.as_ref().map(|watcher| WatcherFacts {
                mode: watcher.mode.clone(),
                state: watcher.state.clone(),
                pid: watcher.pid,
                since: watcher.since.map(Millis::get),
            }),
            backend: None,
            detail: self.detail(),
            warnings: Vec::new(),
        }
    }

    // ---- inputs -------------------------------------------------------

    /// Applies `input`; returns whether it was taken (and due work may run).
    fn take(&mut self, now: Millis, input: Input, out: &mut Vec<Effect>) -> bool {
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
                if owned.is_empty() {
                    return false;
                }
                self.catch_up(now);
                for name in owned {
                    if let Some(lifetime) = self.sessions.end(&name) {
                        self.close_lifetime(SessionKey { name, lifetime }, false, out);
                    }
                }
                true
            }
            Input::SessionEnded { session } => {
                let Some(lifetime) = self.sessions.end(&session) else {
                    return false;
                };
                self.catch_up(now);
                self.close_lifetime(
                    SessionKey {
                        name: session,
                        lifetime,
                    },
                    false,
                    out,
                );
                true
            }
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
                let Some(key) = self.sessions.live_or_implicit(&session) else {
                    // Its result is compared all the same (`shell_result`).
                    return false;
                };
                self.catch_up(now);
                if let Some(dropped) = self.probes.open(key, &tool, now, self.policy.settle_ms) {
                    out.push(Effect::ProbeWorkspace { probe: dropped });
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
                let Some(key) = self.sessions.live_or_implicit(&session) else {
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
                    self.observe_orphan_edit(target);
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
                self.queued = Some(QueuedSync {
                    due_at: now,
                    kind: SyncKind::Manual { requester },
                });
                true
            }
            Input::SyncStrategyFellBack { flight: _, reason } => {
                let text = notice_text::strategy_fell_back(&self.policy.workspace_root, &reason);
                self.offer_to_all(NoticeCondition::SyncStrategyFellBack, &text, out);
                false
            }
            Input::SyncSpawned { flight, pid } => {
                self.spawned(flight, pid);
                false
            }
            Input::SyncBusy { flight, holder } => self.end_flight(
                now,
                flight,
                Ending::Outcome(SyncOutcome::Busy { holder }),
                out,
            ),
            Input::SyncDeclined { flight, reason } => {
                self.end_flight(now, flight, Ending::Declined(reason), out)
            }
            Input::SyncFinished { flight, outcome } => {
                self.end_flight(now, flight, Ending::Outcome(outcome), out)
            }
            Input::NoticeDelivered { session, condition } => {
                // Counted for the lifetime it was offered to, and only while
                // that lifetime is the name's (a replaced one's delivery
                // does not spend its successor's notice).
                if self.sessions.is_current(&session) {
                    if let Some((_, live)) = self.sessions.get_mut(session.lifetime) {
                        live.ledger.mark_delivered(condition);
                    }
                }
                false
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
        }
    }

    /// Moves the machine's clock to `now` and settles edits whose deadline
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
        out: &mut Vec<Effect>,
    ) {
        let now = self.now;
        self.record.edit_epoch = self.record.edit_epoch.saturating_add(1);
        let id = self.record.edit_epoch;
        self.edits
            .record_call(key, tool, now, self.policy.settle_ms, Some(id));
        self.drift_from(key, tool, target, out);
    }

    /// What an observed edit of live lifetime `key` does, once counted.
    fn drift_from(&mut self, key: Lifetime, tool: &str, target: EditTarget, out: &mut Vec<Effect>) {
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
        self.last_editor = Some(key);
        let policy = &self.policy;
        offer(
            &mut self.sessions,
            key,
            NoticeCondition::PossiblyStale,
            out,
            || notice_text::possibly_stale(&policy.workspace_root, tool, policy.auto_sync),
        );
        if self.policy.auto_sync {
            self.queue_automatic(key, now.plus(self.policy.batch_ms));
        }
    }

    /// An edit observed while a watcher runs: it waits for the watcher's
    /// word that it was applied. While the watcher is verified the record
    /// is `possibly_stale` until then (no notice and no sync: the watcher
    /// applies it within its debounce). Before verification the lazy
    /// drift goes on as well; an edit made during CGC's start-up reconcile
    /// (a first start or a restart) may be missed by it (the observer is
    /// scheduled only after the reconcile): it waits as unobserved, which
    /// calls for a restart (`machine/watcher.rs`) unless the watcher
    /// reports that path applied first.
    fn await_watcher(&mut self, target: &EditTarget) {
        let observable = matches!(self.watcher, WatcherSlot::Verified(_));
        match target {
            EditTarget::Unknown => self.awaiting.mark_unknown(),
            EditTarget::Paths(paths) => {
                for path in paths {
                    self.awaiting.insert(path.clone(), observable);
                }
            }
        }
        if self.watcher.is_verified() && !self.awaiting.is_empty() {
            self.record.status = FreshnessStatus::PossiblyStale;
            self.record.stale_since.get_or_insert(self.now);
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
        out: &mut Vec<Effect>,
    ) -> bool {
        self.catch_up(now);
        let probe = match self.sessions.known(session) {
            Known::Live(key) => self.probes.result(key, tool),
            Known::Detached(_) | Known::Ended | Known::Unknown => self.probes.orphan_result(tool),
        };
        out.push(Effect::ProbeWorkspace { probe });
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
        out: &mut Vec<Effect>,
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
                    self.left_uncovered = true;
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
    fn claim_deferred(&mut self, out: &mut Vec<Effect>) {
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
        if matches!(
            self.queued,
            Some(QueuedSync {
                kind: SyncKind::Automatic { .. },
                ..
            })
        ) {
            self.queued = None;
        }
        self.record.status = FreshnessStatus::Fresh;
        self.record.stale_since = None;
        let text = notice_text::sync_completed(&self.policy.workspace_root);
        self.offer_to_all(NoticeCondition::SyncCompleted, &text, out);
    }

    /// An edit under the name of a session that already ended: counted,
    /// unsettled until `settleMs` (no result can settle it), the record made
    /// possibly stale — and nothing else: no session, no budget, no notice,
    /// no automatic sync now (there is no live session to pay for one; the
    /// next lifetime to start pays for it, or the next live drift or a
    /// person's `sync` covers it).
    fn observe_orphan_edit(&mut self, target: EditTarget) {
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
        self.left_uncovered = true;
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

    /// Design §4, "Trigger": the first drift arms the window (due at first
    /// edit + batchMs); later edits do not push it back, but the latest
    /// editor becomes the payer. A queued manual sync covers drift already.
    fn queue_automatic(&mut self, payer: Lifetime, due_at: Millis) {
        match &mut self.queued {
            Some(QueuedSync {
                kind:
                    SyncKind::Automatic {
                        payer: queued_payer,
                    },
                ..
            }) => *queued_payer = payer,
            Some(QueuedSync {
                kind: SyncKind::Manual { .. },
                ..
            }) => {}
            None => {
                self.queued = Some(QueuedSync {
                    due_at,
                    kind: SyncKind::Automatic { payer },
                });
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
        out: &mut Vec<Effect>,
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
                // drift: it pays for the sync the staleness notice promised.
                if self.policy.auto_sync
                    && self.left_uncovered
                    && self.queued.is_none()
                    && self.deferred_claim.is_none()
                    && self.flight.is_idle()
                    && !self.watcher.is_verified()
                    && matches!(
                        self.record.status,
                        FreshnessStatus::PossiblyStale | FreshnessStatus::Unknown
                    )
                {
                    self.last_editor = Some(started);
                    self.queue_automatic(started, now.plus(self.policy.batch_ms));
                }
                out.push(Effect::SessionOpened {
                    session: SessionKey {
                        name,
                        lifetime: started,
                    },
                    reattached: false,
                });
                true
            }
            Registration::Reattached(lifetime) => {
                self.catch_up(now);
                // Work the detach left undone is picked up again: drift not
                // yet covered queues an automatic sync this lifetime pays.
                if self.policy.auto_sync
                    && self.record.status == FreshnessStatus::PossiblyStale
                    && !self.watcher.is_verified()
                {
                    self.last_editor = Some(lifetime);
                    self.queue_automatic(lifetime, now.plus(self.policy.batch_ms));
                }
                out.push(Effect::SessionOpened {
                    session: SessionKey { name, lifetime },
                    reattached: true,
                });
                true
            }
        }
    }

    /// A session lifetime's work stops: it ended (shutdown, replaced by a
    /// new instance, or made room for another) or was detached (`detached`:
    /// every connection that carried it closed). Its edits are settled, its
    /// watcher is gone, an automatic sync it queued is dropped, and an
    /// automatic sync it is paying for is cancelled — that sync's eventual
    /// report is a stale completion. A manual sync is not tied to a session.
    /// The shell is told to stop the lifetime's children.
    fn close_lifetime(&mut self, session: SessionKey, detached: bool, out: &mut Vec<Effect>) {
        self.end_lifetime(session.lifetime, out);
        out.push(Effect::SessionClosed { session, detached });
    }

    fn end_lifetime(&mut self, key: Lifetime, out: &mut Vec<Effect>) {
        self.edits.end_session(key);
        for probe in self.probes.end_session(key) {
            out.push(Effect::ProbeWorkspace { probe });
        }
        if self
            .watcher
            .running()
            .is_some_and(|watcher| watcher.owner == key)
        {
            self.watcher_gone();
        }
        if self.last_editor == Some(key) {
            self.last_editor = None;
        }
        match &mut self.queued {
            Some(QueuedSync {
                kind: SyncKind::Manual { requester },
                ..
            }) if *requester == Some(key) => *requester = None,
            Some(QueuedSync {
                kind: SyncKind::Automatic { payer },
                ..
            }) if *payer == key => {
                self.queued = None;
                self.left_uncovered = true;
            }
            _ => {}
        }
        let paid_by_ended =
            matches!(&self.flight, FlightSlot::Running(flight) if flight.payer == Some(key));
        if paid_by_ended {
            if let FlightSlot::Running(flight) = std::mem::take(&mut self.flight) {
                out.push(Effect::CancelSync { flight: flight.id });
                self.left_uncovered = true;
                self.record.status = self.status_without_claim(&flight);
                self.pending.merge(flight.paths);
                self.flight = FlightSlot::Draining(flight.id, DrainCause::Cancelled);
            }
        }
    }

    // ---- syncs --------------------------------------------------------

    /// Starts the queued sync when it is due and the workspace is free.
    /// Spec, "Lazy, budgeted drift sync": an automatic sync waits for the
    /// observed edits to settle, needs a live paying session that has not
    /// stopped on failures, and a free slot of its budget — otherwise the
    /// session gets the one-time budget notice and nothing spawns. A manual
    /// sync starts at once: it is not budgeted, and an edit still being
    /// written when it starts only keeps it from claiming `fresh`.
    ///
    /// While a watcher is verifying, a due automatic sync waits for the
    /// verification to settle: verified, the watcher covers the drift;
    /// failed, the sync runs then. (Started now, it would often find our
    /// own watcher holding the embedded database and end busy.) While a
    /// verified watcher owns freshness, nothing is started at all.
    fn start_due_sync(&mut self, out: &mut Vec<Effect>) {
        if !self.flight.is_idle() || self.watcher.is_retiring() {
            return;
        }
        if self.watcher.is_verified() {
            self.queued = None;
            return;
        }
        let Some(queued) = self.queued else {
            return;
        };
        if queued.due_at > self.now || self.gap_over_at() > self.now {
            return;
        }
        match queued.kind {
            SyncKind::Manual { requester } => {
                self.queued = None;
                self.start(None, requester, out);
            }
            SyncKind::Automatic { payer } => {
                if self.edits.has_unsettled()
                    || self.watcher.is_verifying()
                    || self.probes.is_comparing()
                    || self.probes.runs_unsettled(self.now)
                {
                    return;
                }
                self.queued = None;
                if !self.policy.auto_sync {
                    return;
                }
                let max_syncs = self.policy.max_syncs_per_session;
                let Some((_, live)) = self.sessions.get(payer) else {
                    return;
                };
                // Drift this session cannot pay for is the next
                // lifetime's to sync.
                self.left_uncovered = true;
                if live.budget.is_failing() {
                    return;
                }
                if !live.budget.has_slot(max_syncs) {
                    let root = &self.policy.workspace_root;
                    offer(
                        &mut self.sessions,
                        payer,
                        NoticeCondition::BudgetExhausted,
                        out,
                        || notice_text::budget_exhausted(root, max_syncs),
                    );
                    return;
                }
                self.start(Some(payer), Some(payer), out);
            }
        }
    }

    /// Decides a sync: snapshots the epoch, the unsettled edits and the
    /// pending batch, and asks the shell to start it.
    fn start(&mut self, payer: Option<Lifetime>, named: Option<Lifetime>, out: &mut Vec<Effect>) {
        self.record.sync_generation = self.record.sync_generation.saturating_add(1);
        self.last_start = Some(self.now);
        self.deferred_claim = None;
        self.left_uncovered = false;
        let id = FlightId(self.record.sync_generation);
        let flight = Flight::start(
            id,
            payer,
            self.record.edit_epoch,
            &self.edits,
            self.pending.take(),
            self.record.status,
        );
        self.record.status = FreshnessStatus::Syncing;
        out.push(Effect::StartSync {
            flight: id,
            session: named.and_then(|key| self.sessions.key(key)),
            manual: payer.is_none(),
        });
        self.flight = FlightSlot::Running(Box::new(flight));
    }

    /// The sync process exists: an automatic sync consumes its payer's slot
    /// now, once.
    fn spawned(&mut self, id: FlightId, pid: u32) {
        let FlightSlot::Running(flight) = &mut self.flight else {
            return;
        };
        if flight.id != id {
            return;
        }
        flight.pid = Some(pid);
        if flight.slot_consumed {
            return;
        }
        if let Some(payer) = flight.payer {
            flight.slot_consumed = true;
            if let Some((_, live)) = self.sessions.get_mut(payer) {
                live.budget.consume_slot();
            }
        }
    }

    /// A terminal report about sync `id`. For the running sync it is the
    /// completion transition; for a draining (cancelled) sync it makes no
    /// claim and only frees the workspace; for any other id it is stale and
    /// changes nothing.
    fn end_flight(
        &mut self,
        now: Millis,
        id: FlightId,
        ending: Ending,
        out: &mut Vec<Effect>,
    ) -> bool {
        match &self.flight {
            FlightSlot::Draining(draining, _) if *draining == id => {
                self.catch_up(now);
                self.flight = FlightSlot::Idle;
                return true;
            }
            FlightSlot::Running(flight) if flight.id == id => {}
            _ => return false,
        }
        self.catch_up(now);
        let FlightSlot::Running(flight) = std::mem::take(&mut self.flight) else {
            return false;
        };
        // The episode the unconfirmed offers belonged to is over.
        for (_, live) in self.sessions.live_mut() {
            live.ledger.forget_undelivered();
        }
        match ending {
            Ending::Declined(reason) => self.settle_declined(*flight, reason, out),
            Ending::Outcome(SyncOutcome::Succeeded) => self.settle_succeeded(*flight, out),
            Ending::Outcome(SyncOutcome::NotApplied { detail }) => {
                self.settle_not_applied(*flight, detail, out)
            }
            Ending::Outcome(SyncOutcome::Failed { error }) => {
                self.settle_failed(*flight, error, out)
            }
            Ending::Outcome(SyncOutcome::TimedOut { error }) => {
                self.settle_failed(*flight, format!("timed out: {error}"), out)
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
    /// success claims `fresh` only when it covers every observed edit.
    /// Otherwise the sync's time is recorded, the record stays possibly
    /// stale from the first uncovered edit, and exactly one follow-up is
    /// queued (the one already coalesced, or an automatic one).
    fn settle_succeeded(&mut self, flight: Flight, out: &mut Vec<Effect>) {
        let now = self.now;
        self.record.last_synced_at = Some(now);
        self.record.last_error = None;
        for (_, live) in self.sessions.live_mut() {
            live.budget.clear_failing();
        }
        if flight.covers_every_edit(self.record.edit_epoch) {
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
            self.offer_to_all(NoticeCondition::SyncCompleted, &text, out);
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
        if self.queued.is_none() && self.policy.auto_sync {
            if let Some(payer) = self.last_editor.or(flight.payer) {
                self.queued = Some(QueuedSync {
                    due_at: max(now, first_uncovered.plus(self.policy.batch_ms)),
                    kind: SyncKind::Automatic { payer },
                });
            }
        }
    }

    /// A sync that applied nothing never claims `fresh`. Retrying would
    /// apply nothing again, so nothing queued runs; the next drift or a
    /// request may try again.
    fn settle_not_applied(&mut self, flight: Flight, detail: String, out: &mut Vec<Effect>) {
        self.record.status = FreshnessStatus::PossiblyStale;
        let text = notice_text::sync_not_applied(&self.policy.workspace_root, &detail);
        self.record.last_error = Some(detail);
        self.pending.merge(flight.paths);
        self.queued = None;
        self.offer_to_all(NoticeCondition::SyncNotApplied, &text, out);
    }

    /// Spec, "Errors are contained": the failure is recorded and surfaced,
    /// and failing work is retried at most once per session — the first
    /// failure of a session's automatic sync queues one retry, the second
    /// stops that session's automatic syncs until a sync succeeds. The
    /// status is decided by [`Freshness::status_without_claim`].
    fn settle_failed(&mut self, flight: Flight, error: String, out: &mut Vec<Effect>) {
        self.record.status = self.status_without_claim(&flight);
        self.pending.merge(flight.paths);
        if let Some(payer) = flight.payer {
            if let Some((_, live)) = self.sessions.get_mut(payer) {
                let retry = live.budget.after_failure();
                if retry && self.policy.auto_sync && self.queued.is_none() {
                    self.queued = Some(QueuedSync {
                        due_at: self.now,
                        kind: SyncKind::Automatic { payer },
                    });
                }
            }
        }
        let another_attempt = self.queued_sync_will_run();
        let text = notice_text::sync_failed(&self.policy.workspace_root, &error, another_attempt);
        self.record.last_error = Some(error);
        self.offer_to_all(NoticeCondition::SyncFailed, &text, out);
    }

    /// Spec, "Sync skipped when busy": nothing was indexed, the state says
    /// skipped-as-busy, a one-time notice names the holder, no slot is
    /// consumed, and nothing is retried in a loop (the next drift or a
    /// request may try again).
    fn settle_busy(&mut self, flight: Flight, holder: String, out: &mut Vec<Effect>) {
        if flight.slot_consumed {
            if let Some((_, live)) = flight.payer.and_then(|payer| self.sessions.get_mut(payer)) {
                live.budget.refund_slot();
            }
        }
        self.record.status = FreshnessStatus::SkippedBusy;
        let text = notice_text::sync_skipped_busy(&self.policy.workspace_root, &holder);
        self.record.last_error = Some(format!("the graph database is held by {holder}"));
        self.pending.merge(flight.paths);
        self.queued = None;
        self.offer_to_all(NoticeCondition::SyncSkippedBusy, &text, out);
    }

    /// The shell did not start the sync (e.g. no index, and creating one
    /// needs consent). Nothing ran; asking again would be declined again.
    fn settle_declined(&mut self, flight: Flight, reason: String, out: &mut Vec<Effect>) {
        self.record.status = self.status_without_claim(&flight);
        let text = notice_text::sync_declined(&self.policy.workspace_root, &reason);
        self.record.last_error = Some(reason);
        self.pending.merge(flight.paths);
        self.queued = None;
        self.offer_to_all(NoticeCondition::SyncDeclinedUnindexed, &text, out);
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

    /// Whether the queued sync would start when due (as far as is known now).
    fn queued_sync_will_run(&self) -> bool {
        match self.queued {
            None => false,
            Some(QueuedSync {
                kind: SyncKind::Manual { .. },
                ..
            }) => true,
            Some(QueuedSync {
                kind: SyncKind::Automatic { payer },
                ..
            }) => self.sessions.get(payer).is_some_and(|(_, live)| {
                !live.budget.is_failing() && live.budget.has_slot(self.policy.max_syncs_per_session)
            }),
        }
    }

    // ---- notices and reporting ---------------------------------------

    /// Offers the notice for `condition` to every live session: a sync's
    /// outcome concerns everyone working in the workspace.
    fn offer_to_all(&mut self, condition: NoticeCondition, text: &str, out: &mut Vec<Effect>) {
        for (name, live) in self.sessions.live_mut() {
            if let Some(text) = live.ledger.offer_text(condition, || text.to_string()) {
                out.push(Effect::Notice {
                    session: SessionKey {
                        name: name.to_string(),
                        lifetime: live.key,
                    },
                    condition,
                    level: notice_text::level(condition),
                    text,
                });
            }
        }
    }

    /// Work not yet covered: the pending batch plus the one in flight.
    fn pending_summary(&self) -> PendingSummary {
        match &self.flight {
            FlightSlot::Running(flight) => self.pending.union_summary(&flight.paths),
            FlightSlot::Idle | FlightSlot::Draining(..) => self.pending.summary(),
        }
    }

    fn detail(&self) -> Option<String> {
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
            FlightSlot::Idle if self.queued.is_some() && self.watcher.is_verifying() => {
                Some("a sync waits for the watcher's verification".to_string())
            }
            FlightSlot::Idle if self.watcher.is_retiring() => {
                Some("the watcher is being stopped; lazy mode has taken over".to_string())
            }
            FlightSlot::Idle if self.queued.is_some() => Some("a sync is queued".to_string()),
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
}

/// Offers the notice for `condition` to the live session `key`, once per
/// lifetime. The text is built only when the notice is due: most edits of an
/// episode find it already delivered, and formatting it for each of them was
/// a measurable part of the intake cost.
fn offer(
    sessions: &mut Sessions,
    key: Lifetime,
    condition: NoticeCondition,
    out: &mut Vec<Effect>,
    text: impl FnOnce() -> String,
) {
    if let Some((name, live)) = sessions.get_mut(key) {
        if let Some(text) = live.ledger.offer_text(condition, text) {
            out.push(Effect::Notice {
                session: SessionKey {
                    name: name.to_string(),
                    lifetime: key,
                },
                condition,
                level: notice_text::level(condition),
                text,
            });
        }
    }
}
