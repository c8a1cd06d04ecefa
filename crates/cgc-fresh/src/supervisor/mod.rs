//! `RootSupervisor`: the one place every child process goes through, from
//! spawn until it is reaped — so no child ever outlives the service.
//!
//! - Spawns happen in this actor's handler, i.e. on the arbiter (main)
//!   thread, which the parent-death signal of each child is tied to.
//! - Exits are collected by the SIGCHLD-driven reaper (the service is a
//!   child subreaper, so daemonizing grandchildren are reaped here too).
//! - The live set is persisted in the registry file and mirrored where the
//!   panic hook can reach it; the next instance sweeps what a killed one
//!   left behind.
//! - When a child ends, whatever it left (its group, processes carrying its
//!   owner token) is killed: a FalkorDB Lite `redis-server` that daemonized
//!   out of a finished `cgc` would otherwise live on.

pub mod panic_hook;
pub mod registry;
pub mod sweep;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use actix::prelude::*;
use cgc_fresh_core::freshness::SessionKey;

use crate::process::capture::{capture_output, log_child_line, CaptureLimits, OutputCapture};
use crate::process::kill;
use crate::process::reap::{ExitReceiver, ExitWatchers, ReapedProcess, Reaper};
use crate::process::signal::Signal;
use crate::process::spawn::{child_owner_token, spawn_child, ChildKind, SpawnError, SpawnSpec};
use crate::process::stop::{interrupt_child, stop_child, StopPlan, StopTarget};
use registry::{Registry, RegistryEntry, RegistryFile};

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "root_supervisor";

/// How long to wait for a child's output pipes to drain after it exited
/// (a daemonized grandchild can hold them open forever).
const OUTPUT_DRAIN_BOUND: Duration = Duration::from_millis(500);

/// Something a child did, for whoever asked for it.
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub enum ChildEvent {
    /// One line of its output (already logged).
    Line { id: u64, text: String },
    /// It exited and was reaped; its leftovers were killed.
    Exited {
        id: u64,
        pid: i32,
        status: ExitStatus,
        output_tail: String,
        /// The service was shutting down when it exited: it was stopped
        /// (or died) as part of an orderly stop, which is nobody's error.
        during_shutdown: bool,
    },
}

/// Start a child.
#[derive(Message)]
#[rtype(result = "Result<ChildStarted, SpawnChildError>")]
pub struct SpawnChild {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env_set: Vec<(String, String)>,
    pub kind: ChildKind,
    /// The session lifetime it works for: stopped when that lifetime's
    /// work stops. `None`: the workspace's (a person's manual sync).
    pub session: Option<SessionKey>,
    pub requester: Recipient<ChildEvent>,
    /// Give it a stdin pipe that [`SendInput`] writes to (a worker).
    pub piped_stdin: bool,
}

/// Write one line to a child's stdin pipe (see [`SpawnChild::piped_stdin`]).
/// Written by a task of its own, so a child that does not read never
/// blocks the supervisor; at most [`INPUT_QUEUE`] lines wait.
#[derive(Message, Debug)]
#[rtype(result = "Result<(), String>")]
pub struct SendInput {
    pub id: u64,
    pub line: String,
}

/// Lines that may wait for a child to read its stdin.
pub const INPUT_QUEUE: usize = 2;

/// Why a spawn did not happen.
#[derive(Debug, thiserror::Error)]
pub enum SpawnChildError {
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error("the service is shutting down")]
    ShuttingDown,
}

/// A started child.
#[derive(Debug, Clone, Copy)]
pub struct ChildStarted {
    pub id: u64,
    pub pid: i32,
}

/// Stop one child (SIGINT → SIGTERM → SIGKILL).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct StopChild {
    pub id: u64,
    pub reason: &'static str,
}

/// Send one SIGINT to a child's group and leave the rest to the child (see
/// [`crate::process::stop::interrupt_child`]).
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct InterruptChild {
    pub id: u64,
    pub reason: &'static str,
}

/// Stop every child that belongs to a session lifetime.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct StopSession {
    pub session: SessionKey,
}

/// Phase one of shutdown: stop and reap every child. Answers when done.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct StopAll {
    pub reason: &'static str,
}

/// Escalation: SIGKILL every child group and token holder now.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct KillAllNow;

/// The registry file is no longer this instance's (another service holds
/// the workspace's lock now): stop writing it, and never remove it.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct ReleaseRegistry;

/// How many children are alive, idle workers aside (for idle decisions
/// and tests).
#[derive(Message, Debug)]
#[rtype(result = "usize")]
pub struct LiveChildren;

struct LiveChild {
    entry: RegistryEntry,
    session: Option<SessionKey>,
    kind: ChildKind,
    started: Instant,
    requester: Recipient<ChildEvent>,
    exited: ExitReceiver,
    capture: OutputCapture,
    /// Lines for its stdin's writer task; dropping it ends the child's
    /// input.
    input: Option<tokio::sync::mpsc::Sender<String>>,
}

pub struct RootSupervisor {
    workspace: PathBuf,
    service_token: String,
    registry: Registry,
    children: BTreeMap<u64, LiveChild>,
    watchers: ExitWatchers,
    next_id: u64,
    stop_grace: Duration,
    shutting_down: bool,
    /// False once another service holds the workspace (see `ReleaseRegistry`).
    owns_registry: bool,
}

impl RootSupervisor {
    /// `service_token` must start with the workspace's token prefix (see
    /// `owner_token_prefix`) so the next instance's sweep recognises it.
    pub fn new(
        workspace: PathBuf,
        service_token: String,
        registry: Registry,
        stop_grace: Duration,
    ) -> Self {
        RootSupervisor {
            workspace,
            service_token,
            registry,
            children: BTreeMap::new(),
            watchers: ExitWatchers::new(),
            next_id: 1,
            stop_grace,
            shutting_down: false,
            owns_registry: true,
        }
    }

    fn persist(&self) {
        if !self.owns_registry {
            return;
        }
        let file = RegistryFile {
            version: 1,
            service_pid: std::process::id(),
            service_token: self.service_token.clone(),
            children: self.children.values().map(|c| c.entry.clone()).collect(),
        };
        if let Err(error) = self.registry.store(&file) {
            tracing::warn!(component = COMPONENT, event = "registry_write_failed", path = %self.registry.path().display(), error = %error);
        }
    }

    fn stop_future(
        &self,
        id: u64,
        reason: &'static str,
    ) -> Option<impl std::future::Future<Output = ()>> {
        let child = self.children.get(&id)?;
        let target = StopTarget {
            pid: child.entry.pid,
            pgid: child.entry.pgid,
            owner_token: child.entry.owner_token.clone(),
        };
        let mut exited = child.exited.clone();
        let plan = StopPlan {
            grace: self.stop_grace,
        };
        Some(async move {
            let report = stop_child(&target, plan, &mut exited, reason).await;
            tracing::info!(
                component = COMPONENT,
                event = "child_stopped",
                id,
                pid = target.pid,
                pgid = target.pgid,
                reason,
                last_signal = report.last_signal.map(|s| s.name()),
                stragglers_killed = ?report.stragglers_killed,
            );
        })
    }
}

/// The owner-token prefix shared by every instance of the service for one
/// workspace: `cgc-fresh:<workspace id>:`.
pub fn owner_token_prefix(workspace_id: &str) -> String {
    format!("cgc-fresh:{workspace_id}:")
}

/// One running instance of the service, as its owner tokens name it: pid
/// and start time (clock ticks after boot, `/proc/<pid>/stat` field 22).
/// The pair names one process across pid reuse, so whether the instance
/// behind a token is still alive can be checked (see `sweep.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceId {
    pub pid: i32,
    pub start_time: u64,
}

impl InstanceId {
    /// This process.
    pub fn current() -> std::io::Result<InstanceId> {
        let pid = std::process::id() as i32;
        let stat = crate::process::proc_info::read_proc_stat(pid)?;
        Ok(InstanceId {
            pid,
            start_time: stat.start_time,
        })
    }

    /// The service token: `<workspace prefix><pid>-<start time>`; each
    /// child's token is this plus `.<child id>`.
    pub fn service_token(&self, workspace_prefix: &str) -> String {
        format!("{workspace_prefix}{}-{}", self.pid, self.start_time)
    }

    /// The instance a token with `workspace_prefix` names, if it names one.
    pub fn from_token(token: &str, workspace_prefix: &str) -> Option<InstanceId> {
        let rest = token.strip_prefix(workspace_prefix)?;
        let instance = rest.split_once('.').map_or(rest, |(instance, _)| instance);
        let (pid, start_time) = instance.split_once('-')?;
        Some(InstanceId {
            pid: pid.parse().ok().filter(|&pid: &i32| pid > 0)?,
            start_time: start_time.parse().ok()?,
        })
    }
}

impl Actor for RootSupervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        match Reaper::new() {
            Ok(reaper) => {
                ctx.add_stream(reaper.into_stream());
            }
            Err(error) => {
                tracing::error!(component = COMPONENT, event = "reaper_failed", error = %error)
            }
        }
        self.persist();
    }
}

impl StreamHandler<ReapedProcess> for RootSupervisor {
    fn handle(&mut self, reaped: ReapedProcess, _: &mut Self::Context) {
        if !self.watchers.dispatch(&reaped) {
            tracing::info!(component = COMPONENT, event = "orphan_reaped", pid = reaped.pid, status = %reaped.status);
        }
    }
}

impl Handler<SpawnChild> for RootSupervisor {
    type Result = Result<ChildStarted, SpawnChildError>;

    fn handle(&mut self, msg: SpawnChild, ctx: &mut Self::Context) -> Self::Result {
        if self.shutting_down {
            return Err(SpawnChildError::ShuttingDown);
        }
        let id = self.next_id;
        self.next_id += 1;
        let owner_token = child_owner_token(&self.service_token, id);
        let spec = SpawnSpec {
            program: msg.program.clone(),
            args: msg.args.clone(),
            cwd: self.workspace.clone(),
            env_set: msg.env_set,
            env_remove: Vec::new(),
            kind: msg.kind,
            owner_token: owner_token.clone(),
            piped_stdin: msg.piped_stdin,
        };
        let spawned = match spawn_child(&spec) {
            Ok(spawned) => spawned,
            Err(error) => {
                tracing::warn!(component = COMPONENT, event = "spawn_failed", id, program = %msg.program.display(), args = ?msg.args, error = %error);
                return Err(error.into());
            }
        };
        // Watch before yielding: a child that exits at once must not be
        // reported as an orphan.
        let exited = self.watchers.watch(spawned.pid);
        tracing::info!(
            component = COMPONENT,
            event = "spawn",
            id,
            kind = ?msg.kind,
            session = msg.session.as_ref().map(tracing::field::display),
            program = %msg.program.display(),
            args = ?msg.args,
            pid = spawned.pid,
            pgid = spawned.pgid,
        );
        let entry = RegistryEntry {
            id,
            kind: format!("{:?}", msg.kind).to_lowercase(),
            session: msg.session.as_ref().map(ToString::to_string),
            pid: spawned.pid,
            pgid: spawned.pgid,
            start_time: spawned.start_time,
            owner_token,
        };
        panic_hook::track(id, spawned.pgid);
        let input = spawned.stdin.and_then(|fd| match input_writer(id, fd) {
            Ok(sender) => Some(sender),
            Err(error) => {
                tracing::warn!(component = COMPONENT, event = "child_input_unusable", id, error = %error);
                None
            }
        });
        let capture = OutputCapture::new(CaptureLimits::default());
        // Output: read both pipes, log and forward every line.
        let (drained_tx, drained_rx) = tokio::sync::oneshot::channel::<()>();
        let requester = msg.requester.clone();
        let pid = spawned.pid;
        let reader_capture = capture.clone();
        actix_rt::spawn(async move {
            let on_line = |line: &crate::process::capture::OutputLine| {
                log_child_line(pid, line);
                requester.do_send(ChildEvent::Line {
                    id,
                    text: line.text.clone(),
                });
            };
            if let Err(error) =
                capture_output(pid, spawned.stdout, spawned.stderr, reader_capture, on_line).await
            {
                tracing::warn!(component = COMPONENT, event = "child_output_unreadable", id, pid, error = %error);
            }
            let _ = drained_tx.send(());
        });
        // Exit: wait for the reaper, give the pipes a bounded moment, report.
        let mut exit_rx = exited.clone();
        ctx.spawn(
            async move {
                let status = loop {
                    if let Some(status) = *exit_rx.borrow_and_update() {
                        break Some(status);
                    }
                    if exit_rx.changed().await.is_err() {
                        break *exit_rx.borrow();
                    }
                };
                let _ = tokio::time::timeout(OUTPUT_DRAIN_BOUND, drained_rx).await;
                status
            }
            .into_actor(self)
            .map(move |status, act, _| act.child_exited(id, status)),
        );
        self.children.insert(
            id,
            LiveChild {
                entry,
                session: msg.session,
                kind: msg.kind,
                started: Instant::now(),
                requester: msg.requester,
                exited,
                capture,
                input,
            },
        );
        self.persist();
        Ok(ChildStarted {
            id,
            pid: spawned.pid,
        })
    }
}

impl RootSupervisor {
    fn child_exited(&mut self, id: u64, status: Option<ExitStatus>) {
        let Some(child) = self.children.remove(&id) else {
            return;
        };
        panic_hook::untrack(id);
        // Leftovers: the rest of its group and anything carrying its token.
        let _ = kill::signal_group(child.entry.pgid, Signal::KILL);
        let stragglers: Vec<i32> =
            kill::kill_token_holders(kill::Tokens::Exactly(&child.entry.owner_token), |_, _| {
                false
            })
            .into_iter()
            .map(|straggler| straggler.pid)
            .collect();
        let runtime = child.started.elapsed();
        let status = status.unwrap_or_else(|| std::os::unix::process::ExitStatusExt::from_raw(0));
        tracing::info!(
            component = COMPONENT,
            event = "child_exited",
            id,
            kind = ?child.kind,
            pid = child.entry.pid,
            code = status.code(),
            signal = std::os::unix::process::ExitStatusExt::signal(&status),
            runtime_ms = runtime.as_millis() as u64,
            stragglers_killed = ?stragglers,
        );
        child.requester.do_send(ChildEvent::Exited {
            id,
            pid: child.entry.pid,
            status,
            output_tail: child.capture.tail_text(20),
            during_shutdown: self.shutting_down,
        });
        self.persist();
    }
}

/// The writer task of a child's stdin: writes each queued line in full
/// (non-blocking pipe, async), and ends — closing the pipe — when the
/// child's record drops its sender or the child stops reading for good.
fn input_writer(
    id: u64,
    fd: std::os::fd::OwnedFd,
) -> std::io::Result<tokio::sync::mpsc::Sender<String>> {
    use tokio::io::AsyncWriteExt;
    let mut pipe = tokio::net::unix::pipe::Sender::from_owned_fd(fd)?;
    let (sender, mut lines) = tokio::sync::mpsc::channel::<String>(INPUT_QUEUE);
    actix_rt::spawn(async move {
        while let Some(line) = lines.recv().await {
            if let Err(error) = pipe.write_all(line.as_bytes()).await {
                tracing::warn!(component = COMPONENT, event = "child_input_failed", id, error = %error);
                break;
            }
        }
    });
    Ok(sender)
}

impl Handler<SendInput> for RootSupervisor {
    type Result = Result<(), String>;
    fn handle(&mut self, msg: SendInput, _: &mut Self::Context) -> Self::Result {
        let child = self
            .children
            .get(&msg.id)
            .ok_or_else(|| format!("child {} is gone", msg.id))?;
        let input = child
            .input
            .as_ref()
            .ok_or_else(|| format!("child {} takes no input", msg.id))?;
        tracing::debug!(
            component = COMPONENT,
            event = "child_input",
            id = msg.id,
            bytes = msg.line.len()
        );
        input
            .try_send(msg.line)
            .map_err(|error| format!("cannot write to child {}: {error}", msg.id))
    }
}

impl Handler<StopChild> for RootSupervisor {
    type Result = ();
    fn handle(&mut self, msg: StopChild, ctx: &mut Self::Context) {
        if let Some(stop) = self.stop_future(msg.id, msg.reason) {
            ctx.spawn(stop.into_actor(self));
        }
    }
}

impl Handler<InterruptChild> for RootSupervisor {
    type Result = ();
    fn handle(&mut self, msg: InterruptChild, _: &mut Self::Context) {
        let Some(child) = self.children.get(&msg.id) else {
            return;
        };
        let target = StopTarget {
            pid: child.entry.pid,
            pgid: child.entry.pgid,
            owner_token: child.entry.owner_token.clone(),
        };
        let sent = interrupt_child(&target, &child.exited, msg.reason);
        tracing::info!(
            component = COMPONENT,
            event = "child_interrupted",
            id = msg.id,
            pid = target.pid,
            pgid = target.pgid,
            reason = msg.reason,
            sent,
        );
    }
}

impl Handler<StopSession> for RootSupervisor {
    type Result = ();
    fn handle(&mut self, msg: StopSession, ctx: &mut Self::Context) {
        let ids: Vec<u64> = self
            .children
            .iter()
            .filter(|(_, c)| c.session.as_ref() == Some(&msg.session))
            .map(|(id, _)| *id)
            .collect();
        tracing::info!(component = COMPONENT, event = "stop_session_children", session = %msg.session, children = ids.len());
        for id in ids {
            if let Some(stop) = self.stop_future(id, "session ended") {
                ctx.spawn(stop.into_actor(self));
            }
        }
    }
}

impl Handler<StopAll> for RootSupervisor {
    type Result = ResponseActFuture<Self, ()>;
    fn handle(&mut self, msg: StopAll, _: &mut Self::Context) -> Self::Result {
        self.shutting_down = true;
        let stops: Vec<_> = self
            .children
            .keys()
            .copied()
            .filter_map(|id| self.stop_future(id, msg.reason))
            .collect();
        tracing::info!(
            component = COMPONENT,
            event = "stop_all",
            reason = msg.reason,
            children = stops.len()
        );
        Box::pin(
            async move {
                futures_util::future::join_all(stops).await;
            }
            .into_actor(self)
            .map(|_, act, _| act.registry_at_exit()),
        )
    }
}

impl RootSupervisor {
    /// After the last stop: with no child left there is nothing for a next
    /// instance to sweep, so the file goes; otherwise what is left is
    /// recorded.
    fn registry_at_exit(&mut self) {
        if !self.owns_registry {
            return;
        }
        if !self.children.is_empty() {
            self.persist();
            return;
        }
        match self.registry.remove() {
            Ok(()) => {
                tracing::info!(component = COMPONENT, event = "registry_removed", path = %self.registry.path().display())
            }
            Err(error) => {
                tracing::warn!(component = COMPONENT, event = "registry_remove_failed", path = %self.registry.path().display(), error = %error);
                self.persist();
            }
        }
    }
}

impl Handler<ReleaseRegistry> for RootSupervisor {
    type Result = ();
    fn handle(&mut self, _: ReleaseRegistry, _: &mut Self::Context) {
        if self.owns_registry {
            tracing::warn!(component = COMPONENT, event = "registry_released", path = %self.registry.path().display());
        }
        self.owns_registry = false;
    }
}

impl Handler<KillAllNow> for RootSupervisor {
    type Result = ();
    fn handle(&mut self, _: KillAllNow, _: &mut Self::Context) {
        self.shutting_down = true;
        let killed = panic_hook::kill_everything_now();
        tracing::warn!(component = COMPONENT, event = "kill_all_now", killed);
    }
}

impl Handler<LiveChildren> for RootSupervisor {
    type Result = usize;
    fn handle(&mut self, _: LiveChildren, _: &mut Self::Context) -> usize {
        // An idle worker waits for the next sync and ends by itself; it
        // keeps nothing alive (a sync in flight is counted by its flight).
        self.children
            .values()
            .filter(|child| child.kind != ChildKind::Worker)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_round_trips_through_its_tokens() {
        let ws = owner_token_prefix("0123456789abcdef");
        let me = InstanceId::current().unwrap();
        assert_eq!(me.pid, std::process::id() as i32);
        let service = me.service_token(&ws);
        assert_eq!(InstanceId::from_token(&service, &ws), Some(me));
        let child = child_owner_token(&service, 7);
        assert_eq!(InstanceId::from_token(&child, &ws), Some(me));
        for bad in ["", "x", "12", "-1-2.3", "0-5.1", "a-b.1", "1-2x.1"] {
            assert_eq!(
                InstanceId::from_token(&format!("{ws}{bad}"), &ws),
                None,
                "{bad}"
            );
        }
        assert_eq!(InstanceId::from_token("cgc-fresh:other:1-2.3", &ws), None);
    }
}
