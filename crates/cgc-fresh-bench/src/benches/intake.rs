//! `intake`: how fast the service takes in harness events.
//!
//! 1. Round trip: a subscribed harness sends a `tool_call` for a modifying
//!    tool and waits for the `state` the service pushes because the record
//!    changed (every edit bumps `edit_epoch`, which is in the record). With
//!    `autoSync` off nothing is spawned, so this is the event path alone:
//!    socket → decode → freshness machine → persist → push.
//! 2. Flood: one connection writes tool_call frames without ids (no acks) as
//!    fast as the socket takes them while a reader thread drains the pushed
//!    frames; a final `status` with an id marks the point where the service
//!    has consumed everything. The service's memory is sampled meanwhile.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};

use super::{var, Tools};
use crate::conn::Conn;
use crate::fake::FakeCgc;
use crate::procfs;
use crate::report::{self, verdict, Table};
use crate::service::{Log, Sandbox, Service};
use crate::stats::{fmt_count, fmt_duration, fmt_kib, Summary};

const TOOL_CALL: &str =
    r#"{"type":"tool_call","session":"s1","tool":"edit","paths":["src/lib.rs"]}"#;
const FLOOD_END: &str = r#"{"id":"flood-end","type":"status"}"#;
const P99_TARGET: Duration = Duration::from_micros(100);
const THROUGHPUT_TARGET: f64 = 500_000.0;
const RSS_TARGET_KIB: u64 = 32 * 1024;

pub struct IntakeOptions {
    pub round_trips: usize,
    pub warmup: usize,
    pub flood_frames: u64,
}

pub fn run(tools: &Tools, options: &IntakeOptions) -> Result<()> {
    report::section(
        "intake: tool_call → state round trip and pipelined flood",
        &tools.command_line,
    );
    let round_trip = measure_round_trips(tools, options)?;
    print_round_trips(options, &round_trip);
    let flood = measure_flood(tools, options.flood_frames)?;
    print_flood(options.flood_frames, &flood);
    Ok(())
}

/// The service as both measurements run it: the fake `cgc` (never
/// started: autoSync off), log discarded.
fn start_service(tools: &Tools, sandbox: &Sandbox) -> Result<Service> {
    let fake = FakeCgc::new(&tools.fake_cgc, sandbox, None)?;
    let mut env = fake.env();
    env.push(var("CGC_FRESHNESS_AUTO_SYNC", "false"));
    Service::start(&tools.service_bin, sandbox, &env, Log::Discard)
}

struct RoundTrips {
    samples: Vec<Duration>,
    /// Edits answered by a state whose edit_epoch was the previous one + 1.
    epoch_steps: usize,
    edits: usize,
    notices: usize,
}

fn measure_round_trips(tools: &Tools, options: &IntakeOptions) -> Result<RoundTrips> {
    let sandbox = Sandbox::new(&tools.scratch)?;
    let service = start_service(tools, &sandbox)?;
    let mut conn = Conn::connect(&service.socket)?;
    conn.hello("bench-intake")?;
    let initial = conn.subscribe()?;
    conn.send_line(r#"{"type":"session_start","session":"s1","reason":"startup"}"#)?;
    conn.set_read_timeout(Duration::from_secs(5))?;
    let mut epoch = initial["edit_epoch"].as_u64().unwrap_or(0);
    let edits = options.warmup + options.round_trips;
    let mut result = RoundTrips {
        samples: Vec::with_capacity(options.round_trips),
        epoch_steps: 0,
        edits,
        notices: 0,
    };
    for i in 0..edits {
        let started = Instant::now();
        conn.send_line(TOOL_CALL)?;
        let state = loop {
            let frame = conn
                .recv()
                .map_err(|e| anyhow!("edit {i}: no state pushed: {e}"))?;
            match frame["type"].as_str() {
                Some("state") => break frame,
                Some("notice") => result.notices += 1,
                _ => bail!("edit {i}: unexpected frame {frame}"),
            }
        };
        let elapsed = started.elapsed();
        let new_epoch = state["edit_epoch"].as_u64().unwrap_or(0);
        if new_epoch == epoch + 1 {
            result.epoch_steps += 1;
        }
        epoch = new_epoch;
        if i >= options.warmup {
            result.samples.push(elapsed);
        }
    }
    Ok(result)
}

fn print_round_trips(options: &IntakeOptions, rt: &RoundTrips) {
    let mut table = Table::new(&[
        "metric", "count", "min", "p50", "p99", "max", "target", "verdict",
    ]);
    if let Some(s) = Summary::of(&rt.samples) {
        table.row(vec![
            "tool_call → pushed state".into(),
            fmt_count(s.count as u64),
            fmt_duration(s.min),
            fmt_duration(s.p50),
            fmt_duration(s.p99),
            fmt_duration(s.max),
            "p99 ≤ 100 µs".into(),
            verdict(s.p99 <= P99_TARGET),
        ]);
    }
    report::print_table(&table);
    report::note(&format!(
        "Every edit pushed a state: {} of {} edits ({} warm-up edits not timed) were answered by a \
         `state` whose `edit_epoch` was the previous one + 1; {} notice(s) arrived on the way \
         (the one-time possibly-stale notice).",
        fmt_count(rt.epoch_steps as u64),
        fmt_count(rt.edits as u64),
        fmt_count(options.warmup as u64),
        rt.notices
    ));
}

struct Flood {
    consumed_after: Duration,
    written_after: Duration,
    states: u64,
    notices: u64,
    rss_before_kib: u64,
    rss_max_sampled_kib: u64,
    rss_samples: usize,
    hwm_kib: u64,
    rss_after_kib: u64,
}

/// What the reader thread counted.
struct Drained {
    states: u64,
    notices: u64,
    done_at: Instant,
}

fn measure_flood(tools: &Tools, frames: u64) -> Result<Flood> {
    let sandbox = Sandbox::new(&tools.scratch)?;
    let service = start_service(tools, &sandbox)?;
    let pid = service.pid();
    let mut conn = Conn::harness(&service.socket, "s1")?;
    let mut writer = conn.stream().try_clone()?;
    conn.set_read_timeout(Duration::from_secs(600))?;
    // Let start-up work finish before the baseline.
    thread::sleep(Duration::from_millis(200));
    let rss_before_kib = procfs::rss_kib(pid)?;

    let stop_sampling = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = Arc::clone(&stop_sampling);
        thread::spawn(move || {
            let (mut max, mut samples) = (0u64, 0usize);
            while !stop.load(Ordering::Relaxed) {
                if let Ok(rss) = procfs::rss_kib(pid) {
                    max = max.max(rss);
                    samples += 1;
                }
                thread::sleep(Duration::from_millis(5));
            }
            (max, samples)
        })
    };
    let reader = thread::spawn(move || -> Result<Drained> {
        let (mut states, mut notices) = (0u64, 0u64);
        loop {
            let line = conn.recv_line()?;
            if line.contains(r#""id":"flood-end""#) {
                return Ok(Drained {
                    states,
                    notices,
                    done_at: Instant::now(),
                });
            }
            if line.contains(r#""type":"state""#) {
                states += 1;
                if states % 100_000 == 0 {
                    eprintln!(
                        "cgc-fresh-bench: flood: {} states pushed back",
                        fmt_count(states)
                    );
                }
            } else if line.contains(r#""type":"notice""#) {
                notices += 1;
            }
        }
    });

    const FRAMES_PER_WRITE: u64 = 1_000;
    let chunk = format!("{TOOL_CALL}\n").repeat(FRAMES_PER_WRITE as usize);
    let started = Instant::now();
    let mut left = frames;
    while left > 0 {
        let n = left.min(FRAMES_PER_WRITE);
        let bytes = &chunk.as_bytes()[..(n as usize) * (TOOL_CALL.len() + 1)];
        writer.write_all(bytes)?;
        left -= n;
    }
    writer.write_all(format!("{FLOOD_END}\n").as_bytes())?;
    let written_after = started.elapsed();
    let drained = reader
        .join()
        .map_err(|_| anyhow!("the reader thread panicked"))??;
    let consumed_after = drained.done_at.duration_since(started);
    let hwm_kib = procfs::peak_rss_kib(pid)?;
    let rss_after_kib = procfs::rss_kib(pid)?;
    stop_sampling.store(true, Ordering::Relaxed);
    let (rss_max_sampled_kib, rss_samples) = sampler
        .join()
        .map_err(|_| anyhow!("the sampler thread panicked"))?;
    Ok(Flood {
        consumed_after,
        written_after,
        states: drained.states,
        notices: drained.notices,
        rss_before_kib,
        rss_max_sampled_kib,
        rss_samples,
        hwm_kib,
        rss_after_kib,
    })
}

fn print_flood(frames: u64, flood: &Flood) {
    let rate = frames as f64 / flood.consumed_after.as_secs_f64();
    let mut table = Table::new(&["metric", "value", "target", "verdict"]);
    table.row(vec![
        "tool_call frames sent (no ids, pipelined)".into(),
        fmt_count(frames),
    ]);
    table.row(vec![
        "all consumed (final `status` answered) after".into(),
        fmt_duration(flood.consumed_after),
    ]);
    table.row(vec![
        "throughput".into(),
        format!("{} frames/s", fmt_count(rate as u64)),
        "≥ 500 000 frames/s".into(),
        verdict(rate >= THROUGHPUT_TARGET),
    ]);
    table.row(vec![
        "writer done after".into(),
        fmt_duration(flood.written_after),
    ]);
    table.row(vec![
        "state frames pushed back".into(),
        format!("{} (+{} notice)", fmt_count(flood.states), flood.notices),
    ]);
    table.row(vec![
        "VmRSS before the flood".into(),
        fmt_kib(flood.rss_before_kib),
    ]);
    table.row(vec![
        "peak RSS (VmHWM at the end)".into(),
        fmt_kib(flood.hwm_kib),
        "≤ 32 MiB".into(),
        verdict(flood.hwm_kib <= RSS_TARGET_KIB),
    ]);
    table.row(vec![
        format!(
            "highest sampled VmRSS ({} samples, every 5 ms)",
            fmt_count(flood.rss_samples as u64)
        ),
        fmt_kib(flood.rss_max_sampled_kib),
    ]);
    table.row(vec![
        "VmRSS right after the flood".into(),
        fmt_kib(flood.rss_after_kib),
    ]);
    report::print_table(&table);
}
