//! The sync runner's warm-up of the driver's worker when a session begins
//! (`Effect::WarmWorker`; the rule is `cgc_fresh_core::warm_worker`).
//!
//! The worker is started in the background and asked, on its stdin, for
//! the driver's API probe (`{"serial": N, "probe": true}`, answered like
//! the one-shot `--probe`, unless a probe already answered for these
//! settings) and then to prepare the tree (`{"prepare": true}`). Neither
//! opens the database. Where the first sync would have to ask whether the
//! workspace is indexed (the consent listing, `cgc list`: no
//! `lifecycle.autoCreate`, no `.codegraphcontext/`, no earlier answer),
//! the warm-up asks it meanwhile, as the sync would, and remembers a yes.
//! A sync or an MCP call that arrives meanwhile waits for the warm-up —
//! bounded by `cgc.timeoutMs`, the probe's own bound — and then finds the
//! probe answered, the listing done and the worker running, instead of
//! starting a probe, a listing and a worker of its own.

use std::time::Duration;

use actix::prelude::*;
use cgc_fresh_core::config::{SyncStrategy, WatchMode};
use cgc_fresh_core::sync_exit::{listing_verdict, ChildEnd, ListingVerdict};
use cgc_fresh_core::sync_plan::{
    list_argv, parse_driver_result, probe_answer, worker_prepare, worker_probe,
};
use cgc_fresh_core::sync_run::{consent, Consent};
use cgc_fresh_core::warm_worker::{warm_worker_plan, WarmFacts, WarmWorker};

use super::mcp_calls::PumpMcp;
use super::{SyncRunner, COMPONENT};
use crate::process::cgc_markers::output_has_backend_fallback;
use crate::process::spawn::ChildKind;
use crate::supervisor::{SpawnChild, StopChild};

/// Lines of `cgc list` kept (as the sync's own listing keeps).
const MAX_LISTING_LINES: usize = 10_000;

/// The consent listing a warm-up runs.
enum Listing {
    /// Not needed (consent is known), or done.
    Settled,
    /// `cgc list` runs (its id once the spawn's reply names it).
    Running {
        child: Option<u64>,
        lines: Vec<String>,
    },
}

/// A warm-up under way.
pub(super) struct Warming {
    /// The serial of its probe line.
    serial: u64,
    /// The worker started for it (`None` until the spawn's reply).
    worker: Option<u64>,
    /// The probe answered (or no probe was needed, or the worker ended).
    probe_done: bool,
    listing: Listing,
    timer: Option<SpawnHandle>,
}

/// Warm the worker if it would serve the next sync (a session began).
#[derive(Message)]
#[rtype(result = "()")]
pub struct WarmUp;

impl SyncRunner {
    /// Whether a warm-up is under way (syncs and MCP calls wait for it).
    pub(super) fn warming(&self) -> bool {
        self.warming.is_some()
    }

    fn warm_facts(&self) -> WarmFacts {
        WarmFacts {
            incremental: self.settings.cgc.sync_strategy == SyncStrategy::Incremental,
            auto_sync: self.settings.freshness.auto_sync,
            watcher_mode_on: self.settings.freshness.watch == WatchMode::On,
            must_reconcile: self.must_reconcile.is_some(),
            probe_refused: matches!(self.probe, Some(Err(_))),
            worker_running: self.workers.current().is_some(),
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
        // The warm-up asks no session's answer: a listing settles it.
        let consented = consent(self.consent_facts(false)) == Consent::Granted;
        self.warming = Some(Warming {
            serial,
            worker: None,
            probe_done: false,
            listing: if consented {
                Listing::Settled
            } else {
                Listing::Running {
                    child: None,
                    lines: Vec::new(),
                }
            },
            timer: Some(timer),
        });
        if !consented {
            self.start_warm_listing(serial, ctx);
        }
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
                act.write_to_worker(started.id, worker_probe(serial), ctx);
            } else {
                act.prepare_warm_worker(started.id, ctx);
                act.probe_done(serial, ctx);
            }
        }));
    }

    /// Runs the consent listing (`cgc list`) for warm-up `serial`.
    fn start_warm_listing(&mut self, serial: u64, ctx: &mut Context<Self>) {
        tracing::info!(
            component = COMPONENT,
            event = "consent_listing_started",
            by = "warm-up"
        );
        let request = self.supervisor.send(SpawnChild {
            program: std::path::PathBuf::from(&self.settings.cgc.executable),
            args: list_argv(&self.settings.cgc.global_args),
            env_set: Vec::new(),
            kind: ChildKind::Probe,
            session: None,
            requester: ctx.address().recipient(),
            piped_stdin: false,
        });
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            let id = match result {
                Ok(Ok(started)) => started.id,
                Ok(Err(error)) => {
                    tracing::info!(component = COMPONENT, event = "consent_listing", by = "warm-up", conclusive = false, error = %error);
                    act.listing_done(serial, ctx);
                    return;
                }
                Err(mailbox) => {
                    tracing::info!(component = COMPONENT, event = "consent_listing", by = "warm-up", conclusive = false, error = %mailbox);
                    act.listing_done(serial, ctx);
                    return;
                }
            };
            match act.warming.as_mut().filter(|w| w.serial == serial) {
                Some(Warming {
                    listing: Listing::Running { child, .. },
                    ..
                }) => *child = Some(id),
                // The warm-up ended (out of time): the listing goes too.
                _ => act.supervisor.do_send(StopChild {
                    id,
                    reason: "its warm-up ended",
                }),
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
        if let Some(Warming {
            listing: Listing::Running { child, lines },
            ..
        }) = self.warming.as_mut()
        {
            if *child == Some(id) {
                if lines.len() < MAX_LISTING_LINES {
                    lines.push(text.to_string());
                }
                return true;
            }
        }
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
            Ok(_) => self.prepare_warm_worker(id, ctx),
            // The next sync reconciles (its fallback note names why); a
            // worker that cannot apply serves nothing.
            Err(_) => self.drop_worker("its API probe refused"),
        }
        self.probe_done(serial, ctx);
        true
    }

    /// Child `id` exited (`code`): the warm-up's worker, before its probe
    /// answered, or its listing. Returns whether it was the listing (the
    /// runner has nothing else to do with it).
    pub(super) fn warm_up_child_exited(
        &mut self,
        id: u64,
        code: Option<i32>,
        ctx: &mut Context<Self>,
    ) -> bool {
        let Some(warming) = self.warming.as_mut() else {
            return false;
        };
        let serial = warming.serial;
        if warming.worker == Some(id) && !warming.probe_done {
            tracing::info!(
                component = COMPONENT,
                event = "worker_warm_up_worker_ended",
                serial
            );
            self.probe_done(serial, ctx);
            return false;
        }
        let Listing::Running { child, lines } = &warming.listing else {
            return false;
        };
        if *child != Some(id) {
            return false;
        }
        let workspace = self.workspace.display().to_string();
        let end = ChildEnd {
            code,
            fell_back: output_has_backend_fallback(&lines.join("\n")),
            ..ChildEnd::default()
        };
        // The warm-up's listing has no budget of its own and no output
        // tail to tell: the verdict is read the sync's way.
        let verdict = listing_verdict(&workspace, lines, end, 0, "");
        let conclusive = !matches!(verdict, ListingVerdict::Inconclusive { .. });
        let indexed = verdict == ListingVerdict::Indexed;
        tracing::info!(
            component = COMPONENT,
            event = "consent_listing",
            by = "warm-up",
            indexed,
            conclusive,
            code
        );
        // Only a yes is remembered: a no, or no answer, is asked again by
        // the sync itself, which declines and tells the session.
        if indexed {
            self.known_indexed = true;
        }
        self.listing_done(serial, ctx);
        true
    }

    fn probe_done(&mut self, serial: u64, ctx: &mut Context<Self>) {
        if let Some(warming) = self.warming.as_mut().filter(|w| w.serial == serial) {
            warming.probe_done = true;
        }
        self.end_warm_up_if_done(serial, ctx);
    }

    fn listing_done(&mut self, serial: u64, ctx: &mut Context<Self>) {
        if let Some(warming) = self.warming.as_mut().filter(|w| w.serial == serial) {
            warming.listing = Listing::Settled;
        }
        self.end_warm_up_if_done(serial, ctx);
    }

    fn end_warm_up_if_done(&mut self, serial: u64, ctx: &mut Context<Self>) {
        let done = self.warming.as_ref().is_some_and(|w| {
            w.serial == serial && w.probe_done && matches!(w.listing, Listing::Settled)
        });
        if done {
            self.end_warm_up(serial, "ready", ctx);
        }
    }

    fn warm_up_timed_out(&mut self, serial: u64, ctx: &mut Context<Self>) {
        let Some(warming) = self.warming.as_mut().filter(|w| w.serial == serial) else {
            return;
        };
        warming.timer = None;
        let probing = warming.worker.is_some() && !warming.probe_done;
        if let Listing::Running {
            child: Some(id), ..
        } = warming.listing
        {
            self.supervisor.do_send(StopChild {
                id,
                reason: "its warm-up ran out of time",
            });
        }
        if probing {
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
    fn handle(&mut self, _msg: WarmUp, ctx: &mut Self::Context) {
        match warm_worker_plan(self.warm_facts()) {
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
