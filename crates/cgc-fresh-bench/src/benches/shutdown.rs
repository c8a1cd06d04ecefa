//! `shutdown`: SIGTERM while a sync is running whose `cgc` hangs and has
//! daemonized a grandchild into its own session (as FalkorDB Lite's
//! redis-server does) → the service has exited and every process the fake
//! logged is gone (a zombie counts as gone).

use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use nix::sys::signal::Signal;
use serde_json::json;

use super::{var, Tools};
use crate::conn::Conn;
use crate::fake::FakeCgc;
use crate::procfs;
use crate::report::{self, verdict, Table};
use crate::service::{wait_for, Log, Sandbox, Service};
use crate::stats::{fmt_duration, Summary};

const TARGET: Duration = Duration::from_secs(1);

struct Run {
    exited_after: Duration,
    all_gone_after: Duration,
    processes: usize,
}

pub fn run(tools: &Tools, runs: usize) -> Result<()> {
    report::section(
        "shutdown: SIGTERM with a live watcher, a running sync and a daemonized grandchild",
        &tools.command_line,
    );
    let mut results = Vec::with_capacity(runs);
    for _ in 0..runs {
        results.push(one_run(tools)?);
    }
    let exited: Vec<Duration> = results.iter().map(|r| r.exited_after).collect();
    let gone: Vec<Duration> = results.iter().map(|r| r.all_gone_after).collect();
    let mut table = Table::new(&["metric", "runs", "min", "p50", "max", "target", "verdict"]);
    if let Some(s) = Summary::of(&exited) {
        table.row(vec![
            "SIGTERM → service exited".into(),
            s.count.to_string(),
            fmt_duration(s.min),
            fmt_duration(s.p50),
            fmt_duration(s.max),
        ]);
    }
    if let Some(s) = Summary::of(&gone) {
        table.row(vec![
            "SIGTERM → service and every logged `cgc` process gone".into(),
            s.count.to_string(),
            fmt_duration(s.min),
            fmt_duration(s.p50),
            fmt_duration(s.max),
            "max ≤ 1 s".into(),
            verdict(s.max <= TARGET),
        ]);
    }
    report::print_table(&table);
    let processes: Vec<String> = results.iter().map(|r| r.processes.to_string()).collect();
    report::note(&format!(
        "`freshness.watch=on` (the managed watcher is the fake's first `watch`: it hangs, so it \
         is still verifying), then a person's `sync` (the second `watch`: it daemonizes a \
         grandchild into its own session and hangs); workspace marked indexed. SIGTERM was sent \
         once the sync was running and the daemon had logged itself. Logged processes per run \
         (watcher, sync, daemon): {}. Liveness polled every 1 ms from /proc/<pid>/stat.",
        processes.join(", ")
    ));
    Ok(())
}

fn one_run(tools: &Tools) -> Result<Run> {
    let sandbox = Sandbox::new(&tools.scratch)?;
    sandbox.mark_indexed()?;
    let scenario = json!({"watch": [
        {"steps": [{"hang": true}]},
        {"steps": [{"spawn_daemon": {}}, {"hang": true}]}
    ]});
    let fake = FakeCgc::new(&tools.fake_cgc, &sandbox, Some(&scenario))?;
    let mut env = fake.env();
    env.push(var("CGC_FRESHNESS_BATCH_MS", 20));
    env.push(var("CGC_FRESHNESS_WATCH", "on"));
    env.push(var("CGC_FRESHNESS_WATCHER_LIVENESS_MS", 60_000));
    let log = sandbox.root().join("serve.log");
    let mut service = Service::start(&tools.service_bin, &sandbox, &env, Log::File(log))?;
    let mut harness = Conn::harness(&service.socket, "s1")?;
    wait_for(
        "the watcher",
        Duration::from_secs(10),
        Duration::from_millis(5),
        || fake.pids().len() == 1,
    )?;
    harness.send(&json!({"type": "sync"}))?;
    harness.recv_until(Duration::from_secs(10), |f| {
        f["type"] == "state" && f["syncing"] == true
    })?;
    wait_for(
        "the fake's daemon record",
        Duration::from_secs(10),
        Duration::from_millis(5),
        || fake.has_daemon(),
    )?;
    let pids = fake.pids();
    if !pids.iter().all(|p| procfs::is_alive(*p)) {
        bail!("a logged process ended before SIGTERM: {pids:?}");
    }

    let started = Instant::now();
    service.signal(Signal::SIGTERM)?;
    let deadline = started + Duration::from_secs(30);
    let mut exited_after = None;
    loop {
        if exited_after.is_none() && service.has_exited()? {
            exited_after = Some(started.elapsed());
        }
        if let Some(exited) = exited_after {
            if pids.iter().all(|p| !procfs::is_alive(*p)) {
                return Ok(Run {
                    exited_after: exited,
                    all_gone_after: started.elapsed(),
                    processes: pids.len(),
                });
            }
        }
        if Instant::now() > deadline {
            let alive: Vec<i32> = pids
                .iter()
                .copied()
                .filter(|p| procfs::is_alive(*p))
                .collect();
            bail!(
                "30 s after SIGTERM: service exited: {}, still alive: {alive:?}; log:\n{}",
                exited_after.is_some(),
                service.log_tail()
            );
        }
        sleep(Duration::from_millis(1));
    }
}
