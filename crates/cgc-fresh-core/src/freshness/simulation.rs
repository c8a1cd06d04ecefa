//! Deterministic simulation: the three sub-machines as actors.
//!
//! [`DriftObserver`], [`SyncScheduler`] and [`Notices`] each get a mailbox
//! (first in, first out, as an actor's); what they send each other, what
//! the harness sends (session and tool events, requests, watcher reports)
//! and what a model runner reports go into those mailboxes, and proptest
//! chooses which mailbox is served next, interleaved with harness events,
//! runner progress and the passing of time. So a message may arrive long
//! after the state it described changed — which is what separate actors
//! allow and what [`super::Freshness`] (synchronous delivery) never shows.
//!
//! The watcher supervisor is modelled too: a restart the observer asks for
//! is reported at once as `WatcherRestarted` with the next pid, whose ready
//! line comes with a later `WatcherVerify`; a stop is reported at once as
//! `WatcherStopped`. Not modelled: `WatcherApplied` lines (so an observed
//! edit under a verified watcher waits until the watcher ends), shell
//! commands and their probes (the policy names no shell tool), a failed
//! respawn, and late lines of a replaced process.
//!
//! The notice hub is modelled as the notices actor's own: a notice is
//! pushed to every connection at once, and counted on the ledger only when
//! a connection that carries the notice's lifetime got it. An `events`
//! subscriber (a connection carrying nothing) gets copies and spends none.
//!
//! Invariants, checked after every step:
//! - never `fresh` (outside a verified watcher) while an observed edit is
//!   not covered by a succeeded sync whose start came after that edit had
//!   settled (the shadow's settling is permissive: a result of the same
//!   session and tool, its deadline, the end of its lifetime);
//! - each notice reaches its session at most once per (lifetime,
//!   condition), and is only ever addressed to the lifetime's own name;
//! - one sync at a time, and `minSyncGapMs` between two starts;
//! - once every mailbox is empty: no sync runs paid by, and no watcher
//!   belongs to, a lifetime that is not live, and every lifetime that ended
//!   had its children stopped (the shell was told, `SessionClosed`);
//!   scheduler and notices keep nothing for a lifetime the observer ended.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use cgc_fresh_proto::{FreshnessStatus, NoticeCondition, SessionStartReason};
use proptest::prelude::*;

use super::budget::{SyncAllowance, SyncCost};
use super::drift_observer::DriftObserver;
use super::events::{Effect, Input, SyncOutcome};
use super::flight::FlightId;
use super::machine::route;
use super::messages::{Envelope, ToNotices, ToObserver, ToScheduler};
use super::notices::Notices;
use super::policy::FreshnessPolicy;
use super::session::{ConnectionId, Lifetime, SessionKey};
use super::sync_scheduler::SyncScheduler;
use super::time::Millis;
use crate::config::WatchMode;

const NAMES: [&str; 3] = ["a", "b", "c"];
const INSTANCES: [&str; 2] = ["i1", "i2"];
const PATHS: [&[&str]; 3] = [&["src/a.rs"], &["/ws/b.rs"], &[]];
/// The connection that carries no session: a plain `events` subscriber.
const SUBSCRIBER: ConnectionId = 99;
const MIN_SYNC_GAP_MS: u64 = 1_000;
/// `freshness.watcherApplyMs` in the simulation.
const WATCHER_APPLY_MS: u64 = 4_000;

#[derive(Debug, Clone)]
enum Op {
    Start {
        name: usize,
        instance: usize,
        connection: ConnectionId,
    },
    End {
        name: usize,
    },
    Close {
        connection: ConnectionId,
    },
    Edit {
        name: usize,
        paths: usize,
        /// Further paths CGC does not index (the shell's count).
        not_indexed: usize,
    },
    Result {
        name: usize,
    },
    Request {
        name: Option<usize>,
    },
    Advance(u64),
    WakeAtDeadline,
    RunnerSpawn,
    RunnerFinish(usize),
    WatcherStart {
        name: usize,
    },
    WatcherVerify,
    WatcherDie,
    /// Serve one message of mailbox 0 (observer), 1 (scheduler) or 2
    /// (notices).
    Serve(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0..3usize, 0..2usize, 1..3u64).prop_map(|(name, instance, connection)| Op::Start {
            name,
            instance,
            connection,
        }),
        1 => (0..3usize).prop_map(|name| Op::End { name }),
        1 => (1..3u64).prop_map(|connection| Op::Close { connection }),
        5 => (0..3usize, 0..PATHS.len(), 0..2usize).prop_map(|(name, paths, not_indexed)| {
            Op::Edit { name, paths, not_indexed }
        }),
        3 => (0..3usize).prop_map(|name| Op::Result { name }),
        1 => proptest::option::of(0..3usize).prop_map(|name| Op::Request { name }),
        2 => (0..2_500u64).prop_map(Op::Advance),
        2 => Just(Op::WakeAtDeadline),
        2 => Just(Op::RunnerSpawn),
        3 => (0..6usize).prop_map(Op::RunnerFinish),
        1 => (0..3usize).prop_map(|name| Op::WatcherStart { name }),
        1 => Just(Op::WatcherVerify),
        1 => Just(Op::WatcherDie),
        14 => (0..3usize).prop_map(Op::Serve),
    ]
}

fn outcome(index: usize) -> SyncOutcome {
    match index {
        0..=2 => SyncOutcome::Succeeded,
        3 => SyncOutcome::Failed {
            error: "exit status 1".into(),
        },
        4 => SyncOutcome::Busy {
            holder: "pid 7".into(),
        },
        _ => SyncOutcome::NotApplied {
            detail: "skipped".into(),
        },
    }
}

/// An edit as the shadow saw the observer take it.
#[derive(Debug, Clone)]
struct ShadowEdit {
    /// `None`: under a name that was not live (settles by deadline only).
    name: Option<&'static str>,
    at: Millis,
    settled: bool,
    covered: bool,
}

/// A sync the runner was told to start.
#[derive(Debug, Clone)]
struct Job {
    flight: FlightId,
    session: Option<SessionKey>,
    allowance: SyncAllowance,
    spawned: bool,
    cancelled: bool,
}

#[derive(Debug, Clone, Copy)]
struct ModelWatcher {
    session_lifetime: Lifetime,
    name: &'static str,
    pid: u32,
    verified: bool,
}

struct Sim {
    policy: FreshnessPolicy,
    observer: DriftObserver,
    scheduler: SyncScheduler,
    notices: Notices,
    to_observer: VecDeque<ToObserver>,
    to_scheduler: VecDeque<ToScheduler>,
    to_notices: VecDeque<ToNotices>,
    now: Millis,
    // The shell's side.
    jobs: VecDeque<Job>,
    watcher: Option<ModelWatcher>,
    next_pid: u32,
    /// Which lifetimes each connection carries (its `session_start`s).
    carried: BTreeMap<ConnectionId, BTreeSet<SessionKey>>,
    // The shadow.
    edits: Vec<ShadowEdit>,
    /// Per flight: the edits settled when the observer took its start.
    snapshots: BTreeMap<FlightId, Vec<usize>>,
    /// Notices that reached a carrier, per (lifetime, condition).
    delivered: BTreeMap<(Lifetime, NoticeCondition), u32>,
    /// The name each lifetime was opened under.
    names: BTreeMap<Lifetime, String>,
    /// Lifetimes ended for good (not detached), and whether the shell was
    /// told to stop their children.
    ended: BTreeSet<Lifetime>,
    starts: Vec<Millis>,
}

impl Sim {
    fn new(policy: FreshnessPolicy) -> Self {
        Sim {
            observer: DriftObserver::new(policy.clone(), None, Millis(0)),
            scheduler: SyncScheduler::new(policy.clone(), 0, 0, false, Millis(0)),
            notices: Notices::new(&policy.workspace_root),
            policy,
            to_observer: VecDeque::new(),
            to_scheduler: VecDeque::new(),
            to_notices: VecDeque::new(),
            now: Millis(0),
            jobs: VecDeque::new(),
            watcher: None,
            next_pid: 100,
            carried: BTreeMap::new(),
            edits: Vec::new(),
            snapshots: BTreeMap::new(),
            delivered: BTreeMap::new(),
            names: BTreeMap::new(),
            ended: BTreeSet::new(),
            starts: Vec::new(),
        }
    }

    fn send(&mut self, envelope: Envelope) -> Result<(), TestCaseError> {
        match envelope {
            Envelope::Observer(message) => self.to_observer.push_back(message),
            Envelope::Scheduler(message) => self.to_scheduler.push_back(message),
            Envelope::Notices(message) => self.to_notices.push_back(message),
            Envelope::Shell(effect) => self.shell(effect)?,
        }
        Ok(())
    }

    fn input(&mut self, input: Input) -> Result<(), TestCaseError> {
        self.send(route(input))
    }

    /// Serves one message of `mailbox`.
    fn serve(&mut self, mailbox: usize) -> Result<(), TestCaseError> {
        let now = self.now;
        match mailbox {
            0 => {
                let Some(message) = self.to_observer.pop_front() else {
                    return Ok(());
                };
                self.observe(now, message)?;
            }
            1 => {
                let Some(message) = self.to_scheduler.pop_front() else {
                    return Ok(());
                };
                for envelope in self.scheduler.handle(now, message) {
                    if let Envelope::Observer(ToObserver::SyncStarted { .. }) = &envelope {
                        if let Some(last) = self.starts.last() {
                            prop_assert!(
                                now.get() >= last.get() + MIN_SYNC_GAP_MS,
                                "two sync starts {} and {} are closer than the gap",
                                last.get(),
                                now.get()
                            );
                        }
                        self.starts.push(now);
                    }
                    self.send(envelope)?;
                }
            }
            _ => {
                let Some(message) = self.to_notices.pop_front() else {
                    return Ok(());
                };
                let effects = self.notices.handle(message);
                for effect in effects {
                    self.shell(effect)?;
                }
            }
        }
        Ok(())
    }

    /// The observer takes `message`; the shadow watches what it did.
    fn observe(&mut self, now: Millis, message: ToObserver) -> Result<(), TestCaseError> {
        self.settle_by_deadline();
        let epoch_before = self.observer.record().edit_epoch;
        let noted = match &message {
            ToObserver::Input(Input::ToolCall { session, .. }) => Some(name_of(session)),
            _ => None,
        };
        if let ToObserver::Input(Input::ToolResult { session, .. }) = &message {
            let name = name_of(session);
            for edit in &mut self.edits {
                if edit.name == Some(name) {
                    edit.settled = true;
                }
            }
        }
        if let ToObserver::SyncStarted { flight, .. } = &message {
            let settled = (0..self.edits.len())
                .filter(|&index| self.edits[index].settled)
                .collect();
            self.snapshots.insert(*flight, settled);
        }
        let sent = self.observer.handle(now, message);
        if let Some(name) = noted {
            if self.observer.record().edit_epoch != epoch_before {
                let live = self.observer.current_lifetime(name).is_some();
                self.edits.push(ShadowEdit {
                    name: live.then_some(name),
                    at: now,
                    settled: false,
                    covered: false,
                });
            }
        }
        for envelope in sent {
            self.send(envelope)?;
        }
        Ok(())
    }

    fn settle_by_deadline(&mut self) {
        let now = self.now;
        let settle_ms = self.policy.settle_ms;
        for edit in &mut self.edits {
            if edit.at.plus(settle_ms) <= now {
                edit.settled = true;
            }
        }
    }

    /// What the shell does with an effect.
    fn shell(&mut self, effect: Effect) -> Result<(), TestCaseError> {
        match effect {
            Effect::StartSync {
                flight,
                session,
                allowance,
                ..
            } => {
                prop_assert!(
                    self.jobs.iter().all(|job| job.cancelled),
                    "a second sync started while {:?} runs",
                    self.jobs
                );
                self.jobs.push_back(Job {
                    flight,
                    session,
                    allowance,
                    spawned: false,
                    cancelled: false,
                });
            }
            Effect::CancelSync { flight } => {
                for job in self.jobs.iter_mut().filter(|job| job.flight == flight) {
                    job.cancelled = true;
                }
            }
            Effect::SessionOpened { session, .. } => {
                let known = self.names.entry(session.lifetime).or_default();
                prop_assert!(known.is_empty() || *known == session.name);
                *known = session.name.clone();
            }
            Effect::SessionClosed { session, detached } => {
                if !detached {
                    self.ended.insert(session.lifetime);
                }
                // The lifetime's children are stopped.
                for job in self
                    .jobs
                    .iter_mut()
                    .filter(|job| job.session.as_ref() == Some(&session))
                {
                    job.cancelled = true;
                }
                if self
                    .watcher
                    .is_some_and(|watcher| watcher.session_lifetime == session.lifetime)
                {
                    self.watcher = None;
                }
                for edit in &mut self.edits {
                    if edit.name == Some(name_of(&session.name)) {
                        edit.settled = true;
                    }
                }
            }
            Effect::Notice {
                session, condition, ..
            } => {
                if let Some(name) = self.names.get(&session.lifetime) {
                    prop_assert_eq!(name, &session.name, "a notice addressed to another name");
                }
                // Pushed to every connection; counted when a carrier of
                // its lifetime got it, synchronously, as the hub does.
                let reached = self
                    .carried
                    .iter()
                    .any(|(connection, keys)| *connection != SUBSCRIBER && keys.contains(&session));
                if reached {
                    let count = self
                        .delivered
                        .entry((session.lifetime, condition))
                        .or_default();
                    *count += 1;
                    prop_assert!(*count <= 1, "{condition:?} reached {session} twice");
                    let effects = self
                        .notices
                        .handle(ToNotices::Delivered { session, condition });
                    prop_assert!(effects.is_empty());
                }
            }
            Effect::RestartWatcher { session, pid } => {
                // The supervisor stops the process and spawns the next one
                // (its ready line is `WatcherVerify`'s to report).
                if let Some(watcher) = self.watcher.as_mut().filter(|watcher| {
                    watcher.pid == pid && watcher.session_lifetime == session.lifetime
                }) {
                    self.next_pid += 1;
                    watcher.pid = self.next_pid;
                    watcher.verified = false;
                    let restarted = Input::WatcherRestarted {
                        session,
                        previous: pid,
                        pid: self.next_pid,
                    };
                    self.input(restarted)?;
                }
            }
            Effect::StopWatcher { session, pid } => {
                if self.watcher.is_some_and(|watcher| {
                    watcher.pid == pid && watcher.session_lifetime == session.lifetime
                }) {
                    self.watcher = None;
                    self.input(Input::WatcherStopped { session, pid })?;
                }
            }
            Effect::ProbeWorkspace { .. }
            | Effect::RecordChanged
            | Effect::PrepareSync
            | Effect::WarmWorker => {}
        }
        Ok(())
    }

    fn step(&mut self, op: Op) -> Result<(), TestCaseError> {
        match op {
            Op::Start {
                name,
                instance,
                connection,
            } => {
                self.input(Input::SessionStarted {
                    session: NAMES[name].into(),
                    instance: INSTANCES[instance].into(),
                    reason: SessionStartReason::Startup,
                    connection: Some(connection),
                    owner: None,
                })?;
                // The connection learns its lifetime once the observer took
                // the start (modelled when it is served: see below).
                self.carried
                    .entry(connection)
                    .or_default()
                    .insert(SessionKey {
                        name: NAMES[name].into(),
                        lifetime: Lifetime::new(0),
                    });
            }
            Op::End { name } => self.input(Input::SessionEnded {
                session: NAMES[name].into(),
            })?,
            Op::Close { connection } => {
                self.carried.remove(&connection);
                self.input(Input::ConnectionClosed { connection })?;
            }
            Op::Edit {
                name,
                paths,
                not_indexed,
            } => self.input(Input::ToolCall {
                session: NAMES[name].into(),
                tool: "edit".into(),
                paths: PATHS[paths].iter().map(|path| path.to_string()).collect(),
                not_indexed,
            })?,
            Op::Result { name } => self.input(Input::ToolResult {
                session: NAMES[name].into(),
                tool: "edit".into(),
                ok: true,
            })?,
            Op::Request { name } => self.input(Input::SyncRequested {
                session: name.map(|name| NAMES[name].to_string()),
            })?,
            Op::Advance(ms) => self.now = self.now.plus(ms),
            Op::WakeAtDeadline => {
                if let Some(deadline) = self.scheduler.next_deadline() {
                    self.now = self.now.max(deadline);
                    self.input(Input::Wake)?;
                }
            }
            Op::RunnerSpawn => {
                if let Some(job) = self.jobs.iter_mut().find(|job| !job.spawned) {
                    job.spawned = true;
                    let flight = job.flight;
                    // The shell spawns only a class the start allows.
                    let cost = if job.allowance.allows(SyncCost::WholeRepository) {
                        SyncCost::WholeRepository
                    } else {
                        SyncCost::ChangedFiles
                    };
                    self.input(Input::SyncSpawned {
                        flight,
                        pid: 4711,
                        cost,
                    })?;
                }
            }
            Op::RunnerFinish(index) => {
                if let Some(job) = self.jobs.pop_front() {
                    let outcome = if job.cancelled {
                        SyncOutcome::Cancelled
                    } else {
                        outcome(index)
                    };
                    if outcome == SyncOutcome::Succeeded {
                        for &edit in self.snapshots.get(&job.flight).into_iter().flatten() {
                            self.edits[edit].covered = true;
                        }
                    }
                    self.input(Input::SyncFinished {
                        flight: job.flight,
                        outcome,
                    })?;
                }
            }
            Op::WatcherStart { name } => {
                let Some(key) = self.observer.current_lifetime(NAMES[name]) else {
                    return Ok(());
                };
                if self.watcher.is_some() || self.observer.attempt_opener(&key).is_none() {
                    return Ok(());
                }
                self.next_pid += 1;
                self.watcher = Some(ModelWatcher {
                    session_lifetime: key.lifetime,
                    name: NAMES[name],
                    pid: self.next_pid,
                    verified: false,
                });
                self.input(Input::WatcherStarted {
                    session: key,
                    mode: WatchMode::On,
                    pid: self.next_pid,
                })?;
            }
            Op::WatcherVerify => {
                if let Some(watcher) = self.watcher.as_mut().filter(|watcher| !watcher.verified) {
                    watcher.verified = true;
                    let report = Input::WatcherVerified {
                        session: SessionKey {
                            name: watcher.name.into(),
                            lifetime: watcher.session_lifetime,
                        },
                        pid: watcher.pid,
                    };
                    self.input(report)?;
                }
            }
            Op::WatcherDie => {
                if let Some(watcher) = self.watcher.take() {
                    let session = SessionKey {
                        name: watcher.name.into(),
                        lifetime: watcher.session_lifetime,
                    };
                    self.input(Input::WatcherDied {
                        session,
                        pid: watcher.pid,
                        error: "exit status 1".into(),
                    })?;
                }
            }
            Op::Serve(mailbox) => self.serve(mailbox)?,
        }
        self.learn_carried_lifetimes();
        self.check()
    }

    /// A connection that sent `session_start{name}` carries the name's live
    /// lifetime once the observer took it (the shell reads it back).
    fn learn_carried_lifetimes(&mut self) {
        for keys in self.carried.values_mut() {
            let named: Vec<SessionKey> = keys
                .iter()
                .filter(|key| key.lifetime == Lifetime::new(0))
                .cloned()
                .collect();
            for placeholder in named {
                if let Some(live) = self.observer.current_lifetime(&placeholder.name) {
                    keys.remove(&placeholder);
                    keys.insert(live);
                }
            }
        }
    }

    fn quiescent(&self) -> bool {
        self.to_observer.is_empty() && self.to_scheduler.is_empty() && self.to_notices.is_empty()
    }

    fn check(&mut self) -> Result<(), TestCaseError> {
        self.settle_by_deadline();
        let record = self.observer.record();
        if record.status == FreshnessStatus::Fresh && !self.observer.watcher().is_verified() {
            let uncovered: Vec<&ShadowEdit> =
                self.edits.iter().filter(|edit| !edit.covered).collect();
            prop_assert!(
                uncovered.is_empty(),
                "fresh while edits are not covered by a completed sync: {uncovered:?}"
            );
        }
        if self.quiescent() {
            let sessions = self.observer.sessions();
            if let Some(payer) = self.scheduler.running_payer() {
                prop_assert!(
                    sessions
                        .key(payer)
                        .is_some_and(|key| sessions.is_current(&key)),
                    "a sync runs paid by {payer}, which is not live"
                );
            }
            if let Some(watcher) = self.observer.watcher().running() {
                prop_assert!(
                    sessions
                        .key(watcher.owner)
                        .is_some_and(|key| sessions.is_current(&key)),
                    "a watcher runs for {}, which is not live",
                    watcher.owner
                );
            }
            for ended in &self.ended {
                prop_assert!(sessions.key(*ended).is_none());
                prop_assert!(
                    !self.scheduler.has_budget(*ended),
                    "budget kept for {ended}"
                );
                prop_assert!(!self.notices.has_ledger(*ended), "ledger kept for {ended}");
                prop_assert!(
                    self.jobs
                        .iter()
                        .filter(|job| job.session.as_ref().is_some_and(|s| s.lifetime == *ended))
                        .all(|job| job.cancelled),
                    "a sync of ended {ended} was not stopped"
                );
                prop_assert!(
                    self.watcher
                        .is_none_or(|watcher| watcher.session_lifetime != *ended),
                    "the watcher of ended {ended} was not stopped"
                );
            }
        }
        Ok(())
    }

    /// Serves every mailbox until all are empty, in a fixed rotation.
    fn drain(&mut self) -> Result<(), TestCaseError> {
        for _ in 0..10_000 {
            if self.quiescent() {
                return Ok(());
            }
            for mailbox in 0..3 {
                self.serve(mailbox)?;
                self.learn_carried_lifetimes();
                self.check()?;
            }
        }
        Err(TestCaseError::fail(
            "the machines kept messaging each other",
        ))
    }
}

fn name_of(name: &str) -> &'static str {
    NAMES
        .iter()
        .find(|known| **known == name)
        .copied()
        .unwrap_or("?")
}

fn policy() -> impl Strategy<Value = FreshnessPolicy> {
    (
        prop::bool::weighted(0.9),
        1..=3u32,
        0..1_500u64,
        1..4_000u64,
    )
        .prop_map(
            |(auto_sync, max_syncs_per_session, batch_ms, settle_ms)| FreshnessPolicy {
                auto_sync,
                max_syncs_per_session,
                max_incremental_syncs_per_session: max_syncs_per_session,
                incremental_strategy: true,
                batch_ms,
                settle_ms,
                min_sync_gap_ms: MIN_SYNC_GAP_MS,
                watcher_apply_ms: WATCHER_APPLY_MS,
                modifying_tools: vec!["edit".into()],
                shell_tools: Vec::new(),
                workspace_root: "/ws".into(),
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        max_shrink_iters: 4_096,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_sub_machines_hold_the_invariants_in_any_delivery_order(
        policy in policy(),
        ops in prop::collection::vec(op(), 1..160),
    ) {
        let mut sim = Sim::new(policy);
        for op in ops {
            sim.step(op)?;
        }
        sim.drain()?;
        // Let every remaining sync finish and every wake-up come, then
        // settle again: the end state holds the invariants too.
        for _ in 0..8 {
            sim.step(Op::RunnerFinish(0))?;
            sim.step(Op::WakeAtDeadline)?;
            sim.drain()?;
        }
    }
}
