//! A bounded soak: an hour of a busy agent compressed into one test.
//!
//! One harness connection (subscribed, as the Pi bridge is) pipelines tool
//! events without ids — reads and edits, as an agent makes them — in
//! cycles; each cycle ends when a sync against the fake `cgc` has made the
//! record `fresh` again. The service's resident memory, descriptors and
//! threads are sampled before the first cycle and along the way; they must
//! stay flat (threads: bounded by the blocking pool's cap), and nothing may
//! be left running at the end. Figures seen are
//! recorded in `docs/RELIABILITY.md`.
//!
//! Counts: `CYCLES` cycles of `EVENTS_PER_CYCLE` events (1 000 000 in all);
//! `CGC_FRESH_SOAK_SCALE=N` divides the number of cycles by N for a quick
//! run (the events per cycle, and so the ratio, stay the same).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{
    is_alive, processes_with_owner_prefix, vitals, wait_until, FakeCgc, Sandbox, Service, Vitals,
};

/// Sync cycles (each ends in a sync that reports `fresh`).
const CYCLES: usize = 500;
/// Tool events per cycle: `tool_call` + `tool_result` pairs.
const EVENTS_PER_CYCLE: usize = 2_000;
/// Of each cycle's call/result pairs, this many are edits; the rest are
/// reads (not modifying tools), as in an agent's transcript.
const EDITS_PER_CYCLE: usize = 100;
/// A new harness session (a new id, as `/new` in Pi) every this many cycles.
const CYCLES_PER_SESSION: usize = 10;
/// Samples of the service's vitals, evenly spread over the cycles.
const SAMPLES: usize = 5;

const RSS_GROWTH_LIMIT_KIB: u64 = 16 * 1024;
const FD_SLACK: usize = 4;

fn cycles() -> usize {
    let scale = std::env::var("CGC_FRESH_SOAK_SCALE")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|s| *s > 0)
        .unwrap_or(1);
    (CYCLES / scale).max(1)
}

/// The harness side: a writer, and a reader thread that forwards only what
/// the test waits for (replies and `fresh` states), dropping the rest
/// unparsed.
struct Harness {
    writer: UnixStream,
    frames: Receiver<Value>,
}

impl Harness {
    fn connect(service: &Service) -> Harness {
        let writer = UnixStream::connect(&service.socket).expect("connect");
        let reader = BufReader::new(writer.try_clone().expect("clone"));
        let (tx, frames) = mpsc::channel();
        std::thread::spawn(move || {
            for line in reader.lines() {
                let Ok(line) = line else { break };
                let wanted = line.contains("\"id\":") || line.contains("\"status\":\"fresh\"");
                if !wanted {
                    continue;
                }
                let frame: Value = serde_json::from_str(&line).expect("a frame");
                if tx.send(frame).is_err() {
                    break;
                }
            }
        });
        let mut harness = Harness { writer, frames };
        harness.send(&json!({"type": "hello", "client": "soak", "instance": "soak-1", "protocol": 1, "id": 0}));
        harness.reply(0);
        harness.send(&json!({"type": "subscribe", "id": 1}));
        harness.reply(1);
        harness.send(
            &json!({"type": "session_start", "session": session_name(0), "reason": "startup"}),
        );
        harness
    }

    fn send(&mut self, frame: &Value) {
        let mut line = serde_json::to_vec(frame).expect("json");
        line.push(b'\n');
        self.writer.write_all(&line).expect("write");
    }

    fn next(&self, what: &str) -> Value {
        self.frames
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("no frame while waiting for {what}: {e}"))
    }

    /// Skips frames until the reply with `id`.
    fn reply(&self, id: u64) -> Value {
        loop {
            let frame = self.next(&format!("reply {id}"));
            if frame["id"] == id {
                return frame;
            }
        }
    }

    /// Asks for the state (which also marks every earlier frame as taken),
    /// then waits until the record is `fresh` at that edit epoch or later.
    fn wait_fresh(&mut self, id: u64) -> Value {
        self.send(&json!({"type": "status", "id": id}));
        let said = self.reply(id);
        if said["status"] == "fresh" {
            return said;
        }
        let epoch = said["edit_epoch"].as_u64().expect("edit_epoch");
        loop {
            let frame = self.next("fresh");
            if frame["type"] == "state"
                && frame["status"] == "fresh"
                && frame["edit_epoch"].as_u64() >= Some(epoch)
            {
                return frame;
            }
        }
    }
}

fn session_name(cycle: usize) -> String {
    format!("s{}", cycle / CYCLES_PER_SESSION)
}

/// One cycle's events: pairs of tool_call + tool_result without ids; the
/// first cycle of a session ends the previous one and starts it.
fn cycle_events(cycle: usize) -> Vec<u8> {
    let session = session_name(cycle);
    let pairs = EVENTS_PER_CYCLE / 2;
    let mut bytes = Vec::with_capacity(pairs * 200);
    if cycle > 0 && cycle.is_multiple_of(CYCLES_PER_SESSION) {
        let previous = session_name(cycle - 1);
        bytes.extend_from_slice(
            format!(
                "{{\"type\":\"session_shutdown\",\"session\":\"{previous}\",\"reason\":\"new\"}}\n\
                 {{\"type\":\"session_start\",\"session\":\"{session}\",\"reason\":\"new\"}}\n"
            )
            .as_bytes(),
        );
    }
    for n in 0..pairs {
        let (tool, path) = if n % (pairs / EDITS_PER_CYCLE) == 0 {
            ("edit", format!("src/m{}/f{n}.py", cycle % 50))
        } else {
            ("read", format!("src/m{}/f{n}.py", n % 50))
        };
        bytes.extend_from_slice(
            format!(
                "{{\"type\":\"tool_call\",\"session\":\"{session}\",\"tool\":\"{tool}\",\"paths\":[\"{path}\"]}}\n\
                 {{\"type\":\"tool_result\",\"session\":\"{session}\",\"tool\":\"{tool}\",\"ok\":true}}\n"
            )
            .as_bytes(),
        );
    }
    bytes
}

#[test]
fn a_compressed_hour_of_events_and_syncs_keeps_memory_descriptors_and_threads_flat() {
    let sandbox = Sandbox::new();
    sandbox.mark_indexed();
    // The reconcile strategy's path (ready line, SIGINT, clean exit), without
    // the real CLI's 100 ms pause on the way out.
    let fake = FakeCgc::new(
        &sandbox,
        json!({"watch": {"steps": [{"stdout": [{"cgc": "ready"}]}, {"hang": true}], "on_sigint": {"exit": 0}}}),
    );
    let cycles = cycles();
    let budget = (CYCLES_PER_SESSION * 4).to_string();
    let service = Service::start_with_fake(
        &sandbox,
        &fake,
        &[
            ("CGC_FRESHNESS_BATCH_MS", "20"),
            ("CGC_FRESHNESS_MIN_SYNC_GAP_MS", "0"),
            ("CGC_FRESHNESS_MAX_SYNCS_PER_SESSION", budget.as_str()),
            // A million events logged at debug would be the test's bottleneck.
            ("CGC_FRESH_LOG", "warn"),
        ],
    );
    let pid = service.pid();
    let mut harness = Harness::connect(&service);
    let began = Instant::now();
    let at_start = vitals(pid);
    let mut samples: Vec<(usize, Vitals)> = vec![(0, at_start)];
    let mut events = 0usize;
    for cycle in 0..cycles {
        let bytes = cycle_events(cycle);
        harness.writer.write_all(&bytes).expect("events");
        events += EVENTS_PER_CYCLE;
        let fresh = harness.wait_fresh(10 + cycle as u64);
        assert_eq!(fresh["status"], "fresh");
        if (cycle + 1) % (cycles / SAMPLES).max(1) == 0 {
            samples.push((cycle + 1, vitals(pid)));
        }
    }
    let elapsed = began.elapsed();
    let syncs = fake.invocations().len();
    // The last sync's process is reaped; then the end sample.
    for pid in fake.all_pids() {
        wait_until("the last sync to be gone", Duration::from_secs(5), || {
            !is_alive(pid)
        });
    }
    let at_end = vitals(pid);
    println!(
        "soak: {cycles} cycles, {events} events, {syncs} syncs in {:.1} s",
        elapsed.as_secs_f64()
    );
    for (cycle, v) in &samples {
        println!(
            "soak: after cycle {cycle:>4}: rss {} KiB, fds {}, threads {}",
            v.rss_kib, v.fds, v.threads
        );
    }
    println!(
        "soak: at the end, children reaped: rss {} KiB, fds {}, threads {}",
        at_end.rss_kib, at_end.fds, at_end.threads
    );
    assert!(syncs >= cycles, "one sync per cycle at least: {syncs}");
    let peak = samples
        .iter()
        .map(|(_, v)| v.rss_kib)
        .chain([at_end.rss_kib])
        .max()
        .unwrap_or(at_end.rss_kib);
    assert!(
        peak.saturating_sub(at_start.rss_kib) < RSS_GROWTH_LIMIT_KIB,
        "memory grew: {samples:?}"
    );
    assert!(
        at_end.fds.abs_diff(at_start.fds) <= FD_SLACK,
        "descriptors: {samples:?}"
    );
    // The event loop, the last-resort signal thread, and at most the
    // blocking pool's two threads for the manifest's walks (they linger a
    // few seconds after a walk): bounded, never growing with the cycles.
    assert!(
        samples
            .iter()
            .all(|(_, v)| v.threads <= at_start.threads + 2),
        "threads: {samples:?}"
    );
    drop(harness);
    let mut service = service;
    service.signal(libc::SIGTERM);
    assert!(service.wait_exit(Duration::from_secs(15)).success());
    let holders = processes_with_owner_prefix(&Service::owner_prefix(&sandbox));
    assert!(holders.is_empty(), "left running: {holders:?}");
}
