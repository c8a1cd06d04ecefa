//! The running service: binding the socket, starting the actors, and the
//! order in which things stop.

mod config_actor;
mod connection;
mod hub;
mod listener;
mod messages;
mod signals;
mod workspace;

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use actix::prelude::*;
use anyhow::{bail, Context as _};

use crate::client::Client;
use crate::instance_lock::{InstanceLock, LockError};
use crate::paths::{ensure_private_dir, ServicePaths};
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
    let span = tracing::info_span!("service", workspace = %paths.workspace.display());
    let _entered = span.enter();
    let system = actix_rt::System::new();
    let result = system.block_on(run(paths.clone(), options.config_file, config));
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

async fn run(
    paths: ServicePaths,
    config_file: Option<PathBuf>,
    config: Arc<LoadedConfig>,
) -> anyhow::Result<()> {
    let listener =
        bind(&paths.socket).with_context(|| format!("socket {}", paths.socket.display()))?;
    let max_line_bytes = config.settings.service.max_line_bytes;
    let workspace = WorkspaceActor::new(paths.workspace.clone(), config).start();
    let config_actor = ConfigActor::new(
        paths.workspace.clone(),
        config_file,
        vec![workspace.clone().recipient()],
    )
    .start();
    let (stopped_tx, stopped_rx) = tokio::sync::oneshot::channel();
    let lifecycle = Lifecycle {
        stopped: Some(stopped_tx),
    }
    .start();
    actix_rt::spawn(signals::signal_loop(
        lifecycle.clone().recipient(),
        config_actor.recipient(),
    ));
    actix_rt::spawn(listener::accept_loop(listener, max_line_bytes, workspace));
    tracing::info!(event = "serving", socket = %paths.socket.display(), pid = std::process::id());
    let _ = stopped_rx.await;
    remove_socket_if_ours(&paths.socket);
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

/// Stops the system once shutdown has finished its work.
struct Lifecycle {
    stopped: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Actor for Lifecycle {
    type Context = Context<Self>;
}

impl Handler<Shutdown> for Lifecycle {
    type Result = ();
    fn handle(&mut self, msg: Shutdown, _: &mut Self::Context) {
        tracing::info!(event = "shutdown", reason = ?msg.reason);
        if matches!(msg.reason, ShutdownReason::SecondSignal(_)) {
            tracing::warn!(event = "shutdown_escalated");
        }
        if let Some(stopped) = self.stopped.take() {
            let _ = stopped.send(());
        }
    }
}
