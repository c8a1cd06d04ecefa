//! `startup`: from spawning `cgc-fresh serve` to its socket accepting a
//! connection, and to the first reply (`hello` → `welcome`).

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
    report::section("startup: spawn → socket accepting", &tools.command_line);
    let mut accepting = Vec::with_capacity(starts);
    let mut welcomed = Vec::with_capacity(starts);
    for _ in 0..starts {
        let sandbox = Sandbox::new(&tools.scratch)?;
        let fake = FakeCgc::new(&tools.fake_cgc, &sandbox, None)?;
        let log = sandbox.root().join("serve.log");
        let mut service =
            Service::spawn(&tools.service_bin, &sandbox, &fake.env(), Log::File(log))?;
        let accepted_after = service.wait_accepting(Duration::from_secs(20), POLL)?;
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
    report::print_table(&table);
    report::note(&format!(
        "Each start in a fresh sandbox (no state file), fake `cgc`, built-in defaults; \
         `connect` retried every {} µs.",
        POLL.as_micros()
    ));
    Ok(())
}
