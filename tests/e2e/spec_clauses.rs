//! The specification's THEN clauses asserted one by one, against the fake
//! `cgc`: each test names its scenario (numbered as in
//! `docs/spec-coverage.md`) and checks every clause of its THEN as a fact
//! that can be false — a notice shown "once" is counted after the service
//! had the chance to send a second one, a watcher that "spawns" (or not) is
//! counted in the fake's invocations and the service's spawns, a value that
//! "stands" is read back from the configuration the service runs with.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::support::{
    agent_edit, fast_env, indexed_with_fake, open_session, wait_until, Conn, FakeCgc, ForeignLock,
    Sandbox, Service,
};

/// A short liveness budget: a watcher with an early ready line is
/// verified 1 s after its spawn.
const LIVENESS: (&str, &str) = ("CGC_FRESHNESS_WATCHER_LIVENESS_MS", "1000");

/// How many `notice` frames for `condition` the connection received.
fn notices(conn: &Conn, condition: &str) -> usize {
    conn.count_seen(|f| f["type"] == "notice" && f["condition"] == condition)
}

/// How many `notice` frames for `condition` and `session` the connection
/// received.
fn session_notices(conn: &Conn, session: &str, condition: &str) -> usize {
    conn.count_seen(|f| {
        f["type"] == "notice" && f["condition"] == condition && f["session"] == session
    })
}

/// The `notice` frames the connection received (for failure messages).
fn notice_frames(conn: &Conn) -> Vec<&Value> {
    conn.history
        .iter()
        .filter(|f| f["type"] == "notice")
        .collect()
}

/// A `status` round trip: every frame the service pushed before it answered
/// has been read into the connection's history.
fn round_trip(conn: &mut Conn, id: u64) -> Value {
    let state = conn.request(json!({"type": "status"}), id);
    assert_eq!(state["type"], "state", "{state}");
    state
}

/// Reads pushed frames until a `state` at `edit_epoch` satisfies `pred`.
fn wait_state_at(
    conn: &mut Conn,
    epoch: u64,
    what: &str,
    mut pred: impl FnMut(&Value) -> bool,
) -> Value {
    conn.recv_until(&format!("{what} at edit epoch {epoch}"), |f| {
        f["type"] == "state" && f["edit_epoch"] == epoch && pred(f)
    })
    .0
}

/// The kind (`Sync`, `Watcher`, `Probe`, `Worker`) of every child the
/// service spawned, in order.
fn spawn_kinds(service: &Service) -> Vec<String> {
    service
        .log_events("spawn")
        .iter()
        .filter_map(|e| e["kind"].as_str().map(str::to_string))
        .collect()
}

/// The fake's invocations of `command` (e.g. `doctor`).
fn invocations_of(fake: &FakeCgc, command: &str) -> usize {
    fake.invocations()
        .iter()
        .filter(|r| r["command"] == command)
        .count()
}

/// The service's watcher-gate decisions (one per attempt).
fn gate_decisions(service: &Service) -> Vec<Value> {
    service
        .log_events("decision")
        .into_iter()
        .filter(|e| e["decision"] == "watcher_gate")
        .collect()
}

fn write_file(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, text).expect("write");
}

/// The workspace configuration file (`<workspace>/.pi/cgc.json`).
fn workspace_config(sandbox: &Sandbox) -> PathBuf {
    sandbox.workspace().join(".pi/cgc.json")
}

/// The user configuration file (`~/.pi/agent/cgc.json`).
fn user_config(sandbox: &Sandbox) -> PathBuf {
    sandbox.home().join(".pi/agent/cgc.json")
}

/// `cgc-fresh config --json` for the sandbox's workspace with `env`.
fn config_json(sandbox: &Sandbox, env: &[(&str, &str)]) -> Value {
    let mut cmd = sandbox.command();
    cmd.args(["config", "--json"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("cgc-fresh config");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("config json")
}

fn warnings_of(doc: &Value) -> Vec<String> {
    doc["warnings"]
        .as_array()
        .unwrap_or_else(|| panic!("no warnings array: {doc}"))
        .iter()
        .map(|w| w.as_str().expect("a string warning").to_string())
        .collect()
}

/// The wall clock in unix milliseconds, the clock the service stamps its
/// record with.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis() as u64
}

/// Whether a state frame says the sync an edit asked for is still queued.
fn sync_queued(frame: &Value) -> bool {
    frame["detail"]
        .as_str()
        .is_some_and(|d| d.contains("a sync is queued"))
}

/// An agent edit of `file` as the `edit_epoch`-th observed edit, bracketed
/// by the wall clock: the time before it was sent, the state once the sync
/// it asked for was dropped for want of a slot, and the time that state
/// was read. The frames on the way (queued, then dropped) may coalesce in
/// the outbox into one that equals the frame before them, so the state is
/// read by `status` round trips: settled once the scheduler woke after the
/// edit (its batching window ended; the machine decided in that step) and
/// the state says no sync is queued or running.
fn timed_edit(conn: &mut Conn, service: &Service, file: &str, epoch: u64) -> (u64, Value, u64) {
    let wakes = |service: &Service| service.log_events("wake").len();
    let woken_before = wakes(service);
    let before = now_ms();
    agent_edit(conn, "s1", file);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let settled = loop {
        let woken = wakes(service) > woken_before;
        let state = round_trip(conn, 100 + epoch);
        let settled = woken
            && state["edit_epoch"] == epoch
            && state["syncing"] == false
            && !sync_queued(&state);
        if settled {
            break state;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the dropped sync never settled: {state}\n{}",
            service.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    (before, settled, now_ms())
}

/// `cgc-fresh status --json` for the sandbox's workspace.
fn status_cli(sandbox: &Sandbox) -> Value {
    let out = sandbox
        .command()
        .args(["status", "--json"])
        .output()
        .expect("cgc-fresh status");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("status json")
}

/// Scenario 2, "Dirty after observed edits": GIVEN the state was fresh and
/// the session then performs file edits, THEN the state reports
/// possibly-stale with the time of the FIRST observed edit — a second edit
/// a second later does not move it. No sync can complete in between (the
/// session's one sync slot was spent reaching `fresh`), and every surface
/// that reads the state says the same: the pushed frames, a `status`
/// request, `cgc-fresh status --json` and the state file.
#[test]
fn dirty_after_observed_edits_reports_the_first_edits_time_and_a_later_edit_does_not_move_it() {
    let (sandbox, fake, service) = indexed_with_fake(
        json!({}),
        &fast_env(&[("CGC_FRESHNESS_MAX_SYNCS_PER_SESSION", "1")]),
    );
    let mut conn = open_session(&service, "s1");
    // GIVEN fresh: an edit synced to `fresh`, which closes its episode.
    agent_edit(&mut conn, "s1", "a.py");
    let (fresh, _) = conn.wait_status("fresh");
    assert!(fresh["stale_since"].is_null(), "{fresh}");
    assert_eq!(fake.invocations().len(), 1, "the one slot was used");

    let (first_before, first, first_after) = timed_edit(&mut conn, &service, "b.py", 2);
    assert_eq!(first["status"], "possibly_stale", "{first}");
    let since = first["stale_since"]
        .as_u64()
        .unwrap_or_else(|| panic!("no stale_since: {first}"));
    assert!(
        (first_before..=first_after).contains(&since),
        "stale_since {since} is the first edit's time, observed within \
         [{first_before}, {first_after}]: {first}"
    );
    assert!(
        since > fresh["last_synced_at"].as_u64().expect("synced at"),
        "a new episode, not the synced edit's: {fresh} then {first}"
    );

    // A second edit, clearly later: stale_since stays at the first.
    std::thread::sleep(Duration::from_millis(1000));
    let (second_before, second, _) = timed_edit(&mut conn, &service, "c.py", 3);
    assert!(second_before > first_after + 900, "the edits are apart");
    assert_eq!(second["status"], "possibly_stale", "{second}");
    assert_eq!(
        second["stale_since"], since,
        "the second edit (sent at {second_before}) does not move stale_since: {second}"
    );

    // Every surface reads the same record.
    let state = round_trip(&mut conn, 10);
    assert_eq!(state["status"], "possibly_stale", "{state}");
    assert_eq!(state["edit_epoch"], 3, "{state}");
    assert_eq!(state["stale_since"], since, "{state}");
    let cli = status_cli(&sandbox);
    assert_eq!(cli["status"], "possibly_stale", "{cli}");
    assert_eq!(cli["stale_since"], since, "{cli}");
    // The file is written before a frame is pushed, and rewritten only
    // when more than the edit counter changed.
    let on_disk: Value =
        serde_json::from_str(&fs::read_to_string(sandbox.state_file()).expect("state file"))
            .expect("state json");
    assert_eq!(on_disk["status"], "possibly_stale", "{on_disk}");
    assert_eq!(on_disk["stale_since"], since, "{on_disk}");
    assert_eq!(
        fake.invocations().len(),
        1,
        "no sync ran between the edits: {:?}",
        fake.invocations()
    );
}

/// Scenario 13, "Stale notice shown once": THEN the user sees ONE
/// staleness notice WITH THE SYNC OPTIONS, and re-observed edits produce
/// no further notices. The options are the automatic background sync (when
/// `freshness.autoSync` is on; said to be off when it is off) and the sync
/// by hand, from a shell or in the agent. Re-observed: more edits in the
/// same episode, and (auto sync on) edits that open new episodes after a
/// completed sync.
#[test]
fn the_stale_notice_offers_the_sync_options_once_however_many_more_edits_are_observed() {
    for auto_sync in [true, false] {
        let case = format!("autoSync {auto_sync}");
        let (_sandbox, fake, service) = indexed_with_fake(
            json!({}),
            &fast_env(&[
                (
                    "CGC_FRESHNESS_AUTO_SYNC",
                    if auto_sync { "true" } else { "false" },
                ),
                // A slot for every episode.
                ("CGC_FRESHNESS_MAX_SYNCS_PER_SESSION", "5"),
            ]),
        );
        let mut conn = open_session(&service, "s1");
        agent_edit(&mut conn, "s1", "a.py");
        let notice = conn.wait_seen("the staleness notice", |f| {
            f["type"] == "notice" && f["condition"] == "possibly_stale"
        });
        assert_eq!(notice["audience"], "user", "{case}: {notice}");
        assert_eq!(notice["session"], "s1", "{case}: {notice}");
        let text = notice["text"].as_str().unwrap_or_default();
        // The sync by hand, both ways.
        assert!(
            text.contains("run `cgc-fresh sync`"),
            "{case}: offers the shell command: {notice}"
        );
        assert!(
            text.contains("`/cgc-fresh sync` in the agent"),
            "{case}: offers the agent command: {notice}"
        );
        // The automatic sync: coming, or off.
        if auto_sync {
            assert!(
                text.contains("A background sync follows shortly"),
                "{case}: says a sync follows: {notice}"
            );
        } else {
            assert!(
                text.contains("Automatic sync is off") && !text.contains("background sync"),
                "{case}: says no sync follows: {notice}"
            );
        }
        // Re-observed edits: the same episode, then (auto sync on) new
        // episodes after completed syncs.
        for file in ["b.py", "c.py"] {
            agent_edit(&mut conn, "s1", file);
        }
        if auto_sync {
            let fresh = |f: &Value| f["status"] == "fresh";
            wait_state_at(&mut conn, 3, "fresh", fresh);
            for (n, file) in ["d.py", "e.py"].iter().enumerate() {
                let epoch = n as u64 + 4;
                agent_edit(&mut conn, "s1", file);
                wait_state_at(&mut conn, epoch, "fresh", fresh);
            }
        }
        let state = round_trip(&mut conn, 10);
        let edits = if auto_sync { 5 } else { 3 };
        assert_eq!(state["edit_epoch"], edits, "{case}: {state}");
        if auto_sync {
            // Three stale episodes, each closed by a completed sync.
            assert!(fake.invocations().len() >= 3, "{case}");
            assert!(
                conn.count_seen(|f| f["type"] == "state" && f["status"] == "possibly_stale") >= 3,
                "{case}: {:?}",
                conn.history
            );
        } else {
            assert_eq!(state["status"], "possibly_stale", "{case}: {state}");
            assert!(fake.invocations().is_empty(), "{case}: no sync");
        }
        assert_eq!(
            notices(&conn, "possibly_stale"),
            1,
            "{case}: one staleness notice for {edits} edits: {:?}",
            notice_frames(&conn)
        );
    }
}

/// Scenario 7, "Sync skipped when busy": THEN no indexing starts, a
/// ONE-TIME busy notice names the conflict, and the state reflects
/// skipped-as-busy — however many more syncs are skipped while the
/// database stays held.
#[test]
fn sync_skipped_when_busy_notices_once_however_many_more_syncs_are_skipped() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let db = sandbox.home().join(".codegraphcontext/global/db/kuzudb");
    let holder = ForeignLock::hold(&db);
    let fake = FakeCgc::new(&sandbox, json!({}));
    let service = Service::start_with_fake(&sandbox, &fake, &fast_env(&[]));
    let mut conn = open_session(&service, "s1");
    let edits = ["a.py", "b.py", "c.py", "d.py"];
    for (n, file) in edits.iter().enumerate() {
        agent_edit(&mut conn, "s1", file);
        // The sync this edit asked for ran into the lock and settled.
        wait_state_at(&mut conn, n as u64 + 1, "skipped_busy", |f| {
            f["status"] == "skipped_busy"
        });
    }
    let state = round_trip(&mut conn, 10);
    assert_eq!(state["status"], "skipped_busy", "{state}");
    let holder_text = format!("pid {}", holder.pid());
    assert!(
        state["last_error"]
            .as_str()
            .is_some_and(|e| e.contains(&holder_text)),
        "{state}"
    );
    let skipped = service
        .log_events("sync_report")
        .iter()
        .filter(|e| e["report"].as_str().is_some_and(|r| r.starts_with("Busy")))
        .count();
    assert_eq!(
        skipped,
        edits.len(),
        "every edit's sync was skipped as busy"
    );
    assert!(
        fake.invocations().is_empty(),
        "no indexing started: {:?}",
        fake.invocations()
    );
    assert_eq!(
        notices(&conn, "sync_skipped_busy"),
        1,
        "one busy notice for {} skipped syncs: {:?}",
        edits.len(),
        notice_frames(&conn)
    );
    let notice = conn.wait_seen("the busy notice", |f| {
        f["type"] == "notice" && f["condition"] == "sync_skipped_busy"
    });
    assert!(
        notice["text"]
            .as_str()
            .is_some_and(|t| t.contains(&holder_text)),
        "names the holder: {notice}"
    );
    assert_eq!(conn.count_seen(|f| f["status"] == "fresh"), 0);
    holder.release();
}

/// Scenario 8, "Budget exhausted": THEN no spawn happens and the existing
/// skip notice flows — once, however many more edits find no slot.
#[test]
fn budget_exhausted_notices_once_however_many_more_edits_find_no_slot() {
    let (_sandbox, fake, service) = indexed_with_fake(
        json!({}),
        &fast_env(&[("CGC_FRESHNESS_MAX_SYNCS_PER_SESSION", "1")]),
    );
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "a.py");
    conn.wait_status("fresh");
    assert_eq!(fake.invocations().len(), 1, "the one slot was used");
    for (n, file) in ["b.py", "c.py", "d.py", "e.py"].iter().enumerate() {
        let epoch = n as u64 + 2;
        agent_edit(&mut conn, "s1", file);
        // The edit queued a sync; the scheduler then found no slot and
        // dropped it (the state stops saying a sync is queued).
        let queued = |f: &Value| {
            f["detail"]
                .as_str()
                .is_some_and(|d| d.contains("a sync is queued"))
        };
        wait_state_at(&mut conn, epoch, "a queued sync", queued);
        let settled = wait_state_at(&mut conn, epoch, "the budget decision", |f| !queued(f));
        assert_eq!(settled["status"], "possibly_stale", "{settled}");
        assert_eq!(settled["syncing"], false, "{settled}");
    }
    let state = round_trip(&mut conn, 10);
    assert_eq!(state["status"], "possibly_stale", "{state}");
    assert_eq!(
        fake.invocations().len(),
        1,
        "no spawn past the budget: {:?}",
        fake.invocations()
    );
    assert_eq!(
        notices(&conn, "budget_exhausted"),
        1,
        "one budget notice for four edits past the budget: {:?}",
        notice_frames(&conn)
    );
}

/// Scenario 10, "Watcher start blocked by lock": THEN it does not start, a
/// ONE-TIME busy notice names the conflict, freshness degrades to the lazy
/// mode behavior, and no "fresh" claim was recorded for the failed watcher.
/// The service gets its chances at a second notice: syncs skipped as busy
/// while the lock is held, and the harness reconnecting and replaying its
/// `session_start` (the same session lifetime, taken up again).
#[test]
fn watcher_start_blocked_by_lock_notices_once_and_lazy_mode_takes_over() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    let db = sandbox.workspace().join(".codegraphcontext/db/kuzudb");
    let holder = ForeignLock::hold(&db);
    let fake = FakeCgc::new(&sandbox, json!({}));
    let service = Service::start_with_fake(
        &sandbox,
        &fake,
        &fast_env(&[("CGC_FRESHNESS_WATCH", "on"), LIVENESS]),
    );
    let mut conn = open_session(&service, "s1");
    let notice = conn.wait_seen("the watcher busy notice", |f| {
        f["type"] == "notice" && f["condition"] == "watcher_skipped_busy"
    });
    let holder_text = format!("pid {}", holder.pid());
    assert!(
        notice["text"]
            .as_str()
            .is_some_and(|t| t.contains(&holder_text)),
        "names the holder: {notice}"
    );
    // Lazy mode while the lock is still held: each edit's sync is skipped
    // as busy.
    for (n, file) in ["a.py", "b.py"].iter().enumerate() {
        agent_edit(&mut conn, "s1", file);
        wait_state_at(&mut conn, n as u64 + 1, "skipped_busy", |f| {
            f["status"] == "skipped_busy"
        });
    }
    round_trip(&mut conn, 10);
    assert_eq!(
        gate_decisions(&service).len(),
        1,
        "one watcher attempt; a skipped sync is none"
    );
    // The harness loses its connection and replays its session_start. The
    // lifetime taken up again gets its watcher attempt back (`session.rs`:
    // a detach stops a watcher through no failure of its own), so a second
    // attempt runs into the lock: its notice must not be shown again.
    let first = conn.history.clone();
    drop(conn);
    wait_until("the session to detach", Duration::from_secs(10), || {
        !service.log_events("session_detached").is_empty()
    });
    let mut conn = open_session(&service, "s1");
    wait_until(
        "the session to be taken up again",
        Duration::from_secs(10),
        || !service.log_events("session_reattached").is_empty(),
    );
    agent_edit(&mut conn, "s1", "c.py");
    wait_state_at(&mut conn, 3, "skipped_busy", |f| {
        f["status"] == "skipped_busy"
    });
    round_trip(&mut conn, 11);
    // Both connections' frames: the session's, before and after.
    let count = |conn: &Conn, condition: &str| {
        first
            .iter()
            .filter(|f| f["type"] == "notice" && f["condition"] == condition)
            .count()
            + notices(conn, condition)
    };
    assert_eq!(
        count(&conn, "watcher_skipped_busy"),
        1,
        "{:?} then {:?}",
        first
            .iter()
            .filter(|f| f["type"] == "notice")
            .collect::<Vec<_>>(),
        notice_frames(&conn)
    );
    assert!(fake.invocations().is_empty(), "{:?}", fake.invocations());
    assert_eq!(count(&conn, "watcher_started"), 0);
    let claims = |conn: &Conn| {
        first.iter().filter(|f| f["status"] == "fresh").count()
            + conn.count_seen(|f| f["status"] == "fresh")
    };
    assert_eq!(claims(&conn), 0, "no claim for the failed watcher");
    // Lazy mode syncs once the database is free; no watcher is started.
    holder.release();
    agent_edit(&mut conn, "s1", "d.py");
    let (fresh, _) = conn.wait_status("fresh");
    assert_ne!(fresh["watcher"]["state"], "verified", "{fresh}");
    round_trip(&mut conn, 12);
    assert_eq!(spawn_kinds(&service), ["Sync"], "the lazy sync only");
    assert_eq!(fake.watch_invocations().len(), 1);
    assert_eq!(count(&conn, "watcher_skipped_busy"), 1);
}

/// Scenario 14, "Sync completion is visible": THEN the user sees ONE
/// completion notice for that condition this session — after three
/// completed syncs, and again one in the next session.
#[test]
fn sync_completion_is_noticed_once_per_session_however_many_syncs_complete() {
    let (_sandbox, fake, service) = indexed_with_fake(
        json!({}),
        &fast_env(&[("CGC_FRESHNESS_MAX_SYNCS_PER_SESSION", "3")]),
    );
    let mut conn = open_session(&service, "s1");
    for (n, file) in ["a.py", "b.py", "c.py"].iter().enumerate() {
        agent_edit(&mut conn, "s1", file);
        let (fresh, _) = conn.wait_status("fresh");
        assert_eq!(fresh["edit_epoch"], n as u64 + 1, "{fresh}");
    }
    round_trip(&mut conn, 10);
    assert_eq!(fake.invocations().len(), 3, "three syncs completed");
    let completed = conn.wait_seen("the completion notice", |f| {
        f["type"] == "notice" && f["condition"] == "sync_completed"
    });
    assert_eq!(completed["audience"], "user", "{completed}");
    assert_eq!(
        notices(&conn, "sync_completed"),
        1,
        "one completion notice for three syncs: {:?}",
        notice_frames(&conn)
    );
    // Per session, not per service: the next session is told once too.
    conn.request(json!({"type": "session_shutdown", "session": "s1"}), 11);
    drop(conn);
    let mut next = open_session(&service, "s2");
    for file in ["d.py", "e.py"] {
        agent_edit(&mut next, "s2", file);
        next.wait_status("fresh");
    }
    round_trip(&mut next, 12);
    assert_eq!(fake.invocations().len(), 5);
    assert_eq!(
        session_notices(&next, "s2", "sync_completed"),
        1,
        "{:?}",
        notice_frames(&next)
    );
    assert_eq!(
        notices(&next, "sync_completed"),
        1,
        "{:?}",
        notice_frames(&next)
    );
}

/// Scenario 22, "Existing boolean config keeps its meaning", in the
/// configuration FILE layer: THEN the effective value is `on` (or `off`),
/// the watcher behavior is unchanged, and no `auto` gating is applied —
/// `true` spawns a watcher on an embedded backend that `auto` would
/// decline, with no backend detection; `false` spawns none.
#[test]
fn a_boolean_watch_in_the_workspace_file_means_on_or_off_without_auto_gating() {
    for (boolean, mode) in [(true, "on"), (false, "off")] {
        let sandbox = Sandbox::new();
        sandbox.mark_indexed();
        write_file(
            &workspace_config(&sandbox),
            &format!(r#"{{"freshness": {{"watch": {boolean}}}}}"#),
        );
        // An embedded backend: `auto` would decline it.
        let env = fast_env(&[("DEFAULT_DATABASE", "kuzudb"), LIVENESS]);
        let doc = config_json(&sandbox, &env);
        let watch = &doc["values"]["freshness.watch"];
        assert_eq!(watch["value"], mode, "{boolean}: {doc}");
        assert!(
            watch["layer"]
                .as_str()
                .is_some_and(|l| l.starts_with("workspace")),
            "{boolean}: {doc}"
        );
        assert!(warnings_of(&doc).is_empty(), "{boolean}: {doc}");

        let fake = FakeCgc::new(&sandbox, json!({}));
        let service = Service::start_with_fake(&sandbox, &fake, &env);
        let mut conn = open_session(&service, "s1");
        let served = conn.request(json!({"type": "config"}), 5);
        assert_eq!(
            served["values"]["freshness.watch"]["value"], mode,
            "{served}"
        );
        if boolean {
            let (fresh, _) = conn.wait_status("fresh");
            assert_eq!(fresh["watcher"]["mode"], "on", "{fresh}");
            assert_eq!(fresh["watcher"]["state"], "verified", "{fresh}");
            assert_eq!(fake.watch_invocations().len(), 1, "a watcher, no edit");
            assert_eq!(spawn_kinds(&service), ["Watcher"]);
            assert_eq!(invocations_of(&fake, "doctor"), 0, "no detection");
            assert_eq!(notices(&conn, "watcher_declined_backend"), 0);
            assert_eq!(notices(&conn, "watcher_started"), 1);
        } else {
            // A watcher is attempted at session start; the lazy sync of an
            // edit comes after that and is the only spawn.
            agent_edit(&mut conn, "s1", "a.py");
            conn.wait_status("fresh");
            round_trip(&mut conn, 6);
            assert_eq!(spawn_kinds(&service), ["Sync"], "no watcher");
            assert_eq!(fake.invocations().len(), 1, "{:?}", fake.invocations());
            assert!(gate_decisions(&service).is_empty(), "no gate in off mode");
            let watched: Vec<&Value> = conn
                .history
                .iter()
                .filter(|f| f["type"] == "state" && !f["watcher"].is_null())
                .collect();
            assert!(watched.is_empty(), "no watcher in any state: {watched:?}");
            assert_eq!(notices(&conn, "watcher_started"), 0);
        }
    }
}

/// Scenario 23, "Explicit auto enables the gated mode", through the
/// environment layer: THEN the effective value is `auto` and the spawn
/// decision follows the backend-aware gating — an embedded backend is
/// declined, a server backend is watched — while the boolean `true` is
/// `on`, never `auto` (it watches the embedded backend).
#[test]
fn only_the_text_auto_in_the_environment_enables_the_gated_mode() {
    for (value, backend, mode, watched) in [
        ("true", "kuzudb", "on", true),
        ("auto", "kuzudb", "auto", false),
        ("auto", "falkordb-remote", "auto", true),
    ] {
        let case = format!("CGC_FRESHNESS_WATCH={value}, DEFAULT_DATABASE={backend}");
        let env = fast_env(&[
            ("CGC_FRESHNESS_WATCH", value),
            ("DEFAULT_DATABASE", backend),
            LIVENESS,
        ]);
        let (sandbox, fake, service) = indexed_with_fake(json!({}), &env);
        let doc = config_json(&sandbox, &env);
        assert_eq!(
            doc["values"]["freshness.watch"]["value"], mode,
            "{case}: {doc}"
        );
        assert!(
            doc["values"]["freshness.watch"]["layer"]
                .as_str()
                .is_some_and(|l| l.contains("CGC_FRESHNESS_WATCH")),
            "{case}: {doc}"
        );
        let mut conn = open_session(&service, "s1");
        if watched {
            let (fresh, _) = conn.wait_status("fresh");
            assert_eq!(fresh["watcher"]["mode"], mode, "{case}: {fresh}");
            assert_eq!(fresh["watcher"]["state"], "verified", "{case}: {fresh}");
            assert_eq!(spawn_kinds(&service), ["Watcher"], "{case}");
            assert_eq!(notices(&conn, "watcher_declined_backend"), 0, "{case}");
        } else {
            let notice = conn.wait_seen("the decline", |f| {
                f["type"] == "notice" && f["condition"] == "watcher_declined_backend"
            });
            assert!(
                notice["text"].as_str().is_some_and(|t| t.contains(backend)),
                "{case}: {notice}"
            );
            // The session goes on lazily: the edit's sync is the only spawn.
            agent_edit(&mut conn, "s1", "a.py");
            conn.wait_status("fresh");
            round_trip(&mut conn, 6);
            assert_eq!(spawn_kinds(&service), ["Sync"], "{case}");
            assert_eq!(notices(&conn, "watcher_declined_backend"), 1, "{case}");
        }
        let gates = gate_decisions(&service);
        assert!(
            !gates.is_empty() && gates.iter().all(|g| g["mode"] == mode),
            "{case}: {gates:?}"
        );
        assert_eq!(fake.watch_invocations().len(), 1, "{case}");
    }
}

/// Scenario 24, "Invalid value is skipped with a warning": THEN the value
/// is ignored, a non-fatal warning is recorded, and the PREVIOUS value
/// stands — `on` from the user file, past an invalid value in the
/// workspace file and another in the environment: the service runs with
/// `on` and its watcher spawns.
#[test]
fn an_invalid_watch_value_in_later_layers_leaves_the_earlier_on_standing() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    write_file(&user_config(&sandbox), r#"{"freshness": {"watch": "on"}}"#);
    write_file(
        &workspace_config(&sandbox),
        r#"{"freshness": {"watch": "sometimes"}}"#,
    );
    let env = fast_env(&[("CGC_FRESHNESS_WATCH", "maybe"), LIVENESS]);
    let doc = config_json(&sandbox, &env);
    let watch = &doc["values"]["freshness.watch"];
    assert_eq!(watch["value"], "on", "the user file's value stands: {doc}");
    assert!(
        watch["layer"]
            .as_str()
            .is_some_and(|l| l.starts_with("user")),
        "{doc}"
    );
    let warnings = warnings_of(&doc);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings.iter().any(|w| w.contains("freshness.watch")
            && w.contains("sometimes")
            && w.contains("workspace")
            && w.contains("cgc.json")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w.contains("freshness.watch")
            && w.contains("maybe")
            && w.contains("CGC_FRESHNESS_WATCH")),
        "{warnings:?}"
    );

    let fake = FakeCgc::new(&sandbox, json!({}));
    let service = Service::start_with_fake(&sandbox, &fake, &env);
    let mut conn = open_session(&service, "s1");
    let served = conn.request(json!({"type": "config"}), 5);
    assert_eq!(
        served["values"]["freshness.watch"]["value"], "on",
        "{served}"
    );
    assert_eq!(warnings_of(&served), warnings, "{served}");
    let (fresh, _) = conn.wait_status("fresh");
    assert_eq!(fresh["watcher"]["mode"], "on", "{fresh}");
    assert_eq!(fresh["watcher"]["state"], "verified", "{fresh}");
    assert_eq!(fake.watch_invocations().len(), 1, "a watcher, no edit");
    assert_eq!(spawn_kinds(&service), ["Watcher"]);
}

/// Scenario 27, "Unknown backend fails open to the conservative answer":
/// `cgc doctor` fails and no fallback source resolves — THEN the backend is
/// treated as embedded, no watcher spawns, and the session proceeds
/// normally: an edit is synced lazily to `fresh`.
#[test]
fn an_unknown_backend_in_auto_mode_spawns_no_watcher_and_the_session_syncs_lazily() {
    let (_sandbox, fake, service) = indexed_with_fake(
        json!({"doctor": {"steps": [{"stderr": "Traceback: boom"}], "exit": 1}}),
        &fast_env(&[("CGC_FRESHNESS_WATCH", "auto"), LIVENESS]),
    );
    let mut conn = open_session(&service, "s1");
    let notice = conn.wait_seen("the decline", |f| {
        f["type"] == "notice" && f["condition"] == "watcher_declined_backend"
    });
    assert_eq!(notice["audience"], "user", "{notice}");
    assert_eq!(invocations_of(&fake, "doctor"), 1, "detection ran");
    // The session proceeds normally, in lazy mode.
    agent_edit(&mut conn, "s1", "a.py");
    let (stale, _) = conn.wait_status("possibly_stale");
    assert!(stale["stale_since"].is_u64(), "{stale}");
    let (fresh, _) = conn.wait_status("fresh");
    assert!(fresh["last_synced_at"].is_u64(), "{fresh}");
    assert_ne!(fresh["watcher"]["state"], "verified", "{fresh}");
    round_trip(&mut conn, 5);
    assert_eq!(
        spawn_kinds(&service),
        ["Probe", "Sync"],
        "doctor, then the lazy sync; no watcher"
    );
    assert_eq!(fake.watch_invocations().len(), 1, "the lazy sync only");
    assert_eq!(notices(&conn, "sync_completed"), 1);
    assert_eq!(notices(&conn, "watcher_started"), 0);
    assert_eq!(notices(&conn, "watcher_declined_backend"), 1);
    let gates = gate_decisions(&service);
    assert!(
        gates
            .last()
            .and_then(|g| g["gate"].as_str())
            .is_some_and(|g| g.starts_with("DeclineBackend")),
        "{gates:?}"
    );
}
