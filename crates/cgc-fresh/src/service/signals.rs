//! Signals, turned into messages.
//!
//! SIGTERM and SIGINT start a graceful shutdown; a second one during the
//! shutdown escalates (every child group is SIGKILLed at once). SIGHUP
//! reloads the configuration and is never a shutdown.

use actix::prelude::*;
use tokio::signal::unix::{signal, Signal, SignalKind};

use super::messages::{ReloadConfig, Shutdown, ShutdownReason};

/// The service's signal handlers, installed. Installing is synchronous and
/// happens before the socket is bound: a client that can connect must also
/// be able to stop us gracefully (a handler installed lazily, on the first
/// poll of a spawned task, leaves a window where SIGTERM kills the process
/// outright and leaves its socket behind).
pub struct SignalStreams {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl SignalStreams {
    /// Installs the SIGTERM, SIGINT and SIGHUP handlers. Must run inside the
    /// runtime.
    pub fn install() -> std::io::Result<SignalStreams> {
        Ok(SignalStreams {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }
}

/// Listens for signals until the system stops. `shutdown` receives the
/// shutdown requests, `reload` the SIGHUPs.
pub async fn signal_loop(
    streams: SignalStreams,
    shutdown: Recipient<Shutdown>,
    reload: Recipient<ReloadConfig>,
) {
    let SignalStreams {
        mut term,
        mut int,
        mut hup,
    } = streams;
    let mut stopping = false;
    loop {
        let signo = tokio::select! {
            _ = term.recv() => libc::SIGTERM,
            _ = int.recv() => libc::SIGINT,
            _ = hup.recv() => libc::SIGHUP,
        };
        if signo == libc::SIGHUP {
            tracing::info!(
                event = "signal",
                signal = "SIGHUP",
                action = "reload_config"
            );
            reload.do_send(ReloadConfig);
            continue;
        }
        let reason = if stopping {
            ShutdownReason::SecondSignal(signo)
        } else {
            ShutdownReason::Signal(signo)
        };
        tracing::info!(
            event = "signal",
            signal = signal_name(signo),
            action = if stopping { "escalate" } else { "shutdown" }
        );
        stopping = true;
        shutdown.do_send(Shutdown { reason });
    }
}

fn signal_name(signo: i32) -> &'static str {
    match signo {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        _ => "other",
    }
}
