//! `startup`: from spawning `cgc-fresh serve` to its socket accepting a
//! connection, to the first reply (`hello` → `welcome`), and to `READY=1`
//! on a `NOTIFY_SOCKET` (what systemd waits for with `Type=notify`).

use std::time::{Duration, Instant};

use anyhow::Result;

use super::Tools;
use crate::conn::Conn;
use crate::fake::FakeCgc;
use crate::report::{self, verdict, Table};
use crate::service::{Log, Sandbox, Service};
use crate::stats::{fmt_duration, Summary};

const TARGET: Duration = Duration::from_millis(20);
/// How often `connect` is retried while the service starts.
const POLL: Duration = Duration::from_micros(100);

pub fn run(tools: &Tools, starts: usize) -> Result<()> {
    report::section(
        "startup: spawn → socket accepting → READY=1",
        &tools.command_line,
    );
    let mut accepting = Vec::with_capacity(starts);
    let mut welcomed = Vec::with_capacity(starts);
    let mut ready = Vec::with_capacity(starts);
    for _ in 0..starts {
        let sandbox = Sandbox::new(&tools.scratch)?;
        let fake = FakeCgc::new(&tools.fake_cgc, &sandbox, None)?;
        let log = sandbox.root().join("serve.log");
        // A notification socket, read by a thread that notes when READY=1
        // arrives (the time it is read would include our own polling).
        let notify_path = sandbox.root().join("notify.sock");
        let notify = std::os::unix::net::UnixDatagram::bind(&notify_path)?;
        notify.set_read_timeout(Some(Duration::from_secs(20)))?;
        let ready_at = std::thread::spawn(move || -> Option<Instant> {
            let mut buffer = [0u8; 512];
            loop {
                let n = notify.recv(&mut buffer).ok()?;
                if String::from_utf8_lossy(&buffer[..n])
                    .lines()
                    .any(|l| l == "READY=1")
                {
                    return Some(Instant::now());
                }
            }
        });
        let mut env = fake.env();
        env.push((
            "NOTIFY_SOCKET".to_string(),
            notify_path.display().to_string(),
        ));
        let mut service = Service::spawn(&tools.service_bin, &sandbox, &env, Log::File(log))?;
        let accepted_after = service.wait_accepting(Duration::from_secs(20), POLL)?;
        match ready_at.join().ok().flatten() {
            Some(at) => ready.push(at.duration_since(service.spawned_at)),
            None => anyhow::bail!("no READY=1 within 20 s"),
        }
        let hello_started = Instant::now();
        let mut conn = Conn::connect(&service.socket)?;
        conn.hello("bench-startup")?;
        welcomed.push(accepted_after + hello_started.elapsed());
        accepting.push(accepted_after);
        drop(conn);
        service.stop(Duration::from_secs(5))?;
    }
    let mut table = Table::new(&["metric", "starts", "min", "p50", "max", "target", "verdict"]);
    if let Some(s) = Summary::of(&accepting) {
        table.row(vec![
            "spawn → socket accepts a connection".into(),
            s.count.to_string(),
            fmt_duration(s.min),
            fmt_duration(s.p50),
            fmt_duration(s.max),
            "p50 ≤ 20 ms".into(),
            verdict(s.p50 <= TARGET),
        ]);
    }
    if let Some(s) = Summary::of(&welcomed) {
        table.row(vec![
            "spawn → `welcome` received".into(),
            s.count.to_string(),
            fmt_duration(s.min),
            fmt_duration(s.p50),
            fmt_duration(s.max),
        ]);
    }
    if let Some(s) = Summary::of(&ready) {
        table.row(vec![
            "spawn → `READY=1` on NOTIFY_SOCKET".into(),
            s.count.to_string(),
            fmt_duration(s.min),
            fmt_duration(s.p50),
            fmt_duration(s.max),
        ]);
    }
    report::print_table(&table);
    report::note(&format!(
        "Each start in a fresh sandbox (no state file), fake `cgc`, built-in defaults; \
         `connect` retried every {} µs.",
        POLL.as_micros()
    ));
    Ok(())
}
