//! The running service: binding the socket, starting the actors, and the
//! order in which things stop.
//!
//! Start-up, in this order, and a refusal at any step changes nothing:
//!
//! 1. the socket's directory is checked (created 0700 when missing; an
//!    existing one must be ours and writable by nobody else — `paths.rs`),
//!    unless systemd passed the socket in (`socket_dir_refused`);
//! 2. the state directory likewise (`state_dir_refused`);
//! 3. the instance lock in the state directory is taken (`instance_lock.rs`).
//!    Held by another service: `instance_refused`, and the process exits
//!    non-zero naming the holder's pid and socket — no sweep, no socket
//!    removal, no state write;
//! 4. the start-up sweep (`supervisor/sweep.rs`);
//! 5. the socket is bound. A file already at its path is removed only if it
//!    is a socket nobody answers on (a dead service's); a live socket, a
//!    regular file, a symlink or anything else is refused
//!    (`socket_path_refused`), never removed.
//!
//! A clean stop removes, in this order, the socket (only if its path still
//! names the file this service bound — device and inode), the registry
//! (when no child is left; the supervisor does it), and the lock file
//! (while still holding it, and only if its path still names the held file).

mod backend_detector;
mod clock;
mod config_actor;
mod connection;
mod drift_observer;
mod hub;
mod last_resort;
mod listener;
mod mcp_route;
mod messages;
mod notices;
mod outbox;
mod owner_watch;
mod signals;
mod socket_guard;
mod store;
mod sync_runner;
mod sync_scheduler;
mod watcher_supervisor;
mod workspace_actors;

use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use actix::prelude::*;
use anyhow::{bail, Context as _};

use std::time::Duration;

use crate::instance_lock::{InstanceLock, LockError};
use crate::paths::{ensure_private_dir, ServicePaths};
use crate::process::reap::set_child_subreaper;
use crate::supervisor::panic_hook;
use crate::supervisor::registry::Registry;
use crate::supervisor::sweep::sweep_leftovers;
use crate::supervisor::{
    owner_token_prefix, InstanceId, KillAllNow, ReleaseRegistry, RootSupervisor, StopAll,
};
use crate::systemd::activation::{bound_path, listen_fds_listener};
use crate::systemd::notify::Notifier;
use config_actor::ConfigActor;
use messages::{Shutdown, ShutdownReason};

/// Threads of the blocking pool (the manifest's walks and writes).
pub const BLOCKING_THREADS: usize = 2;

/// What `serve` needs to know.
pub struct ServeOptions {
    pub paths: ServicePaths,
    pub config_file: Option<PathBuf>,
}

/// Runs the service in the foreground until a shutdown signal. Returns an
/// error for start-up failures (another instance, unusable socket path).
pub fn serve(options: ServeOptions) -> anyhow::Result<()> {
    // Before any thread exists: take systemd's variables out of our
    // environment (children must not inherit them) and the socket it passed.
    let notifier = Notifier::from_env();
    let activated = listen_fds_listener().context("socket activation")?;
    // Everything we create (socket, state, registry, logs) is user-only.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let paths = options.paths;
    if activated.is_none() {
        if let Err(error) = ensure_private_dir(&paths.runtime_dir) {
            tracing::error!(component = COMPONENT, event = "socket_dir_refused", dir = %paths.runtime_dir.display(), socket = %paths.socket.display(), reason = error.reason(), error = %error);
            bail!("socket directory {error}");
        }
    }
    if let Err(error) = ensure_private_dir(&paths.state_dir) {
        tracing::error!(component = COMPONENT, event = "state_dir_refused", dir = %paths.state_dir.display(), reason = error.reason(), error = %error);
        bail!("state directory {error}");
    }
    let lock = match InstanceLock::acquire(&paths.lock, &paths.socket) {
        Ok(lock) => lock,
        Err(error @ LockError::Held { .. }) => {
            if let LockError::Held { holder } = &error {
                tracing::error!(
                    component = COMPONENT,
                    event = "instance_refused",
                    holder_pid = holder.pid,
                    holder_socket = holder.socket.as_ref().map(|s| s.display().to_string()),
                    lock = %paths.lock.display(),
                    socket = %paths.socket.display(),
                    workspace = %paths.workspace.display(),
                );
            }
            bail!("{error} for {}", paths.workspace.display());
        }
        Err(error) => {
            tracing::error!(component = COMPONENT, event = "instance_lock_failed", lock = %paths.lock.display(), error = %error);
            return Err(error.into());
        }
    };
    let config = Arc::new(ConfigActor::load(
        &paths.workspace,
        options.config_file.as_deref(),
    ));
    // Children: we reap re-parented grandchildren, a panic kills them all,
    // and what an earlier (killed) instance left behind is swept first.
    if let Err(error) = set_child_subreaper() {
        tracing::warn!(component = COMPONENT, event = "subreaper_failed", error = %error);
    }
    let token_prefix = owner_token_prefix(&paths.id);
    let instance = InstanceId::current().unwrap_or_else(|error| {
        // Without our start time the token cannot prove we are alive; a
        // next instance would treat our children as leftovers only once
        // our pid is gone or reused, which is when they are.
        tracing::warn!(component = COMPONENT, event = "instance_start_time_unknown", error = %error);
        InstanceId {
            pid: std::process::id() as i32,
            start_time: 0,
        }
    });
    let service_token = instance.service_token(&token_prefix);
    panic_hook::init(&format!("{service_token}."));
    panic_hook::install();
    let registry = Registry::new(paths.registry.clone());
    let swept = sweep_leftovers(&registry, &token_prefix, instance);
    let describe = |list: &[(i32, crate::supervisor::sweep::Spared)]| {
        list.iter()
            .map(|(pid, why)| format!("{pid}:{}", why.as_str()))
            .collect::<Vec<_>>()
    };
    tracing::info!(
        component = COMPONENT,
        event = "startup_sweep",
        registry = %paths.registry.display(),
        service_token = %service_token,
        groups_killed = ?swept.groups_killed,
        token_holders_killed = ?swept.token_holders_killed,
        stale_entries = swept.stale_entries,
        stale = ?describe(&swept.plan.stale),
        spared = ?describe(&swept.plan.spared),
        registry_problem = swept.registry_problem.as_deref(),
    );
    if let Some(problem) = &swept.registry_problem {
        tracing::warn!(component = COMPONENT, event = "registry_unreadable", path = %paths.registry.display(), problem = %problem);
    }
    let span = tracing::info_span!("service", workspace = %paths.workspace.display());
    let _entered = span.enter();
    // One event-loop thread, and a blocking pool for the manifest's walks
    // capped at `BLOCKING_THREADS`: a walk is started per sync and per shell
    // comparison, never more than two at once, so the service's threads
    // stay bounded however long it runs.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS)
        .build()
        .context("the event loop")?;
    let system = actix_rt::System::with_tokio_rt(move || runtime);
    let lock = Arc::new(Mutex::new(lock));
    let start = Start {
        paths: paths.clone(),
        config_file: options.config_file,
        config,
        service_token,
        registry,
        activated,
        notifier,
        lock: lock.clone(),
    };
    let result = system.block_on(run(start));
    // Held (and kept at its path by the socket guard) until everything
    // stopped; the file goes while still held, if it is still ours.
    let removed = lock
        .lock()
        .map(|held| held.remove_file(&paths.lock))
        .unwrap_or(false);
    tracing::info!(component = COMPONENT, event = "instance_released", lock = %paths.lock.display(), lock_file_removed = removed);
    drop(lock);
    result
}

/// Everything `run` starts from.
struct Start {
    paths: ServicePaths,
    config_file: Option<PathBuf>,
    config: Arc<LoadedConfig>,
    service_token: String,
    registry: Registry,
    /// The listening socket systemd passed in, if it did.
    activated: Option<std::os::unix::net::UnixListener>,
    notifier: Notifier,
    /// The instance lock, which the socket guard keeps at its path.
    lock: Arc<Mutex<InstanceLock>>,
}

async fn run(start: Start) -> anyhow::Result<()> {
    let Start {
        paths,
        config_file,
        config,
        service_token,
        registry,
        activated,
        notifier,
        lock,
    } = start;
    let socket_activated = activated.is_some();
    // Before the socket exists: see `SignalStreams`.
    let signal_streams = signals::SignalStreams::install().context("signal handlers")?;
    let listener = match activated {
        Some(listener) => {
            match bound_path(&listener) {
                Ok(Some(bound)) if bound != paths.socket => tracing::warn!(
                    component = COMPONENT,
                    event = "activated_socket_elsewhere",
                    bound = %bound.display(),
                    expected = %paths.socket.display(),
                ),
                Ok(bound) => {
                    tracing::info!(component = COMPONENT, event = "socket_activated", socket = ?bound)
                }
                Err(error) => {
                    tracing::warn!(component = COMPONENT, event = "activated_socket_unnamed", error = %error)
                }
            }
            tokio::net::UnixListener::from_std(listener).context("activated socket")?
        }
        None => match bind(&paths.socket) {
            Ok(listener) => listener,
            Err(error) => {
                tracing::error!(component = COMPONENT, event = "socket_path_refused", socket = %paths.socket.display(), error = %error);
                return Err(error).with_context(|| format!("socket {}", paths.socket.display()));
            }
        },
    };
    let bound = socket_guard::BoundSocket::default();
    if !socket_activated {
        bound.set(socket_guard::file_id(&paths.socket).ok());
    }
    let max_line_bytes = config.settings.service.max_line_bytes;
    let stop_grace = Duration::from_millis(config.settings.supervisor.stop_grace_ms);
    let supervisor =
        RootSupervisor::new(paths.workspace.clone(), service_token, registry, stop_grace).start();
    let (stopped_tx, stopped_rx) = tokio::sync::oneshot::channel();
    let lifecycle = Lifecycle {
        stopped: Some(stopped_tx),
        supervisor: supervisor.clone(),
        stopping: false,
        notifier: notifier.clone(),
    }
    .start();
    let actors = workspace_actors::start(
        &paths,
        config_file,
        config,
        supervisor.clone(),
        lifecycle.clone().recipient(),
    );
    let (workspace, config_actor) = (actors.observer, actors.config);
    actix_rt::spawn(signals::signal_loop(
        signal_streams,
        lifecycle.clone().recipient(),
        config_actor.recipient(),
    ));
    let socket_owner = if socket_activated {
        socket_guard::SocketOwner::Systemd
    } else {
        socket_guard::SocketOwner::Service(paths.socket.clone(), bound.clone())
    };
    let lock_keeper = socket_guard::LockKeeper {
        path: paths.lock.clone(),
        socket: paths.socket.clone(),
        held: lock,
        lost: lifecycle.clone().recipient(),
    };
    socket_guard::start(
        listener,
        socket_owner,
        max_line_bytes,
        workspace,
        lock_keeper,
    );
    tracing::info!(component = COMPONENT, event = "serving", socket = %paths.socket.display(), pid = std::process::id(), socket_activated);
    match notifier.ready() {
        Ok(true) => tracing::info!(component = COMPONENT, event = "notified", state = "READY=1"),
        Ok(false) => {}
        Err(error) => {
            tracing::warn!(component = COMPONENT, event = "notify_failed", state = "READY=1", error = %error)
        }
    }
    let _ = stopped_rx.await;
    // A socket systemd owns stays for the next activation.
    if !socket_activated {
        let removed = socket_guard::remove_if_same_file(&paths.socket, bound.get());
        tracing::info!(component = COMPONENT, event = "socket_removed", socket = %paths.socket.display(), removed, reason = if removed { "ours" } else { "not_ours_or_gone" });
    }
    tracing::info!(component = COMPONENT, event = "stopped");
    Ok(())
}

use crate::config_load::LoadedConfig;

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "lifecycle";

/// Why the socket's path cannot be bound.
#[derive(Debug, thiserror::Error)]
enum BindError {
    #[error("{0}: is a symlink, not a socket; refusing to remove it")]
    Symlink(String),
    #[error("{0}: is not a socket (a {1}); refusing to remove it")]
    NotASocket(String, &'static str),
    #[error("{0}: a live service answers on this socket; refusing to take it over")]
    Live(String),
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Binds the socket, restricted to the owner. A stale socket file (nobody
/// answers on it) is replaced; anything else at the path is left alone and
/// the bind refused (see the module docs).
fn bind(socket: &Path) -> Result<tokio::net::UnixListener, BindError> {
    let shown = || socket.display().to_string();
    match std::fs::symlink_metadata(socket) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
        Ok(meta) => {
            let kind = meta.file_type();
            if kind.is_symlink() {
                return Err(BindError::Symlink(shown()));
            }
            if !kind.is_socket() {
                let what = if kind.is_dir() {
                    "directory"
                } else if kind.is_file() {
                    "regular file"
                } else {
                    "special file"
                };
                return Err(BindError::NotASocket(shown(), what));
            }
            // Another workspace's service may have been given this path.
            if socket_answers(socket)? {
                return Err(BindError::Live(shown()));
            }
            std::fs::remove_file(socket)?;
            tracing::info!(component = COMPONENT, event = "stale_socket_removed", socket = %socket.display());
        }
    }
    let listener = tokio::net::UnixListener::bind(socket)?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Whether something listens on the socket file at `path`. The connect is
/// non-blocking: a listener whose backlog is full still counts as alive,
/// and a wedged one cannot hang the start-up.
fn socket_answers(path: &Path) -> io::Result<bool> {
    use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, UnixAddr};
    use std::os::fd::AsRawFd;
    let fd = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    let address = UnixAddr::new(path)?;
    match connect(fd.as_raw_fd(), &address) {
        Ok(()) | Err(nix::errno::Errno::EAGAIN) | Err(nix::errno::Errno::EINPROGRESS) => Ok(true),
        Err(_) => Ok(false),
    }
}

/// Runs the two-phase shutdown: every child is stopped and reaped, then the
/// actor system stops. A second signal escalates to SIGKILL at once.
struct Lifecycle {
    stopped: Option<tokio::sync::oneshot::Sender<()>>,
    supervisor: Addr<RootSupervisor>,
    stopping: bool,
    notifier: Notifier,
}

impl Actor for Lifecycle {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // systemd's watchdog is opt-in (WatchdogSec= in the unit): only then
        // does a periodic ping run; by default no timer runs while idle.
        if let Some(period) = self.notifier.watchdog_interval() {
            // Already half of WatchdogSec= (see `Notifier::watchdog_interval`).
            tracing::info!(
                component = COMPONENT,
                event = "watchdog_enabled",
                ping_every_ms = period.as_millis() as u64
            );
            ctx.run_interval(period, |act, _| {
                if let Err(error) = act.notifier.watchdog_ping() {
                    tracing::warn!(component = COMPONENT, event = "notify_failed", state = "WATCHDOG=1", error = %error);
                }
            });
        }
    }
}

impl Handler<Shutdown> for Lifecycle {
    type Result = ();
    fn handle(&mut self, msg: Shutdown, ctx: &mut Self::Context) {
        tracing::info!(component = COMPONENT, event = "shutdown", reason = ?msg.reason);
        if self.stopping || matches!(msg.reason, ShutdownReason::SecondSignal(_)) {
            tracing::warn!(component = COMPONENT, event = "shutdown_escalated");
            self.supervisor.do_send(KillAllNow);
            return;
        }
        self.stopping = true;
        if matches!(msg.reason, ShutdownReason::InstanceLost) {
            // The registry is the other service's now (same workspace).
            self.supervisor.do_send(ReleaseRegistry);
        }
        if let Err(error) = self.notifier.stopping() {
            tracing::warn!(component = COMPONENT, event = "notify_failed", state = "STOPPING=1", error = %error);
        }
        let stop_all = self.supervisor.send(StopAll {
            reason: "service shutdown",
        });
        ctx.spawn(
            async move { stop_all.await.ok() }
                .into_actor(self)
                .map(|_, act, _| {
                    tracing::info!(component = COMPONENT, event = "children_stopped");
                    if let Some(stopped) = act.stopped.take() {
                        let _ = stopped.send(());
                    }
                }),
        );
    }
}
