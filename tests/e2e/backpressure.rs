//! Back-pressure: a client that does not read its socket costs the service
//! a bounded amount of memory, and everybody else is served meanwhile.
//!
//! - A requester that pipelines requests and never reads is held: the
//!   service stops reading it once its queue of replies is over the bound,
//!   so the client's `send` blocks; nothing it asked for is lost once it
//!   reads again.
//! - A subscriber that never reads during a burst of state changes is sent
//!   only the latest `state`, never a backlog of them.
//! - A subscriber that stays over the bound past the grace is disconnected,
//!   and the last thing it reads is the `error` frame saying why.
//! - A service at its descriptor limit says so once, not every 50 ms.

// A child's descriptor limit is set between fork and exec (`pre_exec`).
#![allow(unsafe_code)]

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{indexed_with_fake, vitals, wait_until, Conn, Sandbox, Service};

/// The resident memory the service must stay under while a client does not
/// read (its own baseline is a few MiB; today's unbounded queues passed
/// hundreds of MiB within seconds).
const RSS_BOUND_KIB: u64 = 64 * 1024;

/// How long a subscriber may stay over the bound (the service's grace),
/// plus slack for a loaded machine.
const DISCONNECT_WITHIN: Duration = Duration::from_secs(5 + 20);

/// What a flood without reading ended with.
struct Flood {
    /// Every request line generated (all written by the end of `finish`).
    requests: u64,
    /// The flood stopped because the socket stayed blocked.
    blocked: bool,
    /// The highest VmRSS seen while flooding.
    peak_rss_kib: u64,
    /// Bytes generated but not yet written when the flood stopped.
    unwritten: Vec<u8>,
}

/// Writes request lines (`line(n)`) in chunks without ever reading, until a
/// write makes no progress for `blocked_for`, `max_time` passes, or the
/// service's RSS passes [`RSS_BOUND_KIB`] (so that an unbounded service
/// fails the test quickly instead of eating the machine).
fn flood_without_reading(
    stream: &UnixStream,
    pid: i32,
    mut line: impl FnMut(u64) -> String,
    blocked_for: Duration,
    max_time: Duration,
) -> Flood {
    stream
        .set_write_timeout(Some(Duration::from_millis(50)))
        .expect("write timeout");
    let mut writer = stream;
    let began = Instant::now();
    let mut requests = 0u64;
    let mut pending: Vec<u8> = Vec::new();
    let mut offset = 0usize;
    let mut last_progress = Instant::now();
    let mut peak_rss_kib = 0u64;
    let mut last_sample = Instant::now() - Duration::from_secs(1);
    let blocked = loop {
        if last_sample.elapsed() >= Duration::from_millis(20) {
            peak_rss_kib = peak_rss_kib.max(vitals(pid).rss_kib);
            last_sample = Instant::now();
            if peak_rss_kib > RSS_BOUND_KIB {
                break false;
            }
        }
        if began.elapsed() > max_time {
            break false;
        }
        if offset == pending.len() {
            pending.clear();
            offset = 0;
            for _ in 0..2_000 {
                pending.extend_from_slice(line(requests).as_bytes());
                pending.push(b'\n');
                requests += 1;
            }
        }
        match writer.write(&pending[offset..]) {
            Ok(n) => {
                offset += n;
                last_progress = Instant::now();
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if last_progress.elapsed() >= blocked_for {
                    break true;
                }
            }
            Err(e) => panic!("flood write failed: {e}"),
        }
    };
    stream.set_write_timeout(None).expect("write timeout");
    Flood {
        requests,
        blocked,
        peak_rss_kib,
        unwritten: pending[offset..].to_vec(),
    }
}

/// A new connection is served while the slow client is held.
fn assert_another_client_is_served(service: &Service) {
    let mut other = service.connect();
    other.hello();
    let state = other.request(json!({"type": "status"}), 7);
    assert_eq!(state["type"], "state", "{state}");
}

/// A raw connection that said hello (and read the welcome), so that the
/// service knows it before it stops reading.
fn greeted(service: &Service) -> UnixStream {
    let mut conn = service.connect();
    conn.hello();
    conn.stream.try_clone().expect("clone")
}

#[test]
fn a_requester_that_never_reads_is_held_at_a_bounded_queue_while_others_are_served() {
    let sandbox = Sandbox::new();
    let service = Service::start(&sandbox, &[], &[("CGC_FRESH_LOG", "info")]);
    let pid = service.pid();
    let stream = greeted(&service);

    let flood = flood_without_reading(
        &stream,
        pid,
        |n| format!("{{\"type\":\"config\",\"id\":{n}}}"),
        Duration::from_secs(1),
        Duration::from_secs(20),
    );
    let rss_held = vitals(pid).rss_kib;
    println!(
        "requester: {} requests written, blocked {}, peak rss {} KiB, held at {rss_held} KiB",
        flood.requests, flood.blocked, flood.peak_rss_kib
    );
    assert!(
        flood.peak_rss_kib <= RSS_BOUND_KIB && rss_held <= RSS_BOUND_KIB,
        "the service grew to {} KiB (bound {RSS_BOUND_KIB} KiB) for a client that does not read",
        flood.peak_rss_kib.max(rss_held)
    );
    assert!(
        flood.blocked,
        "the client's writes never blocked: the service kept reading a client that does not read"
    );
    let held = service.log_events("connection_backpressure");
    assert!(!held.is_empty(), "no connection_backpressure event");
    assert!(held[0]["queued_bytes"].as_u64() > held[0]["bound"].as_u64());

    assert_another_client_is_served(&service);

    // Once it reads, every request is answered, in order: nothing was lost.
    let reader_stream = stream.try_clone().expect("clone");
    reader_stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let total = flood.requests;
    let reader = std::thread::spawn(move || {
        let mut expected = 0u64;
        for line in BufReader::new(reader_stream).lines() {
            let frame: Value = serde_json::from_str(&line.expect("read")).expect("frame");
            assert_eq!(frame["type"], "config", "{frame}");
            assert_eq!(frame["id"], expected, "replies out of order");
            expected += 1;
            if expected == total {
                break;
            }
        }
        expected
    });
    let mut writer = &stream;
    writer.write_all(&flood.unwritten).expect("the rest");
    assert_eq!(reader.join().expect("reader"), total);
    assert!(vitals(pid).rss_kib <= RSS_BOUND_KIB);
}

/// A harness connection without a subscription: hello and `session_start`.
fn driver(service: &Service, session: &str) -> Conn {
    let mut conn = service.connect();
    conn.hello();
    conn.send(json!({"type": "session_start", "session": session, "reason": "startup"}));
    conn
}

#[test]
fn a_subscriber_that_never_reads_is_sent_the_latest_state_not_a_backlog() {
    const EDITS: u64 = 20_000;
    let (_sandbox, _fake, service) = indexed_with_fake(
        json!({}),
        &[
            ("CGC_FRESHNESS_AUTO_SYNC", "false"),
            ("CGC_FRESHNESS_WATCH", "off"),
            ("CGC_FRESH_LOG", "info"),
        ],
    );
    let pid = service.pid();
    let mut subscriber = service.connect();
    subscriber.hello();
    subscriber.subscribe();

    // One edit per round trip: each is its own turn of the service's loop,
    // so each pushes a state of its own to every subscriber.
    let mut editor = driver(&service, "s");
    let mut peak_rss_kib = 0;
    for n in 0..EDITS {
        let ack = editor.request(
            json!({"type": "tool_call", "session": "s", "tool": "edit", "paths": [format!("f{n}.py")]}),
            n + 1,
        );
        assert_eq!(ack["type"], "ack", "{ack}");
        if n % 1_000 == 0 {
            peak_rss_kib = peak_rss_kib.max(vitals(pid).rss_kib);
        }
        if n == EDITS / 2 {
            assert_another_client_is_served(&service);
        }
    }
    let last = editor.request(json!({"type": "status"}), 0);
    let final_epoch = last["edit_epoch"].as_u64().expect("edit_epoch");
    assert!(final_epoch >= EDITS, "{last}");
    peak_rss_kib = peak_rss_kib.max(vitals(pid).rss_kib);
    assert!(
        peak_rss_kib <= RSS_BOUND_KIB,
        "{peak_rss_kib} KiB for one subscriber that does not read"
    );

    // Now it reads: states in increasing order, the last one the latest,
    // and nowhere near one per edit.
    let (latest, before) = subscriber.recv_until("the latest state", |f| {
        f["type"] == "state" && f["edit_epoch"].as_u64() == Some(final_epoch)
    });
    println!(
        "subscriber: {EDITS} edits, peak rss {peak_rss_kib} KiB, {} frames read",
        before.len() + 1
    );
    let epochs: Vec<u64> = before
        .iter()
        .filter(|f| f["type"] == "state")
        .filter_map(|f| f["edit_epoch"].as_u64())
        .chain([final_epoch])
        .collect();
    assert!(
        epochs.windows(2).all(|w| w[0] < w[1]),
        "states out of order: {epochs:?}"
    );
    assert!(
        (epochs.len() as u64) < EDITS / 4,
        "{} states for {EDITS} edits: a backlog, not the latest",
        epochs.len()
    );
    assert_eq!(latest["status"], last["status"]);
    assert!(before.iter().all(|f| f["type"] != "error"), "{before:?}");
    assert!(service
        .log_events("slow_subscriber_disconnected")
        .is_empty());
    // Still subscribed and served.
    assert_eq!(
        subscriber.request(json!({"type": "status"}), 9)["type"],
        "state"
    );
}

#[test]
fn a_subscriber_that_stays_over_the_bound_is_disconnected_with_an_error_saying_why() {
    let (_sandbox, _fake, service) = indexed_with_fake(
        json!({}),
        &[
            ("CGC_FRESHNESS_AUTO_SYNC", "false"),
            ("CGC_FRESHNESS_WATCH", "off"),
            ("CGC_FRESH_LOG", "info"),
        ],
    );
    let pid = service.pid();
    let mut conn = service.connect();
    conn.hello();
    conn.subscribe();
    let stream = conn.stream.try_clone().expect("clone");
    drop(conn);

    // It asks for more than it reads, until the service stops reading it.
    let flood = flood_without_reading(
        &stream,
        pid,
        |n| format!("{{\"type\":\"status\",\"id\":{n}}}"),
        Duration::from_secs(1),
        Duration::from_secs(20),
    );
    assert!(
        flood.peak_rss_kib <= RSS_BOUND_KIB,
        "the service grew to {} KiB",
        flood.peak_rss_kib
    );
    assert!(
        flood.blocked,
        "the service kept reading a subscriber that does not read"
    );

    // State changes keep coming meanwhile, and another client is served.
    let mut editor = driver(&service, "s");
    for n in 0..200u64 {
        editor.request(
            json!({"type": "tool_call", "session": "s", "tool": "edit", "paths": [format!("f{n}.py")]}),
            n + 1,
        );
    }
    assert_another_client_is_served(&service);

    wait_until(
        "the slow subscriber to be disconnected",
        DISCONNECT_WITHIN,
        || {
            !service
                .log_events("slow_subscriber_disconnected")
                .is_empty()
        },
    );
    let event = &service.log_events("slow_subscriber_disconnected")[0];
    assert!(
        event["queued_bytes"].as_u64() > event["bound"].as_u64(),
        "{event}"
    );
    assert_eq!(event["grace_ms"], 5_000);
    assert!(vitals(pid).rss_kib <= RSS_BOUND_KIB);

    // What it finally reads ends with the error frame, then EOF.
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut bytes = Vec::new();
    let mut reader = &stream;
    match reader.read_to_end(&mut bytes) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        Err(e) => panic!("draining the slow subscriber: {e}"),
    }
    let text = String::from_utf8(bytes).expect("utf-8");
    println!(
        "slow subscriber: {} requests written, read {} bytes, {} lines after the disconnect",
        flood.requests,
        text.len(),
        text.lines().count()
    );
    let last_line = text.lines().last().expect("at least the error frame");
    let error: Value = serde_json::from_str(last_line).expect("a frame");
    assert_eq!(error["type"], "error", "{error}");
    assert_eq!(error["code"], "unavailable", "{error}");
    let message = error["message"].as_str().expect("message");
    assert!(
        message.contains("did not read") && message.contains("reconnect"),
        "{message}"
    );
    assert_another_client_is_served(&service);
}

#[test]
fn a_service_at_its_descriptor_limit_warns_once_and_summarises_when_it_accepts_again() {
    let sandbox = Sandbox::new();
    let log = sandbox.root.path().join("serve-fd-limit.log");
    let socket = sandbox.default_socket();
    let mut cmd = sandbox.command();
    cmd.arg("serve")
        .arg("--socket")
        .arg(&socket)
        .env("CGC_FRESH_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"));
    // SAFETY: setrlimit(2) only, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 64,
                rlim_max: 64,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().expect("spawn serve");
    let service = Service {
        child,
        socket,
        log,
        says_serving: true,
    };
    let mut first = Conn::connect_when_listening(&service.socket);
    first.hello();

    // Hold connections until the service cannot accept any more.
    let mut held = Vec::new();
    for _ in 0..200 {
        held.push(UnixStream::connect(&service.socket).expect("connect"));
    }
    wait_until("an accept failure", Duration::from_secs(10), || {
        !service.log_events("accept_failed").is_empty()
    });
    // Today's loop warned every 50 ms; it must say so once.
    std::thread::sleep(Duration::from_millis(1_500));
    let warnings = service.log_events("accept_failed");
    assert_eq!(warnings.len(), 1, "{warnings:?}");

    // Freed descriptors: it accepts again and says how many it kept quiet.
    drop(held);
    drop(first);
    wait_until("accepting again", Duration::from_secs(10), || {
        !service.log_events("accept_recovered").is_empty()
    });
    let recovered = &service.log_events("accept_recovered")[0];
    assert!(recovered["suppressed"].as_u64() >= Some(10), "{recovered}");
    assert_another_client_is_served(&service);
}
