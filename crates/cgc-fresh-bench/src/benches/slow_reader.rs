//! `slow-reader`: what clients that never read cost the service.
//!
//! 1. Requester: one connection pipelines `config` requests (the largest
//!    reply) and never reads, until its writes stay blocked for a second —
//!    the service stopped reading it — or `--seconds` pass. Another client
//!    is timed (`hello` + `status`) while the first is held; then the first
//!    reads everything it asked for.
//! 2. Subscriber: one subscribed connection never reads while another makes
//!    `--edits` edits, one per round trip (each pushes a `state`). Then it
//!    reads what it was sent.
//! 3. Subscriber over the bound: a subscribed connection pipelines `status`
//!    requests and never reads, until the service disconnects it; what it
//!    reads afterwards must end with the `error` frame.
//!
//! Memory is sampled every 5 ms (VmRSS) and VmHWM is read at the end;
//! every flood stops early if VmRSS passes `--rss-cap-mib`, so a build
//! without back-pressure is measured without eating the machine.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use serde_json::{json, Value};

use super::{var, Tools};
use crate::conn::Conn;
use crate::fake::FakeCgc;
use crate::procfs;
use crate::report::{self, verdict, Table};
use crate::service::{wait_for, Log, Sandbox, Service};
use crate::stats::{fmt_count, fmt_duration, fmt_kib};

/// The service's bound per connection (`QUEUE_BOUND_BYTES`), for the notes.
const BOUND_MIB: u64 = 1;
const RSS_TARGET_KIB: u64 = 32 * 1024;

pub struct SlowReaderOptions {
    /// Longest a flood writes.
    pub seconds: u64,
    /// Edits made while the subscriber does not read.
    pub edits: u64,
    /// A flood stops when the service's VmRSS passes this.
    pub rss_cap_mib: u64,
}

pub fn run(tools: &Tools, options: &SlowReaderOptions) -> Result<()> {
    report::section(
        "slow-reader: a requester and a subscriber that never read",
        &tools.command_line,
    );
    let requester = requester(tools, options)?;
    let subscriber = subscriber(tools, options)?;
    let over = over_bound_subscriber(tools, options)?;

    let mut table = Table::new(&["case", "metric", "value", "target", "verdict"]);
    let peak = |m: &Memory| m.sampled_max_kib.max(m.hwm_kib);
    table.row(vec![
        "requester never reads".into(),
        "requests written until its `send` blocked".into(),
        format!(
            "{} ({} bytes) in {}{}",
            fmt_count(requester.flood.requests),
            fmt_count(requester.flood.bytes),
            fmt_duration(requester.flood.elapsed),
            if requester.flood.blocked {
                ""
            } else {
                " — **never blocked**"
            }
        ),
    ]);
    table.row(vec![
        String::new(),
        "VmRSS before / peak (VmHWM) / held".into(),
        format!(
            "{} / {} / {}",
            fmt_kib(requester.memory.before_kib),
            fmt_kib(peak(&requester.memory)),
            fmt_kib(requester.memory.after_kib)
        ),
        "peak ≤ 32 MiB".into(),
        verdict(peak(&requester.memory) <= RSS_TARGET_KIB),
    ]);
    table.row(vec![
        String::new(),
        "another client's `hello` + `status` while it is held".into(),
        fmt_duration(requester.other_client),
    ]);
    table.row(vec![
        String::new(),
        "then it reads: replies received, in order".into(),
        format!(
            "{} of {} in {}",
            fmt_count(requester.replies),
            fmt_count(requester.flood.requests),
            fmt_duration(requester.drained_in)
        ),
        "all".into(),
        verdict(requester.replies == requester.flood.requests),
    ]);
    table.row(vec![
        "subscriber never reads".into(),
        "edits (one round trip each) by another client".into(),
        format!(
            "{} in {}",
            fmt_count(subscriber.edits),
            fmt_duration(subscriber.elapsed)
        ),
    ]);
    table.row(vec![
        String::new(),
        "VmRSS before / peak (VmHWM) / after".into(),
        format!(
            "{} / {} / {}",
            fmt_kib(subscriber.memory.before_kib),
            fmt_kib(peak(&subscriber.memory)),
            fmt_kib(subscriber.memory.after_kib)
        ),
        "peak ≤ 32 MiB".into(),
        verdict(peak(&subscriber.memory) <= RSS_TARGET_KIB),
    ]);
    table.row(vec![
        String::new(),
        "`state` frames it reads afterwards (the last one the latest)".into(),
        format!(
            "{} ({})",
            fmt_count(subscriber.states_read),
            if subscriber.last_is_latest {
                "latest"
            } else {
                "**not the latest**"
            }
        ),
        "≪ edits".into(),
        verdict(subscriber.last_is_latest && subscriber.states_read * 10 < subscriber.edits),
    ]);
    table.row(vec![
        "subscriber over the bound".into(),
        "requests written until its `send` blocked".into(),
        format!(
            "{} in {}",
            fmt_count(over.flood.requests),
            fmt_duration(over.flood.elapsed)
        ),
    ]);
    table.row(vec![
        String::new(),
        "its `send` blocked (no progress for 1 s) → `slow_subscriber_disconnected`".into(),
        over.disconnected_after
            .map(fmt_duration)
            .unwrap_or_else(|| "**never**".into()),
        "5 s grace from going over the bound".into(),
        verdict(over.disconnected_after.is_some()),
    ]);
    table.row(vec![
        String::new(),
        "VmRSS peak (VmHWM)".into(),
        fmt_kib(peak(&over.memory)),
        "≤ 32 MiB".into(),
        verdict(peak(&over.memory) <= RSS_TARGET_KIB),
    ]);
    table.row(vec![
        String::new(),
        "what it reads afterwards".into(),
        format!(
            "{} bytes, {} lines, last: {}",
            fmt_count(over.read_bytes),
            fmt_count(over.read_lines),
            over.last_line
        ),
        "ends with the `error`".into(),
        verdict(over.ends_with_error),
    ]);
    report::print_table(&table);
    report::note(&format!(
        "Set-up: fake `cgc`, `freshness.autoSync=false`, `freshness.watch=off`, log at info to a \
         file. The service bounds what is queued for one connection at {BOUND_MIB} MiB (replies \
         and pushes in its mailbox, its queue, the write in progress); over it, it stops reading \
         that connection. VmRSS sampled every 5 ms from /proc/<pid>/status; VmHWM read at the \
         end (it includes start-up). Floods write 2 000 request lines at a time with a 50 ms \
         write timeout and stop once writes make no progress for 1 s, after {} s, or when VmRSS \
         passes {} MiB.",
        options.seconds, options.rss_cap_mib
    ));
    Ok(())
}

/// The service as every case runs it.
fn start_service(tools: &Tools, sandbox: &Sandbox) -> Result<(Service, std::path::PathBuf)> {
    sandbox.mark_indexed()?;
    let fake = FakeCgc::new(&tools.fake_cgc, sandbox, None)?;
    let mut env = fake.env();
    env.push(var("CGC_FRESHNESS_AUTO_SYNC", "false"));
    env.push(var("CGC_FRESHNESS_WATCH", "off"));
    env.push(var("CGC_FRESH_LOG", "info"));
    let log = sandbox.root().join("serve.log");
    let service = Service::start(&tools.service_bin, sandbox, &env, Log::File(log.clone()))?;
    Ok((service, log))
}

/// Memory over one case.
#[derive(Debug, Default, Clone, Copy)]
struct Memory {
    before_kib: u64,
    sampled_max_kib: u64,
    hwm_kib: u64,
    after_kib: u64,
}

/// Samples VmRSS every 5 ms until stopped.
struct Sampler {
    stop: Arc<AtomicBool>,
    max: Arc<AtomicU64>,
    thread: thread::JoinHandle<()>,
}

impl Sampler {
    fn start(pid: i32) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let max = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, max) = (Arc::clone(&stop), Arc::clone(&max));
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(rss) = procfs::rss_kib(pid) {
                        max.fetch_max(rss, Ordering::Relaxed);
                    }
                    thread::sleep(Duration::from_millis(5));
                }
            })
        };
        Sampler { stop, max, thread }
    }

    fn max_kib(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }

    fn finish(self, pid: i32, before_kib: u64) -> Result<Memory> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        Ok(Memory {
            before_kib,
            sampled_max_kib: self.max.load(Ordering::Relaxed),
            hwm_kib: procfs::peak_rss_kib(pid)?,
            after_kib: procfs::rss_kib(pid)?,
        })
    }
}

struct Flood {
    requests: u64,
    bytes: u64,
    blocked: bool,
    elapsed: Duration,
    /// Generated, not yet written when the flood stopped.
    unwritten: Vec<u8>,
}

/// Writes `line(n)` request lines without reading (see the module docs).
fn flood(
    stream: &UnixStream,
    sampler: &Sampler,
    options: &SlowReaderOptions,
    mut line: impl FnMut(u64) -> String,
) -> Result<Flood> {
    stream.set_write_timeout(Some(Duration::from_millis(50)))?;
    let mut writer = stream;
    let began = Instant::now();
    let (mut requests, mut bytes) = (0u64, 0u64);
    let mut pending: Vec<u8> = Vec::new();
    let mut offset = 0usize;
    let mut last_progress = Instant::now();
    let cap_kib = options.rss_cap_mib * 1024;
    let blocked = loop {
        if began.elapsed() > Duration::from_secs(options.seconds) || sampler.max_kib() > cap_kib {
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
                bytes += n as u64;
                last_progress = Instant::now();
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if last_progress.elapsed() >= Duration::from_secs(1) {
                    break true;
                }
            }
            Err(e) => return Err(e).context("flood write"),
        }
    };
    stream.set_write_timeout(None)?;
    Ok(Flood {
        requests,
        bytes,
        blocked,
        elapsed: began.elapsed(),
        unwritten: pending[offset..].to_vec(),
    })
}

/// A connection that said hello (its welcome read), as a raw stream.
fn greeted(service: &Service, instance: &str, subscribe: bool) -> Result<UnixStream> {
    let mut conn = Conn::connect(&service.socket)?;
    conn.hello(instance)?;
    if subscribe {
        conn.subscribe()?;
    }
    Ok(conn.stream().try_clone()?)
}

fn time_other_client(service: &Service) -> Result<Duration> {
    let started = Instant::now();
    let mut other = Conn::connect(&service.socket)?;
    other.hello("bench-other")?;
    let state = other.request(json!({"type": "status"}), "other")?;
    if state["type"] != "state" {
        bail!("status answered with {state}");
    }
    Ok(started.elapsed())
}

struct Requester {
    flood: Flood,
    memory: Memory,
    other_client: Duration,
    replies: u64,
    drained_in: Duration,
}

fn requester(tools: &Tools, options: &SlowReaderOptions) -> Result<Requester> {
    let sandbox = Sandbox::new(&tools.scratch)?;
    let (service, _log) = start_service(tools, &sandbox)?;
    let pid = service.pid();
    let stream = greeted(&service, "bench-requester", false)?;
    thread::sleep(Duration::from_millis(200));
    let before = procfs::rss_kib(pid)?;
    let sampler = Sampler::start(pid);
    eprintln!("cgc-fresh-bench: slow-reader: requester flooding");
    let flood = flood(&stream, &sampler, options, |n| {
        format!("{{\"type\":\"config\",\"id\":{n}}}")
    })?;
    let other_client = time_other_client(&service)?;
    let memory = sampler.finish(pid, before)?;
    if !flood.blocked {
        eprintln!("cgc-fresh-bench: slow-reader: the requester's writes never blocked");
    }
    // Now it reads; the rest of its last chunk goes out meanwhile.
    let started = Instant::now();
    let total = flood.requests;
    let reader_stream = stream.try_clone()?;
    reader_stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let reader = thread::spawn(move || -> Result<u64> {
        let mut conn_reader = std::io::BufReader::new(reader_stream);
        let mut line = String::new();
        let mut expected = 0u64;
        while expected < total {
            line.clear();
            if std::io::BufRead::read_line(&mut conn_reader, &mut line)? == 0 {
                break;
            }
            let frame: Value = serde_json::from_str(&line)?;
            if frame["id"] != expected {
                bail!("reply {expected} expected, got {frame}");
            }
            expected += 1;
        }
        Ok(expected)
    });
    (&stream).write_all(&flood.unwritten)?;
    let replies = reader
        .join()
        .map_err(|_| anyhow::anyhow!("reader panicked"))??;
    Ok(Requester {
        flood,
        memory,
        other_client,
        replies,
        drained_in: started.elapsed(),
    })
}

struct Subscriber {
    edits: u64,
    elapsed: Duration,
    memory: Memory,
    states_read: u64,
    last_is_latest: bool,
}

fn subscriber(tools: &Tools, options: &SlowReaderOptions) -> Result<Subscriber> {
    let sandbox = Sandbox::new(&tools.scratch)?;
    let (service, _log) = start_service(tools, &sandbox)?;
    let pid = service.pid();
    let stream = greeted(&service, "bench-subscriber", true)?;
    let mut editor = Conn::connect(&service.socket)?;
    editor.hello("bench-editor")?;
    editor.send(&json!({"type": "session_start", "session": "s1", "reason": "startup"}))?;
    thread::sleep(Duration::from_millis(200));
    let before = procfs::rss_kib(pid)?;
    let sampler = Sampler::start(pid);
    eprintln!(
        "cgc-fresh-bench: slow-reader: {} edits, subscriber not reading",
        options.edits
    );
    let started = Instant::now();
    for n in 0..options.edits {
        let id = format!("e{n}");
        let ack = editor.request(
            json!({"type": "tool_call", "session": "s1", "tool": "edit", "paths": [format!("src/f{n}.py")]}),
            &id,
        )?;
        if ack["type"] != "ack" {
            bail!("tool_call answered with {ack}");
        }
        if sampler.max_kib() > options.rss_cap_mib * 1024 {
            eprintln!("cgc-fresh-bench: slow-reader: VmRSS cap reached after {n} edits");
            break;
        }
    }
    let elapsed = started.elapsed();
    let latest = editor.request(json!({"type": "status"}), "latest")?;
    let latest_epoch = latest["edit_epoch"].as_u64().unwrap_or(0);
    let memory = sampler.finish(pid, before)?;
    // Now it reads until the latest state.
    let mut reader = std::io::BufReader::new(stream);
    reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(30)))?;
    let (mut states_read, mut last_epoch) = (0u64, 0u64);
    let mut line = String::new();
    while last_epoch < latest_epoch {
        line.clear();
        if std::io::BufRead::read_line(&mut reader, &mut line)? == 0 {
            break;
        }
        let frame: Value = serde_json::from_str(&line)?;
        if frame["type"] == "state" {
            states_read += 1;
            last_epoch = frame["edit_epoch"].as_u64().unwrap_or(0);
        }
    }
    Ok(Subscriber {
        edits: options.edits,
        elapsed,
        memory,
        states_read,
        last_is_latest: last_epoch == latest_epoch,
    })
}

struct OverBound {
    flood: Flood,
    disconnected_after: Option<Duration>,
    memory: Memory,
    read_bytes: u64,
    read_lines: u64,
    last_line: String,
    ends_with_error: bool,
}

fn over_bound_subscriber(tools: &Tools, options: &SlowReaderOptions) -> Result<OverBound> {
    let sandbox = Sandbox::new(&tools.scratch)?;
    let (service, log) = start_service(tools, &sandbox)?;
    let pid = service.pid();
    let stream = greeted(&service, "bench-over", true)?;
    thread::sleep(Duration::from_millis(200));
    let before = procfs::rss_kib(pid)?;
    let sampler = Sampler::start(pid);
    eprintln!("cgc-fresh-bench: slow-reader: subscriber flooding");
    let flood = flood(&stream, &sampler, options, |n| {
        format!("{{\"type\":\"status\",\"id\":{n}}}")
    })?;
    let blocked_at = Instant::now();
    let disconnected = wait_for(
        "slow_subscriber_disconnected",
        Duration::from_secs(30),
        Duration::from_millis(20),
        || {
            std::fs::read_to_string(&log)
                .is_ok_and(|t| t.contains("\"slow_subscriber_disconnected\""))
        },
    );
    let disconnected_after = disconnected.is_ok().then(|| blocked_at.elapsed());
    let memory = sampler.finish(pid, before)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut bytes = Vec::new();
    match (&stream).read_to_end(&mut bytes) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        Err(e) => return Err(e).context("reading after the disconnect"),
    }
    let text = String::from_utf8_lossy(&bytes);
    let last = text.lines().last().unwrap_or_default();
    let frame: Value = serde_json::from_str(last).unwrap_or_default();
    let ends_with_error = frame["type"] == "error";
    let last_line = if ends_with_error {
        format!("`error` `{}`", frame["code"].as_str().unwrap_or_default())
    } else {
        format!("`{}`", frame["type"].as_str().unwrap_or("nothing"))
    };
    Ok(OverBound {
        flood,
        disconnected_after,
        memory,
        read_bytes: bytes.len() as u64,
        read_lines: text.lines().count() as u64,
        last_line,
        ends_with_error,
    })
}
