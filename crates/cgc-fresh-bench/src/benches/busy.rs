//! `busy`: how long it takes to learn that the embedded database is busy.
//!
//! A real `cgc --db kuzudb watch .` holds the Kùzu file's POSIX write lock.
//! (a) The service's way: `fcntl(F_GETLK)` on that file from another
//! process (open, probe, close). (b) The naive way: run the real CLI
//! (`cgc --db kuzudb index .`) and wait for its lock error.

use std::fs::{self, File};
use std::io::{BufRead, BufReader};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use nix::fcntl::{fcntl, FcntlArg};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::Tools;
use crate::real_cgc::RealCgc;
use crate::report::{self, verdict, Table};
use crate::service::Sandbox;
use crate::stats::{fmt_count, fmt_duration, Summary};

const RATIO_TARGET: f64 = 1000.0;
const READY_LINE: &str = "Monitoring for file changes";
const LOCK_ERROR: &str = "Could not set lock";

pub struct BusyOptions {
    pub probes: usize,
    pub cli_runs: usize,
}

pub fn run(tools: &Tools, options: &BusyOptions) -> Result<()> {
    report::section(
        "busy: lock probe vs. running the CLI into the lock",
        &tools.command_line,
    );
    let sandbox = Sandbox::new(&tools.scratch)?;
    let cgc = RealCgc::new(&tools.real_cgc, &sandbox)?;
    let version = cgc.version()?;
    write_small_project(&sandbox.workspace())?;
    cgc.index()?;
    let watcher = Watcher::start(&cgc)?;
    let db = cgc.db_file();

    let mut probe_times = Vec::with_capacity(options.probes);
    let mut probe_hits = 0;
    for _ in 0..options.probes {
        let started = Instant::now();
        let holder = probe_write_lock(&db)?;
        probe_times.push(started.elapsed());
        if holder == Some(watcher.pid()) {
            probe_hits += 1;
        }
    }

    let mut cli_times = Vec::with_capacity(options.cli_runs);
    let mut cli_hits = 0;
    for run in 0..options.cli_runs {
        eprintln!(
            "cgc-fresh-bench: busy: CLI run {} of {}",
            run + 1,
            options.cli_runs
        );
        let started = Instant::now();
        let out = cgc.run(&["index", "."])?;
        cli_times.push(started.elapsed());
        if out.status.code() == Some(1) && String::from_utf8_lossy(&out.stdout).contains(LOCK_ERROR)
        {
            cli_hits += 1;
        }
    }
    drop(watcher);

    let probe = Summary::of(&probe_times).ok_or_else(|| anyhow!("no probes"))?;
    let cli = Summary::of(&cli_times).ok_or_else(|| anyhow!("no CLI runs"))?;
    let ratio = cli.p50.as_secs_f64() / probe.p50.as_secs_f64();

    let mut table = Table::new(&[
        "method",
        "runs",
        "min",
        "p50",
        "p99",
        "max",
        "verdict right",
    ]);
    table.row(vec![
        "`fcntl(F_GETLK)` probe (open + probe + close)".into(),
        fmt_count(probe.count as u64),
        fmt_duration(probe.min),
        fmt_duration(probe.p50),
        fmt_duration(probe.p99),
        fmt_duration(probe.max),
        format!(
            "{}/{} saw F_WRLCK held by the watcher's pid",
            fmt_count(probe_hits),
            fmt_count(probe.count as u64)
        ),
    ]);
    table.row(vec![
        "`cgc --db kuzudb index .` until its lock error".into(),
        cli.count.to_string(),
        fmt_duration(cli.min),
        fmt_duration(cli.p50),
        fmt_duration(cli.p99),
        fmt_duration(cli.max),
        format!("{cli_hits}/{} exited 1 with the lock error", cli.count),
    ]);
    report::print_table(&table);
    let mut ratio_table = Table::new(&["metric", "value", "target", "verdict"]);
    ratio_table.row(vec![
        "p50(CLI) / p50(probe)".into(),
        format!("{}×", fmt_count(ratio as u64)),
        "≥ 1 000×".into(),
        verdict(ratio >= RATIO_TARGET),
    ]);
    report::print_table(&ratio_table);
    report::note(&format!(
        "Real CLI ({version}), Kùzu in global mode (`$HOME/.codegraphcontext/global/db/kuzudb`), \
         a 5-file indexed workspace; the lock holder is `cgc --db kuzudb watch .` past its ready \
         line. A probe is `open` + `fcntl(F_GETLK)` + `close` of the database file."
    ));
    Ok(())
}

/// The pid holding a write lock on `path`, if any (without taking it).
fn probe_write_lock(path: &Path) -> Result<Option<i32>> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut query = libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    };
    fcntl(file.as_raw_fd(), FcntlArg::F_GETLK(&mut query)).context("fcntl(F_GETLK)")?;
    Ok((query.l_type != libc::F_UNLCK as libc::c_short).then_some(query.l_pid))
}

fn write_small_project(ws: &Path) -> Result<()> {
    fs::create_dir_all(ws.join("pkg"))?;
    fs::write(ws.join("pkg/__init__.py"), "")?;
    for i in 0..4 {
        fs::write(
            ws.join(format!("pkg/m{i}.py")),
            format!("def f{i}(x):\n    return g{i}(x) + 1\n\n\ndef g{i}(x):\n    return x * {i}\n"),
        )?;
    }
    Ok(())
}

/// A real `cgc watch .` past its ready line; stopped with SIGINT on drop.
struct Watcher {
    child: Child,
}

impl Watcher {
    fn start(cgc: &RealCgc) -> Result<Watcher> {
        let mut child = cgc
            .command(&["watch", "."])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("spawning cgc watch")?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("no stdout pipe"))?;
        let watcher = Watcher { child };
        let (ready_tx, ready_rx) = mpsc::channel();
        // Keeps draining stdout for the watcher's whole life so it never
        // blocks on a full pipe.
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.contains(READY_LINE) {
                    let _ = ready_tx.send(());
                }
            }
        });
        match ready_rx.recv_timeout(Duration::from_secs(120)) {
            Ok(()) => Ok(watcher),
            Err(_) => bail!("cgc watch printed no ready line within 120 s"),
        }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        // One SIGINT: the real watcher stops cleanly and releases its lock.
        let _ = kill(Pid::from_raw(self.pid()), Signal::SIGINT);
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
