//! A long sync's progress (`state.progress`), end to end: the phases of a
//! slow, chatty reconcile by the fake `cgc`, and the file counts of a slow
//! driver apply by a stand-in worker, as subscribers, `cgc-fresh status`,
//! `status --line` and `events` show them. When they are shown (not in a
//! sync's first 2 s, at most every 500 ms within a phase) is the core's
//! rule, proven in `cgc_fresh_core::sync_progress`.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{agent_edit, fast_env, indexed_with_fake, open_session, Sandbox, Service};

/// A reconcile that says it is synchronizing, then works for a while
/// before its ready line.
fn slow_reconcile() -> Value {
    json!({"watch": {"steps": [
        {"stdout": ["✓ Already indexed. Synchronizing current files..."]},
        {"sleep_ms": 8000},
        {"stdout": [{"cgc": "ready"}]},
        {"hang": true}
    ]}})
}

/// `cgc-fresh` with `args`, run against `service` until its output
/// satisfies `done` (the status line answers within a small budget and
/// prints nothing when it misses it, so it is asked again).
fn cli_until(
    sandbox: &Sandbox,
    service: &Service,
    args: &[&str],
    done: impl Fn(&str) -> bool,
) -> String {
    let socket = service.socket.display().to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = sandbox
            .command()
            .args(["--socket", &socket])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("cgc-fresh runs");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if done(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "`cgc-fresh {}` never said what was awaited; last: {text:?}",
            args.join(" ")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_slow_reconcile_shows_its_phase_in_state_frames_status_and_the_status_line() {
    let (sandbox, _fake, service) = indexed_with_fake(slow_reconcile(), &fast_env(&[]));
    let mut events = events_stream(&sandbox, &service);
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "src/a.py");
    let (shown, _) = conn.recv_until("a state frame with the reconcile's phase", |f| {
        f["type"] == "state" && f["progress"]["phase"] == "reconciling"
    });
    assert_eq!(shown["syncing"], true, "{shown}");
    assert!(
        shown["progress"].get("done").is_none(),
        "no counts: {shown}"
    );
    let since = shown["progress"]["since"].as_u64().expect("since");
    let stale_since = shown["stale_since"].as_u64().expect("stale_since");
    assert!(
        since >= stale_since,
        "the sync started after the edit: {shown}"
    );

    let status = cli_until(&sandbox, &service, &["status"], |out| {
        out.contains("syncing (reconciling, ")
    });
    assert!(
        status.contains(&shown["workspace"].as_str().unwrap_or("?").to_string()),
        "{status}"
    );
    let line = cli_until(&sandbox, &service, &["status", "--line"], |out| {
        !out.is_empty()
    });
    assert!(
        line.starts_with("graph: ") && line.contains("syncing (reconciling, "),
        "{line:?}"
    );
    // The `events` stream carries the same state frames.
    let seen = events.until(|f| f["type"] == "state" && f["progress"]["phase"] == "reconciling");
    assert_eq!(seen["progress"]["since"], since, "{seen}");

    let (fresh, _) = conn.recv_until("fresh", |f| f["type"] == "state" && f["status"] == "fresh");
    assert!(
        fresh.get("progress").is_none(),
        "no progress once it ended: {fresh}"
    );
    let after = conn.request(json!({"type": "status"}), 5);
    assert!(after.get("progress").is_none(), "{after}");
    let logged = service.log_events("sync_progress");
    assert!(
        logged
            .iter()
            .any(|e| e["phase"] == "reconciling" && e["component"] == "sync_runner"),
        "{logged:?}"
    );
}

/// A stand-in driver interpreter whose worker, given an apply, reports
/// parsing 2 032 files in 41 lines over about 4 s, then — past the quiet
/// start, where a new phase would be shown at once — a line for another
/// request's serial, which is not this sync's, then writing, and answers.
fn slow_worker_python(dir: &Path) -> String {
    let stub = dir.join("python");
    fs::write(
        &stub,
        r#"#!/usr/bin/env python3
import json, sys, time
args = sys.argv[1:]

def say(prefix, obj):
    print(prefix + json.dumps(obj), flush=True)

if '--probe' in args:
    say('CGC_FRESH_RESULT ', {'protocol': 1, 'ok': True, 'mode': 'probe', 'missing': []})
    sys.exit(0)
if not args or args[-1] != 'serve':
    sys.exit(2)
for line in sys.stdin:
    request = json.loads(line)
    if request.get('prepare'):
        continue
    serial = request['serial']
    if request.get('probe'):
        say('CGC_FRESH_RESULT ', {'protocol': 1, 'ok': True, 'mode': 'probe', 'missing': [], 'serial': serial, 'exit': 0})
        continue
    for done in range(0, 2033, 50):
        say('CGC_FRESH_PROGRESS ', {'serial': serial, 'phase': 'parsing', 'done': done, 'total': 2032})
        time.sleep(0.1)
    say('CGC_FRESH_PROGRESS ', {'serial': serial + 1000, 'phase': 'checking'})
    time.sleep(0.6)
    say('CGC_FRESH_PROGRESS ', {'serial': serial, 'phase': 'writing', 'done': 1, 'total': 1})
    time.sleep(0.6)
    answer = {'ok': True, 'mode': 'apply', 'serial': serial, 'exit': 0,
              'paths': {path: 'modified' for path in request['paths']}}
    if request.get('baseline'):
        answer.update(baseline=True, paths={})
    say('CGC_FRESH_RESULT ', answer)
sys.exit(0)
"#,
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&stub, fs::Permissions::from_mode(0o755)).unwrap();
    stub.display().to_string()
}

#[test]
fn a_slow_driver_apply_shows_its_file_counts() {
    let stub = tempfile::tempdir().unwrap();
    let python = slow_worker_python(stub.path());
    let (sandbox, fake, service) = indexed_with_fake(
        json!({}),
        &fast_env(&[
            ("CGC_SYNC_STRATEGY", "incremental"),
            ("CGC_FRESH_DRIVER_PYTHON", python.as_str()),
        ]),
    );
    let mut conn = open_session(&service, "s1");
    agent_edit(&mut conn, "s1", "src/a.py");
    let (counted, _) = conn.recv_until("a state frame with file counts", |f| {
        f["type"] == "state" && f["progress"]["phase"] == "parsing"
    });
    assert_eq!(counted["progress"]["total"], 2032, "{counted}");
    assert!(
        counted["progress"]["done"].as_u64() <= Some(2032),
        "{counted}"
    );
    let line = cli_until(&sandbox, &service, &["status", "--line"], |out| {
        out.contains(" files (")
    });
    assert!(line.contains("/2 032 files ("), "{line:?}");

    let (fresh, seen) =
        conn.recv_until("fresh", |f| f["type"] == "state" && f["status"] == "fresh");
    assert!(fresh.get("progress").is_none(), "{fresh}");
    let phases: Vec<&Value> = seen
        .iter()
        .chain(conn.history.iter())
        .filter_map(|f| f.get("progress").map(|p| &p["phase"]))
        .collect();
    assert!(
        phases.iter().all(|p| *p != "checking"),
        "another request's line is not this sync's progress: {phases:?}"
    );
    // Within a phase, counts are published at most every 500 ms: the
    // parsing lines of its last ~2 s (about 20) make at most 5 or so.
    let counts = service
        .log_events("sync_progress")
        .into_iter()
        .filter(|e| e["phase"] == "parsing")
        .count();
    assert!((1..=8).contains(&counts), "{counts} parsing publications");
    assert!(fake.invocations().is_empty(), "no reconcile ran");
}

/// `cgc-fresh events`, its state frames read on a thread.
struct EventsStream {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

fn events_stream(sandbox: &Sandbox, service: &Service) -> EventsStream {
    let mut cmd: Command = sandbox.command();
    let mut child = cmd
        .args(["--socket", &service.socket.display().to_string(), "events"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("cgc-fresh events");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    EventsStream { child, lines }
}

impl EventsStream {
    fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .expect("`cgc-fresh events` printed what was awaited");
            if let Ok(frame) = serde_json::from_str::<Value>(&line) {
                if pred(&frame) {
                    return frame;
                }
            }
        }
    }
}

impl Drop for EventsStream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
