//! `connections`: many connections held open at once.
//!
//! 1. `--count` connections (10 000 by default) are opened and held; each
//!    sends a `hello` and never reads its `welcome`. The service's VmRSS
//!    and open descriptors are read once all are accepted, another client
//!    is timed (`hello` + `status`), and the descriptors are read again
//!    after all are closed.
//! 2. At the descriptor limit: the service runs with `RLIMIT_NOFILE`
//!    `--limit` (1 024 by default) and more connections than that are held
//!    for `--hold-seconds`; the `accept_failed` warnings it logs meanwhile
//!    are counted (the accept loop retries every 50 ms; it logs the first
//!    failure and then one summary per 10 s), and whether it accepts again
//!    once they are closed.

use nix::sys::resource::{getrlimit, setrlimit, Resource};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use serde_json::json;

use super::{var, Tools};
use crate::conn::Conn;
use crate::fake::FakeCgc;
use crate::procfs;
use crate::report::{self, verdict, Table};
use crate::service::{wait_for, Log, Sandbox, Service};
use crate::stats::{fmt_count, fmt_duration, fmt_kib};

pub struct ConnectionsOptions {
    pub count: usize,
    pub limit: u64,
    pub hold_seconds: u64,
}

const HELLO: &[u8] =
    b"{\"type\":\"hello\",\"client\":\"bench\",\"instance\":\"held\",\"protocol\":1}\n";

pub fn run(tools: &Tools, options: &ConnectionsOptions) -> Result<()> {
    report::section("connections: many held at once", &tools.command_line);
    let held = held(tools, options.count)?;
    let limited = at_limit(tools, options)?;
    let mut table = Table::new(&["case", "metric", "value", "target", "verdict"]);
    table.row(vec![
        format!("{} held", fmt_count(options.count as u64)),
        "opened (each sent `hello`, reads nothing) and accepted in".into(),
        fmt_duration(held.accepted_in),
    ]);
    table.row(vec![
        String::new(),
        "VmRSS idle / all held / peak (VmHWM)".into(),
        format!(
            "{} / {} / {}",
            fmt_kib(held.rss_idle_kib),
            fmt_kib(held.rss_held_kib),
            fmt_kib(held.hwm_kib)
        ),
    ]);
    table.row(vec![
        String::new(),
        "VmRSS per held connection".into(),
        format!(
            "{:.1} KiB",
            held.rss_held_kib.saturating_sub(held.rss_idle_kib) as f64 / options.count as f64
        ),
    ]);
    table.row(vec![
        String::new(),
        "descriptors idle / all held / after closing".into(),
        format!(
            "{} / {} / {}",
            held.fds_idle,
            fmt_count(held.fds_held as u64),
            held.fds_after
        ),
        "back to idle".into(),
        verdict(held.fds_after <= held.fds_idle + 1),
    ]);
    table.row(vec![
        String::new(),
        "another client's `hello` + `status` meanwhile".into(),
        fmt_duration(held.other_client),
    ]);
    table.row(vec![
        format!(
            "{} opened, `RLIMIT_NOFILE` {}",
            fmt_count(limited.opened as u64),
            fmt_count(options.limit)
        ),
        format!(
            "`accept_failed` warnings in {} s at the limit",
            options.hold_seconds
        ),
        limited.warnings.to_string(),
        format!("≤ {}", 1 + options.hold_seconds / 10),
        verdict(limited.warnings <= 1 + options.hold_seconds / 10),
    ]);
    table.row(vec![
        String::new(),
        "failed accepts in that time (counted by `accept_recovered`)".into(),
        limited
            .suppressed
            .map(fmt_count)
            .unwrap_or_else(|| "—".into()),
    ]);
    table.row(vec![
        String::new(),
        "accepts again once they are closed".into(),
        if limited.recovered { "yes" } else { "**no**" }.into(),
        "yes".into(),
        verdict(limited.recovered),
    ]);
    report::print_table(&table);
    report::note(
        "Set-up: fake `cgc` (never started), log at info to a file. Descriptors are the entries \
         of /proc/<pid>/fd; VmRSS and VmHWM from /proc/<pid>/status. The at-limit case lowers \
         the soft `RLIMIT_NOFILE` of the service only (set before it is spawned); the benchmark \
         itself needs a limit above `--count` + 100.",
    );
    Ok(())
}

fn start(tools: &Tools, sandbox: &Sandbox) -> Result<(Service, std::path::PathBuf)> {
    let fake = FakeCgc::new(&tools.fake_cgc, sandbox, None)?;
    let mut env = fake.env();
    env.push(var("CGC_FRESH_LOG", "info"));
    let log = sandbox.root().join("serve.log");
    let service = Service::start(&tools.service_bin, sandbox, &env, Log::File(log.clone()))?;
    Ok((service, log))
}

fn fd_count(pid: i32) -> Result<usize> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))
        .with_context(|| format!("listing /proc/{pid}/fd"))?
        .count())
}

fn other_client(service: &Service) -> Result<Duration> {
    let started = Instant::now();
    let mut conn = Conn::connect(&service.socket)?;
    conn.hello("bench-other")?;
    conn.request(json!({"type": "status"}), "other")?;
    Ok(started.elapsed())
}

struct Held {
    accepted_in: Duration,
    rss_idle_kib: u64,
    rss_held_kib: u64,
    hwm_kib: u64,
    fds_idle: usize,
    fds_held: usize,
    fds_after: usize,
    other_client: Duration,
}

fn held(tools: &Tools, count: usize) -> Result<Held> {
    raise_own_nofile(count as u64 + 256)?;
    let sandbox = Sandbox::new(&tools.scratch)?;
    let (service, _log) = start(tools, &sandbox)?;
    let pid = service.pid();
    thread::sleep(Duration::from_millis(200));
    let rss_idle_kib = procfs::rss_kib(pid)?;
    let fds_idle = fd_count(pid)?;
    eprintln!("cgc-fresh-bench: connections: opening {count}");
    let started = Instant::now();
    let mut streams = Vec::with_capacity(count);
    for _ in 0..count {
        let mut stream = UnixStream::connect(&service.socket).context("connect")?;
        stream.write_all(HELLO)?;
        streams.push(stream);
    }
    wait_for(
        "every connection to be accepted",
        Duration::from_secs(120),
        Duration::from_millis(10),
        || fd_count(pid).is_ok_and(|n| n >= fds_idle + count),
    )?;
    let accepted_in = started.elapsed();
    thread::sleep(Duration::from_millis(500));
    let rss_held_kib = procfs::rss_kib(pid)?;
    let fds_held = fd_count(pid)?;
    let other = other_client(&service)?;
    drop(streams);
    wait_for(
        "the descriptors to come back",
        Duration::from_secs(120),
        Duration::from_millis(10),
        || fd_count(pid).is_ok_and(|n| n <= fds_idle + 1),
    )
    .ok();
    Ok(Held {
        accepted_in,
        rss_idle_kib,
        rss_held_kib,
        hwm_kib: procfs::peak_rss_kib(pid)?,
        fds_idle,
        fds_held,
        fds_after: fd_count(pid)?,
        other_client: other,
    })
}

struct AtLimit {
    opened: usize,
    warnings: u64,
    suppressed: Option<u64>,
    recovered: bool,
}

fn at_limit(tools: &Tools, options: &ConnectionsOptions) -> Result<AtLimit> {
    let sandbox = Sandbox::new(&tools.scratch)?;
    // The service inherits a low soft limit; this process gets its own back.
    let (soft, hard) = nofile()?;
    set_nofile(options.limit.min(hard), hard)?;
    let started = start(tools, &sandbox);
    set_nofile(soft, hard)?;
    let (service, log) = started?;
    // Past the limit, but within the listen backlog (1 024) so that every
    // connect returns.
    let opened = options.limit as usize + 500;
    eprintln!(
        "cgc-fresh-bench: connections: {opened} against a limit of {}, held {} s",
        options.limit, options.hold_seconds
    );
    let mut streams = Vec::with_capacity(opened);
    for _ in 0..opened {
        streams.push(UnixStream::connect(&service.socket).context("connect")?);
    }
    let events = |name: &str| -> Vec<serde_json::Value> {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["event"] == name)
            .collect()
    };
    wait_for(
        "the first accept failure",
        Duration::from_secs(30),
        Duration::from_millis(10),
        || !events("accept_failed").is_empty(),
    )?;
    thread::sleep(Duration::from_secs(options.hold_seconds));
    let warnings = events("accept_failed").len() as u64;
    drop(streams);
    let recovered = wait_for(
        "accepting again",
        Duration::from_secs(30),
        Duration::from_millis(10),
        || other_client(&service).is_ok() && !events("accept_recovered").is_empty(),
    )
    .is_ok();
    let suppressed = events("accept_recovered")
        .first()
        .and_then(|e| e["failures"].as_u64());
    Ok(AtLimit {
        opened,
        warnings,
        suppressed,
        recovered,
    })
}

/// The soft and hard descriptor limits.
fn nofile() -> Result<(u64, u64)> {
    getrlimit(Resource::RLIMIT_NOFILE).context("getrlimit")
}

fn set_nofile(soft: u64, hard: u64) -> Result<()> {
    setrlimit(Resource::RLIMIT_NOFILE, soft, hard).context("setrlimit")
}

/// Raises this process's soft descriptor limit to at least `wanted` (up to
/// the hard limit).
fn raise_own_nofile(wanted: u64) -> Result<()> {
    let (soft, hard) = nofile()?;
    if soft < wanted {
        set_nofile(wanted.min(hard), hard)?;
    }
    if nofile()?.0 < wanted {
        anyhow::bail!("the descriptor limit is below {wanted}: raise it (ulimit -n)");
    }
    Ok(())
}
