//! Lazy, budgeted drift sync against the fake `cgc`: what is spawned, when,
//! how often, and what the record and the notices say afterwards.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{
    agent_edit, args_of, fast_env, indexed_with_fake, is_alive, open_session, wait_until, FakeCgc,
    ForeignLock, Sandbox, Service,
};

fn notices(frames: &[Value], condition: &str) -> usize {
    frames
        .iter()
        .filter(|f| f["type"] == "notice" && f["condition"] == condition)
        .count()
}

#[test]
fn first_drift_triggers_a_background_sync_that_reconciles_and_reports_fresh() {
    let (sandbox, fake, service) = indexed_with_fake(json!({}), &fast_env(&[]));
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "src/a.py");
    let (stale, before) = conn.wait_status("possibly_stale");
    assert!(stale["stale_since"].as_u64().is_some(), "{stale}");
    let (fresh, _) = conn.wait_status("fresh");
    let seen = conn.history.clone();
    drop(before);
    assert!(
        fresh["last_synced_at"].as_u64() >= stale["stale_since"].as_u64(),
        "{fresh}"
    );
    assert!(
        seen.iter()
            .any(|f| f["type"] == "state" && f["status"] == "syncing"),
        "{seen:?}"
    );
    assert_eq!(notices(&seen, "possibly_stale"), 1, "{seen:?}");
    let completed = conn.wait_seen("sync_completed notice", |f| {
        f["condition"] == "sync_completed"
    });
    assert_eq!(completed["audience"], "user");
    let calls = fake.invocations();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let call = &calls[0];
    assert_eq!(
        args_of(call),
        json!(["watch", "--sync-on-start", "."]),
        "{call}"
    );
    assert_eq!(call["env"]["ENABLE_AUTO_WATCH"], "false");
    assert_eq!(call["env"]["COLUMNS"], "1000");
    assert!(call["env"]["CGC_FRESH_OWNER"]
        .as_str()
        .unwrap()
        .starts_with(&Service::owner_prefix(&sandbox)));
    let canonical = std::fs::canonicalize(sandbox.workspace()).unwrap();
    assert_eq!(call["cwd"], canonical.display().to_string());
    // Stopped with one SIGINT after the ready line: a clean exit 0.
    let end = fake.wait_end_record();
    assert_eq!(end["how"], json!({"exit": 0}), "{end}");
}

/// After its ready line the reconciling watch has done its work; on a
/// loaded machine its clean exit after the SIGINT can take longer than the
/// stop grace. It must be let finish (the time budget bounds it), not be
/// SIGTERMed into a failed sync (seen with the real CLI under load: killed
/// after printing "Watcher stopped.").
#[test]
fn a_reconcile_that_exits_slowly_after_its_sigint_is_not_killed_and_counts() {
    let (_sandbox, fake, service) = indexed_with_fake(
        json!({"watch": {
            "steps": [{"stdout": [{"cgc": "ready"}]}, {"hang": true}],
            "on_sigint": {
                "stdout": ["🛑 Stopping watcher..."],
                "steps": [{"sleep_ms": 1500}, {"stdout": ["✓ Watcher stopped."]}],
                "exit": 0
            }
        }}),
        // Stop grace 500 ms: three times shorter than that exit.
        &fast_env(&[]),
    );
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "src/a.py");
    conn.wait_status("fresh");
    let end = fake.wait_end_record();
    assert_eq!(end["how"], json!({"exit": 0}), "{end}");
    assert_eq!(end["handled_signal"], "INT", "{end}");
    let signals: Vec<Value> = service
        .log_events("signal_sent")
        .into_iter()
        .filter(|e| e["reason"] == "reconcile complete")
        .collect();
    assert_eq!(signals.len(), 1, "exactly one SIGINT: {signals:?}");
    assert_eq!(signals[0]["signal"], "SIGINT");
    assert!(
        service
            .log_events("signal_sent")
            .iter()
            .all(|e| e["signal"] == "SIGINT"),
        "no escalation"
    );
    assert_eq!(conn.count_seen(|f| f["condition"] == "sync_failed"), 0);
}

/// A reconcile whose SIGINT `cgc watch` does not take (CGC waits for it in
/// a `threading.Event().wait()` that a SIGINT handed to another of its
/// threads does not wake): with no "Stopping watcher" line 5 s after the
/// SIGINT, it is sent again — and the time budget still ends the run.
#[test]
fn a_reconcile_sigint_not_taken_is_sent_again_until_the_time_budget() {
    let (_sandbox, _fake, service) = indexed_with_fake(
        json!({"watch": {"steps": [{"stdout": [{"cgc": "ready"}]}, {"hang": true}], "ignore_sigint": true}}),
        &fast_env(&[
            ("CGC_MAINTENANCE_TIMEOUT_MS", "7500"),
            ("CGC_SUPERVISOR_STOP_GRACE_MS", "200"),
        ]),
    );
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "src/a.py");
    conn.wait_seen("sync_failed", |f| f["condition"] == "sync_failed");
    let repeated = service.log_events("interrupt_repeated");
    assert_eq!(
        repeated.len(),
        1,
        "one repeat before the budget: {repeated:?}"
    );
    assert_eq!(repeated[0]["sent"], 1, "{repeated:?}");
    let interrupts = service
        .log_events("signal_sent")
        .into_iter()
        .filter(|e| e["reason"] == "reconcile complete")
        .count();
    assert_eq!(interrupts, 2, "the SIGINT and its repeat");
    let state = conn.request(json!({"type": "status"}), 63);
    assert_ne!(state["status"], "fresh", "{state}");
}

/// A reconcile that took its SIGINT ("Stopping watcher") and needs longer
/// than the repeat's 5 s to exit gets no second SIGINT (mid-stop, CGC
/// would exit 130), and the sync counts.
#[test]
fn a_reconcile_that_said_it_is_stopping_gets_no_second_sigint() {
    let (_sandbox, fake, service) = indexed_with_fake(
        json!({"watch": {
            "steps": [{"stdout": [{"cgc": "ready"}]}, {"hang": true}],
            "on_sigint": {
                "stdout": ["🛑 Stopping watcher..."],
                "steps": [{"sleep_ms": 6500}, {"stdout": ["✓ Watcher stopped."]}],
                "exit": 0
            }
        }}),
        &fast_env(&[]),
    );
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "src/a.py");
    conn.wait_status("fresh");
    let end = fake.wait_end_record();
    assert_eq!(end["how"], json!({"exit": 0}), "{end}");
    assert!(service.log_events("interrupt_repeated").is_empty());
    let interrupts = service
        .log_events("signal_sent")
        .into_iter()
        .filter(|e| e["reason"] == "reconcile complete")
        .count();
    assert_eq!(interrupts, 1, "exactly one SIGINT");
}

#[test]
fn global_args_go_before_the_subcommand_and_strategies_are_honoured() {
    let (_sandbox, fake, service) = indexed_with_fake(
        json!({}),
        &fast_env(&[
            ("CGC_GLOBAL_ARGS", "--db kuzudb"),
            ("CGC_SYNC_STRATEGY", "update"),
        ]),
    );
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "a.py");
    conn.wait_status("fresh");
    let calls = fake.invocations();
    assert_eq!(
        args_of(&calls[0]),
        json!(["--db", "kuzudb", "update", ".", "--quiet"])
    );
}

#[test]
fn index_strategy_that_skips_an_indexed_repository_is_not_applied_never_fresh() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let fake = FakeCgc::new(
        &sandbox,
        json!({"index": {"steps": [{"stdout": {"cgc": "already_indexed", "files": 50}}]}}),
    );
    let service = Service::start_with_fake(
        &sandbox,
        &fake,
        &fast_env(&[("CGC_SYNC_STRATEGY", "index")]),
    );
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "a.py");
    let notice = conn.wait_seen("sync_not_applied", |f| f["condition"] == "sync_not_applied");
    std::thread::sleep(Duration::from_millis(200));
    let state = conn.request(json!({"type": "status"}), 49);
    let seen = conn.history.clone();
    assert_eq!(state["status"], "possibly_stale");
    assert!(
        notice["text"].as_str().unwrap().contains("not applied")
            || notice["text"].as_str().unwrap().contains("skipped"),
        "{notice}"
    );
    assert!(
        !seen.iter().any(|f| f["status"] == "fresh"),
        "never fresh: {seen:?}"
    );
    let state = conn.request(json!({"type": "status"}), 50);
    assert_eq!(state["status"], "possibly_stale", "{state}");
    assert!(
        state["last_error"].as_str().unwrap().contains("skipped"),
        "{state}"
    );
}

#[test]
fn sync_skipped_when_busy_names_the_holder_and_spawns_nothing() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    // Another process holds the embedded database, as a CGC MCP server would.
    let db = sandbox.home().join(".codegraphcontext/global/db/kuzudb");
    let holder = ForeignLock::hold(&db);
    let fake = FakeCgc::new(&sandbox, json!({}));
    let service = Service::start_with_fake(&sandbox, &fake, &fast_env(&[]));
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "a.py");
    let (busy, _) = conn.wait_status("skipped_busy");
    let notice = conn.wait_seen("busy notice", |f| f["condition"] == "sync_skipped_busy");
    let text = notice["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("pid {}", holder.pid())),
        "names the holder: {text}"
    );
    assert!(busy["status"] == "skipped_busy");
    assert!(
        fake.invocations().is_empty(),
        "nothing spawned: {:?}",
        fake.invocations()
    );
    // A second edit in the same session: no second busy notice.
    agent_edit(&mut conn, "s1", "b.py");
    let again = conn.request(json!({"type": "status"}), 51);
    assert_ne!(again["status"], "fresh");
    holder.release();
}

#[test]
fn budget_exhausted_spawns_nothing_and_says_so_once() {
    let (_sandbox, fake, service) = indexed_with_fake(
        json!({}),
        &fast_env(&[("CGC_FRESHNESS_MAX_SYNCS_PER_SESSION", "1")]),
    );
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "a.py");
    conn.wait_status("fresh");
    agent_edit(&mut conn, "s1", "b.py");
    let notice = conn.wait_seen("budget notice", |f| f["condition"] == "budget_exhausted");
    assert!(
        notice["text"].as_str().unwrap().contains("cgc-fresh sync"),
        "{notice}"
    );
    agent_edit(&mut conn, "s1", "c.py");
    std::thread::sleep(Duration::from_millis(300));
    let state = conn.request(json!({"type": "status"}), 52);
    assert_eq!(state["status"], "possibly_stale", "{state}");
    assert_eq!(fake.invocations().len(), 1, "one spawn only");
    // The person's sync is not budgeted.
    conn.send(json!({"type": "sync", "id": 53}));
    conn.wait_status("fresh");
    assert_eq!(fake.invocations().len(), 2);
}

#[test]
fn a_thousand_sync_requests_during_a_flight_spawn_one_process() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    // The reconcile takes a moment before it is ready.
    let fake = FakeCgc::new(
        &sandbox,
        json!({"watch": {"steps": [{"sleep_ms": 400}, {"stdout": [{"cgc": "ready"}]}, {"hang": true}]}}),
    );
    let service = Service::start_with_fake(&sandbox, &fake, &fast_env(&[]));
    let mut conn = service.connect();
    conn.hello();
    conn.subscribe();
    let mut burst = Vec::new();
    for _ in 0..1000 {
        burst.extend_from_slice(b"{\"type\":\"sync\"}\n");
    }
    conn.send_raw(&burst);
    conn.wait_status("fresh");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(fake.invocations().len(), 1, "{:?}", fake.invocations());
}

#[test]
fn an_edit_during_a_sync_leaves_it_stale_and_causes_exactly_one_follow_up() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let fake = FakeCgc::new(
        &sandbox,
        json!({"watch": {"steps": [{"sleep_ms": 600}, {"stdout": [{"cgc": "ready"}]}, {"hang": true}]}}),
    );
    let service = Service::start_with_fake(&sandbox, &fake, &fast_env(&[]));
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "a.py");
    conn.wait_status("syncing");
    agent_edit(&mut conn, "s1", "b.py");
    agent_edit(&mut conn, "s1", "c.py");
    let (fresh, seen) = conn.wait_status("fresh");
    // The first completion could not claim fresh: the edits came after its
    // start. It records its time and leaves the state possibly stale; only
    // the follow-up's completion is fresh.
    let first_completion = seen
        .iter()
        .find(|f| f["type"] == "state" && f["last_synced_at"].is_u64())
        .unwrap_or_else(|| panic!("no completion before fresh: {seen:?}"));
    assert_eq!(
        first_completion["status"], "possibly_stale",
        "{first_completion}"
    );
    assert_eq!(first_completion["syncing"], false, "{first_completion}");
    assert!(
        fresh["last_synced_at"].as_u64() > first_completion["last_synced_at"].as_u64(),
        "fresh is the follow-up's completion: {fresh} after {first_completion}"
    );
    assert_eq!(
        conn.count_seen(|f| f["type"] == "state" && f["status"] == "fresh"),
        1,
        "fresh once, at the follow-up: {:?}",
        conn.history
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        fake.invocations().len(),
        2,
        "one flight plus exactly one follow-up"
    );
}

#[test]
fn missing_executable_is_recorded_noticed_once_and_the_service_keeps_serving() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let service = Service::start(
        &sandbox,
        &[],
        &fast_env(&[("CGC_EXECUTABLE", "/nonexistent/cgc")]),
    );
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "a.py");
    let notice = conn.wait_seen("sync_failed", |f| f["condition"] == "sync_failed");
    assert!(
        notice["text"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/cgc"),
        "{notice}"
    );
    let state = conn.request(json!({"type": "status"}), 60);
    assert_ne!(state["status"], "fresh");
    assert!(
        state["last_error"].as_str().unwrap().contains("not found"),
        "{state}"
    );
    let mut other = service.connect();
    assert_eq!(other.request(json!({"type": "status"}), 1)["type"], "state");
}

#[test]
fn a_crashing_sync_is_a_recorded_failure_with_its_output_and_is_retried_at_most_once() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let fake = FakeCgc::new(
        &sandbox,
        json!({"watch": {"steps": [{"stdout": "Traceback: boom"}], "exit": 1}}),
    );
    let service = Service::start_with_fake(&sandbox, &fake, &fast_env(&[]));
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "a.py");
    conn.wait_seen("sync_failed", |f| f["condition"] == "sync_failed");
    for file in ["b.py", "c.py", "d.py"] {
        agent_edit(&mut conn, "s1", file);
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(500));
    let state = conn.request(json!({"type": "status"}), 61);
    assert!(
        state["last_error"].as_str().unwrap().contains("boom"),
        "{state}"
    );
    assert!(
        fake.invocations().len() <= 2,
        "failing work retried at most once: {}",
        fake.invocations().len()
    );
}

#[test]
fn a_hung_sync_is_stopped_at_the_time_budget_and_its_group_is_gone() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let fake = FakeCgc::new(
        &sandbox,
        json!({"watch": {"steps": [{"hang": true}], "ignore_sigint": true}}),
    );
    let service = Service::start_with_fake(
        &sandbox,
        &fake,
        &fast_env(&[
            ("CGC_MAINTENANCE_TIMEOUT_MS", "500"),
            ("CGC_SUPERVISOR_STOP_GRACE_MS", "200"),
        ]),
    );
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "a.py");
    conn.wait_seen("sync_failed", |f| f["condition"] == "sync_failed");
    let state = conn.request(json!({"type": "status"}), 62);
    assert!(
        state["last_error"].as_str().unwrap().contains("500 ms"),
        "{state}"
    );
    assert_ne!(state["status"], "fresh");
    for pid in fake.all_pids() {
        wait_until("the hung sync to be gone", Duration::from_secs(5), || {
            !is_alive(pid)
        });
    }
    assert!(
        service.log_events("signal_sent").len() + service.log_text().matches("SIGTERM").count() > 0
    );
}

#[test]
fn unindexed_workspace_is_declined_without_autocreate_and_synced_with_it() {
    let sandbox = Sandbox::new();
    let fake = FakeCgc::new(&sandbox, json!({}));
    let service = Service::start_with_fake(&sandbox, &fake, &fast_env(&[]));
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "a.py");
    let notice = conn.wait_seen("declined notice", |f| {
        f["condition"] == "sync_declined_unindexed"
    });
    assert!(
        notice["text"].as_str().unwrap().contains("autoCreate"),
        "{notice}"
    );
    let calls = fake.invocations();
    assert!(
        calls.iter().all(|c| c["argv"][0] == "list"),
        "only the consent listing ran: {calls:?}"
    );
    drop(conn);
    drop(service);
    let service = Service::start_with_fake(
        &sandbox,
        &fake,
        &fast_env(&[("CGC_LIFECYCLE_AUTO_CREATE", "true")]),
    );
    let mut conn = open_session(&service, "s2");
    agent_edit(&mut conn, "s2", "a.py");
    conn.wait_status("fresh");
}

/// A consent listing that read another database than the graph's (CGC
/// fell back to an empty KùzuDB when FalkorDB Lite did not start) lists
/// nothing: that is not "not indexed", and the session's syncs are not
/// declined for it.
#[test]
fn a_consent_listing_of_another_backend_is_not_an_unindexed_verdict() {
    let sandbox = Sandbox::new();
    let fake = FakeCgc::new(
        &sandbox,
        json!({"list": {"steps": [{"stdout": [
            "Falling back to KùzuDB for a reliable experience...",
            "Using database: kuzudb (source: auto-detect)",
            "No repositories indexed yet."
        ]}], "exit": 0}}),
    );
    let service = Service::start_with_fake(&sandbox, &fake, &fast_env(&[]));
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "a.py");
    let failed = conn.wait_seen("sync_failed", |f| f["condition"] == "sync_failed");
    let text = failed["text"].as_str().unwrap();
    assert!(text.contains("could not tell whether"), "{text}");
    assert!(text.contains("another database backend"), "{text}");
    assert_eq!(
        conn.count_seen(|f| f["condition"] == "sync_declined_unindexed"),
        0,
        "a listing of another backend is not 'not indexed'"
    );
    let listings = service.log_events("consent_listing");
    assert!(
        listings.iter().all(|l| l["conclusive"] == false),
        "{listings:?}"
    );
    assert_eq!(conn.count_seen(|f| f["status"] == "fresh"), 0);
}

/// A consent listing that fails says so: it is not a verdict that the
/// workspace is unindexed, nothing is created, and nothing is remembered
/// (the next attempt asks again).
#[test]
fn a_failing_consent_listing_is_a_failure_not_an_unindexed_verdict() {
    let sandbox = Sandbox::new();
    let fake = FakeCgc::new(
        &sandbox,
        json!({"list": {"steps": [{"stderr": ["Database Connection Error: boom"]}], "exit": 1}}),
    );
    let service = Service::start_with_fake(&sandbox, &fake, &fast_env(&[]));
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "a.py");
    let failed = conn.wait_seen("sync_failed", |f| f["condition"] == "sync_failed");
    let text = failed["text"].as_str().unwrap();
    assert!(text.contains("could not tell whether"), "{text}");
    assert!(text.contains("exited with code 1"), "{text}");
    assert!(text.contains("boom"), "{text}");
    // The one automatic retry asks again; then automatic syncs stop.
    let mut id = 100;
    let mut state = Value::Null;
    wait_until("the retry to end", Duration::from_secs(10), || {
        id += 1;
        state = conn.request(json!({"type": "status"}), id);
        service.log_events("consent_listing").len() == 2 && state["syncing"] == false
    });
    assert_eq!(state["status"], "possibly_stale", "{state}");
    assert!(
        state["last_error"]
            .as_str()
            .unwrap_or_default()
            .contains("could not tell whether"),
        "{state}"
    );
    // A person's sync asks once more: nothing was remembered.
    let ack = conn.request(json!({"type": "sync"}), 5);
    assert_eq!(ack["type"], "ack");
    wait_until("the manual sync's listing", Duration::from_secs(10), || {
        fake.invocations().len() == 3
    });
    std::thread::sleep(Duration::from_millis(300));
    let calls = fake.invocations();
    assert!(
        calls.iter().all(|c| c["argv"][0] == "list"),
        "nothing but listings ran: {calls:?}"
    );
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(
        conn.count_seen(|f| f["condition"] == "sync_declined_unindexed"),
        0,
        "not knowing is not 'not indexed'"
    );
    assert_eq!(conn.count_seen(|f| f["status"] == "fresh"), 0);
}

#[test]
fn a_spawned_cgc_that_hits_the_lock_is_busy_not_a_failure() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    // The lock was free at the probe, then taken before CGC opened it: CGC's
    // own lock error (wrapped at 80 columns, as without COLUMNS) must count
    // as busy, and busy consumes no budget slot.
    let fake = FakeCgc::new(
        &sandbox,
        json!({"watch": [
            {"steps": [{"stdout": ["Database Connection Error: IO exception: Could not set lock on", "file : /x/.codegraphcontext/db/kuzudb", "Another CGC process already has this embedded database open."]}], "exit": 1},
            "builtin"
        ]}),
    );
    let service = Service::start_with_fake(
        &sandbox,
        &fake,
        &fast_env(&[("CGC_FRESHNESS_MAX_SYNCS_PER_SESSION", "1")]),
    );
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "a.py");
    conn.wait_status("skipped_busy");
    assert_eq!(
        conn.count_seen(|f| f["condition"] == "sync_failed"),
        0,
        "busy is not a failure"
    );
    // The slot was refunded: the next drift may still sync once.
    agent_edit(&mut conn, "s1", "b.py");
    conn.wait_status("fresh");
    assert_eq!(fake.invocations().len(), 2);
}

#[test]
fn an_edit_of_a_file_cgc_ignores_opens_no_stale_episode_lazily() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    std::fs::write(
        sandbox.workspace().join(".gitignore"),
        "*.log\nbuild-out/\n",
    )
    .unwrap();
    let fake = FakeCgc::new(&sandbox, json!({}));
    let service = Service::start_with_fake(&sandbox, &fake, &fast_env(&[]));
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "debug.log");
    agent_edit(&mut conn, "s1", "build-out/gen.py");
    agent_edit(&mut conn, "s1", "__pycache__/a.py");
    let state = conn.request(json!({"type": "status"}), 7);
    assert_eq!(state["status"], "unknown", "{state}");
    assert_eq!(state["edit_epoch"], 0, "{state}");
    assert_eq!(conn.count_seen(|f| f["condition"] == "possibly_stale"), 0);
    // The first edit the graph holds opens the episode and its sync.
    agent_edit(&mut conn, "s1", "src/a.py");
    let (stale, _) = conn.wait_status("possibly_stale");
    assert_eq!(stale["edit_epoch"], 1, "{stale}");
    conn.wait_status("fresh");
}
