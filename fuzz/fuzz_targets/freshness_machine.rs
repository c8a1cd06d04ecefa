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

use cgc_fresh_core::freshness::watcher_model::raised_by_watcher;
use cgc_fresh_core::freshness::{
    Effect, Freshness, FreshnessPolicy, FreshnessRecord, Input, Millis,
};
use cgc_fresh_fuzz::workspace_model::{Shadow, WORKSPACE_ROOT};
use cgc_fresh_proto::{FreshnessStatus, NoticeCondition};
use libfuzzer_sys::fuzz_target;

use inputs::Expect;
use scenario::{Op, Scenario, Step, MODIFYING};

// The fuzzer's input, what each op feeds the machine and the checks after
// each step live in `freshness_machine/` beside this file: every file directly
// in `fuzz_targets/` is a target of its own.
#[path = "freshness_machine/inputs.rs"]
mod inputs;
#[path = "freshness_machine/oracle.rs"]
mod oracle;
#[path = "freshness_machine/scenario.rs"]
mod scenario;

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
