//! The sync run's rules, one event at a time (module doc of `sync_run`).

use proptest::prelude::*;

use super::*;
use crate::freshness::Lifetime;

const WS: &str = "/home/u/proj";

fn session() -> SessionKey {
    SessionKey {
        name: "s".into(),
        lifetime: Lifetime::new(1),
    }
}

fn run() -> SyncRunState {
    SyncRunState::new(
        FlightId(7),
        Some(session()),
        Some(vec!["a.py".into()]),
        SyncAllowance::ANY,
    )
}

fn request(serial: u64) -> DriverRequest {
    DriverRequest {
        serial,
        paths: vec!["a.py".into()],
        baseline: false,
    }
}

fn driver_run(serial: u64) -> SyncRunState {
    let mut state = run();
    state.begin_driver(request(serial), false);
    state
}

fn context(strategy: &SyncStrategy) -> ExitContext<'_> {
    ExitContext {
        workspace: WS,
        cli_timeout_ms: 1_000,
        maintenance_timeout_ms: 60_000,
        strategy,
    }
}

fn exit(code: i32, tail: &str) -> ChildExit {
    ChildExit {
        code: Some(code),
        signal: None,
        tail: tail.into(),
    }
}

fn answer(serial: u64, code: i32) -> String {
    format!(
        "CGC_FRESH_RESULT {{\"ok\": {}, \"serial\": {serial}, \"exit\": {code}, \"paths\": {{\"a.py\": \"updated\"}}}}",
        code == 0
    )
}

/// The child of an incremental run's `state` ended with `code`.
fn ended(state: &mut SyncRunState, code: i32, tail: &str) -> ExitReport {
    state.exited(
        exit(code, tail),
        &context(&SyncStrategy::Incremental),
        never_asked,
    )
}

fn never_asked() -> Option<String> {
    panic!("the lock holder is asked only after a lock error")
}

#[test]
fn consent_runs_an_indexed_or_auto_created_workspace_and_lists_once_per_session() {
    let facts = ConsentFacts::default();
    assert_eq!(consent(facts), Consent::AskListing);
    for granted in [
        ConsentFacts {
            auto_create: true,
            ..facts
        },
        ConsentFacts {
            known_indexed: true,
            session_known_unindexed: true,
            ..facts
        },
        ConsentFacts {
            marker_present: true,
            ..facts
        },
    ] {
        assert_eq!(consent(granted), Consent::Granted, "{granted:?}");
    }
    let answered = ConsentFacts {
        session_known_unindexed: true,
        ..facts
    };
    assert_eq!(consent(answered), Consent::Declined);
}

#[test]
fn the_driver_is_probed_before_its_first_use_and_an_unavailable_one_reconciles() {
    let plan = || SyncRun::Incremental {
        paths: vec!["a.py".into()],
    };
    assert_eq!(start_step(plan(), None), StartStep::Probe);
    assert_eq!(
        start_step(plan(), Some(&Ok(None))),
        StartStep::Driver {
            paths: vec!["a.py".into()],
            baseline: None
        }
    );
    match start_step(plan(), Some(&Err("no interpreter".into()))) {
        StartStep::Command { strategy, fallback } => {
            assert_eq!(strategy, SyncStrategy::Reconcile);
            assert_eq!(
                fallback.as_deref(),
                Some("the incremental driver is unavailable: no interpreter")
            );
        }
        other => panic!("{other:?}"),
    }
    let baseline = SyncRun::Baseline {
        reason: "no manifest".into(),
    };
    assert_eq!(
        start_step(baseline, Some(&Ok(None))),
        StartStep::Driver {
            paths: vec![],
            baseline: Some("no manifest".into())
        }
    );
    let command = SyncRun::Command {
        strategy: SyncStrategy::Update,
        fallback_reason: None,
    };
    // A configured command never waits for the driver's probe.
    assert_eq!(
        start_step(command, None),
        StartStep::Command {
            strategy: SyncStrategy::Update,
            fallback: None
        }
    );
}

#[test]
fn the_notes_say_what_runs_and_whether_the_driver_is_unavailable() {
    let plain = command_note(&SyncStrategy::Update, None);
    assert_eq!(plain.note, "sync strategy update");
    assert!(!plain.fallback && !plain.driver_unavailable);
    let partial = command_note(&SyncStrategy::Reconcile, Some("the last sync failed"));
    assert!(partial.fallback && !partial.driver_unavailable);
    assert_eq!(
        partial.note,
        "sync strategy reconcile (instead of incremental: the last sync failed)"
    );
    let unavailable = command_note(&SyncStrategy::Reconcile, Some(&driver_unavailable("x")));
    assert!(unavailable.fallback && unavailable.driver_unavailable);

    let unproven: ProbeAnswer = Ok(Some("CGC 9.9 is not proven".into()));
    assert_eq!(
        driver_note(3, None, Some(&unproven)).note,
        "sync strategy incremental (3 changed file(s); CGC 9.9 is not proven)"
    );
    assert!(driver_note(0, Some("no manifest"), None)
        .note
        .ends_with("comparing the graph with the tree (no manifest)"));
}

#[test]
fn a_baseline_pays_from_the_whole_repository_and_an_incremental_run_from_changed_files() {
    let mut state = run();
    assert_eq!(state.cost(), SyncCost::WholeRepository);
    state.begin_driver(request(1), false);
    assert_eq!(state.cost(), SyncCost::ChangedFiles);
    state.begin_driver(
        DriverRequest {
            baseline: true,
            ..request(2)
        },
        false,
    );
    assert_eq!(state.cost(), SyncCost::WholeRepository);
    state.begin_command(SyncStrategy::Reconcile);
    assert_eq!(state.cost(), SyncCost::WholeRepository);

    let changed_only = SyncAllowance {
        changed_files: true,
        whole_repository: false,
    };
    let state = SyncRunState::new(FlightId(1), None, None, changed_only);
    assert!(state.admits(SyncCost::ChangedFiles));
    assert!(!state.admits(SyncCost::WholeRepository));
}

#[test]
fn a_worker_gets_the_request_with_the_sync_budget_and_each_class_is_reported_spawned_once() {
    let mut state = driver_run(4);
    let start = state.child_started(11, true);
    assert_eq!(start.request, Some(request(4)));
    assert_eq!(start.budget, ChildBudget::Maintenance);
    assert_eq!(start.spawned, Some(SyncCost::ChangedFiles));
    assert_eq!(start.end, None);
    // Its fallback reconcile is another class: reported too.
    state.begin_command(SyncStrategy::Reconcile);
    let start = state.child_started(12, false);
    assert_eq!(start.request, None);
    assert_eq!(start.spawned, Some(SyncCost::WholeRepository));
    // The same class again (a retried worker) is not reported twice.
    state.begin_driver(request(5), true);
    assert_eq!(state.child_started(13, true).spawned, None);
}

#[test]
fn a_child_that_exits_before_its_spawn_is_known_is_still_reported_spawned_first() {
    let mut state = run();
    state.begin_command(SyncStrategy::Update);
    let report = state.exited(exit(0, ""), &context(&SyncStrategy::Update), never_asked);
    assert_eq!(report.spawned, Some(SyncCost::WholeRepository));
    let mut state = run();
    state.begin_command(SyncStrategy::Update);
    state.child_started(3, false);
    let report = state.exited(exit(0, ""), &context(&SyncStrategy::Update), never_asked);
    assert_eq!(report.spawned, None, "reported at its spawn already");
}

#[test]
fn the_listing_and_the_probe_are_bounded_by_the_cli_budget_and_report_nothing_spawned() {
    let mut state = run();
    state.begin_listing();
    let start = state.child_started(1, false);
    assert_eq!(start.budget, ChildBudget::Cli);
    assert_eq!(start.spawned, None);
    state.begin_probe();
    let start = state.child_started(2, true);
    assert_eq!(
        (start.budget, start.spawned, start.request),
        (ChildBudget::Cli, None, None)
    );
}

#[test]
fn an_end_request_is_never_downgraded_nor_repeated() {
    let mut state = run();
    state.begin_command(SyncStrategy::Reconcile);
    state.child_started(9, false);
    assert_eq!(
        state.request_end(EndRequest::Interrupt),
        Some((9, EndRequest::Interrupt))
    );
    assert_eq!(state.request_end(EndRequest::Interrupt), None);
    assert_eq!(
        state.time_out(),
        Some((9, EndRequest::Stop("time budget exhausted")))
    );
    assert!(state.facts().timed_out);
    assert_eq!(state.cancel(), None, "a stop is not repeated");
    assert_eq!(state.request_end(EndRequest::Interrupt), None);
    assert!(state.facts().cancelled);
}

#[test]
fn an_end_asked_before_the_child_is_known_goes_when_it_is_and_no_request_is_written() {
    let mut state = driver_run(2);
    assert_eq!(state.cancel(), None);
    let start = state.child_started(5, true);
    assert_eq!(
        start.end,
        Some(EndRequest::Stop("sync cancelled: its session ended"))
    );
    assert_eq!(
        start.request, None,
        "a cancelled run asks the worker nothing"
    );
}

#[test]
fn the_ready_line_asks_one_interrupt_and_it_is_sent_again_only_until_the_stopping_line() {
    let mut state = run();
    state.begin_command(SyncStrategy::Reconcile);
    state.child_started(4, false);
    assert_eq!(state.line("starting"), LineStep::Noted);
    assert_eq!(state.interrupt_again(1), None, "nothing asked yet");
    assert_eq!(
        state.line("👀 Monitoring for file changes..."),
        LineStep::Reconciled
    );
    assert_eq!(
        state.line("👀 Monitoring for file changes..."),
        LineStep::Noted
    );
    assert_eq!(
        state.request_end(EndRequest::Interrupt),
        Some((4, EndRequest::Interrupt))
    );
    assert_eq!(state.interrupt_again(1), Some(4));
    assert_eq!(state.interrupt_again(INTERRUPT_ATTEMPTS - 1), Some(4));
    assert_eq!(state.interrupt_again(INTERRUPT_ATTEMPTS), None);
    state.line("🛑 Stopping watcher...");
    assert_eq!(state.interrupt_again(1), None);
}

#[test]
fn the_ready_line_means_nothing_outside_a_reconcile() {
    for strategy in [SyncStrategy::Update, SyncStrategy::Index] {
        let mut state = run();
        state.begin_command(strategy);
        assert_eq!(state.line("Monitoring for file changes"), LineStep::Noted);
        assert!(!state.facts().saw_ready);
    }
    let mut state = driver_run(1);
    assert_eq!(state.line("Monitoring for file changes"), LineStep::Noted);
}

#[test]
fn a_worker_answer_for_another_request_is_not_this_runs() {
    let mut state = driver_run(6);
    state.child_started(1, true);
    assert_eq!(
        state.line(&answer(5, 0)),
        LineStep::Stray {
            serial: Some(5),
            expected: 6
        }
    );
    assert!(matches!(
        state.work(),
        Some(RunWork::Driver { result: None, .. })
    ));
    assert_eq!(state.line(&answer(6, 0)), LineStep::Answered { code: 0 });
    let report = ended(&mut state, 0, "");
    match report.step {
        ExitStep::Finished {
            outcome,
            next,
            applied,
        } => {
            assert_eq!(outcome, SyncOutcome::Succeeded);
            assert_eq!(next, NextReconcile::Clear);
            let applied = applied.expect("a success says what it applied");
            assert_eq!((applied.files, applied.baseline), (1, false));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn output_markers_are_noted_for_the_outcome() {
    let mut state = run();
    state.begin_command(SyncStrategy::Index);
    state.line("Repository already indexed. Skipping");
    state.line("CodeGraphContext fell back to another database backend");
    assert!(state.facts().skipped_indexed);
    assert!(state.facts().backend_fell_back);
    assert!(!state.facts().lock_error);
}

#[test]
fn the_lock_holder_is_asked_only_after_a_lock_error() {
    let mut state = run();
    state.begin_command(SyncStrategy::Update);
    let mut asked = false;
    let report = state.exited(
        exit(1, "Could not set lock on file /x/kuzu"),
        &context(&SyncStrategy::Update),
        || {
            asked = true;
            Some("pid 42 (cgc mcp start)".into())
        },
    );
    assert!(asked);
    assert!(state.facts().lock_error);
    assert_eq!(
        state.facts().lock_holder.as_deref(),
        Some("pid 42 (cgc mcp start)")
    );
    assert!(matches!(report.step, ExitStep::Finished { .. }));
}

#[test]
fn the_listings_lines_are_bounded() {
    let mut state = run();
    state.begin_listing();
    for n in 0..LISTING_LINES_KEPT + 5 {
        state.line(&format!("row {n}"));
    }
    match state.phase() {
        RunPhase::Listing { lines } => assert_eq!(lines.len(), LISTING_LINES_KEPT),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_listing_that_names_the_workspace_puts_the_run_back_to_syncing() {
    let mut state = run();
    state.begin_listing();
    state.child_started(1, false);
    state.line(&format!("│ proj │ {WS} │ 12 │"));
    let report = ended(&mut state, 0, "");
    assert_eq!(report.step, ExitStep::Listed(ListingVerdict::Indexed));
    assert_eq!(state.phase(), &RunPhase::Syncing);
    assert_eq!(state.child(), None, "the listing's child is gone");

    let mut state = run();
    state.begin_listing();
    let report = ended(&mut state, 0, "");
    assert_eq!(report.step, ExitStep::Listed(ListingVerdict::NotIndexed));
}

#[test]
fn a_listing_read_from_a_fallen_back_backend_is_inconclusive() {
    let mut state = run();
    state.begin_listing();
    state.line("Falling back to KùzuDB");
    let report = ended(&mut state, 0, "");
    assert!(matches!(
        report.step,
        ExitStep::Listed(ListingVerdict::Inconclusive { .. })
    ));
}

#[test]
fn a_cancelled_probe_ends_the_run_cancelled_and_an_answered_one_is_kept() {
    let mut state = run();
    state.begin_probe();
    state.child_started(1, true);
    state.cancel();
    let report = ended(&mut state, 0, "");
    assert!(matches!(
        report.step,
        ExitStep::Finished {
            outcome: SyncOutcome::Cancelled,
            next: NextReconcile::Unchanged,
            ..
        }
    ));

    let mut state = run();
    state.begin_probe();
    let report = ended(&mut state, 2, "boom");
    match report.step {
        ExitStep::Probed(Err(reason)) => assert!(reason.contains("exit code 2"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_driver_run_that_failed_makes_the_next_sync_reconcile() {
    let mut state = driver_run(3);
    state.child_started(1, true);
    state.line(&answer(3, 1));
    let report = ended(&mut state, 1, "");
    match report.step {
        ExitStep::Finished { next, applied, .. } => {
            assert!(matches!(next, NextReconcile::Require(_)), "{next:?}");
            assert_eq!(applied, None);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_unanswering_worker_is_replaced_once_and_never_for_a_cancelled_run() {
    let state = driver_run(1);
    assert_eq!(
        state.retry_unanswered(Some(0), false),
        Some((vec!["a.py".to_string()], false))
    );
    assert_eq!(state.retry_unanswered(Some(0), true), None, "shutting down");
    assert_eq!(
        state.retry_unanswered(Some(1), false),
        None,
        "may have applied"
    );
    let mut retried = run();
    retried.begin_driver(request(2), true);
    assert_eq!(retried.retry_unanswered(Some(0), false), None, "once");
    let mut cancelled = driver_run(1);
    cancelled.cancel();
    assert_eq!(cancelled.retry_unanswered(Some(0), false), None);
    let mut answered = driver_run(1);
    answered.line(&answer(1, 0));
    assert_eq!(answered.retry_unanswered(Some(0), false), None);
}

#[test]
fn a_new_child_keeps_nothing_of_the_last() {
    let mut state = run();
    state.begin_command(SyncStrategy::Reconcile);
    state.child_started(1, false);
    state.line("Could not set lock on file");
    state.time_out();
    state.begin_driver(request(1), false);
    assert_eq!(state.child(), None);
    assert_eq!(state.end_requested(), None);
    assert!(!state.facts().lock_error && !state.facts().timed_out);
}

#[derive(Debug, Clone, Copy)]
enum Asked {
    Interrupt,
    Stop,
    Cancel,
    TimeOut,
}

fn asked() -> impl Strategy<Value = Asked> {
    prop_oneof![
        Just(Asked::Interrupt),
        Just(Asked::Stop),
        Just(Asked::Cancel),
        Just(Asked::TimeOut),
    ]
}

proptest! {
    /// Whatever is asked in whatever order, the child is sent at most one
    /// interrupt and exactly one stop once any was asked, never an
    /// interrupt after a stop; and what the run remembers is what was sent
    /// last.
    #[test]
    fn the_child_gets_at_most_one_interrupt_and_one_stop_never_downgraded(
        steps in proptest::collection::vec(asked(), 0..24)
    ) {
        let mut state = run();
        state.begin_command(SyncStrategy::Reconcile);
        state.child_started(1, false);
        let mut sent = Vec::new();
        let mut stop_asked = false;
        for step in steps {
            let out = match step {
                Asked::Interrupt => state.request_end(EndRequest::Interrupt),
                Asked::Stop => state.request_end(EndRequest::Stop("x")),
                Asked::Cancel => state.cancel(),
                Asked::TimeOut => state.time_out(),
            };
            stop_asked |= !matches!(step, Asked::Interrupt);
            sent.extend(out.map(|(_, end)| end));
        }
        let interrupts = sent.iter().filter(|e| **e == EndRequest::Interrupt).count();
        let stops = sent.len() - interrupts;
        prop_assert!(interrupts <= 1, "{:?}", sent);
        prop_assert_eq!(stops, usize::from(stop_asked), "{:?}", sent);
        if let Some(first_stop) = sent.iter().position(|e| matches!(e, EndRequest::Stop(_))) {
            prop_assert_eq!(first_stop, sent.len() - 1, "an interrupt after a stop: {:?}", sent);
        }
        prop_assert_eq!(state.end_requested(), sent.last().copied());
    }
}
