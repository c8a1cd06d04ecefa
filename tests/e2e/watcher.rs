//! The managed watcher (`freshness.watch` on/auto) against the fake `cgc`:
//! the gate, backend detection, liveness verification, and its end.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    agent_edit, args_of, fast_env, indexed_with_fake, is_alive, open_session, wait_until, FakeCgc,
    ForeignLock, Sandbox, Service,
};

#[test]
fn on_mode_spawns_the_watcher_verifies_it_and_it_owns_freshness() {
    let (_sandbox, fake, service) = indexed_with_fake(
        json!({}),
        &fast_env(&[
            ("CGC_FRESHNESS_WATCH", "on"),
            ("CGC_GLOBAL_ARGS", "--db kuzudb"),
        ]),
    );
    let mut conn = open_session(&service, "s1");
    let (fresh, _) = conn.wait_status("fresh");
    assert_eq!(fresh["watcher"]["state"], "verified", "{fresh}");
    let started = conn.wait_seen("watcher_started", |f| f["condition"] == "watcher_started");
    assert_eq!(started["audience"], "user");
    let calls = fake.invocations();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(
        args_of(&calls[0]),
        json!(["--db", "kuzudb", "watch", "--sync-on-start", "."])
    );
    // Edits while the verified watcher runs start no sync, open no stale
    // episode and offer no notice; they are `syncing` — the watcher is
    // applying them — and not fresh until the watcher says it applied
    // them (this fake never does; the bound of that wait is 30 s).
    agent_edit(&mut conn, "s1", "a.py");
    agent_edit(&mut conn, "s1", "b.py");
    std::thread::sleep(Duration::from_millis(300));
    let state = conn.request(json!({"type": "status"}), 5);
    assert_eq!(state["status"], "syncing", "{state}");
    assert!(state["stale_since"].is_null(), "{state}");
    assert_eq!(state["watcher"]["state"], "verified", "{state}");
    assert_eq!(
        fake.invocations().len(),
        1,
        "no lazy sync while the watcher owns freshness"
    );
    assert_eq!(conn.count_seen(|f| f["condition"] == "possibly_stale"), 0);
    // The watcher belongs to its session: shutdown stops it with SIGINT.
    let pid = calls[0]["pid"].as_i64().unwrap() as i32;
    conn.request(json!({"type": "session_shutdown", "session": "s1"}), 6);
    wait_until("the watcher to stop", Duration::from_secs(5), || {
        !is_alive(pid)
    });
    let end = fake.wait_end_record();
    assert_eq!(end["how"], json!({"exit": 0}), "stopped gracefully: {end}");
    assert_eq!(end["handled_signal"], "INT", "{end}");
}

#[test]
fn on_mode_with_the_database_locked_skips_as_busy_and_lazy_mode_runs() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let db = sandbox.workspace().join(".codegraphcontext/db/kuzudb");
    let holder = ForeignLock::hold(&db);
    let fake = FakeCgc::new(&sandbox, json!({}));
    let service =
        Service::start_with_fake(&sandbox, &fake, &fast_env(&[("CGC_FRESHNESS_WATCH", "on")]));
    let mut conn = open_session(&service, "s1");
    let notice = conn.wait_seen("watcher busy", |f| f["condition"] == "watcher_skipped_busy");
    assert!(
        notice["text"]
            .as_str()
            .unwrap()
            .contains(&format!("pid {}", holder.pid())),
        "{notice}"
    );
    let state = conn.request(json!({"type": "status"}), 3);
    assert_eq!(state["status"], "skipped_busy");
    assert!(fake.invocations().is_empty(), "nothing spawned");
    assert_eq!(
        conn.count_seen(|f| f["status"] == "fresh"),
        0,
        "no fresh claim for the failed watcher"
    );
    holder.release();
    // Lazy mode: the next edit syncs.
    agent_edit(&mut conn, "s1", "a.py");
    conn.wait_status("fresh");
    assert_eq!(fake.watch_invocations().len(), 1);
}

#[test]
fn auto_mode_with_an_embedded_backend_declines_and_runs_no_watcher() {
    let (_sandbox, fake, service) = indexed_with_fake(
        json!({}),
        &fast_env(&[
            ("CGC_FRESHNESS_WATCH", "auto"),
            ("DEFAULT_DATABASE", "kuzudb"),
        ]),
    );
    let mut conn = open_session(&service, "s1");
    let notice = conn.wait_seen("declined", |f| f["condition"] == "watcher_declined_backend");
    assert!(
        notice["text"].as_str().unwrap().contains("kuzudb"),
        "{notice}"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        fake.invocations().is_empty(),
        "the env override answers without doctor: {:?}",
        fake.invocations()
    );
    let state = conn.request(json!({"type": "status"}), 2);
    assert_eq!(state["backend"]["kind"], "kuzudb", "{state}");
    // Lazy mode runs.
    agent_edit(&mut conn, "s1", "a.py");
    conn.wait_status("fresh");
}

#[test]
fn auto_mode_with_a_server_backend_spawns_and_verifies() {
    let (_sandbox, fake, service) = indexed_with_fake(
        json!({}),
        &fast_env(&[
            ("CGC_FRESHNESS_WATCH", "auto"),
            ("DEFAULT_DATABASE", "falkordb-remote"),
        ]),
    );
    let mut conn = open_session(&service, "s1");
    let (fresh, _) = conn.wait_status("fresh");
    assert_eq!(fresh["backend"]["kind"], "falkordb-remote", "{fresh}");
    assert_eq!(fake.watch_invocations().len(), 1);
}

#[test]
fn auto_mode_on_an_unindexed_workspace_spawns_nothing_and_says_why() {
    let sandbox = Sandbox::new();
    let fake = FakeCgc::new(&sandbox, json!({}));
    let service = Service::start_with_fake(
        &sandbox,
        &fake,
        &fast_env(&[
            ("CGC_FRESHNESS_WATCH", "auto"),
            ("DEFAULT_DATABASE", "neo4j"),
        ]),
    );
    let mut conn = open_session(&service, "s1");
    let notice = conn.wait_seen("declined", |f| {
        f["condition"] == "watcher_declined_unindexed"
    });
    assert_eq!(notice["audience"], "user");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        fake.invocations().is_empty(),
        "no watcher, no scan, no index: {:?}",
        fake.invocations()
    );
    assert!(
        !sandbox.workspace().join(".codegraphcontext").exists(),
        "nothing was created"
    );
    // One-time: the session's replayed start and its edits do not say it
    // again (the decline is decided once per session).
    conn.send(json!({"type": "session_start", "session": "s1", "reason": "startup"}));
    agent_edit(&mut conn, "s1", "pkg/a.py");
    let state = conn.request(json!({"type": "status"}), 9);
    assert_eq!(state["watcher"]["state"], "declined_unindexed", "{state}");
    assert_eq!(
        conn.count_seen(|f| f["type"] == "notice" && f["condition"] == "watcher_declined_unindexed"),
        1,
        "the decline is explained once"
    );
}

#[test]
fn a_hung_doctor_is_killed_at_the_bound_and_the_answer_is_embedded() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let fake = FakeCgc::new(
        &sandbox,
        json!({"doctor": {"steps": [{"spawn_daemon": {}}, {"hang": true}], "ignore_sigint": true}}),
    );
    let service = Service::start_with_fake(
        &sandbox,
        &fake,
        &fast_env(&[("CGC_FRESHNESS_WATCH", "auto"), ("CGC_TIMEOUT_MS", "400")]),
    );
    let mut conn = open_session(&service, "s1");
    let notice = conn.wait_seen("declined", |f| f["condition"] == "watcher_declined_backend");
    assert!(
        notice["text"].as_str().unwrap().contains("unknown")
            || notice["text"].as_str().unwrap().contains("embedded"),
        "{notice}"
    );
    for pid in fake.all_pids() {
        wait_until(
            "the doctor and its daemon to be gone",
            Duration::from_secs(5),
            || !is_alive(pid),
        );
    }
    assert!(fake.watch_invocations().is_empty());
}

#[test]
fn doctor_output_decides_the_backend_and_garbage_fails_open() {
    for (doctor, expect_spawn) in [
        (
            json!({"steps": [{"stderr": "   Default database: neo4j (source: environment (DEFAULT_DATABASE))"}], "exit": 1}),
            true,
        ),
        (
            json!({"steps": [{"stderr": "%%% garbage \u{1b}[31m no line here"}], "exit": 0}),
            false,
        ),
    ] {
        let sandbox = Sandbox::new();
        sandbox.mark_indexed();
        let fake = FakeCgc::new(&sandbox, json!({"doctor": doctor}));
        let service = Service::start_with_fake(
            &sandbox,
            &fake,
            &fast_env(&[("CGC_FRESHNESS_WATCH", "auto")]),
        );
        let mut conn = open_session(&service, "s1");
        if expect_spawn {
            conn.wait_status("fresh");
            assert_eq!(
                fake.watch_invocations().len(),
                1,
                "doctor's line says neo4j (its exit code says nothing)"
            );
        } else {
            conn.wait_seen("declined", |f| f["condition"] == "watcher_declined_backend");
            assert!(fake.watch_invocations().is_empty());
        }
    }
}

#[test]
fn the_dotenv_file_is_the_last_source() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let cgc_home = sandbox.home().join(".codegraphcontext");
    std::fs::create_dir_all(&cgc_home).unwrap();
    std::fs::write(
        cgc_home.join(".env"),
        "# settings\nexport DATABASE_TYPE=\"falkordb-remote\" # server\n",
    )
    .unwrap();
    let fake = FakeCgc::new(
        &sandbox,
        json!({"doctor": {"steps": [{"stderr": "boom"}], "exit": 1}}),
    );
    let service = Service::start_with_fake(
        &sandbox,
        &fake,
        &fast_env(&[("CGC_FRESHNESS_WATCH", "auto")]),
    );
    let mut conn = open_session(&service, "s1");
    let (fresh, _) = conn.wait_status("fresh");
    assert_eq!(fresh["backend"]["kind"], "falkordb-remote", "{fresh}");
}

#[test]
fn a_watcher_that_dies_before_verification_is_not_verified_and_lazy_mode_resumes() {
    for die in [
        json!({"die_after_ms": 1, "exit": 1}),
        json!({"die_after_ms": 150, "exit": 1}),
    ] {
        let sandbox = Sandbox::new();
        sandbox.mark_indexed();
        let fake = FakeCgc::new(
            &sandbox,
            json!({"watch": [{"steps": [die, {"stdout": "Database Configuration Error: Database set to 'neo4j' but it is not configured."}, {"hang": true}]}, "builtin"]}),
        );
        let service =
            Service::start_with_fake(&sandbox, &fake, &fast_env(&[("CGC_FRESHNESS_WATCH", "on")]));
        let mut conn = open_session(&service, "s1");
        let (state, _) = conn.wait_status("not_verified");
        assert!(
            state["last_error"].as_str().unwrap().contains("code 1"),
            "{state}"
        );
        conn.wait_seen("notice", |f| f["condition"] == "watcher_not_verified");
        assert_eq!(
            conn.count_seen(|f| f["status"] == "fresh"),
            0,
            "never fresh for it"
        );
        agent_edit(&mut conn, "s1", "a.py");
        conn.wait_status("fresh");
        assert_eq!(
            fake.watch_invocations().len(),
            2,
            "the watcher, then the lazy sync"
        );
    }
}

/// The spec's liveness verification: a watcher that prints its ready line
/// and exits 0.5 s later, inside a 4 s liveness window, never survived its
/// stabilization probe — it is never verified: no `fresh` is ever
/// recorded, the state is the honest `not_verified` with the error, and
/// one `watcher_not_verified` notice names the failure.
#[test]
fn a_watcher_that_dies_right_after_its_ready_line_is_never_verified() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let fake = FakeCgc::new(
        &sandbox,
        json!({"watch": [{"steps": [{"die_after_ms": 500, "exit": 1}, {"stdout": [{"cgc": "ready"}]}, {"hang": true}]}, "builtin"]}),
    );
    let service = Service::start_with_fake(
        &sandbox,
        &fake,
        &fast_env(&[
            ("CGC_FRESHNESS_WATCH", "on"),
            ("CGC_FRESHNESS_WATCHER_LIVENESS_MS", "4000"),
        ]),
    );
    let mut conn = open_session(&service, "s1");
    let (state, _) = conn.wait_status("not_verified");
    assert!(
        state["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("code 1")),
        "{state}"
    );
    conn.wait_seen("not verified notice", |f| {
        f["condition"] == "watcher_not_verified"
    });
    // Past the window: nothing more comes of it.
    std::thread::sleep(Duration::from_millis(4500));
    let status = conn.request(json!({"type": "status"}), 9);
    assert_ne!(status["status"], "fresh", "{status}");
    assert_eq!(conn.count_seen(|f| f["status"] == "fresh"), 0);
    assert_eq!(
        conn.count_seen(|f| f["condition"] == "watcher_not_verified"),
        1
    );
    assert_eq!(conn.count_seen(|f| f["condition"] == "watcher_started"), 0);
    assert_eq!(conn.count_seen(|f| f["condition"] == "watcher_died"), 0);
}

/// A watcher that stayed alive through its stabilization probe is verified
/// (`fresh`); when it dies later the record drops to `possibly_stale` at
/// once (never a `fresh` left standing), with one `watcher_died` notice.
#[test]
fn a_watcher_that_dies_after_verification_drops_to_possibly_stale_at_once() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    // Ready at once; the probe is 1 s (the liveness budget); dies at 3 s.
    let fake = FakeCgc::new(
        &sandbox,
        json!({"watch": [{"steps": [{"die_after_ms": 3000, "exit": 1}, {"stdout": [{"cgc": "ready"}]}, {"hang": true}]}, "builtin"]}),
    );
    let service = Service::start_with_fake(
        &sandbox,
        &fake,
        &fast_env(&[
            ("CGC_FRESHNESS_WATCH", "on"),
            ("CGC_FRESHNESS_WATCHER_LIVENESS_MS", "1000"),
        ]),
    );
    let mut conn = open_session(&service, "s1");
    conn.wait_status("fresh");
    let (stale, _) = conn.wait_status("possibly_stale");
    assert!(stale["last_error"].as_str().is_some(), "{stale}");
    conn.wait_seen("died notice", |f| f["condition"] == "watcher_died");
    assert_eq!(conn.count_seen(|f| f["condition"] == "watcher_died"), 1);
    assert_eq!(
        conn.count_seen(|f| f["condition"] == "watcher_not_verified"),
        0
    );
}

#[test]
fn a_session_that_ends_during_verification_records_no_fresh() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    // Never ready; the liveness budget is long.
    let fake = FakeCgc::new(&sandbox, json!({"watch": {"steps": [{"hang": true}]}}));
    let service = Service::start_with_fake(
        &sandbox,
        &fake,
        &fast_env(&[
            ("CGC_FRESHNESS_WATCH", "on"),
            ("CGC_FRESHNESS_WATCHER_LIVENESS_MS", "1500"),
        ]),
    );
    let mut conn = open_session(&service, "s1");
    wait_until("the watcher", Duration::from_secs(5), || {
        !fake.invocations().is_empty()
    });
    let pid = fake.invocations()[0]["pid"].as_i64().unwrap() as i32;
    conn.request(json!({"type": "session_shutdown", "session": "s1"}), 2);
    wait_until("the watcher to stop", Duration::from_secs(5), || {
        !is_alive(pid)
    });
    std::thread::sleep(Duration::from_millis(1800)); // past the liveness budget
    let state = conn.request(json!({"type": "status"}), 3);
    assert_ne!(state["status"], "fresh", "{state}");
    assert_eq!(conn.count_seen(|f| f["status"] == "fresh"), 0);
}

#[test]
fn surviving_the_liveness_window_without_the_ready_line_verifies_nothing() {
    // CGC prints its ready line only after its start-up reconcile: a
    // watcher still reconciling is not verified for being alive. No line
    // within cgc.maintenanceTimeoutMs: it is stopped and not verified.
    let (_sandbox, fake, service) = indexed_with_fake(
        json!({"watch": {"steps": [{"hang": true}]}}),
        &fast_env(&[
            ("CGC_FRESHNESS_WATCH", "on"),
            ("CGC_FRESHNESS_WATCHER_LIVENESS_MS", "300"),
            ("CGC_MAINTENANCE_TIMEOUT_MS", "2500"),
        ]),
    );
    let mut conn = open_session(&service, "s1");
    wait_until("the watcher", Duration::from_secs(5), || {
        !fake.invocations().is_empty()
    });
    std::thread::sleep(Duration::from_millis(1200)); // well past the liveness window
    let state = conn.request(json!({"type": "status"}), 2);
    assert_ne!(state["status"], "fresh", "{state}");
    assert_eq!(state["watcher"]["state"], "verifying", "{state}");
    let (failed, before) = conn.wait_status("not_verified");
    assert!(before.iter().all(|f| f["status"] != "fresh"), "{before:?}");
    assert!(
        failed["last_error"]
            .as_str()
            .unwrap()
            .contains("no ready line within cgc.maintenanceTimeoutMs"),
        "{failed}"
    );
    let pid = fake.invocations()[0]["pid"].as_i64().unwrap() as i32;
    wait_until("the watcher to be stopped", Duration::from_secs(5), || {
        !is_alive(pid)
    });
}

#[test]
fn a_slow_start_up_reconcile_is_verified_only_at_its_ready_line() {
    let (_sandbox, _fake, service) = indexed_with_fake(
        json!({"watch": {"steps": [{"sleep_ms": 1500}, {"stdout": [{"cgc": "ready"}]}, {"hang": true}]}}),
        &fast_env(&[
            ("CGC_FRESHNESS_WATCH", "on"),
            ("CGC_FRESHNESS_WATCHER_LIVENESS_MS", "200"),
        ]),
    );
    let started = std::time::Instant::now();
    let mut conn = open_session(&service, "s1");
    let (fresh, before) = conn.wait_status("fresh");
    assert!(
        started.elapsed() >= Duration::from_millis(1400),
        "verified after {:?}, before the ready line",
        started.elapsed()
    );
    assert!(before.iter().all(|f| f["status"] != "fresh"));
    assert_eq!(fresh["watcher"]["state"], "verified");
}

#[test]
fn an_edit_is_fresh_only_once_the_watcher_logs_it_applied() {
    // Spec, "Verified watcher owns freshness": the edit opens no stale
    // episode (no `possibly_stale`, no `stale_since`, no notice) — it is
    // `syncing` while the watcher applies it — and `fresh` waits for the
    // watcher's line that it applied the file.
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let ws = std::fs::canonicalize(sandbox.workspace()).unwrap();
    let applied = applied_line(&ws, "pkg/a.py");
    let fake = FakeCgc::new(
        &sandbox,
        json!({"watch": {"steps": [{"stdout": [{"cgc": "ready"}]}, {"sleep_ms": 5000}, {"stderr": [applied]}, {"hang": true}]}}),
    );
    let service =
        Service::start_with_fake(&sandbox, &fake, &fast_env(&[("CGC_FRESHNESS_WATCH", "on")]));
    let mut conn = open_session(&service, "s1");
    // Verified 2 s after its ready line (the stabilization probe); the
    // edit follows, 3 s before the watcher logs the file applied.
    conn.wait_status("fresh");
    agent_edit(&mut conn, "s1", "pkg/a.py");
    let (applying, _) = conn.wait_status("syncing");
    assert_eq!(applying["watcher"]["state"], "verified", "{applying}");
    assert!(applying["stale_since"].is_null(), "{applying}");
    let (fresh, between) = conn.wait_status("fresh");
    assert_eq!(fresh["watcher"]["state"], "verified", "{fresh}");
    assert!(
        between
            .iter()
            .all(|f| f["status"] != "possibly_stale" && f["stale_since"].is_null()),
        "a stale episode under the verified watcher: {between:?}"
    );
    assert_eq!(
        conn.count_seen(|f| f["condition"] == "possibly_stale"),
        0,
        "no staleness notice: the watcher was applying it"
    );
    assert_eq!(
        fake.invocations().len(),
        1,
        "no sync: the watcher applied it"
    );
    let reports = service.log_events("watcher_report");
    let applied_at = reports
        .iter()
        .position(|e| e["report"].as_str().unwrap_or("").contains("pkg/a.py"));
    assert!(applied_at.is_some(), "{reports:?}");
}

/// CGC's log line that its watcher applied `path` (relative to `ws`), as
/// CGC 0.6.13 writes it.
fn applied_line(ws: &std::path::Path, path: &str) -> String {
    format!(
        "2026-12-01 20:26:55,734 - INFO - codegraphcontext.utils.debug_log - [INCREMENTAL] Done. Graph refresh for {}/{path} complete! ✅",
        ws.display()
    )
}

/// Now, in unix milliseconds (the unit of `stale_since`).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

/// A verified watcher that has not applied an edit within
/// `freshness.watcherApplyMs` opens the stale episode honestly:
/// `possibly_stale` since the edit, one notice that says why; its line
/// that it applied the file ends the episode (`fresh`). No sync runs: the
/// watcher still owns freshness.
#[test]
fn a_watcher_that_does_not_apply_an_edit_within_its_bound_opens_one_stale_episode() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let ws = std::fs::canonicalize(sandbox.workspace()).unwrap();
    let applied = applied_line(&ws, "pkg/a.py");
    let fake = FakeCgc::new(
        &sandbox,
        json!({"watch": {"steps": [{"stdout": [{"cgc": "ready"}]}, {"sleep_ms": 6000}, {"stderr": [applied]}, {"hang": true}]}}),
    );
    let service = Service::start_with_fake(
        &sandbox,
        &fake,
        &fast_env(&[
            ("CGC_FRESHNESS_WATCH", "on"),
            ("CGC_FRESHNESS_WATCHER_APPLY_MS", "1500"),
        ]),
    );
    let mut conn = open_session(&service, "s1");
    conn.wait_status("fresh");
    let before_edit = now_ms();
    agent_edit(&mut conn, "s1", "pkg/a.py");
    conn.wait_status("syncing");
    let (stale, applying) = conn.wait_status("possibly_stale");
    let edit_state = applying
        .iter()
        .find(|f| f["type"] == "state" && f["status"] == "syncing")
        .cloned()
        .unwrap_or(Value::Null);
    let stale_since = stale["stale_since"].as_u64().unwrap_or(0);
    assert!(
        stale_since >= before_edit && stale_since <= before_edit + 1_000,
        "stale since the edit ({before_edit}): {stale}"
    );
    assert!(
        now_ms() >= stale_since + 1_500,
        "the episode opened before its bound: {stale}"
    );
    assert_eq!(stale["watcher"]["state"], "verified", "{stale}");
    let notice = conn.wait_seen("the lag notice", |f| {
        f["type"] == "notice" && f["condition"] == "possibly_stale"
    });
    assert!(
        notice["text"].as_str().is_some_and(
            |t| t.contains("the watcher has not applied 1 edited file(s) within 1.5 s")
        ),
        "{notice} after {edit_state}"
    );
    let (fresh, _) = conn.wait_status("fresh");
    assert!(fresh["stale_since"].is_null(), "{fresh}");
    assert_eq!(
        conn.count_seen(|f| f["type"] == "notice" && f["condition"] == "possibly_stale"),
        1,
        "one notice for the episode"
    );
    assert_eq!(
        fake.invocations().len(),
        1,
        "no sync: the watcher owns freshness"
    );
}

#[test]
fn a_db_root_option_in_global_args_outranks_the_environment() {
    let (_sandbox, fake, service) = indexed_with_fake(
        json!({}),
        &fast_env(&[
            ("CGC_FRESHNESS_WATCH", "auto"),
            ("DEFAULT_DATABASE", "neo4j"),
            ("CGC_GLOBAL_ARGS", "--db kuzudb"),
        ]),
    );
    let mut conn = open_session(&service, "s1");
    let notice = conn.wait_seen("declined", |f| f["condition"] == "watcher_declined_backend");
    assert!(
        notice["text"].as_str().unwrap().contains("kuzudb"),
        "{notice}"
    );
    assert!(fake.watch_invocations().is_empty());
}

#[test]
fn an_edit_during_the_start_up_reconcile_restarts_the_watcher_and_only_its_ready_line_is_fresh() {
    // CGC schedules its observer only after the start-up reconcile: an
    // edit made meanwhile may never be applied. The watcher is restarted
    // (its new reconcile begins after the edit) and `fresh` waits for the
    // new ready line.
    let (_sandbox, fake, service) = indexed_with_fake(
        json!({"watch": [
            {"steps": [{"sleep_ms": 1500}, {"stdout": [{"cgc": "ready"}]}, {"hang": true}]},
            {"steps": [{"sleep_ms": 1000}, {"stdout": [{"cgc": "ready"}]}, {"hang": true}]}
        ]}),
        &fast_env(&[
            ("CGC_FRESHNESS_WATCH", "on"),
            ("CGC_FRESHNESS_WATCHER_LIVENESS_MS", "200"),
        ]),
    );
    let mut conn = open_session(&service, "s1");
    wait_until("the watcher to start", Duration::from_secs(5), || {
        !fake.watch_invocations().is_empty()
    });
    agent_edit(&mut conn, "s1", "pkg/a.py");
    let (restarting, before) = conn.recv_until("the restart", |f| {
        f["type"] == "state" && f["watcher"]["state"] == "restarting"
    });
    assert!(
        before.iter().all(|f| f["status"] != "fresh"),
        "fresh before the restart: {before:?}"
    );
    assert_eq!(restarting["status"], "syncing", "{restarting}");
    assert!(restarting["stale_since"].is_null(), "{restarting}");
    let (fresh, between) = conn.wait_status("fresh");
    assert!(between.iter().all(|f| f["status"] != "fresh"));
    assert_eq!(fresh["watcher"]["state"], "verified", "{fresh}");
    let watches = fake.watch_invocations();
    assert_eq!(watches.len(), 2, "one restart: {watches:?}");
    assert_eq!(
        fresh["watcher"]["pid"], watches[1]["pid"],
        "verified as the new process"
    );
    for watch in &watches {
        assert_eq!(
            args_of(watch),
            json!(["watch", "--sync-on-start", "."]),
            "{watch}"
        );
    }
    let end = fake.wait_end_record();
    assert_eq!(end["handled_signal"], "INT", "stopped gracefully: {end}");
    let decisions = service.log_events("decision");
    assert!(
        decisions.iter().any(|e| e["decision"] == "restart_watcher"),
        "{decisions:?}"
    );
}

#[test]
fn an_edit_of_a_file_cgc_ignores_waits_for_no_watcher() {
    // CGC never logs an ignored file applied: waiting for it would keep
    // the status from `fresh` for as long as the watcher runs.
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    std::fs::write(sandbox.workspace().join(".cgcignore"), "vendor/\n").unwrap();
    let fake = FakeCgc::new(&sandbox, json!({}));
    let service =
        Service::start_with_fake(&sandbox, &fake, &fast_env(&[("CGC_FRESHNESS_WATCH", "on")]));
    let mut conn = open_session(&service, "s1");
    let (fresh, _) = conn.wait_status("fresh");
    let epoch = fresh["edit_epoch"].as_u64().unwrap();
    agent_edit(&mut conn, "s1", "vendor/lib.py");
    agent_edit(&mut conn, "s1", "node_modules/dep/index.js");
    let state = conn.request(json!({"type": "status"}), 7);
    assert_eq!(state["status"], "fresh", "{state}");
    assert_eq!(state["edit_epoch"].as_u64(), Some(epoch), "{state}");
    // A file CGC reads counts, and only it waits.
    agent_edit(&mut conn, "s1", "vendor/lib.py");
    agent_edit(&mut conn, "s1", "pkg/a.py");
    let state = conn.request(json!({"type": "status"}), 8);
    assert_eq!(state["status"], "syncing", "{state}");
    assert!(state["stale_since"].is_null(), "{state}");
    assert_eq!(state["edit_epoch"].as_u64(), Some(epoch + 1), "{state}");
    assert_eq!(
        state["detail"], "the watcher has not yet applied 1 edited file(s)",
        "{state}"
    );
}

#[test]
fn a_shell_command_under_the_watcher_is_compared_with_the_tree_at_its_call() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let ws = std::fs::canonicalize(sandbox.workspace()).unwrap();
    std::fs::create_dir_all(ws.join("pkg")).unwrap();
    std::fs::write(ws.join("pkg/a.py"), "a = 1\n").unwrap();
    std::fs::write(ws.join("pkg/b.py"), "b = 1\n").unwrap();
    let applied = |path: &str| applied_line(&ws, path);
    let fake = FakeCgc::new(
        &sandbox,
        json!({"watch": {"steps": [
            {"stdout": [{"cgc": "ready"}]},
            {"sleep_ms": 2500}, {"stderr": [applied("pkg/a.py")]},
            {"sleep_ms": 2500}, {"stderr": [applied("pkg/b.py")]},
            {"hang": true}
        ]}}),
    );
    let service =
        Service::start_with_fake(&sandbox, &fake, &fast_env(&[("CGC_FRESHNESS_WATCH", "on")]));
    let mut conn = open_session(&service, "s1");
    conn.wait_status("fresh");
    // No sync has run, so there is no manifest: compared with it, every
    // command would be an edit of anything.
    agent_edit(&mut conn, "s1", "pkg/a.py");
    std::fs::write(ws.join("pkg/a.py"), "a = 2\n").unwrap();
    conn.wait_status("syncing");
    conn.wait_status("fresh");
    // A command that changes pkg/b.py: that file, and only it, waits.
    conn.send(json!({"type": "tool_call", "session": "s1", "tool": "bash", "paths": []}));
    std::fs::write(ws.join("pkg/b.py"), "b = 22\n").unwrap();
    conn.send(json!({"type": "tool_result", "session": "s1", "tool": "bash", "ok": true}));
    let (applying, _) = conn.wait_status("syncing");
    assert_eq!(
        applying["detail"], "the watcher has not yet applied 1 edited file(s)",
        "{applying}"
    );
    let compared = service.log_events("shell_compared");
    assert_eq!(compared.len(), 1, "{compared:?}");
    assert_eq!(compared[0]["changed"], 1, "{compared:?}");
    conn.wait_status("fresh");
    // A command that changes nothing leaves it fresh.
    conn.send(json!({"type": "tool_call", "session": "s1", "tool": "bash", "paths": []}));
    conn.send(json!({"type": "tool_result", "session": "s1", "tool": "bash", "ok": true}));
    wait_until("the second comparison", Duration::from_secs(10), || {
        service.log_events("shell_compared").len() == 2
    });
    assert_eq!(service.log_events("shell_compared")[1]["changed"], 0);
    let state = conn.request(json!({"type": "status"}), 9);
    assert_eq!(state["status"], "fresh", "{state}");
    assert_eq!(fake.invocations().len(), 1, "no sync, no restart");
}
