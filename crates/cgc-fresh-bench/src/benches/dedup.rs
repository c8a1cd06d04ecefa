//! `dedup`: N concurrent manual `sync` requests while nothing is edited →
//! how many `cgc` processes the service spawns (single-flight: one).
//!
//! The fake `cgc watch` takes 300 ms to reach its ready line, so every
//! request lands while the first sync is still running.

use std::io::Write;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use serde_json::{json, Value};

use super::Tools;
use crate::conn::Conn;
use crate::fake::FakeCgc;
use crate::report::{self, verdict, Table};
use crate::service::{Log, Sandbox, Service};
use crate::stats::{fmt_count, fmt_duration};

#[derive(Clone, Copy)]
enum Mode {
    /// N frames in one write on one connection.
    Pipelined,
    /// N threads, each with its own connection, released together.
    Threads,
}

impl Mode {
    fn describe(self) -> &'static str {
        match self {
            Mode::Pipelined => "pipelined on one connection",
            Mode::Threads => "one connection per thread",
        }
    }
}

struct Case {
    spawned: usize,
    acked_after: Duration,
    final_status: String,
}

pub fn run(tools: &Tools) -> Result<()> {
    report::section(
        "dedup: concurrent manual syncs with nothing edited",
        &tools.command_line,
    );
    let cases = [
        (Mode::Pipelined, 1),
        (Mode::Pipelined, 10),
        (Mode::Pipelined, 100),
        (Mode::Pipelined, 1000),
        (Mode::Threads, 1),
        (Mode::Threads, 10),
        (Mode::Threads, 100),
    ];
    let mut table = Table::new(&[
        "N `sync` requests",
        "sent",
        "all acked after",
        "`cgc` processes spawned",
        "state after",
        "target",
        "verdict",
    ]);
    for (mode, n) in cases {
        let case = one_case(tools, mode, n)?;
        table.row(vec![
            fmt_count(n as u64),
            mode.describe().into(),
            fmt_duration(case.acked_after),
            case.spawned.to_string(),
            case.final_status,
            "1".into(),
            verdict(case.spawned == 1),
        ]);
    }
    report::print_table(&table);
    report::note(
        "Fake scenario: `watch` sleeps 300 ms, prints the synchronizing line and the ready line \
         twice, then hangs until the service stops it. Workspace marked indexed, built-in \
         defaults otherwise; a fresh service per row. Spawned = `start` records in the fake's \
         invocation log, counted 1 s after the sync settled.",
    );
    Ok(())
}

fn one_case(tools: &Tools, mode: Mode, n: usize) -> Result<Case> {
    let sandbox = Sandbox::new(&tools.scratch)?;
    sandbox.mark_indexed()?;
    let scenario = json!({"watch": {"steps": [
        {"sleep_ms": 300},
        {"stdout": {"cgc": "already_indexed_syncing"}},
        {"stdout": [{"cgc": "ready"}, {"cgc": "ready"}]},
        {"hang": true}
    ]}});
    let fake = FakeCgc::new(&tools.fake_cgc, &sandbox, Some(&scenario))?;
    let log = sandbox.root().join("serve.log");
    let service = Service::start(&tools.service_bin, &sandbox, &fake.env(), Log::File(log))?;
    let mut observer = Conn::connect(&service.socket)?;
    observer.hello("bench-observer")?;
    observer.subscribe()?;

    let acked_after = match mode {
        Mode::Pipelined => pipelined(&service, n)?,
        Mode::Threads => threads(&service, n)?,
    };
    observer.recv_until(Duration::from_secs(10), |f| {
        f["type"] == "state" && f["syncing"] == true
    })?;
    let settled = observer.recv_until(Duration::from_secs(30), |f| {
        f["type"] == "state" && f["syncing"] == false
    })?;
    thread::sleep(Duration::from_secs(1));
    Ok(Case {
        spawned: fake.invocations().len(),
        acked_after,
        final_status: settled["status"].as_str().unwrap_or("?").to_string(),
    })
}

fn pipelined(service: &Service, n: usize) -> Result<Duration> {
    let mut conn = Conn::connect(&service.socket)?;
    conn.hello("bench-dedup")?;
    let frames: String = (0..n)
        .map(|i| format!("{{\"id\":{i},\"type\":\"sync\"}}\n"))
        .collect();
    let started = Instant::now();
    let mut writer = conn.stream().try_clone()?;
    writer.write_all(frames.as_bytes())?;
    let mut acks = 0;
    while acks < n {
        let frame = conn.recv()?;
        match frame["type"].as_str() {
            Some("ack") => acks += 1,
            Some("error") => bail!("a sync request was refused: {frame}"),
            _ => {}
        }
    }
    Ok(started.elapsed())
}

fn threads(service: &Service, n: usize) -> Result<Duration> {
    let barrier = Arc::new(Barrier::new(n + 1));
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let barrier = Arc::clone(&barrier);
        let socket = service.socket.clone();
        handles.push(thread::spawn(move || -> Result<Value> {
            let connected = Conn::connect(&socket).and_then(|mut conn| {
                conn.hello(&format!("bench-dedup-{i}"))?;
                Ok(conn)
            });
            // Every thread reaches the barrier, even one that failed.
            barrier.wait();
            connected?.request(json!({"type": "sync"}), &format!("sync-{i}"))
        }));
    }
    barrier.wait();
    let started = Instant::now();
    for handle in handles {
        let reply = handle
            .join()
            .map_err(|_| anyhow!("a request thread panicked"))??;
        if reply["type"] != "ack" {
            bail!("a sync request was refused: {reply}");
        }
    }
    Ok(started.elapsed())
}
