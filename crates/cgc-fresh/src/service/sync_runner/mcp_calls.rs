//! The sync runner's MCP requests (`cgc-fresh mcp`): CGC's tools answered
//! by the incremental driver's worker, one at a time, between syncs (the
//! worker is the database's one owner).
//!
//! A call may ask the worker to keep the database open for the next one
//! (`mcp.holdDatabaseMs`, 0 by default; never with `freshness.watch =
//! "on"`). The runner then remembers that the worker may hold it
//! (`database_held_by`) and, before any sync starts — the worker's own or
//! a `cgc` command — asks it to release the database and waits for the
//! answer; the sync is deferred meanwhile as behind any call. A sync or
//! prepare line makes the worker release it first by itself.

use std::path::PathBuf;
use std::time::Duration;

use actix::prelude::*;
use cgc_fresh_core::config::WatchMode;
use cgc_fresh_proto::RequestId;

use super::{SyncRunner, COMPONENT};
use crate::service::mcp_route::{
    internal_error, Assembled, Assembler, McpAsk, McpRequest, CHUNK_PREFIX,
    MAX_WAITING_MCP_REQUESTS,
};
use crate::service::messages::Outlet;
use cgc_fresh_core::sync_run::driver_unavailable;

/// Where an answer goes: the client's connection and its request id.
pub(super) type McpReply = (Outlet, Option<RequestId>);

/// The MCP request being answered.
pub(super) struct ActiveMcp {
    ask: McpAsk,
    /// `None`: the runner's own release, answered to nobody.
    reply: Option<McpReply>,
    /// What the call asked the worker to hold the database for (0: not).
    hold_ms: u64,
    serial: u64,
    /// The worker asked (`None` while one is being started for it).
    worker: Option<u64>,
    assembler: Assembler,
    timer: Option<SpawnHandle>,
    started: std::time::Instant,
}

/// Look at the MCP queue (something that held it back ended).
#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct PumpMcp;

impl SyncRunner {
    /// Starts the next MCP request when nothing holds the worker: no sync
    /// runs, no other request is answered. A sync deferred behind the last
    /// answer goes first.
    pub(super) fn pump_mcp(&mut self, ctx: &mut Context<Self>) {
        if self.run.is_some() || self.mcp_active.is_some() || self.warming() {
            return;
        }
        if self.deferred_sync.is_some() && self.database_held() {
            // The sync (or the command it may run instead) needs the
            // database the worker kept for the next call.
            self.ask_worker(McpAsk::Release, None, ctx);
            return;
        }
        if let Some(sync) = self.deferred_sync.take() {
            tracing::info!(
                component = COMPONENT,
                event = "deferred_sync_started",
                flight = sync.flight.0
            );
            self.run_sync(sync, ctx);
            if self.run.is_some() {
                return;
            }
        }
        let Some(request) = self.mcp_queue.pop_front() else {
            return;
        };
        if !request.reply_to.is_open() {
            tracing::info!(
                component = COMPONENT,
                event = "mcp_request_dropped",
                tool = request.ask.tool(),
                reason = "its connection closed"
            );
            ctx.notify(PumpMcp);
            return;
        }
        self.ask_worker(request.ask, Some((request.reply_to, request.id)), ctx);
    }

    /// Whether the current worker may hold the database open for the next
    /// call (it answered a call asked to hold it, and nothing since made
    /// it close: a sync or prepare line, a release, its exit).
    pub(super) fn database_held(&self) -> bool {
        self.workers
            .current()
            .is_some_and(|worker| self.database_held_by == Some(worker.id))
    }

    /// `mcp.holdDatabaseMs`, unless a watcher may need the database.
    fn hold_ms(&self) -> u64 {
        if self.settings.freshness.watch == WatchMode::On {
            0
        } else {
            self.settings.mcp.hold_database_ms
        }
    }

    /// Sends `ask` to the worker (starting one if none runs); its answer
    /// goes to `reply`, or nowhere for the runner's own release.
    fn ask_worker(&mut self, ask: McpAsk, reply: Option<McpReply>, ctx: &mut Context<Self>) {
        self.next_serial += 1;
        let serial = self.next_serial;
        let timeout = Duration::from_millis(self.settings.cgc.maintenance_timeout_ms);
        let timer = ctx.run_later(timeout, move |act, ctx| act.mcp_timed_out(serial, ctx));
        let hold_ms = match ask {
            McpAsk::Call { .. } => self.hold_ms(),
            McpAsk::Tools | McpAsk::Release => 0,
        };
        tracing::info!(
            component = COMPONENT,
            event = "mcp_request_started",
            serial,
            tool = ask.tool(),
            hold_ms,
            worker = self.workers.current().map(|w| w.pid)
        );
        let line = ask.worker_line(serial, hold_ms);
        self.mcp_active = Some(ActiveMcp {
            ask,
            reply,
            hold_ms,
            serial,
            worker: None,
            assembler: Assembler::default(),
            timer: Some(timer),
            started: std::time::Instant::now(),
        });
        if self.workers.current().is_some_and(|w| w.stale) {
            self.drop_worker("the cgc settings changed");
        }
        if let Some(worker) = self.workers.current() {
            if let Some(active) = self.mcp_active.as_mut() {
                active.worker = Some(worker.id);
            }
            if hold_ms > 0 {
                self.database_held_by = Some(worker.id);
            }
            self.write_to_worker(worker.id, line, ctx);
            return;
        }
        match self.driver_command() {
            Ok((program, argv)) => self.spawn_mcp_worker(program, argv, serial, line, ctx),
            Err(reason) => self.finish_mcp(internal_error(driver_unavailable(&reason)), ctx),
        }
    }

    /// Starts a worker for MCP request `serial` (none runs) and sends it
    /// `line` once it exists.
    fn spawn_mcp_worker(
        &mut self,
        program: PathBuf,
        argv: Vec<String>,
        serial: u64,
        line: String,
        ctx: &mut Context<Self>,
    ) {
        let Some(spawn) = self.worker_spawn(program, argv, ctx) else {
            return;
        };
        let request = self.supervisor.send(spawn);
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            let started = match result {
                Ok(Ok(started)) => started,
                Ok(Err(error)) => {
                    act.finish_mcp(
                        internal_error(format!("cannot start the worker: {error}")),
                        ctx,
                    );
                    return;
                }
                Err(mailbox) => {
                    act.finish_mcp(
                        internal_error(format!("cannot start the worker: {mailbox}")),
                        ctx,
                    );
                    return;
                }
            };
            act.worker_started(&started, "mcp");
            // Answered meanwhile (out of time): the worker waits for the
            // next request like any other.
            if let Some(active) = act.mcp_active.as_mut().filter(|a| a.serial == serial) {
                active.worker = Some(started.id);
                if active.hold_ms > 0 {
                    act.database_held_by = Some(started.id);
                }
                act.write_to_worker(started.id, line, ctx);
            }
        }));
    }

    /// A line of worker `id`: a chunk of the current MCP answer. Returns
    /// whether it was one (nothing else is done with it).
    pub(super) fn mcp_line(&mut self, id: u64, text: &str, ctx: &mut Context<Self>) -> bool {
        let Some(rest) = text.strip_prefix(CHUNK_PREFIX) else {
            return false;
        };
        let Some(active) = self.mcp_active.as_mut().filter(|a| a.worker == Some(id)) else {
            return true;
        };
        match active.assembler.push(active.serial, rest) {
            Ok(Assembled::Partial) | Ok(Assembled::Other) => {}
            Ok(Assembled::Done(answer)) => self.finish_mcp(answer, ctx),
            Err(error) => {
                tracing::warn!(component = COMPONENT, event = "mcp_answer_unreadable", id, error = %error);
                self.drop_worker("its MCP answer could not be read");
                self.finish_mcp(internal_error(error.to_string()), ctx);
            }
        }
        true
    }

    /// Worker `id` exited: the request it was answering gets an error.
    pub(super) fn mcp_worker_exited(
        &mut self,
        id: u64,
        pid: i32,
        status: &impl std::fmt::Display,
        ctx: &mut Context<Self>,
    ) {
        if self
            .mcp_active
            .as_ref()
            .is_some_and(|a| a.worker == Some(id))
        {
            tracing::warn!(component = COMPONENT, event = "mcp_worker_exited", id, pid, status = %status);
            self.finish_mcp(
                internal_error(format!("the worker ended ({status}) before it answered")),
                ctx,
            );
        }
    }

    /// Sends the current MCP request its answer; the queue moves on.
    fn finish_mcp(&mut self, answer: cgc_fresh_proto::McpAnswer, ctx: &mut Context<Self>) {
        let Some(active) = self.mcp_active.take() else {
            return;
        };
        if let Some(timer) = active.timer {
            ctx.cancel_future(timer);
        }
        tracing::info!(
            component = COMPONENT,
            event = "mcp_answered",
            serial = active.serial,
            tool = active.ask.tool(),
            ok = answer.error.is_none(),
            elapsed_ms = active.started.elapsed().as_millis() as u64
        );
        if active.ask == McpAsk::Release {
            self.database_held_by = None;
            if answer.error.is_some() {
                // Whether the database is still open is not known: the
                // worker goes, and its exit closes whatever it held.
                self.drop_worker("its held database did not close");
            }
        }
        if let Some((reply_to, id)) = active.reply {
            reply_to.reply(&cgc_fresh_proto::Envelope::with_id(
                id,
                cgc_fresh_proto::ServerFrame::Mcp(answer),
            ));
        }
        ctx.notify(PumpMcp);
    }

    fn mcp_timed_out(&mut self, serial: u64, ctx: &mut Context<Self>) {
        let Some(active) = self.mcp_active.as_mut().filter(|a| a.serial == serial) else {
            return;
        };
        active.timer = None;
        tracing::warn!(
            component = COMPONENT,
            event = "mcp_timeout",
            serial,
            tool = active.ask.tool()
        );
        self.drop_worker("an MCP request ran out of time");
        let bound = self.settings.cgc.maintenance_timeout_ms;
        self.finish_mcp(
            internal_error(format!("CodeGraphContext did not answer within {bound} ms")),
            ctx,
        );
    }
}

impl Handler<McpRequest> for SyncRunner {
    type Result = ();
    fn handle(&mut self, msg: McpRequest, ctx: &mut Self::Context) {
        if self.mcp_queue.len() >= MAX_WAITING_MCP_REQUESTS {
            // Bounded memory whatever a client sends: the request is
            // answered at once, nothing is kept.
            tracing::warn!(
                component = COMPONENT,
                event = "mcp_request_refused",
                tool = msg.ask.tool(),
                reason = "queue full",
                queued = self.mcp_queue.len()
            );
            msg.reply_to.reply(&cgc_fresh_proto::Envelope::with_id(
                msg.id,
                cgc_fresh_proto::ServerFrame::Mcp(internal_error(format!(
                    "{MAX_WAITING_MCP_REQUESTS} requests already wait for the graph; try again"
                ))),
            ));
            return;
        }
        tracing::info!(
            component = COMPONENT,
            event = "mcp_request_queued",
            tool = msg.ask.tool(),
            behind_sync = self.run.is_some(),
            queued = self.mcp_queue.len()
        );
        self.mcp_queue.push_back(msg);
        self.pump_mcp(ctx);
    }
}

impl Handler<PumpMcp> for SyncRunner {
    type Result = ();
    fn handle(&mut self, _: PumpMcp, ctx: &mut Self::Context) {
        self.pump_mcp(ctx);
    }
}
