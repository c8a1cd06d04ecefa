use super::*;

#[test]
fn an_answer_with_odd_timings_is_still_an_answer() {
    let line = r#"CGC_FRESH_RESULT {"protocol": 1, "ok": true, "serial": 4, "exit": 0, "timings": {"total_s": 1.5, "batched_writes_refused": "a reason", "n": 3}}"#;
    let result = parse_driver_result(line).expect("the answer is read");
    assert_eq!((result.serial, result.exit), (Some(4), Some(0)));
    assert_eq!(result.timings.get("total_s"), Some(&1.5));
    assert_eq!(result.timings.get("n"), Some(&3.0));
    assert!(!result.timings.contains_key("batched_writes_refused"));
    let odd = r#"CGC_FRESH_RESULT {"protocol": 1, "ok": true, "serial": 5, "exit": 0, "timings": "none"}"#;
    assert_eq!(parse_driver_result(odd).and_then(|r| r.serial), Some(5));
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn global_args_go_before_the_subcommand() {
    let global = args(&["--db", "kuzudb"]);
    assert_eq!(
        sync_argv(&SyncStrategy::Reconcile, &global),
        args(&["--db", "kuzudb", "watch", "--sync-on-start", "."])
    );
    assert_eq!(
        sync_argv(&SyncStrategy::Update, &global),
        args(&["--db", "kuzudb", "update", ".", "--quiet"])
    );
    assert_eq!(sync_argv(&SyncStrategy::Index, &[]), args(&["index", "."]));
    assert_eq!(
        sync_argv(
            &SyncStrategy::Custom(args(&["index", ".", "--force"])),
            &global
        ),
        args(&["--db", "kuzudb", "index", ".", "--force"])
    );
    assert_eq!(list_argv(&global), args(&["--db", "kuzudb", "list"]));
}

#[test]
fn a_run_that_fell_back_to_another_backend_never_succeeds() {
    for strategy in [
        SyncStrategy::Reconcile,
        SyncStrategy::Update,
        SyncStrategy::Index,
        SyncStrategy::Incremental,
    ] {
        let fell_back = SyncRunFacts {
            exit_code: Some(0),
            saw_ready: true,
            backend_fell_back: true,
            ..Default::default()
        };
        match classify_sync_exit(&strategy, &fell_back) {
            SyncOutcome::Failed { error } => assert!(
                error.contains("another database backend") && error.contains("not synced"),
                "{error}"
            ),
            other => panic!("{strategy}: {other:?}"),
        }
    }
}

#[test]
fn reconcile_succeeds_only_after_the_ready_line_and_exit_0() {
    let ok = SyncRunFacts {
        exit_code: Some(0),
        saw_ready: true,
        ..Default::default()
    };
    assert_eq!(
        classify_sync_exit(&SyncStrategy::Reconcile, &ok),
        SyncOutcome::Succeeded
    );
    let early = SyncRunFacts {
        exit_code: Some(0),
        saw_ready: false,
        ..Default::default()
    };
    assert!(matches!(
        classify_sync_exit(&SyncStrategy::Reconcile, &early),
        SyncOutcome::Failed { .. }
    ));
    let failed = SyncRunFacts {
        exit_code: Some(1),
        saw_ready: true,
        output_tail: "boom".into(),
        ..Default::default()
    };
    match classify_sync_exit(&SyncStrategy::Reconcile, &failed) {
        SyncOutcome::Failed { error } => assert!(
            error.contains("code 1") && error.contains("boom"),
            "{error}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn index_that_skipped_is_not_applied_never_success() {
    let skipped = SyncRunFacts {
        exit_code: Some(0),
        skipped_indexed: true,
        ..Default::default()
    };
    assert!(matches!(
        classify_sync_exit(&SyncStrategy::Index, &skipped),
        SyncOutcome::NotApplied { .. }
    ));
    let ran = SyncRunFacts {
        exit_code: Some(0),
        ..Default::default()
    };
    assert_eq!(
        classify_sync_exit(&SyncStrategy::Index, &ran),
        SyncOutcome::Succeeded
    );
}

#[test]
fn lock_error_is_busy_not_failure_and_timeout_and_cancel_win() {
    let busy = SyncRunFacts {
        exit_code: Some(1),
        lock_error: true,
        lock_holder: Some("pid 9: cgc watch .".into()),
        ..Default::default()
    };
    assert_eq!(
        classify_sync_exit(&SyncStrategy::Update, &busy),
        SyncOutcome::Busy {
            holder: "pid 9: cgc watch .".into()
        }
    );
    let timed = SyncRunFacts {
        signal: Some(2),
        timed_out: true,
        timeout_ms: 5,
        ..Default::default()
    };
    assert!(matches!(
        classify_sync_exit(&SyncStrategy::Update, &timed),
        SyncOutcome::TimedOut { .. }
    ));
    let cancelled = SyncRunFacts {
        cancelled: true,
        timed_out: true,
        ..Default::default()
    };
    assert_eq!(
        classify_sync_exit(&SyncStrategy::Update, &cancelled),
        SyncOutcome::Cancelled
    );
    let killed = SyncRunFacts {
        signal: Some(9),
        ..Default::default()
    };
    assert!(matches!(
        classify_sync_exit(&SyncStrategy::Update, &killed),
        SyncOutcome::Failed { .. }
    ));
}

fn paths(list: &[&str]) -> Vec<String> {
    args(list)
}

#[test]
fn incremental_plans_the_driver_for_a_list_of_files_of_any_size() {
    let changed = paths(&["pkg/a.py", "pkg/b.py"]);
    assert_eq!(
        plan_sync(&SyncStrategy::Incremental, Some(&changed), None),
        SyncRun::Incremental {
            paths: changed.clone()
        }
    );
    // A run that may have left the graph partial reconciles, whatever
    // the paths.
    for given in [None, Some(&[][..]), Some(&changed[..])] {
        match plan_sync(
            &SyncStrategy::Incremental,
            given,
            Some("the last incremental sync failed"),
        ) {
            SyncRun::Command {
                strategy: SyncStrategy::Reconcile,
                fallback_reason: Some(_),
            } => {}
            other => panic!("{other:?}"),
        }
    }
    // A batch of any size is applied: a branch switch is not a reason
    // to reconcile the repository.
    let many: Vec<String> = (0..5_000).map(|i| format!("m{i}.py")).collect();
    assert_eq!(
        plan_sync(&SyncStrategy::Incremental, Some(&many), None),
        SyncRun::Incremental {
            paths: many.clone()
        }
    );
    assert_eq!(
        plan_sync(&SyncStrategy::Update, Some(&changed), None),
        SyncRun::Command {
            strategy: SyncStrategy::Update,
            fallback_reason: None
        }
    );
}

#[test]
fn changes_not_known_file_by_file_are_found_by_comparing_the_graph_not_by_a_reconcile() {
    for given in [None, Some(&[][..])] {
        match plan_sync(&SyncStrategy::Incremental, given, None) {
            SyncRun::Baseline { reason } => assert!(!reason.is_empty()),
            other => panic!("{given:?}: {other:?}"),
        }
    }
    // Only the incremental strategy has a driver to ask.
    assert!(matches!(
        plan_sync(&SyncStrategy::Reconcile, None, None),
        SyncRun::Command {
            strategy: SyncStrategy::Reconcile,
            fallback_reason: None
        }
    ));
}

#[test]
fn a_baseline_request_says_so_and_an_ordinary_one_does_not() {
    let plain: serde_json::Value =
        serde_json::from_str(&worker_request(3, &paths(&["a.py"]), false)).unwrap();
    assert_eq!(plain, serde_json::json!({"serial": 3, "paths": ["a.py"]}));
    let baseline: serde_json::Value = serde_json::from_str(&worker_request(4, &[], true)).unwrap();
    assert_eq!(
        baseline,
        serde_json::json!({"serial": 4, "paths": [], "baseline": true})
    );
}

#[test]
fn a_baseline_succeeds_only_when_the_driver_says_it_compared_the_graph() {
    let ok = SyncRunFacts {
        exit_code: Some(0),
        ..SyncRunFacts::default()
    };
    let compared = DriverResult {
        ok: true,
        baseline: true,
        ..DriverResult::default()
    };
    assert_eq!(
        classify_baseline_exit(Some(&compared), &ok),
        DriverVerdict::Outcome(SyncOutcome::Succeeded)
    );
    // An ordinary apply's answer (an old driver that ignored the
    // request's baseline) is not a baseline.
    let not_compared = DriverResult {
        ok: true,
        ..DriverResult::default()
    };
    assert!(matches!(
        classify_baseline_exit(Some(&not_compared), &ok),
        DriverVerdict::Outcome(SyncOutcome::Failed { .. })
    ));
    assert!(matches!(
        classify_baseline_exit(None, &ok),
        DriverVerdict::Outcome(SyncOutcome::Failed { .. })
    ));
    // Exit 3: nothing written, the reconcile runs.
    let unsupported = SyncRunFacts {
        exit_code: Some(DRIVER_EXIT_UNSUPPORTED),
        ..SyncRunFacts::default()
    };
    assert!(matches!(
        classify_baseline_exit(Some(&not_compared), &unsupported),
        DriverVerdict::Fallback { .. }
    ));
    let failed = SyncRunFacts {
        exit_code: Some(1),
        ..SyncRunFacts::default()
    };
    assert!(matches!(
        classify_baseline_exit(Some(&compared), &failed),
        DriverVerdict::Outcome(SyncOutcome::Failed { .. })
    ));
}

/// The script, root options and cache every driver mode starts with.
const DRIVER_WITH_CACHE: &[&str] = &["/s/d.py", "--db", "kuzudb", "--parse-cache", "/s/c.json"];

#[test]
fn driver_argv_puts_root_options_before_the_mode() {
    let global = args(&["--db", "kuzudb"]);
    let global = DriverOptions {
        global_args: &global,
        allow_unproven_cgc: false,
    };
    assert_eq!(
        driver_argv("/s/d.py", &global, None, None),
        args(&["/s/d.py", "--db", "kuzudb", "--probe"])
    );
    assert_eq!(
        driver_argv(
            "/s/d.py",
            &global,
            Some("/s/c.json"),
            Some(&paths(&["-odd.py", "a b.py"]))
        ),
        args(&[DRIVER_WITH_CACHE, &["apply", "--", "-odd.py", "a b.py"]].concat())
    );
}

#[test]
fn the_opt_in_to_an_unproven_cgc_reaches_the_probe_and_the_worker_not_the_reconcile() {
    let global = args(&["--db", "kuzudb"]);
    let options = DriverOptions {
        global_args: &global,
        allow_unproven_cgc: true,
    };
    assert_eq!(
        driver_argv("/s/d.py", &options, None, None),
        args(&[
            "/s/d.py",
            "--db",
            "kuzudb",
            ALLOW_UNPROVEN_CGC_FLAG,
            "--probe"
        ])
    );
    let worker = worker_argv(
        "/s/d.py",
        &options,
        "/s/c.json",
        std::time::Duration::from_secs(600),
    );
    assert_eq!(
        worker[..4],
        args(&["/s/d.py", "--db", "kuzudb", ALLOW_UNPROVEN_CGC_FLAG])[..]
    );
    assert!(
        !reconcile_argv("/s/d.py", &global, "cgc", &args(&["index", "."]))
            .contains(&ALLOW_UNPROVEN_CGC_FLAG.to_string())
    );
}

#[test]
fn a_worker_that_ended_on_its_own_before_reading_the_request_is_replaced_once() {
    use UnansweredWorkerExit::*;
    assert_eq!(unanswered_worker_exit(Some(0), false, false, false), Retry);
    // Once only: a second clean exit without an answer ends the run.
    assert_eq!(unanswered_worker_exit(Some(0), false, false, true), End);
    // A run being cancelled or out of time ends as it is.
    assert_eq!(unanswered_worker_exit(Some(0), true, false, false), End);
    assert_eq!(unanswered_worker_exit(Some(0), false, true, false), End);
}

#[test]
fn a_worker_that_died_without_answering_ends_the_run() {
    use UnansweredWorkerExit::*;
    // Killed, crashed or failed: it may have been mid-apply.
    assert_eq!(unanswered_worker_exit(None, false, false, false), End);
    assert_eq!(unanswered_worker_exit(Some(1), false, false, false), End);
    assert_eq!(unanswered_worker_exit(Some(137), false, false, false), End);
}

#[test]
fn a_worker_serves_after_its_root_options_and_reads_one_request_a_line() {
    let global = args(&["--db", "kuzudb"]);
    let global = DriverOptions {
        global_args: &global,
        allow_unproven_cgc: false,
    };
    assert_eq!(
        worker_argv(
            "/s/d.py",
            &global,
            "/s/c.json",
            std::time::Duration::from_millis(1500)
        ),
        args(&[DRIVER_WITH_CACHE, &["--idle-exit", "1", "serve"]].concat())
    );
    let probe: serde_json::Value = serde_json::from_str(worker_probe(4).trim_end()).unwrap();
    assert_eq!(probe, serde_json::json!({"serial": 4, "probe": true}));
    let line = worker_request(7, &paths(&["a\nb.py", "c \"d\".py"]), false);
    assert!(line.ends_with('\n'));
    assert_eq!(line.matches('\n').count(), 1, "one line: {line:?}");
    let back: serde_json::Value = serde_json::from_str(line.trim_end()).unwrap();
    assert_eq!(back["serial"], 7);
    assert_eq!(back["paths"][0], "a\nb.py");
    assert_eq!(back["paths"][1], "c \"d\".py");
}

#[test]
fn a_workers_answer_carries_its_request_and_exit_code() {
    let answer = parse_driver_result(
        r#"CGC_FRESH_RESULT {"ok": true, "mode": "apply", "serial": 3, "exit": 0, "paths": {"a.py": "modified"}}"#,
    )
    .unwrap();
    assert_eq!((answer.serial, answer.exit), (Some(3), Some(0)));
    let one_shot = parse_driver_result(r#"CGC_FRESH_RESULT {"ok": true}"#).unwrap();
    assert_eq!((one_shot.serial, one_shot.exit), (None, None));
}

#[test]
fn shebangs_name_the_interpreter() {
    assert_eq!(
        interpreter_from_shebang("#!/venv/bin/python"),
        Some(("/venv/bin/python".into(), vec![]))
    );
    assert_eq!(
        interpreter_from_shebang("#!/usr/bin/env python3"),
        Some(("python3".into(), vec![]))
    );
    assert_eq!(
        interpreter_from_shebang("#! /usr/bin/python3 -s"),
        Some(("/usr/bin/python3".into(), vec!["-s".into()]))
    );
    assert_eq!(interpreter_from_shebang("\x7fELF"), None);
    assert_eq!(interpreter_from_shebang("#!/usr/bin/env -S python3"), None);
}

fn result(line: &str) -> DriverResult {
    parse_driver_result(line).expect("a result line")
}

#[test]
fn the_paths_digest_is_the_drivers() {
    // The same value `protocol.py`'s `paths_digest` gives (its unit
    // test holds it too): UTF-8 bytes, newline-joined, SHA-256 hex.
    assert_eq!(
        paths_digest(&["a.py", "pkg/é.py"]),
        "f56a82439211a8dd6f32d7203fc806b3b65963b465cfd388a6701212021f2505"
    );
}

#[test]
fn a_large_batch_is_accounted_for_by_its_digest() {
    let requested: Vec<String> = (0..300).rev().map(|i| format!("pkg/m{i}.py")).collect();
    let mut sorted: Vec<&str> = requested.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    let ok = SyncRunFacts {
        exit_code: Some(0),
        ..Default::default()
    };
    let line = |digest: &str, count: usize| {
        result(&format!(
            r#"CGC_FRESH_RESULT {{"ok": true, "paths_digest": "{digest}", "paths_accounted": {count}}}"#
        ))
    };
    let exact = line(&paths_digest(&sorted), 300);
    assert_eq!(
        classify_driver_exit(&requested, Some(&exact), &ok),
        DriverVerdict::Outcome(SyncOutcome::Succeeded)
    );
    // One path short, or another set of the same size: not applied.
    let short = line(&paths_digest(&sorted[1..]), 299);
    let mut other = sorted.clone();
    other[0] = "pkg/elsewhere.py";
    other.sort_unstable();
    let other = line(&paths_digest(&other), 300);
    for wrong in [short, other] {
        assert!(matches!(
            classify_driver_exit(&requested, Some(&wrong), &ok),
            DriverVerdict::Outcome(SyncOutcome::Failed { .. })
        ));
    }
}

#[test]
fn driver_success_needs_exit_0_ok_and_every_path_accounted_for() {
    let requested = paths(&["a.py", "b.py"]);
    let ok = SyncRunFacts {
        exit_code: Some(0),
        ..Default::default()
    };
    let full = result(
        r#"CGC_FRESH_RESULT {"ok": true, "paths": {"a.py": "modified", "b.py": "deleted"}}"#,
    );
    assert_eq!(
        classify_driver_exit(&requested, Some(&full), &ok),
        DriverVerdict::Outcome(SyncOutcome::Succeeded)
    );
    let partial = result(r#"CGC_FRESH_RESULT {"ok": true, "paths": {"a.py": "modified"}}"#);
    assert!(matches!(
        classify_driver_exit(&requested, Some(&partial), &ok),
        DriverVerdict::Outcome(SyncOutcome::Failed { error }) if error.contains("b.py")
    ));
    assert!(matches!(
        classify_driver_exit(&requested, None, &ok),
        DriverVerdict::Outcome(SyncOutcome::Failed { .. })
    ));
    let said_no = result(r#"CGC_FRESH_RESULT {"ok": false, "error": "boom"}"#);
    assert!(matches!(
        classify_driver_exit(&requested, Some(&said_no), &ok),
        DriverVerdict::Outcome(SyncOutcome::Failed { error }) if error.contains("boom")
    ));
    let crashed = SyncRunFacts {
        exit_code: Some(1),
        ..Default::default()
    };
    assert!(matches!(
        classify_driver_exit(&requested, Some(&full), &crashed),
        DriverVerdict::Outcome(SyncOutcome::Failed { .. })
    ));
    // A failing driver's own reason (its self-check names the file)
    // is part of the error.
    let checked = result(
        r#"CGC_FRESH_RESULT {"ok": false, "error": "SelfCheckFailed: /ws/a.py: 4 Function node(s) in the graph, 3 written"}"#,
    );
    assert!(matches!(
        classify_driver_exit(&requested, Some(&checked), &crashed),
        DriverVerdict::Outcome(SyncOutcome::Failed { error })
            if error.contains("code 1") && error.contains("/ws/a.py: 4 Function")
    ));
    let unsupported = SyncRunFacts {
        exit_code: Some(DRIVER_EXIT_UNSUPPORTED),
        ..Default::default()
    };
    let why =
        result(r#"CGC_FRESH_RESULT {"ok": false, "unsupported": true, "error": "not indexed"}"#);
    assert_eq!(
        classify_driver_exit(&requested, Some(&why), &unsupported),
        DriverVerdict::Fallback {
            reason: "not indexed".into()
        }
    );
    let busy = SyncRunFacts {
        exit_code: Some(1),
        lock_error: true,
        ..Default::default()
    };
    assert!(matches!(
        classify_driver_exit(&requested, None, &busy),
        DriverVerdict::Outcome(SyncOutcome::Busy { .. })
    ));
    assert!(parse_driver_result("Loaded configuration from: x").is_none());
}

#[test]
fn a_command_sync_through_the_driver_becomes_the_same_cgc_command() {
    let argv = reconcile_argv(
        "/state/incremental-driver.py",
        &args(&["--db", "kuzudb"]),
        "/venv/bin/cgc",
        &sync_argv(&SyncStrategy::Reconcile, &args(&["--db", "kuzudb"])),
    );
    assert_eq!(
        argv,
        args(&[
            "/state/incremental-driver.py",
            "--db",
            "kuzudb",
            "reconcile",
            "--",
            "/venv/bin/cgc",
            "--db",
            "kuzudb",
            "watch",
            "--sync-on-start",
            "."
        ])
    );
}

#[test]
fn listing_matches_whole_path_cells_only() {
    let table = [
        "┏━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━┓",
        "│ ws   │ /tmp/lt/ws │ Project │",
    ];
    assert!(listing_mentions_workspace(table, "/tmp/lt/ws"));
    assert!(!listing_mentions_workspace(table, "/tmp/lt"));
    assert!(!listing_mentions_workspace(table, "/tmp/lt/ws2"));
}

#[test]
fn index_skip_line_is_recognised() {
    assert!(is_index_skip_line(
        "Repository '.' is already indexed with 50 files. Skipping."
    ));
    assert!(!is_index_skip_line(
        "Repository '.' has only 50 of 51 files indexed. Continuing."
    ));
}
