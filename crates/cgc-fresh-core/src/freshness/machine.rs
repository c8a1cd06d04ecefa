//! `Freshness`: the three sub-machines of one workspace, composed.
//!
//! [`DriftObserver`], [`SyncScheduler`] and [`Notices`] share no state; this
//! composite owns one of each and delivers the messages they send each
//! other synchronously, depth first, in the order they were sent — the
//! order in which the calls of one machine would have run. The shell's
//! [`Input`]s are routed to the sub-machine that owns them, and what leaves
//! for the shell is returned as [`Effect`]s, as before the split. The
//! module docs of [`crate::freshness`] map the spec's requirements onto the
//! sub-machines.

use std::cmp::max;

use cgc_fresh_proto::{NoticeCondition, StateFrame};

use super::budget::SyncCost;
use super::drift_observer::DriftObserver;
use super::events::{Effect, Input};
use super::flight::FlightId;
use super::messages::{Envelope, ToNotices, ToObserver, ToScheduler};
use super::notice_text;
use super::notices::Notices;
use super::pending_paths::PendingPaths;
use super::policy::FreshnessPolicy;
use super::record::FreshnessRecord;
use super::session::{ConnectionId, Known, OwnerPid, SessionKey};
use super::sync_scheduler::SyncScheduler;
use super::time::Millis;

/// The freshness of one workspace, with the sessions, edits and syncs that
/// decide it. One per workspace; the shell feeds it every [`Input`] in the
/// order it happened and carries out the returned [`Effect`]s.
#[derive(Debug, Clone)]
pub struct Freshness {
    observer: DriftObserver,
    scheduler: SyncScheduler,
    notices: Notices,
}

/// A held notice taken by [`Freshness::take_notices`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakenNotice {
    pub condition: NoticeCondition,
    pub level: cgc_fresh_proto::NoticeLevel,
    pub text: String,
}

impl Freshness {
    /// A machine for the workspace of `policy`. With a `restored` record
    /// (read back from disk after a restart) the persisted times, error and
    /// edit epoch are kept, but the status is `unknown` — never `fresh` — until
    /// a sync completes; pending work from before the restart is kept as
    /// "whole workspace". A watcher never survives the service, so its facts
    /// are dropped.
    pub fn new(policy: FreshnessPolicy, restored: Option<FreshnessRecord>, now: Millis) -> Self {
        let unpaid_drift = restored
            .as_ref()
            .is_some_and(|record| !record.pending.is_empty());
        let notices = Notices::new(&policy.workspace_root);
        let observer = DriftObserver::new(policy.clone(), restored, now);
        let scheduler = SyncScheduler::new(
            policy,
            observer.record().sync_generation,
            observer.record().edit_epoch,
            unpaid_drift,
            now,
        );
        Freshness {
            observer,
            scheduler,
            notices,
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
        let now = max(now, self.observer.now());
        let before = self.observer.record().clone();
        let mut effects = Vec::new();
        self.deliver(now, route(input), &mut effects);
        self.observer.refresh_pending();
        if *self.observer.record() != before {
            effects.push(Effect::RecordChanged);
        }
        effects
    }

    /// Delivers `envelope` and, depth first, everything it leads to.
    fn deliver(&mut self, now: Millis, envelope: Envelope, effects: &mut Vec<Effect>) {
        let sent = match envelope {
            Envelope::Observer(message) => self.observer.handle(now, message),
            Envelope::Scheduler(message) => self.scheduler.handle(now, message),
            Envelope::Notices(message) => {
                effects.extend(self.notices.handle(message));
                return;
            }
            Envelope::Shell(effect) => {
                effects.push(effect);
                return;
            }
        };
        for envelope in sent {
            self.deliver(now, envelope, effects);
        }
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
        self.scheduler.next_deadline()
    }

    /// The workspace's record, as persisted and reported.
    pub fn record(&self) -> &FreshnessRecord {
        self.observer.record()
    }

    /// The policy in force.
    pub fn policy(&self) -> &FreshnessPolicy {
        self.observer.policy()
    }

    /// Applies a reloaded configuration. Turning `autoSync` off drops a
    /// queued automatic sync (a running one finishes); other values apply
    /// from the next decision on. Re-read [`Freshness::next_deadline`]
    /// afterwards.
    pub fn set_policy(&mut self, policy: FreshnessPolicy) {
        self.notices.set_workspace_root(&policy.workspace_root);
        self.scheduler.set_policy(policy.clone());
        self.observer.set_policy(policy);
    }

    /// Edited paths not yet taken by a sync.
    pub fn pending_paths(&self) -> &PendingPaths {
        self.observer.pending_paths()
    }

    /// The sync occupying the workspace (running, or cancelled and still
    /// going away).
    pub fn current_flight(&self) -> Option<FlightId> {
        self.scheduler.current_flight()
    }

    /// The names of the live sessions, sorted.
    pub fn live_sessions(&self) -> impl Iterator<Item = &str> {
        self.observer.sessions().live_names()
    }

    /// Whether `session` names a live, attached lifetime (started, not
    /// ended, not detached).
    pub fn is_live(&self, session: &str) -> bool {
        self.observer.is_live(session)
    }

    /// The live (attached) lifetime of `session`, if any.
    pub fn current_lifetime(&self, session: &str) -> Option<SessionKey> {
        self.observer.current_lifetime(session)
    }

    /// The process that owns `session`'s lifetime, if one does (the shell
    /// watches it and reports [`Input::OwnerExited`]).
    pub fn owner(&self, session: &SessionKey) -> Option<OwnerPid> {
        self.observer.owner(session)
    }

    /// Whether any lifetime is still owned by `pid` (else its watch can go).
    pub fn owns_any(&self, pid: OwnerPid) -> bool {
        self.observer.owns_any(pid)
    }

    /// Takes the notices offered to `session`'s live lifetime that no
    /// connection of it received yet, oldest condition first; they count as
    /// delivered from now on (a hook that takes them prints them). `None`
    /// when `session` has no live lifetime.
    pub fn take_notices(&mut self, session: &str) -> Option<(SessionKey, Vec<TakenNotice>)> {
        let key = self.current_lifetime(session)?;
        let taken = self
            .notices
            .take_held(key.lifetime)?
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
        self.observer.carriers(session)
    }

    /// Automatic syncs `session` spawned (net of busy refunds), of both
    /// classes of cost; `None` when the session is not live.
    pub fn automatic_syncs_spawned(&self, session: &str) -> Option<u32> {
        let whole = self.automatic_syncs_of(session, SyncCost::WholeRepository)?;
        let changed = self.automatic_syncs_of(session, SyncCost::ChangedFiles)?;
        Some(whole.saturating_add(changed))
    }

    /// Automatic syncs of `cost` `session` spawned (net of busy refunds);
    /// `None` when the session is not live.
    pub fn automatic_syncs_of(&self, session: &str, cost: SyncCost) -> Option<u32> {
        match self.observer.sessions().known(session) {
            Known::Live(key) => self.scheduler.automatic_syncs_spawned(key, cost),
            Known::Detached(_) | Known::Ended | Known::Unknown => None,
        }
    }

    /// Whether a verified watcher owns the workspace's freshness: edits
    /// open no stale episode and no sync is started while it runs.
    pub fn watcher_owns_freshness(&self) -> bool {
        self.observer.watcher_owns_freshness()
    }

    /// Whether a watcher runs that edits wait for (verifying, verified or
    /// restarting): the shell then compares a shell command's changes with
    /// the tree as it was at the command's call, not with the manifest of
    /// the last sync (the watcher applied what changed since).
    pub fn watcher_takes_edits(&self) -> bool {
        self.observer.watcher_takes_edits()
    }

    /// Whether a shell command's probe is open (running or comparing).
    pub fn shell_commands_open(&self) -> bool {
        self.observer.shell_commands_open()
    }

    /// Whether a `session_start{session}` from `instance` would be taken;
    /// `false` only when [`super::MAX_LIVE_SESSIONS`] lifetimes are live and this
    /// would be another (the input is then ignored: the shell says so to
    /// the client instead of applying it).
    pub fn admits_session(&self, session: &str, instance: &str) -> bool {
        self.observer.admits_session(session, instance)
    }

    /// Whether `session` may make its watcher attempt now: it is live, has
    /// not attempted in this lifetime (one attempt per session; a failed or
    /// declined attempt is not retried), and no watcher runs for the
    /// workspace. An attempt reported when this is false is ignored.
    pub fn watcher_attempt_allowed(&self, session: &SessionKey) -> bool {
        self.observer.watcher_attempt_allowed(session)
    }

    /// The workspace-relative paths the running flight `id` took (what its
    /// sync must cover), sorted; `None` when they are not known file by file
    /// (the whole-workspace marker) or `id` is not the running flight.
    pub fn flight_paths(&self, id: FlightId) -> Option<Vec<String>> {
        self.observer.flight_paths(id)
    }

    /// The state frame this machine can fill in. The backend is not known
    /// here; the shell adds it.
    pub fn state_frame(&self) -> StateFrame {
        self.observer.state_frame(self.scheduler.has_queued())
    }
}

/// Which sub-machine an input from the shell goes to: runner reports to the
/// scheduler, deliveries to the notices, everything else to the observer.
pub fn route(input: Input) -> Envelope {
    match input {
        Input::SyncBusy { .. }
        | Input::SyncDeclined { .. }
        | Input::SyncOverBudget { .. }
        | Input::SyncStrategyFellBack { .. }
        | Input::SyncSpawned { .. }
        | Input::SyncFinished { .. } => Envelope::Scheduler(ToScheduler::Input(input)),
        Input::NoticeDelivered { session, condition } => {
            Envelope::Notices(ToNotices::Delivered { session, condition })
        }
        input => Envelope::Observer(ToObserver::Input(input)),
    }
}
