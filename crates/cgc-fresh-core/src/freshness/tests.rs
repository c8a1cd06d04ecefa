//! Scenario tests: one per scenario of the spec's freshness requirements,
//! plus the edge rules of the design (follow-ups, settling, batching, path
//! filtering, restart, stale completions).

use cgc_fresh_proto::{FreshnessStatus, NoticeCondition, NoticeLevel, SessionStartReason};

use super::*;
use crate::config::WatchMode;

const ROOT: &str = "/home/ann/proj";

/// What an automatic sync of the bench may spawn: `policy()` has no
/// incremental allowance.
const RECONCILES: SyncAllowance = SyncAllowance {
    changed_files: false,
    whole_repository: true,
};

fn policy() -> FreshnessPolicy {
    FreshnessPolicy {
        auto_sync: true,
        max_syncs_per_session: 2,
        // The bench's shell runs reconciles, the syncs the spec's budget
        // counts; the incremental class has tests of its own.
        max_incremental_syncs_per_session: 0,
        incremental_strategy: true,
        batch_ms: 500,
        settle_ms: 30_000,
        // The scenarios below are about other rules; the gap has its own.
        min_sync_gap_ms: 0,
        watcher_apply_ms: 30_000,
        modifying_tools: vec!["edit".into(), "write".into()],
        shell_tools: vec!["bash".into()],
        workspace_root: ROOT.into(),
    }
}

/// A machine with a hand-moved clock. It remembers the last lifetime each
/// session name was opened with, as a shell holds on to a [`SessionKey`].
struct Bench {
    machine: Freshness,
    now: u64,
    keys: std::collections::HashMap<String, SessionKey>,
}

impl Bench {
    fn new() -> Self {
        Bench::with(policy())
    }

    fn with(policy: FreshnessPolicy) -> Self {
        Bench {
            machine: Freshness::new(policy, None, Millis(0)),
            now: 0,
            keys: std::collections::HashMap::new(),
        }
    }

    fn at(&mut self, ms: u64) -> &mut Self {
        self.now = ms;
        self
    }

    fn send(&mut self, input: Input) -> Vec<Effect> {
        let effects = self.machine.handle(Millis(self.now), input);
        for effect in &effects {
            if let Effect::SessionOpened { session, .. } = effect {
                self.keys.insert(session.name.clone(), session.clone());
            }
        }
        effects
    }

    /// The lifetime `session` was last opened with (an implicit one, started
    /// by an edit, is looked up live).
    fn key(&self, session: &str) -> SessionKey {
        self.machine
            .current_lifetime(session)
            .or_else(|| self.keys.get(session).cloned())
            .unwrap_or_else(|| panic!("no lifetime of {session} was ever seen"))
    }

    fn start(&mut self, session: &str) -> Vec<Effect> {
        self.start_as(
            session,
            &format!("pi-{session}"),
            SessionStartReason::Startup,
        )
    }

    fn start_as(
        &mut self,
        session: &str,
        instance: &str,
        reason: SessionStartReason,
    ) -> Vec<Effect> {
        self.send(Input::SessionStarted {
            session: session.into(),
            instance: instance.into(),
            reason,
            connection: None,
            owner: None,
        })
    }

    fn end(&mut self, session: &str) -> Vec<Effect> {
        self.send(Input::SessionEnded {
            session: session.into(),
        })
    }

    fn call(&mut self, session: &str, tool: &str, paths: &[&str]) -> Vec<Effect> {
        self.send(Input::ToolCall {
            session: session.into(),
            tool: tool.into(),
            paths: paths.iter().map(|path| path.to_string()).collect(),
            not_indexed: 0,
        })
    }

    fn edit(&mut self, session: &str, path: &str) -> Vec<Effect> {
        self.call(session, "edit", &[path])
    }

    fn result(&mut self, session: &str) -> Vec<Effect> {
        self.send(Input::ToolResult {
            session: session.into(),
            tool: "edit".into(),
            ok: true,
        })
    }

    /// An edit at the current time whose result arrives 10 ms later.
    fn settled_edit(&mut self, session: &str, path: &str) -> Vec<Effect> {
        let mut effects = self.edit(session, path);
        let now = self.now;
        effects.extend(self.at(now + 10).result(session));
        effects
    }

    fn wake(&mut self) -> Vec<Effect> {
        self.send(Input::Wake)
    }

    fn request(&mut self, session: Option<&str>) -> Vec<Effect> {
        self.send(Input::SyncRequested {
            session: session.map(str::to_string),
        })
    }

    fn spawned(&mut self, flight: FlightId) -> Vec<Effect> {
        // The scenarios' syncs are reconciles (the spec's budget counts
        // them); the incremental class has its own tests.
        self.send(Input::SyncSpawned {
            flight,
            pid: 4711,
            cost: SyncCost::WholeRepository,
        })
    }

    fn finish(&mut self, flight: FlightId, outcome: SyncOutcome) -> Vec<Effect> {
        self.send(Input::SyncFinished { flight, outcome })
    }

    fn deliver(&mut self, session: &str, condition: NoticeCondition) -> Vec<Effect> {
        let session = self.key(session);
        self.send(Input::NoticeDelivered { session, condition })
    }

    fn status(&self) -> FreshnessStatus {
        self.machine.record().status
    }

    /// Drives one automatic sync of the pending edits to success at the
    /// current time + 1 000 ms; returns its flight.
    fn sync_to_success(&mut self) -> FlightId {
        let due = self.machine.next_deadline().expect("a sync is queued");
        let flight = started(&self.at(due.get()).wake()).expect("the sync starts when due");
        self.spawned(flight);
        let done = due.get() + 1_000;
        self.at(done).finish(flight, SyncOutcome::Succeeded);
        flight
    }
}

/// The flight of the `StartSync` in `effects`, if any.
fn started(effects: &[Effect]) -> Option<FlightId> {
    let starts: Vec<FlightId> = effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::StartSync { flight, .. } => Some(*flight),
            _ => None,
        })
        .collect();
    assert!(
        starts.len() <= 1,
        "at most one start per input: {effects:?}"
    );
    starts.first().copied()
}

fn notices(effects: &[Effect]) -> Vec<(String, NoticeCondition)> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::Notice {
                session, condition, ..
            } => Some((session.name.clone(), *condition)),
            _ => None,
        })
        .collect()
}

fn notice_text(effects: &[Effect], wanted: NoticeCondition) -> String {
    effects
        .iter()
        .find_map(|effect| match effect {
            Effect::Notice {
                condition, text, ..
            } if *condition == wanted => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {wanted:?} notice in {effects:?}"))
}

fn pair(session: &str, condition: NoticeCondition) -> (String, NoticeCondition) {
    (session.to_string(), condition)
}

/// A bench whose workspace is fresh at 5 000 ms, with session `s1` live.
fn fresh_bench() -> Bench {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "src/main.rs");
    bench.sync_to_success();
    bench.at(5_000);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    bench
}

// ---- Requirement: Freshness state tracking ------------------------------

#[test]
fn fresh_after_a_completed_sync() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "src/main.rs");
    let flight = started(&bench.at(1_500).wake()).unwrap();
    bench.at(1_600).spawned(flight);
    let effects = bench.at(4_200).finish(flight, SyncOutcome::Succeeded);

    assert_eq!(effects.last(), Some(&Effect::RecordChanged));
    let record = bench.machine.record();
    assert_eq!(record.status, FreshnessStatus::Fresh);
    assert_eq!(record.last_synced_at, Some(Millis(4_200)));
    assert_eq!(record.stale_since, None);
    assert_eq!(record.last_error, None);
    let frame = bench.machine.state_frame();
    assert_eq!(frame.status, FreshnessStatus::Fresh);
    assert_eq!(frame.last_synced_at, Some(4_200));
    assert_eq!(frame.workspace, ROOT);
    assert!(!frame.syncing);
}

#[test]
fn dirty_after_observed_edits() {
    let mut bench = fresh_bench();
    bench.at(10_000).edit("s1", "src/lib.rs");
    bench.at(10_200).edit("s1", "src/other.rs");

    let record = bench.machine.record();
    assert_eq!(record.status, FreshnessStatus::PossiblyStale);
    assert_eq!(
        record.stale_since,
        Some(Millis(10_000)),
        "the first observed edit"
    );
    let frame = bench.machine.state_frame();
    assert_eq!(frame.status, FreshnessStatus::PossiblyStale);
    assert_eq!(frame.stale_since, Some(10_000));
    assert_eq!(record.pending.paths, 2);
}

// ---- Requirement: Conservative drift observation without probing --------

#[test]
fn edit_observed_marks_dirty_without_spawns() {
    let mut bench = Bench::new();
    bench.start("s1");
    let effects = bench.at(1_000).edit("s1", "src/main.rs");

    assert_eq!(started(&effects), None, "no cgc process at call time");
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert!(effects.contains(&Effect::RecordChanged));
    assert_eq!(
        started(&bench.at(1_010).result("s1")),
        None,
        "settled, not yet due"
    );
    assert_eq!(bench.machine.next_deadline(), Some(Millis(1_500)));
    assert_eq!(
        started(&bench.at(1_499).wake()),
        None,
        "batch window still open"
    );
    assert!(
        started(&bench.at(1_500).wake()).is_some(),
        "the sync starts only after the window"
    );
}

#[test]
fn no_false_freshness() {
    let mut bench = Bench::with(FreshnessPolicy {
        max_syncs_per_session: 10,
        ..policy()
    });
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");

    // Every ending other than a covering success leaves it not fresh.
    let endings = [
        SyncOutcome::Busy {
            holder: "pid 1: cgc watch .".into(),
        },
        SyncOutcome::NotApplied {
            detail: "cgc index skipped an indexed repository".into(),
        },
        SyncOutcome::Failed {
            error: "exit status 1".into(),
        },
        SyncOutcome::Cancelled,
    ];
    let mut now = 2_000;
    for ending in endings {
        bench.at(now).request(None);
        let flight = bench.machine.current_flight().unwrap();
        bench.at(now + 100).spawned(flight);
        bench.at(now + 200).finish(flight, ending.clone());
        assert_ne!(bench.status(), FreshnessStatus::Fresh, "after {ending:?}");
        assert_eq!(bench.machine.record().stale_since, Some(Millis(1_000)));
        now += 1_000;
    }
    // A success whose start was before an edit is not fresh either.
    bench.at(now).request(None);
    let flight = bench.machine.current_flight().unwrap();
    bench.at(now + 50).settled_edit("s1", "b.rs");
    bench.at(now + 300).finish(flight, SyncOutcome::Succeeded);
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert_eq!(bench.machine.record().stale_since, Some(Millis(now + 50)));
    // Only a new sync that covers everything makes it fresh.
    let due = bench
        .machine
        .next_deadline()
        .expect("one follow-up is queued");
    assert_eq!(due, Millis(now + 550));
    let follow_up = started(&bench.at(due.get()).wake()).expect("the follow-up starts");
    bench
        .at(now + 2_000)
        .finish(follow_up, SyncOutcome::Succeeded);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
}

// ---- Requirement: Lazy, budgeted drift sync ------------------------------

#[test]
fn first_drift_triggers_a_background_sync() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");
    let effects = bench.at(1_500).wake();
    let flight = started(&effects).unwrap();
    assert!(effects.contains(&Effect::StartSync {
        flight,
        session: Some(bench.key("s1")),
        manual: false,
        allowance: RECONCILES,
    }));
    assert_eq!(bench.status(), FreshnessStatus::Syncing);
    assert!(bench.machine.state_frame().syncing);

    // Dedup: drift during the flight starts nothing now.
    assert_eq!(started(&bench.at(1_600).settled_edit("s1", "b.rs")), None);
    assert_eq!(started(&bench.at(5_000).wake()), None);
    assert_eq!(
        bench.machine.next_deadline(),
        None,
        "a running sync needs no timer"
    );

    // The slot is consumed at spawn, not at the decision.
    assert_eq!(bench.machine.automatic_syncs_spawned("s1"), Some(0));
    bench.at(1_700).spawned(flight);
    assert_eq!(bench.machine.automatic_syncs_spawned("s1"), Some(1));
    bench.at(1_800).spawned(flight);
    assert_eq!(
        bench.machine.automatic_syncs_spawned("s1"),
        Some(1),
        "once per sync"
    );
}

#[test]
fn sync_skipped_when_busy() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");
    let flight = started(&bench.at(1_500).wake()).unwrap();
    let effects = bench.at(1_510).send(Input::SyncBusy {
        flight,
        holder: "pid 4242: cgc watch .".into(),
    });

    assert_eq!(bench.status(), FreshnessStatus::SkippedBusy);
    assert!(
        notice_text(&effects, NoticeCondition::SyncSkippedBusy).contains("pid 4242: cgc watch .")
    );
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::SyncSkippedBusy)]
    );
    assert_eq!(
        bench.machine.automatic_syncs_spawned("s1"),
        Some(0),
        "busy uses no slot"
    );
    assert_eq!(bench.machine.next_deadline(), None, "no retry loop");
    assert_eq!(started(&bench.at(60_000).wake()), None);
    assert_eq!(bench.machine.record().stale_since, Some(Millis(1_000)));
    bench.deliver("s1", NoticeCondition::SyncSkippedBusy);

    // The next drift may try again; a spawned cgc that hits the lock
    // refunds its slot, and the delivered busy notice is not repeated.
    bench.at(70_000).settled_edit("s1", "b.rs");
    let flight = started(&bench.at(70_500).wake()).unwrap();
    bench.spawned(flight);
    assert_eq!(bench.machine.automatic_syncs_spawned("s1"), Some(1));
    let effects = bench.at(71_000).finish(
        flight,
        SyncOutcome::Busy {
            holder: "pid 4242: cgc watch .".into(),
        },
    );
    assert_eq!(bench.machine.automatic_syncs_spawned("s1"), Some(0));
    assert_eq!(bench.status(), FreshnessStatus::SkippedBusy);
    assert!(
        notices(&effects).is_empty(),
        "the busy notice was delivered this session"
    );
}

/// The incremental class (`budget.rs`): one session, twelve edits each
/// synced by the incremental worker. The spec's budget of one whole-
/// repository sync is not touched, every sync ends `fresh`.
#[test]
fn incremental_syncs_draw_on_their_own_allowance_and_leave_the_specs_budget_whole() {
    let mut bench = Bench::with(FreshnessPolicy {
        max_syncs_per_session: 1,
        max_incremental_syncs_per_session: 500,
        incremental_strategy: true,
        ..policy()
    });
    bench.start("s1");
    for round in 0..12u64 {
        let at = 1_000 + round * 6_000;
        bench.at(at).settled_edit("s1", &format!("m{round}.py"));
        let effects = bench.at(at + 500).wake();
        let flight = started(&effects).unwrap_or_else(|| panic!("round {round}: {effects:?}"));
        assert!(effects.contains(&Effect::StartSync {
            flight,
            session: Some(bench.key("s1")),
            manual: false,
            allowance: SyncAllowance::ANY,
        }));
        bench.send(Input::SyncSpawned {
            flight,
            pid: 4711,
            cost: SyncCost::ChangedFiles,
        });
        bench.at(at + 1_500).finish(flight, SyncOutcome::Succeeded);
        assert_eq!(bench.status(), FreshnessStatus::Fresh, "round {round}");
    }
    let of = |cost| bench.machine.automatic_syncs_of("s1", cost);
    assert_eq!(of(SyncCost::ChangedFiles), Some(12));
    assert_eq!(of(SyncCost::WholeRepository), Some(0));
}

/// Spec, "Budget exhausted", for the class the spec's key counts: once the
/// session's whole-repository slot is spent, a sync that needs the whole
/// repository again (the shell's `SyncOverBudget`) spawns nothing, the
/// state stays possibly stale, and the notice names the key.
#[test]
fn a_sync_needing_the_whole_repository_past_its_budget_spawns_nothing_and_says_so() {
    let mut bench = Bench::with(FreshnessPolicy {
        max_syncs_per_session: 1,
        max_incremental_syncs_per_session: 500,
        incremental_strategy: true,
        ..policy()
    });
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");
    bench.sync_to_success(); // a reconcile: the one whole-repository slot

    bench.at(10_000).settled_edit("s1", "b.rs");
    let effects = bench.at(10_500).wake();
    let flight = started(&effects).expect("the incremental class has slots");
    assert!(effects.contains(&Effect::StartSync {
        flight,
        session: Some(bench.key("s1")),
        manual: false,
        allowance: SyncAllowance {
            changed_files: true,
            whole_repository: false,
        },
    }));
    let effects = bench.at(10_510).send(Input::SyncOverBudget {
        flight,
        cost: SyncCost::WholeRepository,
    });
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::BudgetExhausted)]
    );
    let text = notice_text(&effects, NoticeCondition::BudgetExhausted);
    assert!(text.contains("`freshness.maxSyncsPerSession`"), "{text}");
    assert!(text.contains("cgc-fresh sync"), "{text}");
    bench.deliver("s1", NoticeCondition::BudgetExhausted);
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert_eq!(
        bench.machine.next_deadline(),
        None,
        "no retry of the same refusal"
    );
    let of = |bench: &Bench, cost| bench.machine.automatic_syncs_of("s1", cost);
    assert_eq!(of(&bench, SyncCost::WholeRepository), Some(1));
    assert_eq!(of(&bench, SyncCost::ChangedFiles), Some(0));

    // A sync that falls back from the incremental path needs a slot of
    // each: its spawn of the worker consumed one, the reconcile has none.
    bench.at(20_000).settled_edit("s1", "c.rs");
    let flight = started(&bench.at(20_500).wake()).expect("started");
    bench.send(Input::SyncSpawned {
        flight,
        pid: 4712,
        cost: SyncCost::ChangedFiles,
    });
    let effects = bench.at(21_000).send(Input::SyncOverBudget {
        flight,
        cost: SyncCost::WholeRepository,
    });
    assert!(
        notices(&effects).is_empty(),
        "the notice flows once: {effects:?}"
    );
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert_eq!(of(&bench, SyncCost::ChangedFiles), Some(1));
}

/// With a strategy other than `incremental` every sync costs the whole
/// repository: once that budget is spent nothing starts (no `syncing` the
/// shell would then refuse), whatever the incremental allowance.
#[test]
fn with_a_whole_repository_strategy_the_specs_budget_alone_decides() {
    let mut bench = Bench::with(FreshnessPolicy {
        max_syncs_per_session: 1,
        max_incremental_syncs_per_session: 500,
        incremental_strategy: false,
        ..policy()
    });
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");
    bench.sync_to_success();
    bench.at(10_000).settled_edit("s1", "b.rs");
    let effects = bench.at(10_500).wake();
    assert_eq!(started(&effects), None, "no start past the budget");
    let text = notice_text(&effects, NoticeCondition::BudgetExhausted);
    assert!(text.contains("`freshness.maxSyncsPerSession`"), "{text}");
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
}

/// The incremental allowance runs out like the spec's budget: no start, one
/// notice naming its key.
#[test]
fn the_incremental_allowance_runs_out_with_a_notice_naming_its_key() {
    let mut bench = Bench::with(FreshnessPolicy {
        max_syncs_per_session: 0,
        max_incremental_syncs_per_session: 2,
        incremental_strategy: true,
        ..policy()
    });
    bench.start("s1");
    for round in 0..2u64 {
        let at = 1_000 + round * 6_000;
        bench.at(at).settled_edit("s1", "a.py");
        let flight = started(&bench.at(at + 500).wake()).expect("a slot left");
        bench.send(Input::SyncSpawned {
            flight,
            pid: 4711,
            cost: SyncCost::ChangedFiles,
        });
        bench.at(at + 1_000).finish(flight, SyncOutcome::Succeeded);
    }
    bench.at(20_000).settled_edit("s1", "a.py");
    let effects = bench.at(20_500).wake();
    assert_eq!(started(&effects), None, "no slot of either class");
    let text = notice_text(&effects, NoticeCondition::BudgetExhausted);
    assert!(text.contains("2 automatic incremental syncs"), "{text}");
    assert!(
        text.contains("`freshness.maxIncrementalSyncsPerSession`"),
        "{text}"
    );
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
}

/// A busy spawn gives back the slot of the class it consumed, and only it.
#[test]
fn a_busy_incremental_sync_gives_back_its_incremental_slot() {
    let mut bench = Bench::with(FreshnessPolicy {
        max_syncs_per_session: 1,
        max_incremental_syncs_per_session: 1,
        incremental_strategy: true,
        ..policy()
    });
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.py");
    let flight = started(&bench.at(1_500).wake()).expect("started");
    bench.send(Input::SyncSpawned {
        flight,
        pid: 4711,
        cost: SyncCost::ChangedFiles,
    });
    let of = |bench: &Bench, cost| bench.machine.automatic_syncs_of("s1", cost);
    assert_eq!(of(&bench, SyncCost::ChangedFiles), Some(1));
    bench.at(1_600).send(Input::SyncFinished {
        flight,
        outcome: SyncOutcome::Busy {
            holder: "pid 9: cgc watch .".into(),
        },
    });
    assert_eq!(of(&bench, SyncCost::ChangedFiles), Some(0));
    assert_eq!(of(&bench, SyncCost::WholeRepository), Some(0));
}

#[test]
fn budget_exhausted() {
    let mut bench = Bench::with(FreshnessPolicy {
        max_syncs_per_session: 1,
        ..policy()
    });
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");
    bench.sync_to_success();

    bench.at(10_000).settled_edit("s1", "b.rs");
    let effects = bench.at(10_500).wake();
    assert_eq!(started(&effects), None, "no spawn beyond the budget");
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::BudgetExhausted)]
    );
    assert!(notice_text(&effects, NoticeCondition::BudgetExhausted).contains("cgc-fresh sync"));
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert_eq!(bench.machine.next_deadline(), None);

    bench.at(20_000).settled_edit("s1", "c.rs");
    let effects = bench.at(20_500).wake();
    assert_eq!(started(&effects), None);
    assert!(notices(&effects).is_empty(), "the skip notice flows once");

    // A person's sync is not budgeted.
    assert!(started(&bench.at(21_000).request(Some("s1"))).is_some());
}

// ---- Requirement: One-time human-facing staleness notices ----------------

#[test]
fn stale_notice_shown_once() {
    let mut bench = Bench::new();
    bench.start("s1");
    let effects = bench.at(1_000).edit("s1", "a.rs");
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::PossiblyStale)]
    );
    let text = notice_text(&effects, NoticeCondition::PossiblyStale);
    assert!(
        text.contains(ROOT) && text.contains("cgc-fresh sync") && text.contains("/cgc-fresh sync")
    );
    bench.deliver("s1", NoticeCondition::PossiblyStale);

    assert!(notices(&bench.at(1_100).edit("s1", "b.rs")).is_empty());
    bench.at(1_200).result("s1");
    bench.at(1_300).result("s1");
    bench.sync_to_success();
    assert!(
        notices(&bench.at(9_000).edit("s1", "c.rs")).is_empty(),
        "re-observed edits produce no further staleness notice this session"
    );
}

#[test]
fn sync_completion_is_visible() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.start("s2");
    bench.at(1_000).settled_edit("s1", "a.rs");
    let flight = started(&bench.at(1_500).wake()).unwrap();
    let effects = bench.at(3_000).finish(flight, SyncOutcome::Succeeded);
    assert_eq!(
        notices(&effects),
        [
            pair("s1", NoticeCondition::SyncCompleted),
            pair("s2", NoticeCondition::SyncCompleted)
        ]
    );
    assert!(notice_text(&effects, NoticeCondition::SyncCompleted).contains(ROOT));
    bench.deliver("s1", NoticeCondition::SyncCompleted);
    bench.deliver("s2", NoticeCondition::SyncCompleted);

    bench.at(5_000).settled_edit("s1", "b.rs");
    let flight = started(&bench.at(5_500).wake()).unwrap();
    let effects = bench.at(6_000).finish(flight, SyncOutcome::Succeeded);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    assert!(
        notices(&effects).is_empty(),
        "one completion notice per session"
    );
}

/// The core's only text output is `Effect::Notice`, a notice for the person
/// at the harness; nothing the machine returns is addressed to the agent.
/// (That the shell keeps notices out of the prompt — the wire `audience:
/// user` — is the shell's and the bridge's to test.) This drives every sync
/// ending and checks, with an exhaustive match, that text only ever appears
/// in notices for a live session.
#[test]
fn notices_stay_out_of_the_agent_prompt() {
    let mut bench = Bench::with(FreshnessPolicy {
        max_syncs_per_session: 1,
        ..policy()
    });
    bench.start("s1");
    let mut effects = bench.at(1_000).settled_edit("s1", "a.rs");
    let flight = started(&bench.at(1_500).wake()).unwrap();
    effects.extend(bench.at(1_600).send(Input::SyncBusy {
        flight,
        holder: "pid 9: cgc mcp start".into(),
    }));
    for (n, ending) in [
        Ending::Declined,
        Ending::Outcome(SyncOutcome::NotApplied {
            detail: "skipped".into(),
        }),
        Ending::Outcome(SyncOutcome::Failed {
            error: "boom".into(),
        }),
        Ending::Outcome(SyncOutcome::Succeeded),
    ]
    .into_iter()
    .enumerate()
    {
        let now = 2_000 + 1_000 * n as u64;
        effects.extend(bench.at(now).request(None));
        let flight = bench.machine.current_flight().unwrap();
        effects.extend(match ending {
            Ending::Declined => bench.at(now + 10).send(Input::SyncDeclined {
                flight,
                reason: "the workspace is not indexed".into(),
            }),
            Ending::Outcome(outcome) => bench.at(now + 10).finish(flight, outcome),
        });
    }
    // One automatic sync uses the budget of one; the next drift finds it spent.
    effects.extend(bench.at(9_000).settled_edit("s1", "b.rs"));
    effects.extend(bench.at(9_500).wake());
    let flight = bench.machine.current_flight().unwrap();
    effects.extend(bench.spawned(flight));
    effects.extend(bench.at(9_600).finish(flight, SyncOutcome::Succeeded));
    effects.extend(bench.at(12_000).settled_edit("s1", "c.rs"));
    effects.extend(bench.at(12_500).wake());

    let mut seen = Vec::new();
    for effect in &effects {
        match effect {
            Effect::Notice {
                session,
                condition,
                level,
                text,
            } => {
                assert_eq!(session.name, "s1");
                assert_eq!(*level, notice_text::level(*condition));
                assert!(text.contains(ROOT), "{text}");
                seen.push(*condition);
            }
            Effect::StartSync { .. }
            | Effect::CancelSync { .. }
            | Effect::ProbeWorkspace { .. }
            | Effect::SessionOpened { .. }
            | Effect::SessionClosed { .. }
            | Effect::RestartWatcher { .. }
            | Effect::StopWatcher { .. }
            | Effect::RecordChanged
            | Effect::PrepareSync
            | Effect::WarmWorker => {}
        }
    }
    for condition in [
        NoticeCondition::PossiblyStale,
        NoticeCondition::SyncSkippedBusy,
        NoticeCondition::SyncDeclinedUnindexed,
        NoticeCondition::SyncNotApplied,
        NoticeCondition::SyncFailed,
        NoticeCondition::SyncCompleted,
        NoticeCondition::BudgetExhausted,
    ] {
        assert!(
            seen.contains(&condition),
            "{condition:?} not driven: {seen:?}"
        );
    }
}

enum Ending {
    Declined,
    Outcome(SyncOutcome),
}

// ---- Requirement: Freshness observation rebinds on session replacement ---

#[test]
fn a_resumed_session_marks_drift() {
    let mut bench = Bench::new();
    bench.start_as("s1", "pi-1", SessionStartReason::Startup);
    bench.at(100).end("s1");
    // (An edit reported under the ended name before the resume is covered by
    // `an_edit_under_an_ended_sessions_name_still_keeps_fresh_honest`.)

    // `/resume` re-runs the extension with a fresh API instance.
    bench
        .at(300)
        .start_as("s1", "pi-2", SessionStartReason::Resume);
    let effects = bench.at(1_000).settled_edit("s1", "a.rs");
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert_eq!(bench.machine.record().edit_epoch, 1);
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::PossiblyStale)]
    );
    let effects = bench.at(1_500).wake();
    assert!(effects.contains(&Effect::StartSync {
        flight: FlightId(1),
        session: Some(bench.key("s1")),
        manual: false,
        allowance: RECONCILES,
    }));

    // A resumed session under a new name works the same way.
    let mut bench = Bench::new();
    bench.start("old");
    bench.at(100).end("old");
    bench
        .at(200)
        .start_as("new", "pi-9", SessionStartReason::Resume);
    bench.at(1_000).settled_edit("new", "a.rs");
    assert!(started(&bench.at(1_500).wake()).is_some());
}

#[test]
fn the_sync_budget_rearms_per_session() {
    let mut bench = Bench::with(FreshnessPolicy {
        max_syncs_per_session: 1,
        ..policy()
    });
    bench.start_as("s1", "pi-1", SessionStartReason::Startup);
    bench.at(1_000).settled_edit("s1", "a.rs");
    bench.sync_to_success();
    bench.at(10_000).settled_edit("s1", "b.rs");
    assert_eq!(started(&bench.at(10_500).wake()), None, "s1 is exhausted");

    bench.at(11_000).end("s1");
    bench
        .at(11_100)
        .start_as("s2", "pi-2", SessionStartReason::New);
    assert_eq!(
        bench.machine.record().stale_since,
        Some(Millis(10_000)),
        "the record persists"
    );
    // The drift s1 left uncovered is s2's first drift: s2 pays for it.
    assert_eq!(bench.machine.next_deadline(), Some(Millis(11_600)));
    let effects = bench.at(11_600).wake();
    assert!(effects.contains(&Effect::StartSync {
        flight: FlightId(2),
        session: Some(bench.key("s2")),
        manual: false,
        allowance: RECONCILES,
    }));

    // Replacement of a live session by a new instance re-arms too.
    let flight = bench.machine.current_flight().unwrap();
    bench.spawned(flight);
    bench.at(13_000).finish(flight, SyncOutcome::Succeeded);
    bench
        .at(13_100)
        .start_as("s2", "pi-3", SessionStartReason::Reload);
    assert_eq!(bench.machine.automatic_syncs_spawned("s2"), Some(0));
    bench.at(14_000).settled_edit("s2", "d.rs");
    assert!(started(&bench.at(14_500).wake()).is_some());
}

#[test]
fn same_api_re_registration_adds_no_duplicate_handler() {
    let mut bench = Bench::new();
    let opened = bench.start_as("s1", "pi-1", SessionStartReason::Startup);
    assert_eq!(
        opened,
        [
            Effect::SessionOpened {
                session: bench.key("s1"),
                reattached: false
            },
            Effect::WarmWorker
        ]
    );
    bench.at(1_000).settled_edit("s1", "a.rs");
    let flight = started(&bench.at(1_500).wake()).unwrap();
    bench.spawned(flight);

    assert_eq!(
        bench
            .at(1_600)
            .start_as("s1", "pi-1", SessionStartReason::Startup),
        []
    );
    assert_eq!(bench.machine.live_sessions().collect::<Vec<_>>(), ["s1"]);
    assert_eq!(
        bench.machine.current_flight(),
        Some(flight),
        "the running sync is kept"
    );
    assert_eq!(
        bench.machine.automatic_syncs_spawned("s1"),
        Some(1),
        "the budget is not re-armed"
    );

    let effects = bench.at(1_700).edit("s1", "b.rs");
    assert_eq!(
        bench.machine.record().edit_epoch,
        2,
        "one edit is observed once"
    );
    assert!(notices(&effects).is_empty(), "the ledger was not reset");
}

// ---- Requirement: Fail-open operation and teardown -----------------------

#[test]
fn errors_are_contained_recorded_and_retried_once_per_session() {
    let mut bench = Bench::with(FreshnessPolicy {
        max_syncs_per_session: 10,
        ..policy()
    });
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");
    let flight = started(&bench.at(1_500).wake()).unwrap();
    bench.spawned(flight);
    let effects = bench.at(2_000).finish(
        flight,
        SyncOutcome::Failed {
            error: "cgc exited with status 2".into(),
        },
    );
    let record = bench.machine.record();
    assert_eq!(
        record.last_error.as_deref(),
        Some("cgc exited with status 2")
    );
    assert_eq!(record.stale_since, Some(Millis(1_000)));
    assert!(notice_text(&effects, NoticeCondition::SyncFailed).contains("Another attempt follows"));
    let retry = started(&effects).expect("one retry follows at once");
    assert_eq!(record.status, FreshnessStatus::Syncing);
    bench.deliver("s1", NoticeCondition::SyncFailed);

    bench.spawned(retry);
    let effects = bench.at(3_000).finish(
        retry,
        SyncOutcome::TimedOut {
            error: "600000 ms passed".into(),
        },
    );
    assert_eq!(started(&effects), None, "no second retry");
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert!(
        notices(&effects).is_empty(),
        "the delivered failure notice is not repeated"
    );
    assert_eq!(
        bench.machine.record().last_error.as_deref(),
        Some("timed out: 600000 ms passed")
    );
    bench.at(4_000).settled_edit("s1", "b.rs");
    assert_eq!(
        started(&bench.at(4_500).wake()),
        None,
        "failing work is not retried again"
    );
    assert_eq!(bench.machine.next_deadline(), None);

    // A person can still sync; its success lifts the stop.
    let flight = started(&bench.at(5_000).request(Some("s1"))).unwrap();
    bench.at(6_000).finish(flight, SyncOutcome::Succeeded);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    bench.at(7_000).settled_edit("s1", "c.rs");
    assert!(started(&bench.at(7_500).wake()).is_some());
}

#[test]
fn a_failure_on_an_unknown_workspace_with_no_edit_stays_unknown() {
    let mut bench = Bench::new();
    let flight = started(&bench.at(100).request(None)).unwrap();
    bench.at(200).finish(
        flight,
        SyncOutcome::Failed {
            error: "no cgc on PATH".into(),
        },
    );
    assert_eq!(bench.status(), FreshnessStatus::Unknown);
    assert_eq!(
        bench.machine.record().last_error.as_deref(),
        Some("no cgc on PATH")
    );
}

#[test]
fn a_session_ending_cancels_its_automatic_sync_and_its_completion_is_stale() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");
    let flight = started(&bench.at(1_500).wake()).unwrap();
    bench.spawned(flight);

    let key = bench.key("s1");
    let effects = bench.at(1_700).end("s1");
    assert_eq!(
        effects,
        [
            Effect::CancelSync { flight },
            Effect::SessionClosed {
                session: key,
                detached: false
            },
            Effect::RecordChanged
        ]
    );
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale, "no claim");
    assert_eq!(
        bench.machine.current_flight(),
        Some(flight),
        "still going away"
    );

    let record = bench.machine.record().clone();
    let effects = bench.at(1_800).finish(flight, SyncOutcome::Succeeded);
    assert_eq!(effects, [], "a stale completion changes nothing");
    assert_eq!(bench.machine.record(), &record);
    assert_eq!(
        bench.machine.current_flight(),
        None,
        "the workspace is free again"
    );
    assert_eq!(bench.at(1_900).finish(flight, SyncOutcome::Succeeded), []);
    assert_eq!(bench.at(2_000).spawned(flight), []);
}

#[test]
fn a_manual_sync_is_not_tied_to_its_session() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.start("s2");
    let flight = started(&bench.at(100).request(Some("s1"))).unwrap();
    let key = bench.key("s1");
    assert_eq!(
        bench.at(200).end("s1"),
        [Effect::SessionClosed {
            session: key,
            detached: false
        }],
        "nothing but the session's own cleanup"
    );
    let effects = bench.at(300).finish(flight, SyncOutcome::Succeeded);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    assert_eq!(
        notices(&effects),
        [pair("s2", NoticeCondition::SyncCompleted)]
    );
}

#[test]
fn inputs_naming_an_ended_session_change_nothing() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(100).end("s1");
    let record = bench.machine.record().clone();
    for input in [
        Input::ToolCall {
            session: "s1".into(),
            tool: "read".into(),
            paths: vec!["a.rs".into()],
            not_indexed: 0,
        },
        Input::ToolCall {
            session: "s1".into(),
            tool: "edit".into(),
            paths: vec!["/elsewhere/a.rs".into()],
            not_indexed: 0,
        },
        Input::ToolResult {
            session: "s1".into(),
            tool: "edit".into(),
            ok: true,
        },
        Input::SyncRequested {
            session: Some("s1".into()),
        },
        Input::NoticeDelivered {
            session: bench.key("s1"),
            condition: NoticeCondition::PossiblyStale,
        },
        Input::SessionEnded {
            session: "s1".into(),
        },
        Input::SessionStarted {
            session: "s1".into(),
            instance: "pi-s1".into(),
            reason: SessionStartReason::Reload,
            connection: None,
            owner: None,
        },
        Input::OwnerExited { pid: 77 },
        Input::ConnectionClosed { connection: 7 },
    ] {
        assert_eq!(bench.at(200).send(input.clone()), [], "{input:?}");
    }
    assert_eq!(bench.machine.record(), &record);
    assert_eq!(bench.machine.live_sessions().count(), 0);
    assert_eq!(bench.machine.next_deadline(), None);
}

#[test]
fn an_edit_under_an_ended_sessions_name_still_keeps_fresh_honest() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.start("s2");
    bench.at(100).settled_edit("s2", "b.rs");
    bench.sync_to_success();
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    bench.at(5_000).end("s1");
    // Another harness still writes under the ended name: the file changed.
    let effects = bench.at(5_100).edit("s1", "a.rs");
    assert_eq!(
        effects,
        [Effect::RecordChanged],
        "no notice, no sync, no budget"
    );
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert_eq!(bench.machine.record().stale_since, Some(Millis(5_100)));
    assert_eq!(bench.machine.live_sessions().count(), 1, "s1 stays ended");
}

#[test]
fn at_the_live_session_bound_a_new_session_is_refused_and_its_edits_still_count() {
    let mut bench = Bench::new();
    for n in 0..MAX_LIVE_SESSIONS {
        bench.start(&format!("s{n}"));
    }
    bench.at(100).settled_edit("s0", "a.rs");
    bench.sync_to_success();
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    assert!(!bench.machine.admits_session("one-too-many", "pi-x"));
    assert!(
        bench.machine.admits_session("s1", "pi-other"),
        "a replacement"
    );
    // A registration the shell applies anyway changes nothing.
    assert_eq!(bench.at(5_000).start("one-too-many"), []);
    assert_eq!(bench.machine.live_sessions().count(), MAX_LIVE_SESSIONS);
    // An edit under a new name starts no lifetime, yet the file changed.
    let effects = bench.at(5_100).edit("unannounced", "b.rs");
    assert_eq!(effects, [Effect::RecordChanged], "no notice, no sync");
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert_eq!(bench.machine.record().stale_since, Some(Millis(5_100)));
    assert_eq!(bench.machine.live_sessions().count(), MAX_LIVE_SESSIONS);
    // Ending one session makes room again.
    bench.at(6_000).end("s5");
    assert!(bench.machine.admits_session("one-too-many", "pi-x"));
}

// ---- design edges --------------------------------------------------------

#[test]
fn an_edit_during_a_flight_queues_exactly_one_follow_up() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");
    let flight = started(&bench.at(1_500).wake()).unwrap();
    bench.spawned(flight);
    for n in 0..5 {
        let effects = bench
            .at(1_600 + n * 100)
            .settled_edit("s1", &format!("f{n}.rs"));
        assert_eq!(started(&effects), None);
        assert_eq!(
            bench.status(),
            FreshnessStatus::Syncing,
            "syncing, follow-up queued"
        );
    }
    assert_eq!(bench.machine.record().stale_since, Some(Millis(1_000)));

    let effects = bench.at(3_000).finish(flight, SyncOutcome::Succeeded);
    let record = bench.machine.record();
    // Not fresh; the one follow-up (due at 1 600 + 500) starts at once.
    assert_eq!(record.status, FreshnessStatus::Syncing);
    assert_eq!(
        record.last_synced_at,
        Some(Millis(3_000)),
        "the sync did run"
    );
    assert_eq!(
        record.stale_since,
        Some(Millis(1_600)),
        "the first edit not covered"
    );
    assert!(notices(&effects).is_empty(), "no completion claim");
    let follow_up = started(&effects).expect("the follow-up starts");
    assert_ne!(follow_up, flight);

    let effects = bench.at(4_000).finish(follow_up, SyncOutcome::Succeeded);
    assert_eq!(started(&effects), None, "exactly one follow-up");
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    assert_eq!(bench.machine.next_deadline(), None);
}

#[test]
fn an_edit_unsettled_at_the_start_is_not_fresh() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(1_000).edit("s1", "a.rs");
    let effects = bench.at(1_200).request(Some("s1"));
    let flight = started(&effects).expect("a manual sync starts at once");
    assert!(effects.contains(&Effect::StartSync {
        flight,
        session: Some(bench.key("s1")),
        manual: true,
        allowance: SyncAllowance::ANY,
    }));
    bench.at(1_300).result("s1");
    let effects = bench.at(2_000).finish(flight, SyncOutcome::Succeeded);
    let record = bench.machine.record();
    assert_ne!(record.status, FreshnessStatus::Fresh);
    assert_eq!(record.stale_since, Some(Millis(1_000)));
    assert_eq!(
        record.edit_epoch, 1,
        "no edit after the start; unsettled at it"
    );
    assert_eq!(
        record.pending.paths, 1,
        "its path is pending again (in the follow-up)"
    );
    let follow_up = started(&effects).expect("one automatic follow-up, due already");
    assert!(effects.contains(&Effect::StartSync {
        flight: follow_up,
        session: Some(bench.key("s1")),
        manual: false,
        allowance: RECONCILES,
    }));
    bench.at(3_000).finish(follow_up, SyncOutcome::Succeeded);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
}

#[test]
fn a_due_sync_waits_for_the_settle_deadline() {
    let mut bench = Bench::with(FreshnessPolicy {
        settle_ms: 2_000,
        ..policy()
    });
    bench.start("s1");
    bench.at(1_000).edit("s1", "a.rs");
    assert_eq!(
        bench.machine.next_deadline(),
        Some(Millis(3_000)),
        "max(1 500, 1 000 + 2 000)"
    );
    assert_eq!(
        started(&bench.at(1_500).wake()),
        None,
        "due, but the edit is unsettled"
    );
    assert_eq!(started(&bench.at(2_999).wake()), None);
    assert!(started(&bench.at(3_000).wake()).is_some());

    // A result settles it earlier and lets the sync start at once.
    let mut bench = Bench::with(FreshnessPolicy {
        settle_ms: 2_000,
        ..policy()
    });
    bench.start("s1");
    bench.at(1_000).edit("s1", "a.rs");
    assert_eq!(started(&bench.at(1_500).wake()), None);
    assert!(started(&bench.at(1_700).result("s1")).is_some());
}

#[test]
fn the_batch_window_is_not_pushed_back() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");
    bench.at(1_300).settled_edit("s1", "b.rs");
    bench.at(1_450).settled_edit("s1", "c.rs");
    assert_eq!(bench.machine.next_deadline(), Some(Millis(1_500)));
    assert!(started(&bench.at(1_500).wake()).is_some());
}

#[test]
fn paths_are_filtered_lexically() {
    let mut bench = Bench::new();
    bench.start("s1");
    assert_eq!(
        bench
            .at(100)
            .call("s1", "edit", &["/tmp/x.rs", "../other/y.rs"]),
        []
    );
    assert_eq!(
        bench.at(100).call("s1", "read", &["src/a.rs"]),
        [],
        "not a modifying tool"
    );
    assert_eq!(bench.machine.record().edit_epoch, 0);

    bench.at(200).call(
        "s1",
        "write",
        &["../proj/src/a.rs", "/home/ann/proj/./b.rs", "/etc/c"],
    );
    assert_eq!(bench.machine.record().edit_epoch, 1);
    assert_eq!(
        bench.machine.pending_paths().paths().collect::<Vec<_>>(),
        ["b.rs", "src/a.rs"]
    );

    bench.at(300).call("s1", "edit", &[]);
    assert_eq!(
        bench.machine.record().edit_epoch,
        2,
        "an unknown target counts"
    );
    assert!(bench.machine.record().pending.whole_workspace);
}

#[test]
fn the_result_of_a_call_outside_the_workspace_settles_no_edit() {
    let mut bench = Bench::with(FreshnessPolicy {
        settle_ms: 5_000,
        ..policy()
    });
    bench.start("s1");
    bench.at(1_000).edit("s1", "/tmp/outside.rs");
    bench.at(1_100).edit("s1", "inside.rs");
    bench.at(1_200).result("s1"); // the outside call's result
    assert_eq!(
        started(&bench.at(1_600).wake()),
        None,
        "the inside edit is still unsettled"
    );
    assert!(started(&bench.at(1_700).result("s1")).is_some());
}

#[test]
fn pending_paths_overflow_into_a_whole_workspace_marker() {
    let mut bench = Bench::new();
    bench.start("s1");
    let paths: Vec<String> = (0..=MAX_PENDING_PATHS)
        .map(|n| format!("gen/f{n}.rs"))
        .collect();
    bench.at(100).send(Input::ToolCall {
        session: "s1".into(),
        tool: "write".into(),
        paths,
        not_indexed: 0,
    });
    let record = bench.machine.record();
    assert_eq!(record.edit_epoch, 1);
    assert_eq!(
        record.pending,
        PendingSummary {
            paths: 0,
            whole_workspace: true
        }
    );
    assert_eq!(bench.machine.pending_paths().len(), 0);
}

#[test]
fn a_restart_restores_the_record_as_unknown() {
    let mut bench = fresh_bench();
    bench.at(9_000).edit("s1", "late.rs");
    let text = bench.machine.record().to_json().unwrap();
    let before = FreshnessRecord::from_json(&text).unwrap();

    let machine = Freshness::new(policy(), Some(before.clone()), Millis(20_000));
    let record = machine.record();
    assert_eq!(
        record.status,
        FreshnessStatus::Unknown,
        "never fresh after a restart"
    );
    assert_eq!(record.last_synced_at, before.last_synced_at);
    assert_eq!(record.stale_since, Some(Millis(9_000)));
    assert_eq!(record.edit_epoch, before.edit_epoch);
    assert!(
        record.pending.whole_workspace,
        "pending work from before is kept as a whole"
    );
    assert_eq!(machine.next_deadline(), None);
    assert_eq!(
        machine.state_frame().detail.as_deref(),
        Some("restored from disk; unknown until a sync completes")
    );

    // A restored fresh record is unknown too, and flight ids continue.
    let mut bench = fresh_bench();
    let old_generation = bench.machine.record().sync_generation;
    let restored = bench.machine.record().clone();
    bench.machine = Freshness::new(policy(), Some(restored), Millis(6_000));
    assert_eq!(bench.status(), FreshnessStatus::Unknown);
    let flight = started(&bench.at(6_000).request(None)).unwrap();
    assert!(flight.get() > old_generation);
    bench.at(6_500).finish(flight, SyncOutcome::Succeeded);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
}

#[test]
fn a_thousand_requests_during_a_flight_that_covers_everything_join_it() {
    let mut bench = Bench::new();
    bench.start("s1");
    let flight = started(&bench.at(100).request(None)).unwrap();
    for n in 0..1_000 {
        assert_eq!(started(&bench.at(200 + n).request(Some("s1"))), None);
    }
    // Nothing was edited since the flight started: it answers them all.
    let effects = bench.at(2_000).finish(flight, SyncOutcome::Succeeded);
    assert_eq!(
        started(&effects),
        None,
        "no second run for requests it covers"
    );
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    assert_eq!(bench.machine.next_deadline(), None);
}

#[test]
fn a_thousand_requests_after_an_edit_during_a_flight_start_one_follow_up() {
    let mut bench = Bench::new();
    bench.start("s1");
    let flight = started(&bench.at(100).request(None)).unwrap();
    bench.at(150).settled_edit("s1", "a.rs");
    for n in 0..1_000 {
        assert_eq!(started(&bench.at(200 + n).request(Some("s1"))), None);
    }
    let effects = bench.at(2_000).finish(flight, SyncOutcome::Succeeded);
    let follow_up = started(&effects).expect("one follow-up");
    assert!(effects.contains(&Effect::StartSync {
        flight: follow_up,
        session: Some(bench.key("s1")),
        manual: true,
        allowance: SyncAllowance::ANY,
    }));
    let effects = bench.at(3_000).finish(follow_up, SyncOutcome::Succeeded);
    assert_eq!(started(&effects), None);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    assert_eq!(bench.machine.next_deadline(), None);
}

#[test]
fn an_idle_workspace_has_no_deadline() {
    let mut bench = Bench::new();
    assert_eq!(bench.machine.next_deadline(), None);
    bench.start("s1");
    assert_eq!(bench.machine.next_deadline(), None);
    bench.at(100).call("s1", "read", &["a.rs"]);
    assert_eq!(bench.machine.next_deadline(), None);
    bench.at(1_000).settled_edit("s1", "a.rs");
    bench.sync_to_success();
    assert_eq!(bench.machine.next_deadline(), None);

    // With autoSync off an edit arms nothing.
    let mut bench = Bench::with(FreshnessPolicy {
        auto_sync: false,
        ..policy()
    });
    bench.start("s1");
    let effects = bench.at(100).edit("s1", "a.rs");
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert!(notice_text(&effects, NoticeCondition::PossiblyStale).contains("Automatic sync is off"));
    assert_eq!(bench.machine.next_deadline(), None);
}

#[test]
fn not_applied_is_never_fresh() {
    let mut bench = fresh_bench();
    let flight = started(&bench.at(6_000).request(None)).unwrap();
    let effects = bench.at(7_000).finish(
        flight,
        SyncOutcome::NotApplied {
            detail: "cgc index skipped an already indexed repository".into(),
        },
    );
    let record = bench.machine.record();
    assert_eq!(record.status, FreshnessStatus::PossiblyStale);
    assert_eq!(
        record.last_error.as_deref(),
        Some("cgc index skipped an already indexed repository")
    );
    assert_eq!(
        record.last_synced_at,
        Some(Millis(2_500)),
        "nothing was applied"
    );
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::SyncNotApplied)]
    );
}

#[test]
fn a_declined_sync_records_why_and_does_not_loop() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");
    let flight = started(&bench.at(1_500).wake()).unwrap();
    let effects = bench.at(1_510).send(Input::SyncDeclined {
        flight,
        reason: "the workspace is not indexed and lifecycle.autoCreate is off".into(),
    });
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert!(bench
        .machine
        .record()
        .last_error
        .as_deref()
        .unwrap()
        .contains("not indexed"));
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::SyncDeclinedUnindexed)]
    );
    assert_eq!(started(&effects), None);
    assert_eq!(bench.machine.next_deadline(), None);
    assert_eq!(bench.machine.automatic_syncs_spawned("s1"), Some(0));
}

#[test]
fn the_latest_editor_pays_for_the_automatic_sync() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.start("s2");
    bench.at(1_000).settled_edit("s1", "a.rs");
    let effects = bench.at(1_100).settled_edit("s2", "b.rs");
    assert_eq!(
        notices(&effects),
        [pair("s2", NoticeCondition::PossiblyStale)]
    );
    let effects = bench.at(1_500).wake();
    assert!(effects.contains(&Effect::StartSync {
        flight: FlightId(1),
        session: Some(bench.key("s2")),
        manual: false,
        allowance: RECONCILES,
    }));
    bench.spawned(FlightId(1));
    assert_eq!(bench.machine.automatic_syncs_spawned("s1"), Some(0));
    assert_eq!(bench.machine.automatic_syncs_spawned("s2"), Some(1));
}

#[test]
fn reports_about_other_flights_are_stale() {
    let mut bench = Bench::new();
    bench.start("s1");
    let flight = started(&bench.at(100).request(None)).unwrap();
    let other = FlightId(flight.get() + 7);
    assert_eq!(bench.at(200).finish(other, SyncOutcome::Succeeded), []);
    assert_eq!(
        bench.send(Input::SyncBusy {
            flight: other,
            holder: "x".into()
        }),
        []
    );
    assert_eq!(bench.status(), FreshnessStatus::Syncing);
    assert_eq!(bench.machine.current_flight(), Some(flight));
}

#[test]
fn time_never_runs_backwards() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(5_000).edit("s1", "a.rs");
    bench.at(1_000).edit("s1", "b.rs");
    assert_eq!(bench.machine.record().stale_since, Some(Millis(5_000)));
    bench.at(1_000).result("s1");
    bench.at(1_000).result("s1");
    assert_eq!(bench.machine.next_deadline(), Some(Millis(5_500)));
}

#[test]
fn turning_auto_sync_off_drops_the_queued_sync() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");
    assert!(bench.machine.next_deadline().is_some());
    bench.machine.set_policy(FreshnessPolicy {
        auto_sync: false,
        ..policy()
    });
    assert_eq!(bench.machine.next_deadline(), None);
    assert_eq!(started(&bench.at(2_000).wake()), None);
}

#[test]
fn an_unannounced_session_is_observed() {
    let mut bench = Bench::new();
    let effects = bench.at(1_000).edit("ghost", "a.rs");
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert_eq!(
        notices(&effects),
        [pair("ghost", NoticeCondition::PossiblyStale)]
    );
    assert_eq!(
        bench
            .at(1_100)
            .start_as("ghost", "pi-7", SessionStartReason::Startup),
        []
    );
    bench.at(1_200).result("ghost");
    assert!(started(&bench.at(1_500).wake()).is_some());
}

#[test]
fn notice_levels_follow_the_condition() {
    let mut bench = Bench::new();
    bench.start("s1");
    let effects = bench.at(100).edit("s1", "a.rs");
    assert!(effects.iter().any(|effect| matches!(
        effect,
        Effect::Notice {
            level: NoticeLevel::Info,
            condition: NoticeCondition::PossiblyStale,
            ..
        }
    )));
}

// ---- Requirements: Opt-in continuous watcher mode, Watcher liveness ------
// ---- verification before the fresh claim --------------------------------
// The gating scenarios (on/off/auto, backends, unindexed) are tested in
// `watcher::gate`; these are the machine's half.

const WATCHER_PID: u32 = 900;

impl Bench {
    fn watcher_started(&mut self, session: &str, mode: WatchMode) -> Vec<Effect> {
        let session = self.key(session);
        self.send(Input::WatcherStarted {
            session,
            mode,
            pid: WATCHER_PID,
        })
    }

    fn watcher_verified(&mut self, session: &str) -> Vec<Effect> {
        let session = self.key(session);
        self.send(Input::WatcherVerified {
            session,
            pid: WATCHER_PID,
        })
    }

    fn watcher_failed(&mut self, session: &str, error: &str) -> Vec<Effect> {
        let session = self.key(session);
        self.send(Input::WatcherFailed {
            session,
            pid: WATCHER_PID,
            error: error.into(),
        })
    }

    fn watcher_died(&mut self, session: &str, error: &str) -> Vec<Effect> {
        let session = self.key(session);
        self.send(Input::WatcherDied {
            session,
            pid: WATCHER_PID,
            error: error.into(),
        })
    }

    fn watcher_stopped(&mut self, session: &str) -> Vec<Effect> {
        let session = self.key(session);
        self.send(Input::WatcherStopped {
            session,
            pid: WATCHER_PID,
        })
    }

    fn watcher_applied(&mut self, session: &str, path: &str) -> Vec<Effect> {
        let session = self.key(session);
        self.send(Input::WatcherApplied {
            session,
            pid: WATCHER_PID,
            path: path.to_string(),
        })
    }

    /// `session` starts at the current time and its `on` watcher is verified
    /// 1 500 ms later.
    fn with_verified_watcher(&mut self, session: &str) -> Vec<Effect> {
        let now = self.now;
        self.start(session);
        self.watcher_started(session, WatchMode::On);
        self.at(now + 1_500).watcher_verified(session)
    }

    fn watcher_state(&self) -> Option<String> {
        self.machine
            .record()
            .watcher
            .as_ref()
            .map(|watcher| watcher.state.clone())
    }
}

#[test]
fn watcher_keeps_the_graph_current() {
    let mut bench = Bench::new();
    bench.with_verified_watcher("s1");
    assert_eq!(bench.status(), FreshnessStatus::Fresh);

    // Files change during the session: the watcher applies them; each
    // edit is possibly stale until the watcher reports it applied, and no
    // sync is ever started.
    let mut now = 2_000;
    for path in ["a.rs", "b.rs", "src/c.rs"] {
        let effects = bench.at(now).settled_edit("s1", path);
        assert_eq!(started(&effects), None);
        assert!(notices(&effects).is_empty(), "{effects:?}");
        assert_eq!(bench.status(), FreshnessStatus::Syncing, "after {path}");
        assert_eq!(
            bench.machine.record().stale_since,
            None,
            "no stale episode under the watcher"
        );
        let effects = bench
            .at(now + 500)
            .watcher_applied("s1", &format!("{ROOT}/{path}"));
        assert_eq!(started(&effects), None);
        assert_eq!(bench.status(), FreshnessStatus::Fresh, "{path} applied");
        now += 1_000;
    }
    assert_eq!(bench.machine.next_deadline(), None);
    assert_eq!(started(&bench.at(600_000).wake()), None);
    let record = bench.machine.record();
    assert_eq!(record.edit_epoch, 3, "edits are still counted");
    assert_eq!(record.stale_since, None);
    assert!(record.pending.is_empty());
    let frame = bench.machine.state_frame();
    assert_eq!(frame.status, FreshnessStatus::Fresh);
    let watcher = frame.watcher.expect("watcher facts");
    assert_eq!(
        (
            watcher.mode.as_str(),
            watcher.state.as_str(),
            watcher.pid,
            watcher.since
        ),
        ("on", "verified", Some(WATCHER_PID), Some(1_500))
    );
}

#[test]
fn verified_watcher_owns_freshness() {
    let mut bench = Bench::new();
    bench.start("s2");
    bench.at(100).start("s1");
    bench.at(200).watcher_started("s1", WatchMode::Auto);
    assert_eq!(bench.watcher_state().as_deref(), Some("verifying"));
    assert!(!bench.machine.watcher_owns_freshness());
    let effects = bench.at(1_200).watcher_verified("s1");
    assert!(bench.machine.watcher_owns_freshness());
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    assert_eq!(
        notices(&effects),
        [
            pair("s1", NoticeCondition::WatcherStarted),
            pair("s2", NoticeCondition::WatcherStarted)
        ],
        "the one-time watcher-start notice, to everyone in the workspace"
    );
    assert!(notice_text(&effects, NoticeCondition::WatcherStarted).contains(ROOT));
    assert_eq!(
        bench.at(1_300).watcher_verified("s1"),
        [],
        "a repeated verification is nothing new"
    );

    // Edits from any live session start no sync and offer no notice; the
    // record is possibly stale until the watcher reports them applied.
    for (at, session) in [(2_000, "s1"), (3_000, "s2")] {
        let effects = bench.at(at).edit(session, "a.rs");
        assert!(notices(&effects).is_empty(), "{effects:?}");
        assert_eq!(started(&effects), None);
        assert_eq!(bench.status(), FreshnessStatus::Syncing);
        bench.at(at + 400).watcher_applied("s1", "a.rs");
        assert_eq!(bench.status(), FreshnessStatus::Fresh);
        assert_eq!(bench.machine.record().stale_since, None);
    }
    // A person's request joins the watcher.
    assert_eq!(bench.at(4_000).request(Some("s2")), []);
    assert_eq!(bench.machine.current_flight(), None);
}

#[test]
fn watcher_fails_liveness_verification() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(100).watcher_started("s1", WatchMode::On);
    let mut statuses = vec![bench.status()];

    // Drift during verification opens an episode as usual, but its sync
    // waits for the verification to settle.
    bench.at(1_000).settled_edit("s1", "a.rs");
    statuses.push(bench.status());
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert_eq!(bench.machine.next_deadline(), None);
    assert_eq!(started(&bench.at(5_000).wake()), None);
    assert_eq!(
        bench.machine.state_frame().detail.as_deref(),
        Some("a sync waits for the watcher's verification")
    );

    let error = "exit status 1: Database Configuration Error: Database set to 'neo4j' but it is not configured.";
    let effects = bench.at(6_000).watcher_failed("s1", error);
    statuses.push(bench.status());
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::WatcherNotVerified)]
    );
    assert!(notice_text(&effects, NoticeCondition::WatcherNotVerified).contains("not configured"));
    let record = bench.machine.record();
    assert!(record
        .last_error
        .as_deref()
        .is_some_and(|text| text.contains(error)));
    assert_eq!(bench.watcher_state().as_deref(), Some("not_verified"));
    assert_eq!(
        record.watcher.as_ref().and_then(|watcher| watcher.pid),
        None
    );
    // Lazy mode resumes: the waiting sync starts now.
    let flight = started(&effects).expect("the held sync starts");
    assert!(!bench.machine.watcher_owns_freshness());
    assert!(
        !statuses.contains(&FreshnessStatus::Fresh),
        "no fresh claim was ever recorded: {statuses:?}"
    );
    // A late verification of the failed watcher changes nothing.
    assert_eq!(bench.at(6_100).watcher_verified("s1"), []);
    bench.at(7_000).finish(flight, SyncOutcome::Succeeded);
    assert_eq!(
        bench.status(),
        FreshnessStatus::Fresh,
        "a covering sync may claim it"
    );
}

#[test]
fn a_failed_verification_without_edits_is_the_not_verified_state() {
    let mut bench = fresh_bench();
    bench.at(6_000).watcher_started("s1", WatchMode::On);
    assert_eq!(bench.status(), FreshnessStatus::Fresh, "the sync's claim");
    bench.at(7_000).watcher_failed("s1", "exit status 1");
    assert_eq!(bench.status(), FreshnessStatus::NotVerified);
    assert_eq!(bench.machine.next_deadline(), None, "nothing to sync");
}

#[test]
fn watcher_start_blocked_by_lock() {
    let mut bench = Bench::new();
    bench.start("s1");
    assert!(bench.machine.watcher_attempt_allowed(&bench.key("s1")));
    let key = bench.key("s1");
    let effects = bench.at(100).send(Input::WatcherBusy {
        session: key,
        mode: WatchMode::On,
        holder: "pid 4242: cgc mcp start".into(),
    });
    assert_eq!(bench.status(), FreshnessStatus::SkippedBusy);
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::WatcherSkippedBusy)]
    );
    assert!(notice_text(&effects, NoticeCondition::WatcherSkippedBusy)
        .contains("pid 4242: cgc mcp start"));
    assert_eq!(bench.watcher_state().as_deref(), Some("skipped_busy"));
    assert!(
        !bench.machine.watcher_attempt_allowed(&bench.key("s1")),
        "one attempt"
    );
    assert_eq!(
        bench.at(200).watcher_started("s1", WatchMode::On),
        [],
        "no second attempt this session"
    );

    // Freshness degrades to the lazy mode behaviour.
    let effects = bench.at(1_000).settled_edit("s1", "a.rs");
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::PossiblyStale)]
    );
    let flight = started(&bench.at(1_500).wake()).expect("a lazy sync");
    bench.at(1_600).spawned(flight);
    bench.at(2_000).finish(flight, SyncOutcome::Succeeded);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    assert!(!bench.machine.watcher_owns_freshness());
}

#[test]
fn a_spawn_failure_is_not_verified() {
    let mut bench = Bench::new();
    bench.start("s1");
    let key = bench.key("s1");
    let effects = bench.at(100).send(Input::WatcherSpawnFailed {
        session: key,
        mode: WatchMode::On,
        error: "cgc not found on PATH".into(),
    });
    assert_eq!(bench.status(), FreshnessStatus::NotVerified);
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::WatcherNotVerified)]
    );
    assert!(!bench.machine.watcher_attempt_allowed(&bench.key("s1")));
}

#[test]
fn a_watcher_dying_right_after_start_is_not_verified() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(100).watcher_started("s1", WatchMode::On);
    // The shell may call it a death; the machine never verified it.
    let effects = bench.at(150).watcher_died("s1", "killed by signal 9");
    assert_eq!(bench.status(), FreshnessStatus::NotVerified);
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::WatcherNotVerified)]
    );
    assert_eq!(bench.watcher_state().as_deref(), Some("not_verified"));
}

#[test]
fn a_verified_watcher_dying_drops_to_possibly_stale_at_once() {
    let mut bench = Bench::new();
    bench.with_verified_watcher("s1");
    bench.at(3_000).settled_edit("s1", "a.rs");
    let effects = bench.at(10_000).watcher_died("s1", "exit status 1: boom");
    let record = bench.machine.record();
    assert_eq!(record.status, FreshnessStatus::PossiblyStale);
    assert_eq!(record.stale_since, Some(Millis(10_000)));
    assert!(record.pending.whole_workspace);
    assert!(record
        .last_error
        .as_deref()
        .is_some_and(|text| text.contains("exit status 1: boom")));
    assert_eq!(bench.watcher_state().as_deref(), Some("died"));
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::WatcherDied)]
    );
    assert!(notice_text(&effects, NoticeCondition::WatcherDied).contains("background sync follows"));
    assert!(!bench.machine.watcher_owns_freshness());

    // Lazy mode resumes: the death opened an episode, synced after batchMs.
    assert_eq!(bench.machine.next_deadline(), Some(Millis(10_500)));
    let flight = bench.sync_to_success();
    assert!(flight.get() > 0);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    let effects = bench.at(20_000).edit("s1", "b.rs");
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::PossiblyStale)]
    );
    assert!(
        !bench.machine.watcher_attempt_allowed(&bench.key("s1")),
        "not retried until the next session"
    );
}

#[test]
fn ready_then_death_is_a_death_after_verification() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(100).watcher_started("s1", WatchMode::On);
    bench.at(1_300).watcher_verified("s1"); // the ready line, while alive
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    // Labelled a failure by the shell, but the machine had verified it.
    let effects = bench.at(1_350).watcher_failed("s1", "exit status 1");
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::WatcherDied)]
    );
    assert_eq!(bench.machine.record().stale_since, Some(Millis(1_350)));
}

#[test]
fn session_ended_during_verification_makes_a_later_verification_stale() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(100).watcher_started("s1", WatchMode::On);
    bench.at(500).end("s1");
    assert_eq!(
        bench.machine.record().watcher,
        None,
        "the watcher ended with it"
    );
    let record = bench.machine.record().clone();
    for input in [
        Input::WatcherVerified {
            session: bench.key("s1"),
            pid: WATCHER_PID,
        },
        Input::WatcherFailed {
            session: bench.key("s1"),
            pid: WATCHER_PID,
            error: "killed".into(),
        },
        Input::WatcherStopped {
            session: bench.key("s1"),
            pid: WATCHER_PID,
        },
        Input::WatcherDeclined {
            session: bench.key("s1"),
            reason: WatcherDecline::Unindexed,
        },
    ] {
        assert_eq!(bench.at(1_000).send(input.clone()), [], "{input:?}");
    }
    assert_eq!(bench.machine.record(), &record);
    assert_ne!(bench.status(), FreshnessStatus::Fresh);

    // The session resumed by a new instance is a new lifetime: it may make
    // its own attempt, and a late report about the old pid is still stale.
    bench
        .at(2_000)
        .start_as("s1", "pi-new", SessionStartReason::Resume);
    assert!(bench.machine.watcher_attempt_allowed(&bench.key("s1")));
    bench.send(Input::WatcherStarted {
        session: bench.key("s1"),
        mode: WatchMode::On,
        pid: 901,
    });
    assert_eq!(bench.at(2_100).watcher_verified("s1"), []);
    assert!(!bench.machine.watcher_owns_freshness());
    bench.send(Input::WatcherVerified {
        session: bench.key("s1"),
        pid: 901,
    });
    assert!(bench.machine.watcher_owns_freshness());
}

#[test]
fn a_verified_watcher_whose_session_ends_leaves_possibly_stale() {
    let mut bench = Bench::new();
    bench.start("s2");
    bench.at(0).with_verified_watcher("s1");
    let effects = bench.at(5_000).end("s1");
    assert!(notices(&effects).is_empty(), "a planned stop is no failure");
    let record = bench.machine.record();
    assert_eq!(record.status, FreshnessStatus::PossiblyStale);
    assert_eq!(record.stale_since, Some(Millis(5_000)));
    assert_eq!(record.watcher, None);
    assert_eq!(
        bench.at(5_100).watcher_stopped("s1"),
        [],
        "the stop report after the end changes nothing"
    );
    // The live session is back on lazy mode; it may make its own attempt.
    assert!(bench.machine.watcher_attempt_allowed(&bench.key("s2")));
    bench.at(6_000).settled_edit("s2", "a.rs");
    assert!(started(&bench.at(6_500).wake()).is_some());
}

#[test]
fn a_watcher_stopped_while_its_session_lives_ends_quietly() {
    let mut bench = Bench::new();
    bench.with_verified_watcher("s1");
    let effects = bench.at(4_000).watcher_stopped("s1");
    assert_eq!(effects, [Effect::RecordChanged]);
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert_eq!(bench.machine.record().stale_since, Some(Millis(4_000)));
    assert_eq!(bench.machine.next_deadline(), None, "the next drift syncs");

    // Stopped before verification: nothing was claimed, nothing changes
    // but the facts.
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(100).watcher_started("s1", WatchMode::On);
    bench.at(200).settled_edit("s1", "a.rs");
    let effects = bench.at(1_000).watcher_stopped("s1");
    assert_eq!(bench.machine.record().watcher, None);
    assert!(
        started(&effects).is_some(),
        "the sync that waited for the verification starts"
    );
}

#[test]
fn a_sync_in_flight_when_the_watcher_is_verified_runs_out_without_a_say() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(100).watcher_started("s1", WatchMode::On);
    bench.at(200).request(Some("s1"));
    let flight = bench.machine.current_flight().expect("a manual sync runs");
    bench.at(300).spawned(flight);
    let effects = bench.at(1_500).watcher_verified("s1");
    assert!(
        !effects
            .iter()
            .any(|effect| matches!(effect, Effect::CancelSync { .. })),
        "the sync is not stopped part-way"
    );
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    assert_eq!(bench.machine.current_flight(), Some(flight));
    assert_eq!(
        bench.machine.state_frame().detail,
        Some(format!(
            "sync {} superseded by the watcher, finishing",
            flight.get()
        ))
    );
    let record = bench.machine.record().clone();
    let effects = bench.at(2_000).finish(
        flight,
        SyncOutcome::Failed {
            error: "exit status 1".into(),
        },
    );
    assert_eq!(effects, [], "its completion does not downgrade the status");
    assert_eq!(bench.machine.record(), &record);
    assert_eq!(bench.machine.current_flight(), None);
}

#[test]
fn verification_drops_a_queued_sync() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(100).watcher_started("s1", WatchMode::On);
    bench.at(200).settled_edit("s1", "a.rs");
    bench.at(1_000).watcher_verified("s1");
    // The only deadline: the bound of the wait for the restart that covers a.rs.
    assert_eq!(
        bench.machine.next_deadline(),
        Some(Millis(200 + policy().watcher_apply_ms))
    );
    assert_eq!(started(&bench.at(90_000).wake()), None);
    assert_eq!(bench.machine.automatic_syncs_spawned("s1"), Some(0));
}

#[test]
fn one_watcher_attempt_per_session_and_one_watcher_per_workspace() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.start("s2");
    assert!(bench.machine.current_lifetime("ghost").is_none());
    bench.at(100).watcher_started("s1", WatchMode::On);
    assert!(
        !bench.machine.watcher_attempt_allowed(&bench.key("s2")),
        "a watcher already runs"
    );
    let key = bench.key("s2");
    assert_eq!(
        bench.at(200).send(Input::WatcherBusy {
            session: key,
            mode: WatchMode::On,
            holder: "pid 900: cgc watch .".into(),
        }),
        [],
        "an attempt that may not be made is ignored"
    );
    bench.at(300).watcher_failed("s1", "exit status 1");
    assert!(!bench.machine.watcher_attempt_allowed(&bench.key("s1")));
    assert!(bench.machine.watcher_attempt_allowed(&bench.key("s2")));
    // A report about another pid than the running watcher is stale.
    let mut bench = Bench::new();
    bench.start("s1");
    bench.watcher_started("s1", WatchMode::On);
    assert_eq!(
        bench.send(Input::WatcherVerified {
            session: bench.key("s1"),
            pid: 1
        }),
        []
    );
    assert_eq!(
        bench.send(Input::WatcherDied {
            session: bench.key("s1"),
            pid: 1,
            error: "x".into()
        }),
        []
    );
    assert_eq!(bench.watcher_state().as_deref(), Some("verifying"));
}

#[test]
fn a_declined_watcher_leaves_the_status_and_says_why() {
    let mut bench = fresh_bench();
    let answer = "kuzudb (environment DEFAULT_DATABASE)";
    let key = bench.key("s1");
    let effects = bench.at(6_000).send(Input::WatcherDeclined {
        session: key,
        reason: WatcherDecline::Backend(answer.into()),
    });
    assert_eq!(bench.status(), FreshnessStatus::Fresh, "nothing ran");
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::WatcherDeclinedBackend)]
    );
    assert!(notice_text(&effects, NoticeCondition::WatcherDeclinedBackend).contains(answer));
    let watcher = bench.machine.record().watcher.clone().unwrap();
    assert_eq!(
        (watcher.mode.as_str(), watcher.state.as_str()),
        ("auto", "declined_backend")
    );
    assert!(!bench.machine.watcher_attempt_allowed(&bench.key("s1")));

    let mut bench = Bench::new();
    bench.start("s1");
    let effects = bench.send(Input::WatcherDeclined {
        session: bench.key("s1"),
        reason: WatcherDecline::Unindexed,
    });
    assert_eq!(bench.status(), FreshnessStatus::Unknown);
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::WatcherDeclinedUnindexed)]
    );
    assert_eq!(bench.watcher_state().as_deref(), Some("declined_unindexed"));
    // Lazy behaviour runs for the session.
    bench.at(1_000).settled_edit("s1", "a.rs");
    assert!(started(&bench.at(1_500).wake()).is_some());
}

#[test]
fn a_restart_forgets_the_watcher() {
    let mut bench = Bench::new();
    bench.with_verified_watcher("s1");
    let record = bench.machine.record().clone();
    assert!(record.watcher.is_some());
    let machine = Freshness::new(policy(), Some(record), Millis(9_000));
    assert_eq!(machine.record().status, FreshnessStatus::Unknown);
    assert_eq!(machine.record().watcher, None);
    assert!(!machine.watcher_owns_freshness());
}

// ---- lifetimes: detach, re-attach, replacement -------------------------

impl Bench {
    fn start_over(&mut self, session: &str, instance: &str, connection: u64) -> Vec<Effect> {
        self.send(Input::SessionStarted {
            session: session.into(),
            instance: instance.into(),
            reason: SessionStartReason::Startup,
            connection: Some(connection),
            owner: None,
        })
    }

    fn close_connection(&mut self, connection: u64) -> Vec<Effect> {
        self.send(Input::ConnectionClosed { connection })
    }
}

#[test]
fn a_dropped_connection_detaches_its_session_and_a_replay_carries_on_with_budget_and_notices() {
    let mut bench = Bench::new();
    bench.start_over("s1", "pi-1", 1);
    let key = bench.key("s1");
    let effects = bench.at(100).settled_edit("s1", "a.rs");
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::PossiblyStale)]
    );
    bench.deliver("s1", NoticeCondition::PossiblyStale);
    bench.sync_to_success();
    assert_eq!(bench.machine.automatic_syncs_spawned("s1"), Some(1));
    // The connection drops: the lifetime's work stops, the lifetime stays.
    let effects = bench.at(5_000).close_connection(1);
    assert_eq!(
        effects,
        [Effect::SessionClosed {
            session: key.clone(),
            detached: true
        }]
    );
    assert!(!bench.machine.is_live("s1"));
    // An edit under the name before the replay still counts (never a
    // false fresh) but opens nothing for the detached lifetime.
    let effects = bench.at(5_100).settled_edit("s1", "b.rs");
    assert_eq!(notices(&effects), []);
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert_eq!(bench.machine.next_deadline(), None, "nobody pays");
    // The harness reconnects and replays its session_start.
    let effects = bench.at(6_000).start_over("s1", "pi-1", 2);
    assert_eq!(
        effects[0],
        Effect::SessionOpened {
            session: key.clone(),
            reattached: true
        }
    );
    assert_eq!(bench.key("s1"), key, "the same lifetime");
    assert_eq!(bench.machine.carriers(&key), [2]);
    // The drift it missed is synced, paid from the same budget.
    let flight = bench.sync_to_success();
    assert!(flight.get() > 1);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    assert_eq!(bench.machine.automatic_syncs_spawned("s1"), Some(2));
    // The staleness notice was delivered in this lifetime: not again.
    let effects = bench.at(20_000).settled_edit("s1", "c.rs");
    assert_eq!(notices(&effects), []);
}

#[test]
fn a_second_connection_of_the_same_instance_keeps_the_session_attached() {
    let mut bench = Bench::new();
    bench.start_over("s1", "pi-1", 1);
    bench.start_over("s1", "pi-1", 2);
    assert_eq!(bench.at(100).close_connection(1), []);
    assert!(bench.machine.is_live("s1"));
    assert_eq!(bench.machine.carriers(&bench.key("s1")), [2]);
}

#[test]
fn a_replacement_closes_the_old_lifetime_and_a_late_close_of_its_connection_changes_nothing() {
    let mut bench = Bench::new();
    bench.start_over("s1", "pi-1", 1);
    let old = bench.key("s1");
    let effects = bench.at(100).start_over("s1", "pi-2", 2);
    let new = bench.key("s1");
    assert_ne!(old, new);
    assert_eq!(
        effects,
        [
            Effect::SessionClosed {
                session: old,
                detached: false
            },
            Effect::SessionOpened {
                session: new.clone(),
                reattached: false
            },
            Effect::WarmWorker
        ]
    );
    // The old connection closes later: the new lifetime is untouched.
    assert_eq!(bench.at(200).close_connection(1), []);
    assert!(bench.machine.is_live("s1"));
    assert_eq!(bench.key("s1"), new);
    bench.at(300).settled_edit("s1", "a.rs");
    assert!(
        bench.machine.next_deadline().is_some(),
        "auto-sync still armed"
    );
}

#[test]
fn a_notice_delivered_to_a_replaced_lifetime_does_not_spend_its_successors() {
    let mut bench = Bench::new();
    bench.start_over("s1", "pi-1", 1);
    let old = bench.key("s1");
    bench.at(100).start_over("s1", "pi-2", 2);
    bench.send(Input::NoticeDelivered {
        session: old,
        condition: NoticeCondition::PossiblyStale,
    });
    let effects = bench.at(200).settled_edit("s1", "a.rs");
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::PossiblyStale)]
    );
}

#[test]
fn a_detached_lifetime_makes_room_when_the_table_is_full() {
    let mut bench = Bench::new();
    for n in 0..MAX_LIVE_SESSIONS as u64 {
        bench.start_over(&format!("s{n}"), "pi", n);
    }
    assert!(!bench.machine.admits_session("new", "pi"));
    bench.close_connection(5);
    assert!(bench.machine.admits_session("new", "pi"));
    let effects = bench.at(100).start_over("new", "pi", 9_999);
    assert!(effects.contains(&Effect::SessionClosed {
        session: bench.key("s5"),
        detached: false
    }));
    assert!(bench.machine.is_live("new"));
    // Ended, not detached: its replay is a late duplicate.
    bench.start_over("s5", "pi", 5);
    assert!(!bench.machine.is_live("s5"));
}

#[test]
fn two_sync_starts_are_at_least_the_minimum_gap_apart() {
    let mut bench = Bench::with(FreshnessPolicy {
        min_sync_gap_ms: 5_000,
        max_syncs_per_session: 10,
        ..policy()
    });
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");
    let first = started(&bench.at(1_500).wake()).unwrap();
    bench.spawned(first);
    // An edit during the sync makes its success a follow-up case.
    bench.at(1_600).settled_edit("s1", "b.rs");
    let effects = bench.at(2_000).finish(first, SyncOutcome::Succeeded);
    assert_eq!(started(&effects), None, "the follow-up waits for the gap");
    assert_eq!(bench.machine.next_deadline(), Some(Millis(6_500)));
    assert_eq!(started(&bench.at(6_499).wake()), None);
    let follow_up = started(&bench.at(6_500).wake()).unwrap();
    // A failure's retry waits too, and so does a person's request.
    bench.spawned(follow_up);
    bench.at(7_000).finish(
        follow_up,
        SyncOutcome::Failed {
            error: "exit 1".into(),
        },
    );
    let effects = bench.at(7_100).request(None);
    assert_eq!(started(&effects), None);
    assert_eq!(bench.machine.next_deadline(), Some(Millis(11_500)));
    assert!(started(&bench.at(11_500).wake()).is_some());
}

// ---- Shell edits: a shell command's changes, found by comparing the tree ----

impl Bench {
    fn bash_call(&mut self, session: &str) -> Vec<Effect> {
        self.call(session, "bash", &[])
    }

    /// A `bash` result; returns the probe the machine asks to compare.
    fn bash_result(&mut self, session: &str) -> ProbeId {
        let effects = self.send(Input::ToolResult {
            session: session.into(),
            tool: "bash".into(),
            ok: true,
        });
        probes(&effects)
            .first()
            .copied()
            .unwrap_or_else(|| panic!("no comparison asked for: {effects:?}"))
    }

    fn answer(&mut self, probe: ProbeId, changes: TreeChanges) -> Vec<Effect> {
        self.send(Input::ProbeAnswered { probe, changes })
    }
}

fn probes(effects: &[Effect]) -> Vec<ProbeId> {
    effects
        .iter()
        .filter_map(|effect| match effect {
            Effect::ProbeWorkspace { probe } => Some(*probe),
            _ => None,
        })
        .collect()
}

fn changed(paths: &[&str]) -> TreeChanges {
    TreeChanges::Paths(paths.iter().map(|path| path.to_string()).collect())
}

#[test]
fn a_shell_command_that_changed_files_is_an_observed_edit() {
    let mut bench = fresh_bench();
    let epoch = bench.machine.record().edit_epoch;
    assert!(
        bench.at(6_000).bash_call("s1").is_empty(),
        "a call decides nothing yet"
    );
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    let probe = bench.at(6_100).bash_result("s1");
    assert_eq!(bench.status(), FreshnessStatus::Fresh);

    let effects = bench
        .at(6_120)
        .answer(probe, changed(&["src/gen.rs", "src/old.rs"]));
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::PossiblyStale)]
    );
    assert!(notice_text(&effects, NoticeCondition::PossiblyStale).contains("`bash`"));
    let record = bench.machine.record();
    assert_eq!(record.status, FreshnessStatus::PossiblyStale);
    assert_eq!(record.stale_since, Some(Millis(6_120)));
    assert_eq!(record.edit_epoch, epoch + 1);
    assert_eq!(
        bench.machine.pending_paths().paths().collect::<Vec<_>>(),
        ["src/gen.rs", "src/old.rs"]
    );
    // Settled at once (the command ended): the batching window decides.
    assert_eq!(bench.machine.next_deadline(), Some(Millis(6_620)));
    let flight = started(&bench.at(6_620).wake()).expect("the lazy sync starts");
    bench.spawned(flight);
    bench.at(7_000).finish(flight, SyncOutcome::Succeeded);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    assert!(
        bench.answer(probe, changed(&["x.rs"])).is_empty(),
        "answered once"
    );
}

#[test]
fn a_shell_command_that_changed_nothing_changes_nothing() {
    let mut bench = fresh_bench();
    let before = bench.machine.record().clone();
    bench.at(6_000).bash_call("s1");
    let probe = bench.at(6_100).bash_result("s1");
    let effects = bench.at(6_110).answer(probe, TreeChanges::Unchanged);
    assert!(effects.is_empty(), "{effects:?}");
    assert_eq!(bench.machine.record(), &before);
    assert_eq!(bench.machine.next_deadline(), None);
    // An empty list of paths is the same answer.
    bench.at(7_000).bash_call("s1");
    let probe = bench.at(7_100).bash_result("s1");
    assert!(bench.answer(probe, changed(&[])).is_empty());
    // Other tools' results do not ask for comparisons.
    assert!(probes(&bench.result("s1")).is_empty());
}

#[test]
fn without_a_manifest_a_shell_command_is_a_whole_workspace_edit() {
    let mut bench = fresh_bench();
    bench.at(6_000).bash_call("s1");
    let probe = bench.at(6_100).bash_result("s1");
    let effects = bench.at(6_110).answer(probe, TreeChanges::WholeWorkspace);
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::PossiblyStale)]
    );
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert!(bench.machine.pending_paths().is_whole_workspace());
    assert!(bench.machine.record().pending.whole_workspace);
}

#[test]
fn changed_paths_outside_the_workspace_are_not_an_edit() {
    let mut bench = fresh_bench();
    bench.at(6_000).bash_call("s1");
    let probe = bench.at(6_100).bash_result("s1");
    assert!(bench
        .answer(probe, changed(&["/tmp/scratch.rs"]))
        .is_empty());
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
}

#[test]
fn no_sync_claims_fresh_while_a_shell_command_is_not_compared() {
    // The command runs across the whole sync.
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");
    let flight = started(&bench.at(1_500).wake()).unwrap();
    bench.spawned(flight);
    bench.at(1_600).bash_call("s1");
    let effects = bench.at(3_000).finish(flight, SyncOutcome::Succeeded);
    assert!(notices(&effects).is_empty(), "no completion notice yet");
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert_eq!(bench.machine.record().last_synced_at, Some(Millis(3_000)));
    assert!(bench
        .machine
        .state_frame()
        .detail
        .is_some_and(|detail| detail.contains("shell command")));
    assert_eq!(
        bench.machine.next_deadline(),
        None,
        "no follow-up is queued"
    );

    // Its result: still no claim while the comparison runs.
    let probe = bench.at(9_000).bash_result("s1");
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    let effects = bench.at(9_010).answer(probe, TreeChanges::Unchanged);
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::SyncCompleted)]
    );
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    assert_eq!(bench.machine.record().stale_since, None);

    // The same with a command that did change something: no claim, a sync.
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");
    let flight = started(&bench.at(1_500).wake()).unwrap();
    bench.spawned(flight);
    bench.at(1_600).bash_call("s1");
    bench.at(3_000).finish(flight, SyncOutcome::Succeeded);
    let probe = bench.at(9_000).bash_result("s1");
    bench.at(9_010).answer(probe, changed(&["b.rs"]));
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert_eq!(
        bench.machine.record().stale_since,
        Some(Millis(1_000)),
        "the episode never closed"
    );
    assert_eq!(bench.machine.next_deadline(), Some(Millis(9_510)));
}

#[test]
fn a_shell_command_compared_during_the_sync_decides_before_its_end() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");
    let flight = started(&bench.at(1_500).wake()).unwrap();
    bench.spawned(flight);
    bench.at(1_600).bash_call("s1");
    let probe = bench.at(1_700).bash_result("s1");
    bench.at(1_710).answer(probe, TreeChanges::Unchanged);
    bench.at(3_000).finish(flight, SyncOutcome::Succeeded);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);

    // A change found during the sync keeps it from claiming `fresh`.
    bench.at(10_000).settled_edit("s1", "b.rs");
    let flight = started(&bench.at(10_500).wake()).unwrap();
    bench.spawned(flight);
    bench.at(10_600).bash_call("s1");
    let probe = bench.at(10_700).bash_result("s1");
    bench.at(10_710).answer(probe, changed(&["c.rs"]));
    let effects = bench.at(12_000).finish(flight, SyncOutcome::Succeeded);
    assert!(!notices(&effects).contains(&pair("s1", NoticeCondition::SyncCompleted)));
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert_eq!(bench.machine.record().last_synced_at, Some(Millis(12_000)));
}

#[test]
fn a_due_sync_waits_for_a_running_shell_command_and_its_comparison() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");
    bench.at(1_200).bash_call("s1");
    assert_eq!(started(&bench.at(1_500).wake()), None, "the command runs");
    assert_eq!(bench.machine.next_deadline(), Some(Millis(31_200)));
    let probe = bench.at(2_000).bash_result("s1");
    assert_eq!(
        bench.machine.next_deadline(),
        None,
        "the comparison's answer will come"
    );
    let effects = bench.at(2_010).answer(probe, TreeChanges::Unchanged);
    assert!(started(&effects).is_some(), "starts once compared");

    // A command that outlives settleMs stops holding back the sync.
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");
    bench.at(1_200).bash_call("s1");
    let flight = started(&bench.at(31_200).wake()).expect("settle window over");
    bench.spawned(flight);
    bench.at(32_000).finish(flight, SyncOutcome::Succeeded);
    assert_eq!(
        bench.status(),
        FreshnessStatus::PossiblyStale,
        "still no claim: the command is open"
    );
}

#[test]
fn a_shell_command_of_an_ending_session_is_compared_at_its_end() {
    let mut bench = fresh_bench();
    bench.at(6_000).bash_call("s1");
    let effects = bench.at(6_100).end("s1");
    let asked = probes(&effects);
    assert_eq!(asked.len(), 1, "{effects:?}");
    let effects = bench.at(6_120).answer(asked[0], changed(&["gen.rs"]));
    assert!(notices(&effects).is_empty(), "nobody to tell");
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert_eq!(bench.machine.next_deadline(), None, "nobody pays");

    // A result under an ended name is compared too.
    let mut bench = fresh_bench();
    bench.at(6_000).end("s1");
    let probe = bench.at(6_100).bash_result("s1");
    bench.at(6_120).answer(probe, changed(&["gen.rs"]));
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
}

// ---- Drift no sync covered is the next lifetime's first drift ---------------

#[test]
fn a_session_ended_before_its_lazy_sync_leaves_the_sync_to_the_next_lifetime() {
    let mut bench = Bench::new();
    bench.start("s1");
    let effects = bench.at(1_000).settled_edit("s1", "a.rs");
    assert!(notice_text(&effects, NoticeCondition::PossiblyStale).contains("follows shortly"));
    bench.at(1_070).end("s1");
    assert_eq!(bench.machine.next_deadline(), None, "the payer is gone");
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);

    bench
        .at(5_000)
        .start_as("s2", "pi-2", SessionStartReason::New);
    assert_eq!(bench.machine.next_deadline(), Some(Millis(5_500)));
    let effects = bench.at(5_500).wake();
    assert!(effects.contains(&Effect::StartSync {
        flight: FlightId(1),
        session: Some(bench.key("s2")),
        manual: false,
        allowance: RECONCILES,
    }));
    let flight = bench.machine.current_flight().unwrap();
    bench.spawned(flight);
    assert_eq!(bench.machine.automatic_syncs_spawned("s2"), Some(1));
    bench.at(6_000).finish(flight, SyncOutcome::Succeeded);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);

    // A fresh workspace gives a new lifetime nothing to do.
    bench
        .at(7_000)
        .start_as("s3", "pi-3", SessionStartReason::New);
    assert_eq!(bench.machine.next_deadline(), None);
}

#[test]
fn a_restored_record_with_pending_work_is_synced_by_the_first_lifetime() {
    let mut bench = fresh_bench();
    bench.at(9_000).edit("s1", "late.rs");
    let restored = bench.machine.record().clone();
    bench.machine = Freshness::new(policy(), Some(restored), Millis(20_000));
    bench.keys.clear();
    assert_eq!(bench.machine.next_deadline(), None, "nobody to pay yet");
    bench
        .at(20_100)
        .start_as("s1", "pi-9", SessionStartReason::Startup);
    assert_eq!(bench.machine.next_deadline(), Some(Millis(20_600)));
    let flight = started(&bench.at(20_600).wake()).expect("the restored work is synced");
    bench.spawned(flight);
    bench.at(21_000).finish(flight, SyncOutcome::Succeeded);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);

    // A restored record with nothing pending stays unknown until asked.
    let mut bench = fresh_bench();
    let restored = bench.machine.record().clone();
    bench.machine = Freshness::new(policy(), Some(restored), Millis(20_000));
    bench
        .at(20_100)
        .start_as("s2", "pi-2", SessionStartReason::Startup);
    assert_eq!(bench.machine.next_deadline(), None);
    assert_eq!(bench.status(), FreshnessStatus::Unknown);
}

#[test]
fn drift_a_stopped_watcher_left_is_not_a_new_lifetimes_sync() {
    let mut bench = Bench::new();
    bench.at(1_000).with_verified_watcher("s1");
    bench.at(5_000).end("s1");
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    bench
        .at(6_000)
        .start_as("s2", "pi-2", SessionStartReason::New);
    assert_eq!(
        bench.machine.next_deadline(),
        None,
        "the new session's own watcher (or its next drift) covers it"
    );
}

#[test]
fn a_cancelled_sync_of_an_ended_payer_is_the_next_lifetimes_sync() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");
    let flight = started(&bench.at(1_500).wake()).unwrap();
    bench.spawned(flight);
    let effects = bench.at(1_600).end("s1");
    assert!(effects.contains(&Effect::CancelSync { flight }));
    bench.at(1_700).finish(flight, SyncOutcome::Cancelled);
    bench
        .at(2_000)
        .start_as("s2", "pi-2", SessionStartReason::New);
    assert_eq!(bench.machine.next_deadline(), Some(Millis(2_500)));
}

/// The drift observer and the sync scheduler as the service runs them: two
/// actors with a mailbox each, so a message may reach one after the other
/// already moved on — which [`Freshness`] (synchronous delivery) never
/// shows. The notices are left out.
struct Actors {
    observer: DriftObserver,
    scheduler: SyncScheduler,
    effects: Vec<Effect>,
}

impl Actors {
    fn new() -> Self {
        Actors {
            observer: DriftObserver::new(policy(), None, Millis(0)),
            scheduler: SyncScheduler::new(policy(), 0, 0, false, Millis(0)),
            effects: Vec::new(),
        }
    }

    /// Delivers `mail` and everything it leads to, each actor's in the
    /// order it was sent.
    fn deliver(&mut self, now: u64, mail: Vec<Envelope>) {
        let mut mail = std::collections::VecDeque::from(mail);
        while let Some(envelope) = mail.pop_front() {
            match envelope {
                Envelope::Observer(message) => {
                    mail.extend(self.observer.handle(Millis(now), message));
                }
                Envelope::Scheduler(message) => {
                    mail.extend(self.scheduler.handle(Millis(now), message));
                }
                Envelope::Notices(_) => {}
                Envelope::Shell(effect) => self.effects.push(effect),
            }
        }
    }

    fn input(&mut self, now: u64, input: Input) {
        self.deliver(now, vec![route(input)]);
    }

    fn edit(&mut self, now: u64, session: &str, path: &str) {
        self.input(
            now,
            Input::ToolCall {
                session: session.into(),
                tool: "edit".into(),
                paths: vec![path.into()],
                not_indexed: 0,
            },
        );
        self.input(
            now + 10,
            Input::ToolResult {
                session: session.into(),
                tool: "edit".into(),
                ok: true,
            },
        );
    }

    fn started(&mut self) -> Option<(FlightId, Option<SessionKey>)> {
        self.effects.drain(..).find_map(|effect| match effect {
            Effect::StartSync {
                flight, session, ..
            } => Some((flight, session)),
            _ => None,
        })
    }
}

#[test]
fn a_follow_up_settled_after_its_payer_detached_is_not_paid_by_it() {
    let mut actors = Actors::new();
    actors.input(
        0,
        Input::SessionStarted {
            session: "s1".into(),
            instance: "pi-1".into(),
            reason: SessionStartReason::Startup,
            connection: Some(1),
            owner: None,
        },
    );
    let key = actors.observer.current_lifetime("s1").unwrap();
    actors.edit(100, "s1", "a.rs");
    actors.input(600, Input::Wake);
    let (flight, payer) = actors.started().expect("the automatic sync started");
    assert_eq!(payer.as_ref(), Some(&key));
    // An edit during the flight: its success cannot claim fresh and asks
    // for a follow-up.
    actors.edit(700, "s1", "b.rs");
    // The runner's report reaches the scheduler, which settles the flight;
    // before the observer takes that, it takes the close of the session's
    // only connection (the scheduler learns of it after settling).
    let settled = actors.scheduler.handle(
        Millis(800),
        ToScheduler::Input(Input::SyncFinished {
            flight,
            outcome: SyncOutcome::Succeeded,
        }),
    );
    actors.input(810, Input::ConnectionClosed { connection: 1 });
    assert!(!actors.observer.is_live("s1"));
    actors.deliver(820, settled);
    assert_eq!(
        actors.observer.record().status,
        FreshnessStatus::PossiblyStale
    );
    // A detached lifetime's work stopped: no follow-up is paid by it.
    assert_eq!(actors.scheduler.next_deadline(), None, "nobody pays");
    actors.input(5_000, Input::Wake);
    assert_eq!(actors.started(), None);
    assert_eq!(actors.scheduler.running_payer(), None);
    // The drift is the next lifetime's to sync.
    actors.input(
        6_000,
        Input::SessionStarted {
            session: "s2".into(),
            instance: "pi-2".into(),
            reason: SessionStartReason::New,
            connection: Some(2),
            owner: None,
        },
    );
    assert_eq!(actors.scheduler.next_deadline(), Some(Millis(6_500)));
    actors.input(6_500, Input::Wake);
    let (_, payer) = actors.started().expect("the inherited sync started");
    assert_eq!(payer, actors.observer.current_lifetime("s2"));
}

#[test]
fn a_strategy_fallback_is_said_once_per_session_lifetime() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(1_000).settled_edit("s1", "a.rs");
    let flight = started(&bench.at(1_500).wake()).unwrap();
    let fell_back = |bench: &mut Bench| {
        bench.send(Input::SyncStrategyFellBack {
            flight,
            reason: "the CGC API probe failed".into(),
        })
    };
    let effects = fell_back(&mut bench);
    assert_eq!(
        notices(&effects),
        [pair("s1", NoticeCondition::SyncStrategyFellBack)]
    );
    let text = notice_text(&effects, NoticeCondition::SyncStrategyFellBack);
    assert!(text.contains("the CGC API probe failed"), "{text}");
    bench.deliver("s1", NoticeCondition::SyncStrategyFellBack);
    assert_eq!(notices(&fell_back(&mut bench)), []);
    // The flight goes on and is reported as usual.
    bench.spawned(flight);
    bench.at(2_000).finish(flight, SyncOutcome::Succeeded);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
}

#[test]
fn an_edit_under_a_verified_watcher_is_fresh_only_once_the_watcher_applied_it() {
    let mut bench = Bench::new();
    bench.with_verified_watcher("s1");
    bench.at(2_000).edit("s1", "a.py");
    bench.at(2_100).edit("s1", "pkg/b.py");
    bench.at(2_150).edit("s1", "README.md"); // not a file CGC parses
    assert_eq!(bench.status(), FreshnessStatus::Syncing);
    assert_eq!(
        bench.machine.state_frame().detail.as_deref(),
        Some("the watcher has not yet applied 2 edited file(s)")
    );
    // Another watcher's word, another file's, or a path outside count for nothing.
    let stale_key = bench.key("s1");
    assert_eq!(
        bench.at(2_200).send(Input::WatcherApplied {
            session: stale_key,
            pid: WATCHER_PID + 1,
            path: "a.py".into(),
        }),
        []
    );
    assert_eq!(bench.at(2_300).watcher_applied("s1", "c.py"), []);
    assert_eq!(bench.at(2_300).watcher_applied("s1", "/elsewhere/a.py"), []);
    bench
        .at(4_000)
        .watcher_applied("s1", &format!("{ROOT}/a.py"));
    assert_eq!(bench.status(), FreshnessStatus::Syncing, "b.py waits");
    let effects = bench.at(4_100).watcher_applied("s1", "pkg/b.py");
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    assert!(effects.contains(&Effect::RecordChanged));
    assert_eq!(started(&effects), None);
    assert_eq!(
        bench.machine.next_deadline(),
        None,
        "no lazy sync while it runs"
    );
}

impl Bench {
    /// The restart `effects` asked of the watcher, if any: its pid.
    fn restart_asked(effects: &[Effect]) -> Option<u32> {
        effects.iter().find_map(|effect| match effect {
            Effect::RestartWatcher { pid, .. } => Some(*pid),
            _ => None,
        })
    }

    fn watcher_restarted(&mut self, session: &str, previous: u32, pid: u32) -> Vec<Effect> {
        let session = self.key(session);
        self.send(Input::WatcherRestarted {
            session,
            previous,
            pid,
        })
    }

    fn watcher_verified_as(&mut self, session: &str, pid: u32) -> Vec<Effect> {
        let session = self.key(session);
        self.send(Input::WatcherVerified { session, pid })
    }
}

#[test]
fn an_edit_during_the_watchers_start_up_restarts_it_and_the_new_ready_line_claims_fresh() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(100).watcher_started("s1", WatchMode::On);
    // The start-up reconcile may already have read a.py, and CGC schedules
    // its observer only after the reconcile: nothing will report this edit.
    bench.at(500).settled_edit("s1", "a.py");
    let effects = bench.at(3_000).watcher_verified("s1");
    assert!(bench.machine.watcher_owns_freshness());
    assert_eq!(Bench::restart_asked(&effects), Some(WATCHER_PID));
    assert_eq!(bench.status(), FreshnessStatus::Syncing);
    assert_eq!(bench.machine.record().stale_since, None);
    assert_eq!(bench.watcher_state().as_deref(), Some("restarting"));
    assert_eq!(
        bench.machine.next_deadline(),
        Some(Millis(500 + policy().watcher_apply_ms)),
        "no sync against it, only the bound of its wait"
    );
    // The old process's word is not the new start-up's.
    assert_eq!(bench.at(3_100).watcher_verified("s1"), []);
    assert_eq!(bench.status(), FreshnessStatus::Syncing);
    let next = WATCHER_PID + 7;
    bench.at(3_400).watcher_restarted("s1", WATCHER_PID, next);
    assert_eq!(
        bench.machine.record().watcher.as_ref().and_then(|w| w.pid),
        Some(next)
    );
    // Its reconcile began after the edit was written: its ready line
    // covers it.
    let effects = bench.at(5_000).watcher_verified_as("s1", next);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    assert_eq!(bench.machine.record().stale_since, None);
    assert_eq!(bench.watcher_state().as_deref(), Some("verified"));
    assert_eq!(Bench::restart_asked(&effects), None);
    assert_eq!(started(&effects), None);
}

#[test]
fn a_start_up_edit_still_being_written_delays_the_restart_until_it_settles() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(100).watcher_started("s1", WatchMode::On);
    bench.at(500).edit("s1", "a.py"); // its result has not come
    let effects = bench.at(3_000).watcher_verified("s1");
    assert_eq!(Bench::restart_asked(&effects), None);
    assert_eq!(bench.status(), FreshnessStatus::Syncing);
    // Woken when the edit counts as settled at the latest.
    assert_eq!(
        bench.machine.next_deadline(),
        Some(Millis(500 + policy().settle_ms))
    );
    let effects = bench.at(3_500).result("s1");
    assert_eq!(Bench::restart_asked(&effects), Some(WATCHER_PID));
}

#[test]
fn a_restarted_watcher_claims_nothing_before_its_ready_line() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(100).watcher_started("s1", WatchMode::On);
    bench.at(500).settled_edit("s1", "a.py");
    bench.at(3_000).watcher_verified("s1");
    let next = WATCHER_PID + 1;
    bench.at(3_400).watcher_restarted("s1", WATCHER_PID, next);
    // An edit while it starts up again, applied by its observer after all.
    bench.at(3_600).settled_edit("s1", "b.py");
    let session = bench.key("s1");
    bench.at(4_000).send(Input::WatcherApplied {
        session,
        pid: next,
        path: "b.py".into(),
    });
    assert_eq!(bench.status(), FreshnessStatus::Syncing);
    bench.at(5_000).watcher_verified_as("s1", next);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
}

#[test]
fn edits_during_every_restart_stop_the_watcher_and_lazy_mode_takes_over() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(100).watcher_started("s1", WatchMode::On);
    bench.at(500).settled_edit("s1", "a.py");
    let mut effects = bench.at(3_000).watcher_verified("s1");
    let mut pid = WATCHER_PID;
    let mut now = 3_000;
    for restart in 1..=MAX_WATCHER_RESTARTS {
        assert_eq!(
            Bench::restart_asked(&effects),
            Some(pid),
            "restart {restart}"
        );
        let next = pid + 1;
        bench.at(now + 200).watcher_restarted("s1", pid, next);
        bench
            .at(now + 500)
            .settled_edit("s1", &format!("m{restart}.py"));
        effects = bench.at(now + 2_000).watcher_verified_as("s1", next);
        pid = next;
        now += 2_000;
    }
    assert_eq!(Bench::restart_asked(&effects), None);
    let stop = effects.iter().find_map(|effect| match effect {
        Effect::StopWatcher { session, pid } => Some((session.name.clone(), *pid)),
        _ => None,
    });
    assert_eq!(stop, Some(("s1".to_string(), pid)));
    assert!(notice_text(&effects, NoticeCondition::WatcherDied).contains("was stopped"));
    assert!(!bench.machine.watcher_owns_freshness());
    assert_eq!(bench.watcher_state().as_deref(), Some("stopping"));
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    let last = format!("m{MAX_WATCHER_RESTARTS}.py");
    assert!(bench.machine.pending_paths().paths().any(|p| p == last));
    // The lazy sync waits until the watcher let go of the database.
    assert_eq!(bench.machine.next_deadline(), None);
    assert_eq!(started(&bench.at(now + 5_000).wake()), None);
    let session = bench.key("s1");
    let effects = bench
        .at(now + 5_100)
        .send(Input::WatcherStopped { session, pid });
    assert!(started(&effects).is_some(), "{effects:?}");
    assert_eq!(bench.watcher_state(), None);
}

#[test]
fn a_restart_that_fails_drops_to_the_lazy_path_like_a_death() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(100).watcher_started("s1", WatchMode::On);
    bench.at(500).settled_edit("s1", "a.py");
    bench.at(3_000).watcher_verified("s1");
    let effects = bench
        .at(3_300)
        .watcher_failed("s1", "the graph database is held by pid 7");
    assert!(notices(&effects).contains(&pair("s1", NoticeCondition::WatcherDied)));
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert!(bench.machine.pending_paths().is_whole_workspace());
    assert!(
        bench.machine.next_deadline().is_some(),
        "a lazy sync follows"
    );
}

#[test]
fn an_ignore_file_edit_under_a_verified_watcher_restarts_it() {
    let mut bench = Bench::new();
    bench.with_verified_watcher("s1");
    // CGC's watcher reads its ignore rules once, at start.
    let effects = bench.at(2_000).settled_edit("s1", ".cgcignore");
    assert_eq!(Bench::restart_asked(&effects), Some(WATCHER_PID));
    assert_eq!(bench.status(), FreshnessStatus::Syncing);
}

#[test]
fn a_pathless_edit_under_a_verified_watcher_restarts_it_once_settled() {
    let mut bench = Bench::new();
    bench.with_verified_watcher("s1");
    let key = bench.key("s1");
    bench.at(2_000).send(Input::ToolCall {
        session: key.name.clone(),
        tool: "write".into(),
        paths: Vec::new(),
        not_indexed: 0,
    });
    assert_eq!(bench.status(), FreshnessStatus::Syncing);
    let effects = bench.at(2_100).send(Input::ToolResult {
        session: key.name.clone(),
        tool: "write".into(),
        ok: true,
    });
    assert_eq!(Bench::restart_asked(&effects), Some(WATCHER_PID));
}

#[test]
fn a_pathless_edit_being_written_keeps_a_verified_watcher_possibly_stale_until_it_goes() {
    let mut bench = Bench::new();
    bench.with_verified_watcher("s1");
    let key = bench.key("s1");
    bench.at(2_000).send(Input::ToolCall {
        session: key.name.clone(),
        tool: "write".into(),
        paths: Vec::new(),
        not_indexed: 0,
    });
    assert_eq!(bench.status(), FreshnessStatus::Syncing);
    bench.at(3_000).watcher_applied("s1", "a.py");
    assert_eq!(bench.status(), FreshnessStatus::Syncing);
    // Stopped: lazy mode takes over with the whole workspace pending.
    bench.at(4_000).watcher_stopped("s1");
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert!(!bench.machine.record().pending.is_empty());
}

#[test]
fn a_watcher_that_dies_with_edits_waiting_drops_them_to_the_lazy_path() {
    let mut bench = Bench::new();
    bench.with_verified_watcher("s1");
    bench.at(2_000).edit("s1", "a.py");
    let effects = bench.at(2_500).watcher_died("s1", "killed");
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert!(notices(&effects).contains(&pair("s1", NoticeCondition::WatcherDied)));
    // A late report from the dead watcher changes nothing.
    assert_eq!(bench.at(2_600).watcher_applied("s1", "a.py"), []);
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
}

// ---- Files CGC does not index --------------------------------------------

impl Bench {
    /// An `edit` naming `paths` and `not_indexed` more paths the shell
    /// found CGC does not index, with its result.
    fn edit_with_unindexed(&mut self, paths: &[&str], not_indexed: usize) -> Vec<Effect> {
        let mut effects = self.send(Input::ToolCall {
            session: "s1".into(),
            tool: "edit".into(),
            paths: paths.iter().map(|path| path.to_string()).collect(),
            not_indexed,
        });
        let now = self.now;
        effects.extend(self.at(now + 10).result("s1"));
        effects
    }
}

#[test]
fn an_edit_of_only_files_cgc_does_not_index_is_no_drift_lazily() {
    let mut bench = fresh_bench();
    let epoch = bench.machine.record().edit_epoch;
    let effects = bench.at(6_000).edit_with_unindexed(&[], 2);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    assert_eq!(bench.machine.record().edit_epoch, epoch);
    assert!(notices(&effects).is_empty());
    assert_eq!(bench.machine.next_deadline(), None, "no sync for it");
    // Beside an indexed file it changes nothing about that file's drift.
    bench.at(7_000).edit_with_unindexed(&["src/lib.rs"], 1);
    assert_eq!(bench.status(), FreshnessStatus::PossiblyStale);
    assert_eq!(
        bench.machine.pending_paths().paths().collect::<Vec<_>>(),
        ["src/lib.rs"]
    );
}

#[test]
fn an_edit_of_only_files_cgc_does_not_index_waits_for_no_watcher() {
    let mut bench = Bench::new();
    bench.with_verified_watcher("s1");
    let effects = bench.at(2_000).edit_with_unindexed(&[], 1);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    assert_eq!(Bench::restart_asked(&effects), None);
    // A call that named no path at all is another thing: anything.
    bench.at(3_000).edit_with_unindexed(&[], 0);
    assert_eq!(bench.status(), FreshnessStatus::Syncing);
}

// ---- Shell edits under a watcher -----------------------------------------

#[test]
fn a_shell_command_under_a_verified_watcher_is_compared_and_fresh_waits_for_its_files() {
    let mut bench = Bench::new();
    bench.with_verified_watcher("s1");
    bench.at(2_000).bash_call("s1");
    let probe = bench.at(2_500).bash_result("s1");
    assert_eq!(bench.status(), FreshnessStatus::Fresh, "not known yet");
    let effects = bench
        .at(2_600)
        .answer(probe, changed(&["pkg/a.py", "notes.md"]));
    assert_eq!(bench.status(), FreshnessStatus::Syncing);
    assert_eq!(started(&effects), None, "the watcher applies it, no sync");
    assert!(notices(&effects).is_empty(), "no staleness notice");
    assert_eq!(Bench::restart_asked(&effects), None, "its observer saw it");
    bench.at(5_000).watcher_applied("s1", "pkg/a.py");
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
    // A command that changed nothing keeps it fresh.
    bench.at(6_000).bash_call("s1");
    let probe = bench.at(6_100).bash_result("s1");
    bench.at(6_200).answer(probe, TreeChanges::Unchanged);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
}

#[test]
fn an_edit_still_being_written_when_the_watcher_starts_restarts_it_after_verification() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(100).edit("s1", "a.py"); // called, not yet written
    bench.at(200).watcher_started("s1", WatchMode::On);
    bench.at(300).result("s1");
    // Its write may have come after the start-up reconcile read a.py.
    let effects = bench.at(3_000).watcher_verified("s1");
    assert_eq!(Bench::restart_asked(&effects), Some(WATCHER_PID));
    assert_eq!(bench.status(), FreshnessStatus::Syncing);
}

#[test]
fn an_edit_written_before_the_watcher_starts_is_covered_by_its_reconcile() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(100).settled_edit("s1", "a.py");
    bench.at(200).watcher_started("s1", WatchMode::On);
    let effects = bench.at(3_000).watcher_verified("s1");
    assert_eq!(Bench::restart_asked(&effects), None);
    assert_eq!(bench.status(), FreshnessStatus::Fresh);
}

#[test]
fn a_shell_command_called_while_the_watcher_started_up_restarts_it() {
    let mut bench = Bench::new();
    bench.start("s1");
    bench.at(100).watcher_started("s1", WatchMode::On);
    bench.at(500).bash_call("s1");
    // Verified while the command runs: it waits for the command.
    let effects = bench.at(3_000).watcher_verified("s1");
    assert_eq!(Bench::restart_asked(&effects), None);
    let probe = bench.at(3_500).bash_result("s1");
    // Some of its writes came before the observer was scheduled.
    let effects = bench.at(3_600).answer(probe, changed(&["pkg/a.py"]));
    assert_eq!(Bench::restart_asked(&effects), Some(WATCHER_PID));
    assert_eq!(bench.status(), FreshnessStatus::Syncing);
}

// ---- Preparing a sync ahead of its window ----------------------------------

fn prepares(effects: &[Effect]) -> usize {
    effects
        .iter()
        .filter(|e| matches!(e, Effect::PrepareSync))
        .count()
}

#[test]
fn an_edit_that_settles_while_its_sync_waits_for_the_window_asks_once_to_prepare() {
    let mut bench = Bench::new();
    bench.at(0).start("s1");
    // The call alone: the edit may not be written yet.
    assert_eq!(prepares(&bench.at(100).edit("s1", "a.rs")), 0);
    // Its result settles the last edit; the sync is due at 600.
    assert_eq!(prepares(&bench.at(110).result("s1")), 1);
    let due = bench.at(600).wake();
    assert_eq!(prepares(&due), 0);
    assert!(due.iter().any(|e| matches!(e, Effect::StartSync { .. })));
}

#[test]
fn no_prepare_while_an_edit_is_unsettled_a_sync_runs_or_no_sync_will_run() {
    let mut bench = Bench::new();
    bench.at(0).start("s1");
    // Two edits in flight: the first result leaves one unsettled.
    bench.at(100).edit("s1", "a.rs");
    bench.at(105).call("s1", "write", &["b.rs"]);
    assert_eq!(prepares(&bench.at(110).result("s1")), 0);
    let last = bench.at(120).send(Input::ToolResult {
        session: "s1".into(),
        tool: "write".into(),
        ok: true,
    });
    assert_eq!(prepares(&last), 1);

    // A sync running: an edit settling during it prepares nothing (its
    // follow-up is queued behind the running one).
    bench.at(600).wake();
    let flight = bench.machine.current_flight().expect("the sync started");
    bench.spawned(flight);
    assert_eq!(prepares(&bench.at(700).settled_edit("s1", "c.rs")), 0);
    bench.at(800).finish(flight, SyncOutcome::Succeeded);
    // The follow-up spends the last of the two syncs.
    bench.at(1_300).wake();
    let follow_up = bench
        .machine
        .current_flight()
        .expect("the follow-up started");
    bench.spawned(follow_up);
    bench.at(1_400).finish(follow_up, SyncOutcome::Succeeded);

    // The budget is spent: no sync will run, so nothing is prepared.
    assert_eq!(prepares(&bench.at(5_000).settled_edit("s1", "d.rs")), 0);
}

// ---- Warming the worker at a session's start --------------------------------

fn warm_ups(effects: &[Effect]) -> usize {
    effects
        .iter()
        .filter(|e| matches!(e, Effect::WarmWorker))
        .count()
}

#[test]
fn a_session_that_begins_with_automatic_syncs_on_asks_once_to_warm_the_worker() {
    let mut bench = Bench::new();
    assert_eq!(warm_ups(&bench.at(0).start("s1")), 1);
    // The same session again (its harness registered twice) is no new
    // beginning; a second session is.
    assert_eq!(warm_ups(&bench.at(10).start("s1")), 0);
    assert_eq!(warm_ups(&bench.at(20).start("s2")), 1);
    // Edits ask nothing of the kind.
    assert_eq!(warm_ups(&bench.at(30).edit("s1", "a.py")), 0);
}

#[test]
fn no_warm_up_with_automatic_syncs_off_or_a_verified_watcher() {
    let mut bench = Bench::with(FreshnessPolicy {
        auto_sync: false,
        ..policy()
    });
    assert_eq!(warm_ups(&bench.at(0).start("s1")), 0);

    let mut bench = Bench::new();
    bench.at(0).start("s1");
    bench.at(100).watcher_started("s1", WatchMode::On);
    bench.at(3_000).watcher_verified("s1");
    assert_eq!(warm_ups(&bench.at(4_000).start("s2")), 0);
}
