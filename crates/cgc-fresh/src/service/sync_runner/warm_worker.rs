//! The sync runner's warm-up of the driver's worker when a session begins
//! (`Effect::WarmWorker`; the rule is `cgc_fresh_core::warm_worker`).
//!
//! The worker is started in the background and asked, on its stdin, for
//! the driver's API probe (`{"serial": N, "probe": true}`, answered like
//! the one-shot `--probe`, unless a probe already answered for these
//! settings) and then to prepare the tree (`{"prepare": true}`). Neither
//! opens the database. A sync or an MCP call that arrives meanwhile waits
//! for the warm-up — bounded by `cgc.timeoutMs`, the probe's own bound —
//! and then finds the probe answered and the worker running, instead of
//! starting a probe and a worker of its own.

use std::time::Duration;

use actix::prelude::*;
use cgc_fresh_core::config::{SyncStrategy, WatchMode};
use cgc_fresh_core::sync_plan::{parse_driver_result, probe_answer, worker_prepare};
use cgc_fresh_core::warm_worker::{warm_worker_plan, WarmFacts, WarmWorker};

use super::mcp_calls::PumpMcp;
use super::{SyncRunner, COMPONENT};

/// A warm-up under way.
pub(super) struct Warming {
    /// The serial of its probe line.
    serial: u64,
    /// The worker started for it (`None` until the spawn's reply).
    worker: Option<u64>,
    timer: Option<SpawnHandle>,
}

/// Warm the worker if it would serve the next sync (a session began).
#[derive(Message)]
#[rtype(result = "()")]
pub struct WarmUp {
    /// The observer holds a manifest of the last successful sync.
    pub manifest: bool,
}

impl SyncRunner {
    /// Whether a warm-up is under way (syncs and MCP calls wait for it).
    pub(super) fn warming(&self) -> bool {
        self.warming.is_some()
    }

    fn warm_facts(&self, manifest: bool) -> WarmFacts {
        WarmFacts {
            incremental: self.settings.cgc.sync_strategy == SyncStrategy::Incremental,
            auto_sync: self.settings.freshness.auto_sync,
            watcher_mode_on: self.settings.freshness.watch == WatchMode::On,
            manifest,
            must_reconcile: self.must_reconcile.is_some(),
            probe_refused: matches!(self.probe, Some(Err(_))),
            worker_running: self.worker.is_some(),
            busy: self.run.is_some()
                || self.mcp_active.is_some()
                || self.deferred_sync.is_some()
                || self.warming.is_some(),
        }
    }

    fn start_warm_up(&mut self, ctx: &mut Context<Self>) {
        let (program, argv) = match self.driver_command() {
            Ok(command) => command,
            Err(reason) => {
                tracing::info!(component = COMPONENT, event = "worker_warm_up_skipped", reason = %reason);
                return;
            }
        };
        self.next_serial += 1;
        let serial = self.next_serial;
        let Some(spawn) = self.worker_spawn(program, argv, ctx) else {
            return;
        };
        let timeout = Duration::from_millis(self.settings.cgc.timeout_ms);
        let timer = ctx.run_later(timeout, move |act, ctx| act.warm_up_timed_out(serial, ctx));
        self.warming = Some(Warming {
            serial,
            worker: None,
            timer: Some(timer),
        });
        tracing::info!(
            component = COMPONENT,
            event = "worker_warm_up_started",
            serial,
            probe = self.probe.is_none()
        );
        let request = self.supervisor.send(spawn);
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            let started = match result {
                Ok(Ok(started)) => started,
                Ok(Err(error)) => {
                    act.end_warm_up(serial, &format!("cannot start the worker: {error}"), ctx);
                    return;
                }
                Err(mailbox) => {
                    act.end_warm_up(serial, &format!("cannot start the worker: {mailbox}"), ctx);
                    return;
                }
            };
            act.worker_started(&started, "warm-up");
            let Some(warming) = act.warming.as_mut().filter(|w| w.serial == serial) else {
                // Out of time already: the worker waits for the next
                // request like any other.
                return;
            };
            warming.worker = Some(started.id);
            if act.probe.is_none() {
                let line = format!("{{\"serial\":{serial},\"probe\":true}}\n");
                act.write_to_worker(started.id, line, ctx);
            } else {
                act.prepare_warm_worker(started.id, ctx);
                act.end_warm_up(serial, "prepared", ctx);
            }
        }));
    }

    fn prepare_warm_worker(&mut self, id: u64, ctx: &mut Context<Self>) {
        tracing::info!(
            component = COMPONENT,
            event = "driver_worker_prepare",
            id,
            for_request = "warm-up"
        );
        self.write_to_worker(id, worker_prepare(), ctx);
    }

    /// A line of worker `id`: the answer to the warm-up's probe. Returns
    /// whether it was one.
    pub(super) fn warm_up_line(&mut self, id: u64, text: &str, ctx: &mut Context<Self>) -> bool {
        let Some(warming) = self.warming.as_ref().filter(|w| w.worker == Some(id)) else {
            return false;
        };
        let serial = warming.serial;
        let Some(parsed) = parse_driver_result(text).filter(|r| r.serial == Some(serial)) else {
            return false;
        };
        let answer = probe_answer(Some(&parsed), parsed.exit).unwrap_or_else(|| {
            Err(format!(
                "its API probe ended with exit code {}",
                parsed
                    .exit
                    .map_or("none".to_string(), |code| code.to_string())
            ))
        });
        tracing::info!(
            component = COMPONENT,
            event = "driver_probe_result",
            ok = answer.is_ok(),
            reason = answer.as_ref().err(),
            unproven = answer.as_ref().ok().and_then(|note| note.as_deref()),
            by = "worker"
        );
        self.probe = Some(answer.clone());
        match answer {
            Ok(_) => {
                self.prepare_warm_worker(id, ctx);
                self.end_warm_up(serial, "prepared", ctx);
            }
            Err(_) => {
                // The next sync reconciles (its fallback note names why);
                // a worker that cannot apply serves nothing.
                self.drop_worker("its API probe refused");
                self.end_warm_up(serial, "the probe refused", ctx);
            }
        }
        true
    }

    /// Worker `id` exited: a warm-up waiting on it ends.
    pub(super) fn warm_up_worker_exited(&mut self, id: u64, ctx: &mut Context<Self>) {
        if let Some(serial) = self
            .warming
            .as_ref()
            .filter(|w| w.worker == Some(id))
            .map(|w| w.serial)
        {
            self.end_warm_up(serial, "the worker ended before its probe answered", ctx);
        }
    }

    fn warm_up_timed_out(&mut self, serial: u64, ctx: &mut Context<Self>) {
        let Some(warming) = self.warming.as_mut().filter(|w| w.serial == serial) else {
            return;
        };
        warming.timer = None;
        if warming.worker.is_some() {
            self.drop_worker("its warm-up probe ran out of time");
        }
        self.end_warm_up(serial, "out of time", ctx);
    }

    /// The warm-up `serial` ended (`how`): what waited for it goes on.
    fn end_warm_up(&mut self, serial: u64, how: &str, ctx: &mut Context<Self>) {
        let Some(warming) = self.warming.take_if(|w| w.serial == serial) else {
            return;
        };
        if let Some(timer) = warming.timer {
            ctx.cancel_future(timer);
        }
        tracing::info!(
            component = COMPONENT,
            event = "worker_warm_up_ended",
            serial,
            how
        );
        ctx.notify(PumpMcp);
    }
}

impl Handler<WarmUp> for SyncRunner {
    type Result = ();
    fn handle(&mut self, msg: WarmUp, ctx: &mut Self::Context) {
        match warm_worker_plan(self.warm_facts(msg.manifest)) {
            WarmWorker::Start => self.start_warm_up(ctx),
            WarmWorker::Skip(reason) => {
                tracing::debug!(
                    component = COMPONENT,
                    event = "worker_warm_up_skipped",
                    reason
                );
            }
        }
    }
}
