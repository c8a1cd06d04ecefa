//! Random sequences of inputs to the core freshness machine, checked after
//! every step against a shadow model ([`cgc_fresh_fuzz::workspace_model`],
//! whose watcher part is the core's reference model
//! `cgc_fresh_core::freshness::watcher_model`, shared with the core's
//! property tests) that knows only what was fed in and what came out.
//!
//! Inputs: session starts (new, repeated, replacing), ends, tool calls of
//! modifying and other tools with paths inside and outside the workspace,
//! tool results, wakes (also exactly at the machine's deadline), manual
//! sync requests, the shell's reports on the syncs the machine started
//! (spawned, busy, declined, finished with every outcome, stale reports),
//! the watcher supervisor's reports (started, spawn failed, busy, declined,
//! verified, failed, died, stopped — about the running watcher or not),
//! notice deliveries (only of notices received, when a subscriber is
//! there), and restarts from the persisted record. Time only moves forward.
//!
//! Asserted after every step, each from the documentation of
//! `cgc_fresh_core::freshness`:
//! - `fresh` only when the last successful sync saw no edit after its
//!   start and none unsettled at it, with no edit observed since — or
//!   while a watcher verified after its start (and not failed, died,
//!   stopped or ended since) runs; a verified watcher means `fresh` once
//!   it reported every edit made while it ran applied, `syncing` while any
//!   waits (no stale episode), `possibly_stale` once one waited longer
//!   than `watcherApplyMs`;
//! - every notice goes to a live session, never for a (session lifetime,
//!   condition) already delivered: each pair is delivered at most once;
//! - automatic syncs spawned per session lifetime stay within
//!   `maxSyncsPerSession` (and match `automatic_syncs_spawned`); an
//!   automatic sync starts only with `autoSync`, for a live payer with a
//!   free slot, with every edit settled and no watcher running;
//! - one sync at a time, ids increasing; a session's end cancels the sync
//!   it pays for (and only that);
//! - the edit epoch counts exactly the observed edits;
//! - `RecordChanged` comes once, last, exactly when the record changed;
//!   inputs the docs call ignorable (a result, request or end naming an
//!   ended session, a non-modifying tool, a stale flight, `SyncSpawned`,
//!   `NoticeDelivered`, a stale watcher report) have no effect; an edit
//!   under an ended session's name is counted but raises no notice and
//!   starts no lifetime; a stale completion changes nothing;
//! - `next_deadline` is `None` while a sync occupies the workspace, never
//!   already due after a wake, and `None` only when no sync would ever
//!   start by time alone;
//! - the state frame agrees with the record and survives the wire; a
//!   restart reads the record back unchanged and starts `unknown`.

#![no_main]

use arbitrary::Arbitrary;
use cgc_fresh_core::config::WatchMode;
use cgc_fresh_core::freshness::watcher_model::{raised_by_watcher, WatcherReport};
use cgc_fresh_core::freshness::{
    Effect, FlightId, Freshness, FreshnessPolicy, FreshnessRecord, Input, Lifetime, Millis,
    SessionKey, SyncCost, SyncOutcome,
};
use cgc_fresh_fuzz::round_trip;
use cgc_fresh_fuzz::workspace_model::{self, OpenFlight, Shadow, WORKSPACE_ROOT};
use cgc_fresh_proto::{
    Envelope, FreshnessStatus, NoticeCondition, ServerFrame, SessionStartReason,
};
use libfuzzer_sys::fuzz_target;

const NAMES: [&str; 3] = ["a", "b", "c"];
/// `edit` and `write` modify files; `read` does not, nor does `Edit`
/// (tool names match exactly).
const TOOLS: [&str; 4] = ["edit", "write", "read", "Edit"];
const MODIFYING: [&str; 2] = ["edit", "write"];
/// Path components a tool path is built from.
const PIECES: [&str; 8] = ["ws", "src", "a.rs", ".", "..", "", "tmp", "ws2"];
#[derive(Arbitrary, Debug)]
struct Scenario {
    manual_only: bool,
    max_syncs: u8,
    batch_ms: u16,
    settle_ms: u16,
    steps: Vec<Step>,
}

#[derive(Arbitrary, Debug)]
struct Step {
    advance: Advance,
    /// Whether a subscriber is there to receive this step's notices.
    subscribed: bool,
    op: Op,
}

#[derive(Arbitrary, Debug)]
enum Advance {
    Not,
    Little(u8),
    Much(u16),
}

impl Advance {
    fn millis(&self) -> u64 {
        match self {
            Advance::Not => 0,
            Advance::Little(ms) => u64::from(*ms),
            Advance::Much(ms) => u64::from(*ms) * 8,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Op {
    Start {
        name: u8,
        instance: u8,
        reason: u8,
    },
    End {
        name: u8,
    },
    Call {
        name: u8,
        tool: u8,
        paths: Vec<PathSpec>,
    },
    Result {
        name: u8,
        tool: u8,
        ok: bool,
    },
    Wake,
    WakeAtDeadline,
    Request {
        name: Option<u8>,
    },
    Spawn {
        pid: u32,
    },
    ProbeBusy,
    Declined,
    Finish(Outcome),
    StaleReport(u8),
    Restart,
    Watcher(WatcherOp),
}

#[derive(Arbitrary, Debug)]
struct PathSpec {
    absolute: bool,
    pieces: Vec<u8>,
}

impl PathSpec {
    fn text(&self) -> String {
        let pieces: Vec<&str> = self
            .pieces
            .iter()
            .take(6)
            .map(|piece| PIECES[usize::from(*piece) % PIECES.len()])
            .collect();
        let joined = pieces.join("/");
        if self.absolute {
            format!("/{joined}")
        } else {
            joined
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Succeeded,
    NotApplied,
    Failed,
    TimedOut,
    Busy,
    Cancelled,
}

impl Outcome {
    fn report(self) -> SyncOutcome {
        match self {
            Outcome::Succeeded => SyncOutcome::Succeeded,
            Outcome::NotApplied => SyncOutcome::NotApplied {
                detail: "nothing to apply".into(),
            },
            Outcome::Failed => SyncOutcome::Failed {
                error: "exit status 1".into(),
            },
            Outcome::TimedOut => SyncOutcome::TimedOut {
                error: "after 600000 ms".into(),
            },
            Outcome::Busy => SyncOutcome::Busy {
                holder: "pid 7: cgc watch .".into(),
            },
            Outcome::Cancelled => SyncOutcome::Cancelled,
        }
    }
}

#[derive(Arbitrary, Debug)]
struct WatcherOp {
    /// Picks one of [`WatcherReport::ALL`].
    kind: u8,
    name: u8,
    /// Name the running watcher's session instead of `name`.
    owner: bool,
    /// Name the running watcher's pid instead of another.
    right_pid: bool,
    auto: bool,
}

fn name(index: u8) -> &'static str {
    NAMES[usize::from(index) % NAMES.len()]
}

/// What the shadow expects of one step.
#[derive(Debug, Default)]
struct Expect {
    /// The docs say this input changes nothing and has no effects.
    silent: bool,
    /// The sync the machine must cancel.
    cancel: Option<FlightId>,
    /// The flight whose success this step reports (if it still counts).
    succeeded: Option<OpenFlight>,
    /// The step reports the end of a draining sync.
    drained: bool,
    /// The step is a wake.
    wake: bool,
    /// The watcher notice this step may raise.
    watcher_notice: Option<NoticeCondition>,
}

struct World {
    policy: FreshnessPolicy,
    machine: Freshness,
    shadow: Shadow,
}

impl World {
    fn new(policy: FreshnessPolicy) -> Self {
        World {
            machine: Freshness::new(policy.clone(), None, Millis(0)),
            shadow: Shadow::new(policy.settle_ms),
            policy,
        }
    }

    /// The input for `op`, with what the shadow expects of it; `None` when
    /// the op has nothing to report about now.
    fn prepare(&mut self, op: &Op, expect: &mut Expect) -> Option<Input> {
        let shadow = &mut self.shadow;
        Some(match op {
            Op::Start {
                name: index,
                instance,
                reason,
            } => {
                let (name, instance) = (name(*index), instance % 3);
                match shadow.live.get(name).copied() {
                    Some(live) if live.instance == Some(instance) => expect.silent = true,
                    Some(live) if live.instance.is_none() => {
                        shadow.live.insert(
                            name,
                            workspace_model::Live {
                                instance: Some(instance),
                                ..live
                            },
                        );
                        expect.silent = true;
                    }
                    Some(live) => {
                        expect.cancel = shadow.end_lifetime(live.lifetime);
                        shadow.start_lifetime(name, Some(instance));
                    }
                    None if shadow.ended.get(name) == Some(&Some(instance)) => {
                        expect.silent = true;
                    }
                    None => {
                        shadow.start_lifetime(name, Some(instance));
                    }
                }
                Input::SessionStarted {
                    session: name.into(),
                    instance: format!("pi-{instance}"),
                    reason: SessionStartReason::ALL
                        [usize::from(*reason) % SessionStartReason::ALL.len()],
                    connection: None,
                    owner: None,
                }
            }
            Op::End { name: index } => {
                let name = name(*index);
                match shadow.live.remove(name) {
                    Some(live) => {
                        shadow.ended.insert(name, live.instance);
                        expect.cancel = shadow.end_lifetime(live.lifetime);
                    }
                    None => expect.silent = true,
                }
                Input::SessionEnded {
                    session: name.into(),
                }
            }
            Op::Call {
                name: index,
                tool,
                paths,
            } => {
                let (name, tool) = (name(*index), TOOLS[usize::from(*tool) % TOOLS.len()]);
                let paths: Vec<String> = paths.iter().take(4).map(PathSpec::text).collect();
                // A call naming no path may have touched anything.
                let observed = paths.is_empty()
                    || paths
                        .iter()
                        .any(|path| workspace_model::inside_workspace(path));
                let lifetime = if !MODIFYING.contains(&tool) {
                    None
                } else if shadow.ended.contains_key(name) {
                    // An edit under an ended session's name still counts,
                    // but revives nothing, and no result settles it.
                    observed.then_some(workspace_model::ORPHAN)
                } else {
                    Some(match shadow.lifetime(name) {
                        Some(lifetime) => lifetime,
                        None => shadow.start_lifetime(name, None),
                    })
                };
                match lifetime {
                    None => expect.silent = true,
                    Some(lifetime) if observed => {
                        let inside: Vec<String> = paths
                            .iter()
                            .filter_map(|path| workspace_model::workspace_relative(path))
                            .collect();
                        let inside: Vec<&str> = inside.iter().map(String::as_str).collect();
                        shadow
                            .watcher
                            .observe_edit((!paths.is_empty()).then_some(&inside[..]));
                        shadow.edits.push(workspace_model::Edit {
                            lifetime,
                            tool,
                            at: shadow.now,
                            settled: false,
                        })
                    }
                    Some(_) => {}
                }
                Input::ToolCall {
                    session: name.into(),
                    tool: tool.into(),
                    paths,
                    not_indexed: 0,
                }
            }
            Op::Result {
                name: index,
                tool,
                ok,
            } => {
                let (name, tool) = (name(*index), TOOLS[usize::from(*tool) % TOOLS.len()]);
                match shadow.lifetime(name) {
                    Some(lifetime) => {
                        for edit in &mut shadow.edits {
                            if edit.lifetime == lifetime && edit.tool == tool {
                                edit.settled = true;
                            }
                        }
                    }
                    None => expect.silent = true,
                }
                Input::ToolResult {
                    session: name.into(),
                    tool: tool.into(),
                    ok: *ok,
                }
            }
            Op::Wake => {
                expect.wake = true;
                Input::Wake
            }
            Op::WakeAtDeadline => {
                if let Some(deadline) = self.machine.next_deadline() {
                    shadow.now = shadow.now.max(deadline.get());
                }
                expect.wake = true;
                Input::Wake
            }
            Op::Request { name: index } => {
                let name = index.map(name);
                if name.is_some_and(|name| shadow.ended.contains_key(name)) {
                    expect.silent = true;
                }
                Input::SyncRequested {
                    session: name.map(str::to_owned),
                }
            }
            Op::Spawn { pid } => {
                expect.silent = true;
                let flight = match &mut shadow.flight {
                    Some(flight) => {
                        if !flight.draining && !flight.spawned {
                            flight.spawned = true;
                            if let Some(payer) = flight.payer {
                                *shadow.spawns.entry(payer).or_default() += 1;
                            }
                        }
                        flight.id
                    }
                    // A report about a sync that does not exist.
                    None => FlightId(shadow.last_started.map_or(0, FlightId::get) + 7),
                };
                // The shadow's shell runs reconciles only (the policy has no
                // incremental allowance): the class the spec's budget counts.
                Input::SyncSpawned {
                    flight,
                    pid: *pid,
                    cost: SyncCost::WholeRepository,
                }
            }
            Op::ProbeBusy => {
                let flight = shadow.close_flight(true)?;
                expect.drained = flight.draining;
                Input::SyncBusy {
                    flight: flight.id,
                    holder: "pid 7: cgc mcp start".into(),
                }
            }
            Op::Declined => {
                let flight = shadow.close_flight(false)?;
                expect.drained = flight.draining;
                Input::SyncDeclined {
                    flight: flight.id,
                    reason: "the workspace has no index".into(),
                }
            }
            Op::Finish(outcome) => {
                let flight = shadow.close_flight(*outcome == Outcome::Busy)?;
                expect.drained = flight.draining;
                let id = flight.id;
                if *outcome == Outcome::Succeeded && !flight.draining {
                    expect.succeeded = Some(flight);
                }
                Input::SyncFinished {
                    flight: id,
                    outcome: outcome.report(),
                }
            }
            Op::StaleReport(pick) => {
                let flight = *shadow
                    .closed
                    .get(usize::from(*pick) % shadow.closed.len().max(1))?;
                expect.silent = true;
                Input::SyncFinished {
                    flight,
                    outcome: SyncOutcome::Succeeded,
                }
            }
            Op::Restart => return None,
            Op::Watcher(op) => self.prepare_watcher(op, expect),
        })
    }

    fn prepare_watcher(&mut self, op: &WatcherOp, expect: &mut Expect) -> Input {
        let shadow = &mut self.shadow;
        let kind = WatcherReport::ALL[usize::from(op.kind) % WatcherReport::ALL.len()];
        let name = shadow.watcher.subject(op.owner, name(op.name));
        let mode = if op.auto {
            WatchMode::Auto
        } else {
            WatchMode::On
        };
        let lifetime = shadow.lifetime(name);
        let (input, verdict) = shadow
            .watcher
            .report(kind, name, lifetime, op.right_pid, mode);
        expect.silent |= verdict.ignored;
        expect.watcher_notice = verdict.notice;
        if kind == WatcherReport::Started && !verdict.ignored && shadow.any_unsettled() {
            shadow.watcher.started_with_unsettled_edits();
        }
        if verdict.verified_now {
            // A running sync drains: its outcome no longer counts.
            if let Some(flight) = &mut shadow.flight {
                flight.draining = true;
            }
        }
        input
    }

    /// Rebuilds the machine from its persisted record, as a restarted
    /// service does.
    fn restart(&mut self) {
        let record = self.machine.record().clone();
        let text = record
            .to_json()
            .unwrap_or_else(|error| panic!("a record does not serialize: {error}"));
        let read = FreshnessRecord::from_json(&text)
            .unwrap_or_else(|error| panic!("a written record is not read back: {error}"));
        assert_eq!(read, record, "the record changed on its way through disk");
        self.machine = Freshness::new(self.policy.clone(), Some(read), Millis(self.shadow.now));
        let restored = self.machine.record();
        assert_eq!(
            restored.status,
            FreshnessStatus::Unknown,
            "a restart claims a status"
        );
        assert_eq!(
            restored.edit_epoch, record.edit_epoch,
            "a restart lost edits"
        );
        assert_eq!(restored.watcher, None, "a watcher survived a restart");
        assert_eq!(
            self.machine.next_deadline(),
            None,
            "a restart armed a timer"
        );

        let shadow = &mut self.shadow;
        shadow.live.clear();
        shadow.ended.clear();
        if let Some(flight) = shadow.flight.take() {
            shadow.closed.push(flight.id);
        }
        for edit in &mut shadow.edits {
            edit.settled = true;
        }
        shadow.fresh_basis = None;
        shadow.watcher.restart();
        shadow.restart_lifetimes();
    }

    fn step(&mut self, step: &Step) {
        self.shadow.now = self.shadow.now.saturating_add(step.advance.millis());
        if matches!(step.op, Op::Restart) {
            self.restart();
            self.check_invariants(&Expect::default());
            return;
        }
        let mut expect = Expect::default();
        let Some(input) = self.prepare(&step.op, &mut expect) else {
            return;
        };
        let now = Millis(self.shadow.now);
        let before = self.machine.record().clone();
        let effects = self.machine.handle(now, input.clone());
        let record = self.machine.record().clone();

        let changes = effects
            .iter()
            .filter(|effect| **effect == Effect::RecordChanged)
            .count();
        assert!(changes <= 1, "RecordChanged twice: {effects:?}");
        assert_eq!(
            changes == 1,
            record != before,
            "RecordChanged without a change, or a change without it: {effects:?}"
        );
        if changes == 1 {
            assert_eq!(
                effects.last(),
                Some(&Effect::RecordChanged),
                "RecordChanged is not last"
            );
        }
        if expect.silent {
            assert!(
                effects.is_empty(),
                "{input:?} should change nothing, got {effects:?}"
            );
            assert_eq!(record, before, "{input:?} should change nothing");
        }

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
            match self.shadow.watcher.apply_effect(effect) {
                Ok(true) => expect.watcher_notice = Some(NoticeCondition::WatcherDied),
                Ok(false) => {}
                Err(problem) => panic!("{problem}, after {input:?}"),
            }
        }

        let mut cancels = Vec::new();
        let mut started = false;
        let mut prepared = false;
        let mut notices = Vec::new();
        for effect in &effects {
            match effect {
                Effect::CancelSync { flight } => cancels.push(*flight),
                Effect::StartSync {
                    flight,
                    session,
                    manual,
                    ..
                } => {
                    self.check_start(*flight, session.as_ref().map(|k| k.name.as_str()), *manual);
                    started = true;
                }
                Effect::Notice {
                    session,
                    condition,
                    text,
                    ..
                } => {
                    let lifetime = self.shadow.lifetime(&session.name).unwrap_or_else(|| {
                        panic!("a {condition:?} notice to {session}, which is not live")
                    });
                    assert!(
                        !self.shadow.delivered.contains_key(&(lifetime, *condition)),
                        "{condition:?} offered again to {session} after it was delivered"
                    );
                    assert!(!text.is_empty(), "an empty notice");
                    assert!(
                        !expect.drained
                            || *condition == NoticeCondition::BudgetExhausted
                            || (watcher_decided && *condition == NoticeCondition::WatcherDied)
                            || (self.shadow.watcher.verified()
                                && *condition == NoticeCondition::PossiblyStale),
                        "the end of a draining sync raised {condition:?}"
                    );
                    if raised_by_watcher(*condition) {
                        assert_eq!(
                            Some(*condition),
                            expect.watcher_notice,
                            "a watcher notice from a step that cannot raise it"
                        );
                    }
                    assert_eq!(
                        session.lifetime.get(),
                        lifetime,
                        "a notice to another lifetime"
                    );
                    notices.push((session.clone(), *condition, lifetime));
                }
                Effect::SessionOpened { session, .. } => {
                    assert_eq!(
                        self.shadow.lifetime(&session.name),
                        Some(session.lifetime.get()),
                        "opened a lifetime the shadow does not know"
                    );
                }
                Effect::ProbeWorkspace { .. } => {
                    panic!("a probe with no shell tool configured: {input:?}")
                }
                // A hint to parse ahead of a sync that waits: never while
                // one runs (checked below, once the step is done).
                Effect::PrepareSync => prepared = true,
                // A hint to start the worker at a session's start: the
                // shell decides; it changes nothing the model tracks.
                Effect::SessionClosed { .. }
                | Effect::RestartWatcher { .. }
                | Effect::StopWatcher { .. }
                | Effect::RecordChanged
                | Effect::WarmWorker => {}
            }
        }
        if prepared {
            assert!(
                !started && self.machine.current_flight().is_none(),
                "a prepare while a sync runs or starts: {input:?} → {effects:?}"
            );
        }
        assert_eq!(
            cancels,
            expect.cancel.into_iter().collect::<Vec<_>>(),
            "wrong cancellations"
        );
        // The freed workspace may let a queued sync start or a waiting
        // watcher restart (or be given up).
        // A verified watcher's wait may reach its bound (`watcherApplyMs`)
        // in any step: it opens the stale episode then.
        let lag_opened = self.shadow.watcher.verified()
            && record.status == FreshnessStatus::PossiblyStale
            && before.status != FreshnessStatus::PossiblyStale;
        if expect.drained && !started && !watcher_decided && !lag_opened {
            assert_eq!(
                record, before,
                "the end of a draining sync changed the record"
            );
        }

        // A subscriber receives this step's notices; the shell reports each.
        if step.subscribed {
            for (session, condition, lifetime) in notices {
                let delivered = self
                    .shadow
                    .delivered
                    .entry((lifetime, condition))
                    .or_default();
                *delivered += 1;
                assert_eq!(*delivered, 1, "{condition:?} delivered twice to {session}");
                let effects = self
                    .machine
                    .handle(now, Input::NoticeDelivered { session, condition });
                assert!(effects.is_empty(), "a delivery had effects: {effects:?}");
            }
        }

        if let Some(flight) = &expect.succeeded {
            if flight.edits_at_start == self.shadow.edits.len() && !flight.unsettled_at_start {
                self.shadow.fresh_basis = Some(self.shadow.edits.len());
            }
        }
        self.check_invariants(&expect);
    }

    /// A `StartSync`: checked against the rules for starting, then opened.
    fn check_start(&mut self, flight: FlightId, session: Option<&str>, manual: bool) {
        let shadow = &mut self.shadow;
        assert!(
            shadow.flight.is_none(),
            "a second sync started while {:?} occupies the workspace",
            shadow.flight
        );
        assert!(
            !shadow.watcher.verified(),
            "a sync started while a verified watcher owns freshness"
        );
        assert!(
            shadow.last_started.is_none_or(|last| flight > last),
            "flight ids do not increase"
        );
        let payer = if manual {
            if let Some(name) = session {
                assert!(
                    shadow.lifetime(name).is_some(),
                    "a manual sync names {name}, which is not live"
                );
            }
            None
        } else {
            assert!(self.policy.auto_sync, "an automatic sync without autoSync");
            assert!(
                shadow.watcher.running().is_none(),
                "an automatic sync started while a watcher runs"
            );
            assert!(
                !shadow.any_unsettled(),
                "an automatic sync started while an edit is unsettled"
            );
            let name = session.unwrap_or_else(|| panic!("an automatic sync names no payer"));
            let lifetime = shadow
                .lifetime(name)
                .unwrap_or_else(|| panic!("the payer {name} is not live"));
            let spent = shadow.spawns.get(&lifetime).copied().unwrap_or(0);
            assert!(
                spent < self.policy.max_syncs_per_session,
                "{name} has no slot left ({spent} spawned)"
            );
            Some(lifetime)
        };
        shadow.flight = Some(OpenFlight {
            id: flight,
            edits_at_start: shadow.edits.len(),
            unsettled_at_start: shadow.any_unsettled(),
            payer,
            draining: false,
            spawned: false,
        });
        shadow.last_started = Some(flight);
    }

    fn check_invariants(&mut self, expect: &Expect) {
        let shadow = &mut self.shadow;
        let machine = &self.machine;
        let record = machine.record();

        assert_eq!(
            record.edit_epoch,
            shadow.edits.len() as u64,
            "the epoch does not count the observed edits"
        );

        // No false freshness.
        let verified = shadow.watcher.verified();
        if verified {
            shadow.fresh_basis = None;
        }
        if shadow.watcher.owes_fresh() {
            assert_eq!(
                record.status,
                FreshnessStatus::Fresh,
                "a verified watcher that applied every edit but not fresh"
            );
            assert_eq!(
                record.stale_since, None,
                "a verified watcher with a stale episode"
            );
        } else if verified {
            // The watcher is applying what waits (`syncing`, no stale
            // episode) until `watcherApplyMs` has passed since the oldest
            // waiting edit; then the episode is open, dated at that edit.
            match record.status {
                FreshnessStatus::Syncing => assert_eq!(
                    record.stale_since, None,
                    "a stale episode while the watcher is applying an edit"
                ),
                FreshnessStatus::PossiblyStale => assert!(
                    record.stale_since.is_some_and(|since| since.get()
                        + self.policy.watcher_apply_ms
                        <= shadow.now),
                    "a stale episode under a verified watcher within its bound"
                ),
                other => panic!("{other:?} while an edit waits for the watcher"),
            }
        }
        if record.status == FreshnessStatus::Fresh && !verified {
            assert_eq!(
                shadow.fresh_basis,
                Some(shadow.edits.len()),
                "fresh, but no successful sync covers every edit and no verified watcher runs"
            );
        }

        // The watcher as the shadow sees it.
        assert_eq!(
            machine.watcher_owns_freshness(),
            verified,
            "who owns freshness"
        );
        if let Err(problem) = shadow.watcher.check_facts(record.watcher.as_ref()) {
            panic!("{problem}");
        }
        for name in NAMES {
            let lifetime = shadow.lifetime(name);
            let allowed = shadow.watcher.may_attempt(lifetime);
            let key = SessionKey {
                name: name.to_owned(),
                lifetime: Lifetime::new(lifetime.unwrap_or(0)),
            };
            assert_eq!(
                machine.watcher_attempt_allowed(&key),
                allowed,
                "watcher attempt of {name}"
            );
        }

        // Sessions and budgets.
        let live: Vec<&str> = machine.live_sessions().collect();
        let expected_live: Vec<&str> = shadow.live.keys().copied().collect();
        assert_eq!(live, expected_live, "live sessions");
        for name in NAMES {
            let spent = shadow
                .lifetime(name)
                .map(|lifetime| shadow.spawns.get(&lifetime).copied().unwrap_or(0));
            assert_eq!(
                machine.automatic_syncs_spawned(name),
                spent,
                "automatic syncs of {name}"
            );
        }
        for spent in shadow.spawns.values() {
            assert!(
                *spent <= self.policy.max_syncs_per_session,
                "a session spawned {spent} automatic syncs"
            );
        }

        // The sync slot.
        assert_eq!(
            machine.current_flight(),
            shadow.flight.as_ref().map(|flight| flight.id),
            "the occupying sync"
        );
        let frame = machine.state_frame();
        assert_eq!(frame.status, record.status);
        assert_eq!(frame.edit_epoch, record.edit_epoch);
        assert_eq!(frame.workspace, WORKSPACE_ROOT);
        assert_eq!(
            frame.syncing,
            shadow
                .flight
                .as_ref()
                .is_some_and(|flight| !flight.draining),
            "syncing"
        );
        round_trip::assert_server_round_trip(&Envelope::new(ServerFrame::State(frame)));

        // Deadlines.
        let deadline = machine.next_deadline();
        if shadow.flight.is_some() {
            assert_eq!(
                deadline, None,
                "a deadline while a sync occupies the workspace"
            );
        }
        if expect.wake {
            assert!(
                deadline.is_none_or(|deadline| deadline.get() > shadow.now),
                "a deadline at or before the wake that should have handled it: {deadline:?}"
            );
        }
        if deadline.is_none() && shadow.flight.is_none() {
            let mut idle = machine.clone();
            let later = idle.handle(Millis(shadow.now.saturating_add(100_000_000)), Input::Wake);
            assert!(
                !later
                    .iter()
                    .any(|effect| matches!(effect, Effect::StartSync { .. })),
                "no deadline, yet a sync starts when time passes: {later:?}"
            );
        }
    }
}

fuzz_target!(|scenario: Scenario| {
    let policy = FreshnessPolicy {
        auto_sync: !scenario.manual_only,
        max_syncs_per_session: u32::from(scenario.max_syncs % 4),
        // Every sync of the shadow's shell is a reconcile (see `Op::Spawn`).
        max_incremental_syncs_per_session: 0,
        incremental_strategy: true,
        batch_ms: u64::from(scenario.batch_ms % 2_000),
        settle_ms: u64::from(scenario.settle_ms % 5_000),
        min_sync_gap_ms: u64::from(scenario.settle_ms % 7) * 1_000,
        watcher_apply_ms: 1 + u64::from(scenario.batch_ms % 6_000),
        modifying_tools: MODIFYING.iter().map(|tool| tool.to_string()).collect(),
        shell_tools: Vec::new(),
        workspace_root: WORKSPACE_ROOT.to_owned(),
    };
    let mut world = World::new(policy);
    for step in scenario.steps.iter().take(256) {
        world.step(step);
    }
});
