//! Property tests: random interleavings of session starts, ends and
//! replacements, tool calls and results, wakes, sync reports with random
//! outcomes, watcher reports, notice deliveries and restarts (rebuilding the
//! machine from its persisted record), checked after every step against a
//! shadow model.
//!
//! The shadow keeps its own list of observed edits and a deliberately
//! *permissive* notion of "settled" (any result of the same session and
//! tool after the call settles it, as do the settle deadline and the end of
//! the session). The machine settles no more than that, so "the shadow saw
//! an unsettled edit at a sync's start" implies the machine did too — which
//! is what makes the no-false-freshness check sound.
//!
//! The shadow's watcher is the plain reading of the spec: an attempt is
//! one per session lifetime and only while no watcher runs; reports name
//! the owner's live session and the watcher's pid; a `fresh` that no sync
//! justifies is allowed only while a watcher verified after its
//! `WatcherStarted` — with no failure, death, stop or end of its session in
//! between — is running.

use std::collections::{BTreeMap, BTreeSet};

use cgc_fresh_proto::{FreshnessStatus, NoticeCondition, SessionStartReason};
use proptest::prelude::*;

use super::watcher_model::{raised_by_watcher, WatcherModel, WatcherReport};
use super::*;
use crate::config::WatchMode;

const NAMES: [&str; 3] = ["a", "b", "c"];
const INSTANCES: [&str; 2] = ["i1", "i2"];
/// The third tool does not modify files.
const TOOLS: [&str; 3] = ["edit", "write", "read"];
/// Path lists a tool call may carry, and whether the call is an edit of
/// the workspace `/ws`.
const PATH_SETS: [(&[&str], bool); 6] = [
    (&[], true),
    (&["src/a.rs"], true),
    (&["/ws/b.rs"], true),
    (&["/elsewhere/c.rs"], false),
    (&["../ws2/d.rs"], false),
    (&["/ws/../ws/./e.rs", "/tmp/x"], true),
];
/// The workspace-relative paths of each of [`PATH_SETS`] inside `/ws`
/// (`None`: the call named no path).
const PATHS_INSIDE: [Option<&[&str]>; 6] = [
    None,
    Some(&["src/a.rs"]),
    Some(&["b.rs"]),
    Some(&[]),
    Some(&[]),
    Some(&["e.rs"]),
];

#[derive(Debug, Clone)]
enum Op {
    Start {
        name: usize,
        instance: usize,
    },
    End {
        name: usize,
    },
    Call {
        name: usize,
        tool: usize,
        paths: usize,
    },
    Result {
        name: usize,
        tool: usize,
    },
    Wake,
    WakeAtDeadline,
    Request {
        name: Option<usize>,
    },
    /// The shell spawns the sync: of the class it prefers (`true`: the
    /// whole repository) when the start allows it, else of the other; a
    /// preference of a class the start does not allow is reported as over
    /// budget when `over` is set.
    Spawn {
        whole: bool,
        over: bool,
    },
    Busy,
    Declined,
    Finish(usize),
    StaleReport,
    DeliverEmitted(usize),
    Deliver {
        name: usize,
        condition: usize,
    },
    Restart,
    Watcher(WatcherOp),
}

/// A watcher report. `owner` picks the running watcher's session (when
/// there is one) instead of `name`; `right_pid` its pid instead of another.
#[derive(Debug, Clone)]
struct WatcherOp {
    kind: WatcherReport,
    name: usize,
    owner: bool,
    right_pid: bool,
}

fn watcher_op() -> impl Strategy<Value = WatcherOp> {
    (
        prop::sample::select(WatcherReport::ALL.to_vec()),
        0..3usize,
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.9),
    )
        .prop_map(|(kind, name, owner, right_pid)| WatcherOp {
            kind,
            name,
            owner,
            right_pid,
        })
}

fn outcome(index: usize) -> SyncOutcome {
    match index % 8 {
        0..=2 => SyncOutcome::Succeeded,
        3 => SyncOutcome::NotApplied {
            detail: "skipped".into(),
        },
        4 => SyncOutcome::Failed {
            error: "exit status 1".into(),
        },
        5 => SyncOutcome::TimedOut {
            error: "600000 ms".into(),
        },
        6 => SyncOutcome::Busy {
            holder: "pid 7: cgc watch .".into(),
        },
        _ => SyncOutcome::Cancelled,
    }
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0..3usize, 0..2usize).prop_map(|(name, instance)| Op::Start { name, instance }),
        1 => (0..3usize).prop_map(|name| Op::End { name }),
        6 => (0..3usize, 0..3usize, 0..PATH_SETS.len())
            .prop_map(|(name, tool, paths)| Op::Call { name, tool, paths }),
        4 => (0..3usize, 0..3usize).prop_map(|(name, tool)| Op::Result { name, tool }),
        2 => Just(Op::Wake),
        3 => Just(Op::WakeAtDeadline),
        1 => proptest::option::of(0..3usize).prop_map(|name| Op::Request { name }),
        3 => (any::<bool>(), prop::bool::weighted(0.3))
            .prop_map(|(whole, over)| Op::Spawn { whole, over }),
        1 => Just(Op::Busy),
        1 => Just(Op::Declined),
        4 => (0..8usize).prop_map(Op::Finish),
        1 => Just(Op::StaleReport),
        2 => any::<usize>().prop_map(Op::DeliverEmitted),
        1 => (0..3usize, 0..NoticeCondition::ALL.len())
            .prop_map(|(name, condition)| Op::Deliver { name, condition }),
        1 => Just(Op::Restart),
        5 => watcher_op().prop_map(Op::Watcher),
        // What a shell carrying out a restart reports, about the running
        // watcher: its successor spawned, then verified.
        2 => prop::sample::select(vec![WatcherReport::Restarted, WatcherReport::Verified])
            .prop_map(|kind| Op::Watcher(WatcherOp {
                kind,
                name: 0,
                owner: true,
                right_pid: true,
            })),
    ]
}

fn policy() -> impl Strategy<Value = FreshnessPolicy> {
    (
        prop::bool::weighted(0.85),
        0..=3u32,
        (0..=3u32, any::<bool>()),
        0..1_500u64,
        1..4_000u64,
        prop_oneof![Just(0u64), 1..6_000u64],
        1..8_000u64,
    )
        .prop_map(
            |(
                auto_sync,
                max_syncs_per_session,
                (max_incremental_syncs_per_session, incremental_strategy),
                batch_ms,
                settle_ms,
                min_sync_gap_ms,
                watcher_apply_ms,
            )| {
                FreshnessPolicy {
                    auto_sync,
                    max_syncs_per_session,
                    max_incremental_syncs_per_session,
                    incremental_strategy,
                    batch_ms,
                    settle_ms,
                    min_sync_gap_ms,
                    watcher_apply_ms,
                    modifying_tools: vec!["edit".into(), "write".into()],
                    shell_tools: Vec::new(),
                    workspace_root: "/ws".into(),
                }
            },
        )
}

/// The lifetime of edits reported under an ended session's name.
const ORPHAN_LIFETIME: u64 = u64::MAX;

#[derive(Debug, Clone)]
struct ShadowEdit {
    lifetime: u64,
    tool: &'static str,
    at: u64,
    settled: bool,
}

#[derive(Debug, Clone)]
struct OpenFlight {
    id: FlightId,
    edits_at_start: usize,
    unsettled_at_start: bool,
    payer: Option<u64>,
    cancelled: bool,
    /// The classes of the processes spawned (a sync that falls back from
    /// the incremental path to a reconcile spawns one of each).
    spawned: BTreeSet<SyncCost>,
    allowance: SyncAllowance,
}

/// What the shadow expects of one step.
#[derive(Debug, Default)]
struct Expect {
    /// The input names an ended session, a stale flight, or is a report
    /// that never has effects: nothing may come out, nothing may change.
    silent: bool,
    cancel: Option<FlightId>,
    succeeded: Option<OpenFlight>,
    drained: bool,
    wake: bool,
    /// The watcher notice this step may raise.
    watcher_notice: Option<NoticeCondition>,
    /// An edit under an ended session's name: it may change the record
    /// (never to fresh) but nothing else may come out.
    orphan_edit: bool,
}

struct World {
    policy: FreshnessPolicy,
    machine: Freshness,
    now: u64,
    live: BTreeMap<&'static str, (Option<&'static str>, u64)>,
    ended: BTreeMap<&'static str, Option<&'static str>>,
    next_lifetime: u64,
    edits: Vec<ShadowEdit>,
    epoch_base: u64,
    open: Option<OpenFlight>,
    last_flight: Option<FlightId>,
    /// When the machine last started a sync (across restarts: the gap is
    /// a property of the machine's life, reset with it).
    last_start_at: Option<u64>,
    closed: Vec<FlightId>,
    fresh_basis: Option<usize>,
    spawns: BTreeMap<(u64, SyncCost), u32>,
    delivered: BTreeSet<(u64, NoticeCondition)>,
    emitted: Vec<(&'static str, NoticeCondition)>,
    watcher: WatcherModel,
}

impl World {
    fn new(policy: FreshnessPolicy) -> Self {
        World {
            machine: Freshness::new(policy.clone(), None, Millis(0)),
            policy,
            now: 0,
            live: BTreeMap::new(),
            ended: BTreeMap::new(),
            next_lifetime: 0,
            edits: Vec::new(),
            epoch_base: 0,
            open: None,
            last_flight: None,
            last_start_at: None,
            closed: Vec::new(),
            fresh_basis: None,
            spawns: BTreeMap::new(),
            delivered: BTreeSet::new(),
            emitted: Vec::new(),
            watcher: WatcherModel::new(1_001),
        }
    }

    fn new_lifetime(&mut self, name: &'static str, instance: Option<&'static str>) -> u64 {
        self.next_lifetime += 1;
        self.ended.remove(name);
        self.live.insert(name, (instance, self.next_lifetime));
        self.next_lifetime
    }

    fn end_lifetime(&mut self, lifetime: u64, expect: &mut Expect) {
        for edit in &mut self.edits {
            if edit.lifetime == lifetime {
                edit.settled = true;
            }
        }
        if let Some(open) = &mut self.open {
            if open.payer == Some(lifetime) && !open.cancelled {
                open.cancelled = true;
                expect.cancel = Some(open.id);
            }
        }
        self.watcher.end_lifetime(lifetime);
    }

    fn any_unsettled(&self) -> bool {
        self.edits
            .iter()
            .any(|edit| !edit.settled && self.now < edit.at + self.policy.settle_ms)
    }

    fn close(&mut self, expect: &mut Expect, refund: bool) -> Option<FlightId> {
        let open = self.open.take()?;
        if open.cancelled {
            expect.drained = true;
        } else if refund {
            if let Some(payer) = open.payer {
                for cost in &open.spawned {
                    *self.spawns.entry((payer, *cost)).or_default() -= 1;
                }
            }
        }
        self.closed.push(open.id);
        Some(open.id)
    }

    /// Turns `op` into an input and the shadow's expectations; `None` when
    /// the op does not apply now.
    fn prepare(&mut self, op: Op, expect: &mut Expect) -> Option<Input> {
        match op {
            Op::Start { name, instance } => {
                let (name, instance) = (NAMES[name], INSTANCES[instance]);
                match self.live.get(name).copied() {
                    Some((Some(known), _)) if known == instance => expect.silent = true,
                    Some((None, lifetime)) => {
                        self.live.insert(name, (Some(instance), lifetime));
                        expect.silent = true;
                    }
                    Some((Some(_), old)) => {
                        self.end_lifetime(old, expect);
                        self.new_lifetime(name, Some(instance));
                    }
                    None if self.ended.get(name) == Some(&Some(instance)) => expect.silent = true,
                    None => {
                        self.new_lifetime(name, Some(instance));
                    }
                }
                Some(Input::SessionStarted {
                    session: name.into(),
                    instance: instance.into(),
                    reason: SessionStartReason::Resume,
                    connection: None,
                    owner: None,
                })
            }
            Op::End { name } => {
                let name = NAMES[name];
                match self.live.remove(name) {
                    Some((instance, lifetime)) => {
                        self.ended.insert(name, instance);
                        self.end_lifetime(lifetime, expect);
                    }
                    None => expect.silent = true,
                }
                Some(Input::SessionEnded {
                    session: name.into(),
                })
            }
            Op::Call { name, tool, paths } => {
                let (name, tool) = (NAMES[name], TOOLS[tool]);
                let (path_list, is_edit) = PATH_SETS[paths];
                if tool == "read" || (self.ended.contains_key(name) && !is_edit) {
                    expect.silent = true;
                } else if self.ended.contains_key(name) {
                    // Counted, never settled by a result.
                    self.watcher.observe_edit(PATHS_INSIDE[paths]);
                    self.edits.push(ShadowEdit {
                        lifetime: ORPHAN_LIFETIME,
                        tool,
                        at: self.now,
                        settled: false,
                    });
                    expect.orphan_edit = true;
                } else {
                    let lifetime = match self.live.get(name) {
                        Some((_, lifetime)) => *lifetime,
                        None => self.new_lifetime(name, None),
                    };
                    if is_edit {
                        self.watcher.observe_edit(PATHS_INSIDE[paths]);
                        self.edits.push(ShadowEdit {
                            lifetime,
                            tool,
                            at: self.now,
                            settled: false,
                        });
                    }
                }
                Some(Input::ToolCall {
                    session: name.into(),
                    tool: tool.into(),
                    paths: path_list.iter().map(|path| path.to_string()).collect(),
                    not_indexed: 0,
                })
            }
            Op::Result { name, tool } => {
                let (name, tool) = (NAMES[name], TOOLS[tool]);
                match self.live.get(name) {
                    Some((_, lifetime)) => {
                        let lifetime = *lifetime;
                        for edit in &mut self.edits {
                            if edit.lifetime == lifetime && edit.tool == tool {
                                edit.settled = true;
                            }
                        }
                    }
                    None => expect.silent = true,
                }
                Some(Input::ToolResult {
                    session: name.into(),
                    tool: tool.into(),
                    ok: true,
                })
            }
            Op::Wake => {
                expect.wake = true;
                Some(Input::Wake)
            }
            Op::WakeAtDeadline => {
                if let Some(deadline) = self.machine.next_deadline() {
                    self.now = self.now.max(deadline.get());
                }
                expect.wake = true;
                Some(Input::Wake)
            }
            Op::Request { name } => {
                let name = name.map(|name| NAMES[name]);
                if name.is_some_and(|name| self.ended.contains_key(name)) {
                    expect.silent = true;
                }
                Some(Input::SyncRequested {
                    session: name.map(str::to_string),
                })
            }
            Op::Spawn { whole, over } => {
                let open = self.open.as_mut()?;
                let preferred = if whole {
                    SyncCost::WholeRepository
                } else {
                    SyncCost::ChangedFiles
                };
                if !open.allowance.allows(preferred) && over {
                    // The shell needs work its payer has no slot for.
                    let flight = self.close(expect, false)?;
                    return Some(Input::SyncOverBudget {
                        flight,
                        cost: preferred,
                    });
                }
                let other = if whole {
                    SyncCost::ChangedFiles
                } else {
                    SyncCost::WholeRepository
                };
                let cost = if open.allowance.allows(preferred) {
                    preferred
                } else {
                    other
                };
                expect.silent = true;
                if !open.cancelled && open.spawned.insert(cost) {
                    if let Some(payer) = open.payer {
                        *self.spawns.entry((payer, cost)).or_default() += 1;
                    }
                }
                Some(Input::SyncSpawned {
                    flight: open.id,
                    pid: 42,
                    cost,
                })
            }
            Op::Busy => {
                let flight = self.close(expect, true)?;
                Some(Input::SyncBusy {
                    flight,
                    holder: "pid 7: cgc watch .".into(),
                })
            }
            Op::Declined => {
                let flight = self.close(expect, false)?;
                Some(Input::SyncDeclined {
                    flight,
                    reason: "not indexed".into(),
                })
            }
            Op::Finish(index) => {
                let outcome = outcome(index);
                let open = self.open.clone()?;
                let flight = self.close(expect, matches!(outcome, SyncOutcome::Busy { .. }))?;
                if outcome == SyncOutcome::Succeeded && !open.cancelled {
                    expect.succeeded = Some(open);
                }
                Some(Input::SyncFinished { flight, outcome })
            }
            Op::StaleReport => {
                let flight = match (self.closed.last(), &self.open) {
                    (Some(closed), _) => *closed,
                    (None, Some(open)) => FlightId(open.id.get() + 1_000),
                    (None, None) => return None,
                };
                expect.silent = true;
                Some(Input::SyncFinished {
                    flight,
                    outcome: SyncOutcome::Succeeded,
                })
            }
            Op::DeliverEmitted(index) => {
                if self.emitted.is_empty() {
                    return None;
                }
                let (name, condition) = self.emitted[index % self.emitted.len()];
                Some(self.deliver(name, condition, expect))
            }
            Op::Deliver { name, condition } => {
                Some(self.deliver(NAMES[name], NoticeCondition::ALL[condition], expect))
            }
            Op::Restart => None,
            Op::Watcher(op) => Some(self.prepare_watcher(op, expect)),
        }
    }

    fn prepare_watcher(&mut self, op: WatcherOp, expect: &mut Expect) -> Input {
        let name = self.watcher.subject(op.owner, NAMES[op.name]);
        let lifetime = self.live.get(name).map(|(_, lifetime)| *lifetime);
        let (input, verdict) =
            self.watcher
                .report(op.kind, name, lifetime, op.right_pid, WatchMode::On);
        expect.silent |= verdict.ignored;
        expect.watcher_notice = verdict.notice;
        if op.kind == WatcherReport::Started && !verdict.ignored && self.any_unsettled() {
            self.watcher.started_with_unsettled_edits();
        }
        if verdict.verified_now {
            // A running sync no longer has a say.
            if let Some(open) = &mut self.open {
                open.cancelled = true;
            }
        }
        input
    }

    fn deliver(
        &mut self,
        name: &'static str,
        condition: NoticeCondition,
        expect: &mut Expect,
    ) -> Input {
        let lifetime = self.live.get(name).map(|(_, lifetime)| *lifetime);
        if let Some(lifetime) = lifetime {
            self.delivered.insert((lifetime, condition));
        }
        expect.silent = true;
        Input::NoticeDelivered {
            session: key(name, lifetime),
            condition,
        }
    }

    fn restart(&mut self) -> Result<(), TestCaseError> {
        let text = self
            .machine
            .record()
            .to_json()
            .expect("a record serializes");
        let record = FreshnessRecord::from_json(&text).expect("a record reads back");
        prop_assert_eq!(&record, self.machine.record());
        self.machine = Freshness::new(self.policy.clone(), Some(record), Millis(self.now));
        prop_assert_eq!(self.machine.record().status, FreshnessStatus::Unknown);
        prop_assert_eq!(
            self.machine.record().edit_epoch,
            self.epoch_base + self.edits.len() as u64
        );
        prop_assert_eq!(self.machine.next_deadline(), None);
        self.live.clear();
        self.ended.clear();
        // The new machine numbers lifetimes from 1 again; what was kept per
        // lifetime belonged to the ones that are gone.
        self.next_lifetime = 0;
        self.last_start_at = None;
        self.spawns.clear();
        self.delivered.clear();
        if let Some(open) = self.open.take() {
            self.closed.push(open.id);
        }
        self.fresh_basis = None;
        for edit in &mut self.edits {
            edit.settled = true;
        }
        self.emitted.clear();
        self.watcher.restart();
        prop_assert_eq!(&self.machine.record().watcher, &None);
        Ok(())
    }

    fn step(&mut self, dt: u64, op: Op) -> Result<(), TestCaseError> {
        self.now += dt;
        if matches!(op, Op::Restart) {
            return self.restart();
        }
        let mut expect = Expect::default();
        let Some(input) = self.prepare(op, &mut expect) else {
            return Ok(());
        };
        let before = self.machine.record().clone();
        let due_before = self.machine.next_deadline();
        let effects = self.machine.handle(Millis(self.now), input);
        let record = self.machine.record().clone();

        // RecordChanged: exactly once, last, iff the record changed.
        let changes = effects
            .iter()
            .filter(|effect| **effect == Effect::RecordChanged)
            .count();
        prop_assert!(changes <= 1, "{:?}", effects);
        prop_assert_eq!(changes == 1, record != before, "{:?}", effects);
        if changes == 1 {
            prop_assert_eq!(effects.last(), Some(&Effect::RecordChanged));
        }

        if expect.silent {
            prop_assert!(effects.is_empty(), "expected no effects, got {:?}", effects);
            prop_assert_eq!(&record, &before);
        }
        if expect.orphan_edit {
            // It changes the record and starts nothing of its own; a sync
            // queued earlier that has become due (`minSyncGapMs` passed)
            // may start with it, as with any input — the start itself is
            // checked below like every other; so may a verified watcher's
            // wait that reached its bound before this input (its notice is
            // checked below like every other).
            let lag_due = self.watcher.verified();
            prop_assert!(
                effects.iter().all(|effect| match effect {
                    Effect::RecordChanged | Effect::StartSync { .. } => true,
                    Effect::Notice { condition, .. } =>
                        lag_due && *condition == NoticeCondition::PossiblyStale,
                    _ => false,
                }),
                "an ended session's edit may only change the record, got {:?}",
                effects
            );
            let starts = effects
                .iter()
                .any(|effect| matches!(effect, Effect::StartSync { .. }));
            prop_assert!(
                !starts || due_before.is_some_and(|due| due.get() <= self.now),
                "an ended session's edit started a sync nothing had made due: {:?}",
                effects
            );
        }

        let cancels: Vec<FlightId> = effects
            .iter()
            .filter_map(|effect| match effect {
                Effect::CancelSync { flight } => Some(*flight),
                _ => None,
            })
            .collect();
        prop_assert_eq!(cancels, expect.cancel.into_iter().collect::<Vec<_>>());

        // The machine's own watcher decisions (a restart, a stop) are
        // checked against the model first: a stop raises its notice in a
        // step that is no watcher report.
        let watcher_decided = effects.iter().any(|effect| {
            matches!(
                effect,
                Effect::RestartWatcher { .. } | Effect::StopWatcher { .. }
            )
        });
        for effect in &effects {
            if self
                .watcher
                .apply_effect(effect)
                .map_err(TestCaseError::fail)?
            {
                expect.watcher_notice = Some(NoticeCondition::WatcherDied);
            }
        }

        let mut started = false;
        for effect in &effects {
            match effect {
                Effect::StartSync {
                    flight,
                    session,
                    manual,
                    allowance,
                } => {
                    prop_assert!(self.open.is_none(), "a second flight: {:?}", effects);
                    prop_assert!(
                        !self.watcher.verified(),
                        "a sync started while a verified watcher owns freshness"
                    );
                    prop_assert!(
                        *manual || self.watcher.running().is_none(),
                        "an automatic sync started while a watcher is verifying"
                    );
                    prop_assert!(self.last_flight.is_none_or(|last| *flight > last));
                    // Design reference 002: two sync starts are at least
                    // `minSyncGapMs` apart.
                    prop_assert!(
                        self.last_start_at
                            .is_none_or(|last| self.now >= last + self.policy.min_sync_gap_ms),
                        "a sync started {} ms after the last one (gap {})",
                        self.now - self.last_start_at.unwrap_or(0),
                        self.policy.min_sync_gap_ms
                    );
                    self.last_start_at = Some(self.now);
                    let payer = if *manual {
                        None
                    } else {
                        prop_assert!(self.policy.auto_sync);
                        let name = session
                            .as_ref()
                            .map(|key| key.name.as_str())
                            .expect("an automatic sync names its payer");
                        let lifetime = self.live.get(name).map(|(_, lifetime)| *lifetime);
                        prop_assert!(lifetime.is_some(), "payer {} is not live", name);
                        let lifetime = lifetime.unwrap_or_default();
                        let spent = |cost| self.spawns.get(&(lifetime, cost)).copied().unwrap_or(0);
                        // The start allows exactly the classes with a slot
                        // left, and at least one.
                        prop_assert_eq!(
                            *allowance,
                            SyncAllowance {
                                changed_files: self.policy.incremental_strategy
                                    && spent(SyncCost::ChangedFiles)
                                        < self.policy.max_incremental_syncs_per_session,
                                whole_repository: spent(SyncCost::WholeRepository)
                                    < self.policy.max_syncs_per_session,
                            }
                        );
                        prop_assert!(allowance.any(), "a start with no slot of either class");
                        Some(lifetime)
                    };
                    if *manual {
                        prop_assert_eq!(
                            *allowance,
                            SyncAllowance::ANY,
                            "a manual sync is not budgeted"
                        );
                    }
                    self.open = Some(OpenFlight {
                        id: *flight,
                        edits_at_start: self.edits.len(),
                        unsettled_at_start: self.any_unsettled(),
                        payer,
                        cancelled: false,
                        spawned: BTreeSet::new(),
                        allowance: *allowance,
                    });
                    self.last_flight = Some(*flight);
                    started = true;
                }
                Effect::Notice {
                    session, condition, ..
                } => {
                    let lifetime = self
                        .live
                        .get(session.name.as_str())
                        .map(|(_, lifetime)| *lifetime);
                    prop_assert!(
                        lifetime.is_some(),
                        "a notice to {} which is not live",
                        session
                    );
                    let lifetime = lifetime.unwrap_or_default();
                    prop_assert!(
                        !self.delivered.contains(&(lifetime, *condition)),
                        "{:?} for {} was delivered already",
                        condition,
                        session
                    );
                    // A stale completion claims nothing; the only notice in its
                    // step can come from the queued sync it lets go ahead, or
                    // from a verified watcher's wait that reached its bound
                    // while the superseded sync ran.
                    prop_assert!(
                        !expect.drained
                            || *condition == NoticeCondition::BudgetExhausted
                            || (watcher_decided && *condition == NoticeCondition::WatcherDied)
                            || (self.watcher.verified()
                                && *condition == NoticeCondition::PossiblyStale),
                        "a stale completion made a {:?} notice",
                        condition
                    );
                    if raised_by_watcher(*condition) {
                        prop_assert_eq!(
                            Some(*condition),
                            expect.watcher_notice,
                            "a watcher notice from the wrong step"
                        );
                    }
                    let name = NAMES
                        .iter()
                        .find(|name| **name == session.name.as_str())
                        .copied()
                        .unwrap_or("a");
                    self.emitted.push((name, *condition));
                }
                Effect::SessionOpened { session, .. } => {
                    let lifetime = self
                        .live
                        .get(session.name.as_str())
                        .map(|(_, lifetime)| *lifetime);
                    prop_assert_eq!(
                        Some(session.lifetime.get()),
                        lifetime,
                        "opened a lifetime the shadow does not know"
                    );
                }
                Effect::ProbeWorkspace { .. } => {
                    prop_assert!(false, "a probe with no shell tool configured");
                }
                Effect::CancelSync { .. }
                | Effect::SessionClosed { .. }
                | Effect::RestartWatcher { .. }
                | Effect::StopWatcher { .. }
                | Effect::RecordChanged
                | Effect::PrepareSync
                | Effect::WarmWorker => {}
            }
        }

        // A stale completion changes nothing, but the workspace it frees
        // may let a queued sync start or a waiting watcher restart (or be
        // given up).
        let lag_opened = self.watcher.verified()
            && record.status == FreshnessStatus::PossiblyStale
            && before.status != FreshnessStatus::PossiblyStale;
        if expect.drained && !started && !watcher_decided && !lag_opened {
            prop_assert_eq!(&record, &before, "a stale completion changed the record");
        }

        // Every observed edit is counted, and only those.
        prop_assert_eq!(record.edit_epoch, self.epoch_base + self.edits.len() as u64);

        // No false freshness. A success that the shadow sees covering every
        // edit (none after its start, none unsettled at it) permits `fresh`
        // — now, or later when a sync that never ran gives the status back —
        // for as long as no further edit is observed. Nothing else does.
        if let Some(flight) = &expect.succeeded {
            if flight.edits_at_start == self.edits.len() && !flight.unsettled_at_start {
                self.fresh_basis = Some(self.edits.len());
            }
        }
        // A verified watcher ends the episode: what a sync covered before
        // says nothing once the watcher is gone.
        let verified = self.watcher.verified();
        if verified {
            self.fresh_basis = None;
        }
        if record.status == FreshnessStatus::Fresh && !verified {
            prop_assert_eq!(
                self.fresh_basis,
                Some(self.edits.len()),
                "fresh without a success covering every edit or a verified watcher"
            );
        }
        // A verified watcher owns freshness: fresh with no stale episode
        // once it applied every edit made while it ran, possibly stale
        // while any waits for it.
        prop_assert_eq!(self.machine.watcher_owns_freshness(), verified);
        if self.watcher.owes_fresh() {
            prop_assert_eq!(record.status, FreshnessStatus::Fresh);
            prop_assert_eq!(record.stale_since, None);
        } else if verified {
            // Spec, "Verified watcher owns freshness": an edit the watcher
            // is applying opens no stale episode (`syncing`); one it has
            // not applied within `watcherApplyMs` does, dated no later
            // than the bound before now.
            match record.status {
                FreshnessStatus::Syncing => prop_assert_eq!(record.stale_since, None),
                FreshnessStatus::PossiblyStale => {
                    let since = record.stale_since.map(Millis::get);
                    prop_assert!(
                        since.is_some_and(|since| since + self.policy.watcher_apply_ms <= self.now),
                        "a stale episode under a verified watcher within its bound: {:?} at {}",
                        since,
                        self.now
                    );
                }
                other => prop_assert!(false, "{other:?} while a verified watcher owes an edit"),
            }
        }
        // The record's watcher facts follow the running watcher.
        self.watcher
            .check_facts(record.watcher.as_ref())
            .map_err(TestCaseError::fail)?;
        // One attempt per session, and only while no watcher runs.
        for name in NAMES {
            let lifetime = self.live.get(name).map(|(_, lifetime)| *lifetime);
            prop_assert_eq!(
                self.machine.watcher_attempt_allowed(&key(name, lifetime)),
                self.watcher.may_attempt(lifetime)
            );
        }

        // Budget: automatic spawns per session and class within the limit.
        for ((_, cost), spent) in &self.spawns {
            let max = match cost {
                SyncCost::ChangedFiles => self.policy.max_incremental_syncs_per_session,
                SyncCost::WholeRepository => self.policy.max_syncs_per_session,
            };
            prop_assert!(*spent <= max, "{} {:?} syncs over {}", spent, cost, max);
        }

        // Deadlines: none while a sync runs; none overdue after a wake; none
        // means nothing would ever happen by time alone.
        let deadline = self.machine.next_deadline();
        if self.open.is_some() {
            prop_assert_eq!(deadline, None);
        }
        if expect.wake {
            prop_assert!(deadline.is_none_or(|deadline| deadline.get() > self.now));
        }
        if deadline.is_none() && self.open.is_none() {
            let mut idle = self.machine.clone();
            let later = idle.handle(Millis(self.now + 100_000_000), Input::Wake);
            prop_assert!(
                !later
                    .iter()
                    .any(|effect| matches!(effect, Effect::StartSync { .. })),
                "work was pending without a deadline"
            );
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        // Shrunk failures are reported in the test output; nothing is
        // written into the source tree.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_interleavings_keep_every_invariant(
        policy in policy(),
        steps in prop::collection::vec((0..2_500u64, op()), 1..150),
    ) {
        let mut world = World::new(policy);
        for (dt, op) in steps {
            world.step(dt, op)?;
        }
    }
}

/// The key of `name`'s lifetime as the shadow numbers them (the machine
/// numbers them the same way, from 1); `None` gives one that is not current.
fn key(name: &str, lifetime: Option<u64>) -> SessionKey {
    SessionKey {
        name: name.to_owned(),
        lifetime: Lifetime::new(lifetime.unwrap_or(0)),
    }
}

/// A case proptest found (shrunk): an edit made while the watcher starts
/// up waits for a restart, and an `Applied` report about another session's
/// watcher (stale: another name, another pid) does not cover it. The
/// reference model used to let such a report cover it, then called the
/// machine's restart after verification one for nothing.
#[test]
fn a_stale_applied_report_does_not_cover_an_edit_made_during_start_up() {
    let policy = FreshnessPolicy {
        auto_sync: false,
        max_syncs_per_session: 0,
        max_incremental_syncs_per_session: 0,
        incremental_strategy: true,
        batch_ms: 0,
        settle_ms: 1,
        min_sync_gap_ms: 0,
        watcher_apply_ms: 30_000,
        modifying_tools: vec!["edit".into(), "write".into()],
        shell_tools: Vec::new(),
        workspace_root: "/ws".into(),
    };
    let watcher = |kind, name, owner, right_pid| {
        Op::Watcher(WatcherOp {
            kind,
            name,
            owner,
            right_pid,
        })
    };
    let mut world = World::new(policy);
    let steps = [
        (
            0,
            Op::Call {
                name: 0,
                tool: 0,
                paths: 0,
            },
        ),
        (1, watcher(WatcherReport::Started, 0, false, false)),
        (
            0,
            Op::Call {
                name: 0,
                tool: 0,
                paths: 1,
            },
        ),
        (0, watcher(WatcherReport::Applied, 1, false, false)),
        (1, watcher(WatcherReport::Verified, 0, true, true)),
    ];
    for (dt, op) in steps {
        world.step(dt, op).unwrap();
    }
}
