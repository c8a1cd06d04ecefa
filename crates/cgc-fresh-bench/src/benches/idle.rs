//! `idle`: what an idle service costs — resident memory after start-up and
//! wake-ups (context switches of all its threads) while one subscribed
//! harness is connected and nothing happens.

use std::thread;
use std::time::Duration;

use anyhow::{bail, Result};

use super::Tools;
use crate::conn::Conn;
use crate::fake::FakeCgc;
use crate::procfs;
use crate::report::{self, verdict, Table};
use crate::service::{Log, Sandbox, Service};
use crate::stats::{fmt_count, fmt_kib};

const RSS_TARGET_KIB: u64 = 10 * 1024;

pub fn run(tools: &Tools, seconds: u64, watcher: bool) -> Result<()> {
    let title = if watcher {
        "idle: memory and wake-ups with a verified watcher"
    } else {
        "idle: memory and wake-ups"
    };
    report::section(title, &tools.command_line);
    let sandbox = Sandbox::new(&tools.scratch)?;
    let fake = FakeCgc::new(&tools.fake_cgc, &sandbox, None)?;
    let mut env = fake.env();
    if watcher {
        sandbox.mark_indexed()?;
        env.push(super::var("CGC_FRESHNESS_WATCH", "on"));
    }
    let log = sandbox.root().join("serve.log");
    let mut service = Service::start(&tools.service_bin, &sandbox, &env, Log::File(log))?;
    let pid = service.pid();
    let rss_at_accept = procfs::rss_kib(pid)?;
    let mut harness = Conn::harness(&service.socket, "s1")?;
    if watcher {
        // Count only once the watcher is verified (the fake prints the
        // ready line): the service then owns a live child and waits.
        harness.recv_until(Duration::from_secs(20), |f| {
            f["type"] == "state" && f["watcher"]["state"] == "verified"
        })?;
    }
    // Let the connection's own work finish before counting.
    thread::sleep(Duration::from_secs(1));
    let rss_before = procfs::rss_kib(pid)?;
    let before = procfs::context_switches(pid)?;
    eprintln!("cgc-fresh-bench: idle: watching pid {pid} for {seconds} s");
    thread::sleep(Duration::from_secs(seconds));
    let after = procfs::context_switches(pid)?;
    let rss_after = procfs::rss_kib(pid)?;
    let hwm = procfs::peak_rss_kib(pid)?;
    if service.has_exited()? {
        bail!("the service exited during the idle period");
    }
    let voluntary = after.voluntary.saturating_sub(before.voluntary);
    let nonvoluntary = after.nonvoluntary.saturating_sub(before.nonvoluntary);

    let mut table = Table::new(&["metric", "value", "target", "verdict"]);
    table.row(vec![
        "VmRSS when the socket first accepts".into(),
        fmt_kib(rss_at_accept),
        "≤ 10 MiB".into(),
        verdict(rss_at_accept <= RSS_TARGET_KIB),
    ]);
    table.row(vec![
        "VmRSS with one subscribed harness, before idling".into(),
        fmt_kib(rss_before),
    ]);
    table.row(vec![
        format!("VmRSS after {seconds} s idle"),
        fmt_kib(rss_after),
    ]);
    table.row(vec!["VmHWM (peak so far)".into(), fmt_kib(hwm)]);
    table.row(vec![
        "threads".into(),
        format!("{} before, {} after", before.threads, after.threads),
    ]);
    table.row(vec![
        format!("context switches in {seconds} s idle (all threads)"),
        format!(
            "{} ({} voluntary + {} non-voluntary)",
            fmt_count(voluntary + nonvoluntary),
            fmt_count(voluntary),
            fmt_count(nonvoluntary)
        ),
        "0".into(),
        verdict(voluntary + nonvoluntary == 0),
    ]);
    report::print_table(&table);
    if watcher {
        report::note(
            "With `freshness.watch=on`: the fake `cgc watch --sync-on-start .` printed its ready \
             line, the service verified it (state `fresh`, watcher `verified`) and the watcher \
             stays alive, silent, for the whole period.",
        );
    }
    report::note(
        "Set-up: fake `cgc`, built-in defaults, one connection that sent `hello`, \
         `subscribe` and `session_start` and then nothing. Context switches are the sums of \
         `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches` over /proc/<pid>/task/*/status, \
         read before and after the idle period.",
    );
    Ok(())
}
