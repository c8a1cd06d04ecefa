//! The running service: binding the socket, starting the actors, and the
//! order in which things stop.

mod backend_detector;
mod config_actor;
mod connection;
mod hub;
mod last_resort;
mod listener;
mod messages;
mod signals;
mod socket_guard;
mod store;
mod sync_runner;
mod watcher_supervisor;
mod workspace;

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use actix::prelude::*;
use anyhow::{bail, Context as _};

use std::time::Duration;

use crate::client::Client;
use crate::instance_lock::{InstanceLock, LockError};
use crate::paths::{ensure_private_dir, ServicePaths};
use crate::process::reap::set_child_subreaper;
use crate::supervisor::panic_hook;
use crate::supervisor::registry::Registry;
use crate::supervisor::sweep::sweep_leftovers;
use crate::supervisor::{owner_token_prefix, KillAllNow, RootSupervisor, StopAll};
use crate::systemd::activation::{bound_path, listen_fds_listener};
use crate::systemd::notify::Notifier;
use config_actor::ConfigActor;
use messages::{Shutdown, ShutdownReason};
use workspace::WorkspaceActor;

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
    ensure_private_dir(&paths.runtime_dir)
        .with_context(|| format!("runtime directory {}", paths.runtime_dir.display()))?;
    let lock = match InstanceLock::acquire(&paths.lock) {
        Ok(lock) => lock,
        Err(LockError::Held { pid }) => {
            let pid = live_service_pid(&paths.socket).or(pid);
            let pid = pid
                .map(|p| p.to_string())
                .unwrap_or_else(|| "unknown".into());
            tracing::error!(event = "already_running", pid = %pid, socket = %paths.socket.display());
            bail!(
                "already running (pid {pid}) for {}",
                paths.workspace.display()
            );
        }
        Err(other) => return Err(other.into()),
    };
    let config = Arc::new(ConfigActor::load(
        &paths.workspace,
        options.config_file.as_deref(),
    ));
    // Children: we reap re-parented grandchildren, a panic kills them all,
    // and what an earlier (killed) instance left behind is swept first.
    if let Err(error) = set_child_subreaper() {
        tracing::warn!(event = "subreaper_failed", error = %error);
    }
    let token_prefix = owner_token_prefix(&paths.id);
    let service_token = format!("{token_prefix}{}-{}", std::process::id(), unique_suffix());
    panic_hook::init(&format!("{service_token}."));
    panic_hook::install();
    let registry = Registry::new(paths.registry.clone());
    let swept = sweep_leftovers(&registry, &token_prefix, &service_token);
    tracing::info!(
        event = "startup_sweep",
        groups_killed = ?swept.groups_killed,
        token_holders_killed = ?swept.token_holders_killed,
        stale_entries = swept.stale_entries,
        registry_problem = swept.registry_problem.as_deref(),
    );
    if let Some(problem) = &swept.registry_problem {
        tracing::warn!(event = "registry_unreadable", path = %paths.registry.display(), problem = %problem);
    }
    let span = tracing::info_span!("service", workspace = %paths.workspace.display());
    let _entered = span.enter();
    let system = actix_rt::System::new();
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
    // Held (and kept at its path by the socket guard) until everything stopped.
    drop(lock);
    result
}

/// Asks whoever answers on `socket` for its pid.
fn live_service_pid(socket: &Path) -> Option<u32> {
    Client::connect_hello(socket, "cgc-fresh-serve-probe")
        .ok()?
        .welcome
        .map(|w| w.pid)
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
                    event = "activated_socket_elsewhere",
                    bound = %bound.display(),
                    expected = %paths.socket.display(),
                ),
                Ok(bound) => tracing::info!(event = "socket_activated", socket = ?bound),
                Err(error) => tracing::warn!(event = "activated_socket_unnamed", error = %error),
            }
            tokio::net::UnixListener::from_std(listener).context("activated socket")?
        }
        None => {
            bind(&paths.socket).with_context(|| format!("socket {}", paths.socket.display()))?
        }
    };
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
    let current_config = config.clone();
    let workspace = WorkspaceActor::new(
        &paths,
        config,
        supervisor.clone(),
        lifecycle.clone().recipient(),
    )
    .start();
    let config_actor = ConfigActor::new(
        paths.workspace.clone(),
        config_file,
        vec![workspace.clone().recipient()],
        current_config,
    )
    .start();
    actix_rt::spawn(signals::signal_loop(
        signal_streams,
        lifecycle.clone().recipient(),
        config_actor.recipient(),
    ));
    let socket_owner = if socket_activated {
        socket_guard::SocketOwner::Systemd
    } else {
        socket_guard::SocketOwner::Service(paths.socket.clone())
    };
    let lock_keeper = socket_guard::LockKeeper {
        path: paths.lock.clone(),
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
    tracing::info!(event = "serving", socket = %paths.socket.display(), pid = std::process::id(), socket_activated);
    match notifier.ready() {
        Ok(true) => tracing::info!(event = "notified", state = "READY=1"),
        Ok(false) => {}
        Err(error) => tracing::warn!(event = "notify_failed", state = "READY=1", error = %error),
    }
    let _ = stopped_rx.await;
    // A socket systemd owns stays for the next activation.
    if !socket_activated {
        remove_socket_if_ours(&paths.socket);
    }
    tracing::info!(event = "stopped");
    Ok(())
}

use crate::config_load::LoadedConfig;

/// Binds the socket, replacing a stale file (we hold the instance lock, so
/// no live service owns it), and restricts it to the owner.
fn bind(socket: &Path) -> io::Result<tokio::net::UnixListener> {
    match std::fs::remove_file(socket) {
        Ok(()) => tracing::info!(event = "stale_socket_removed", socket = %socket.display()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = tokio::net::UnixListener::bind(socket)?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

fn remove_socket_if_ours(socket: &Path) {
    let _ = std::fs::remove_file(socket);
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
        if let Some(interval) = self.notifier.watchdog_interval() {
            tracing::info!(
                event = "watchdog_enabled",
                interval_ms = interval.as_millis() as u64
            );
            ctx.run_interval(interval / 2, |act, _| {
                if let Err(error) = act.notifier.watchdog_ping() {
                    tracing::warn!(event = "notify_failed", state = "WATCHDOG=1", error = %error);
                }
            });
        }
    }
}

impl Handler<Shutdown> for Lifecycle {
    type Result = ();
    fn handle(&mut self, msg: Shutdown, ctx: &mut Self::Context) {
        tracing::info!(event = "shutdown", reason = ?msg.reason);
        if self.stopping || matches!(msg.reason, ShutdownReason::SecondSignal(_)) {
            tracing::warn!(event = "shutdown_escalated");
            self.supervisor.do_send(KillAllNow);
            return;
        }
        self.stopping = true;
        if let Err(error) = self.notifier.stopping() {
            tracing::warn!(event = "notify_failed", state = "STOPPING=1", error = %error);
        }
        let stop_all = self.supervisor.send(StopAll {
            reason: "service shutdown",
        });
        ctx.spawn(
            async move { stop_all.await.ok() }
                .into_actor(self)
                .map(|_, act, _| {
                    tracing::info!(event = "children_stopped");
                    if let Some(stopped) = act.stopped.take() {
                        let _ = stopped.send(());
                    }
                }),
        );
    }
}

fn unique_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}
