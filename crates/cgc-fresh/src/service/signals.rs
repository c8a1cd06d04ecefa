//! Signals, turned into messages.
//!
//! SIGTERM and SIGINT start a graceful shutdown; a second one during the
//! shutdown escalates (every child group is SIGKILLed at once). SIGHUP
//! reloads the configuration and is never a shutdown.

use actix::prelude::*;
use tokio::signal::unix::{signal, SignalKind};

use super::messages::{ReloadConfig, Shutdown, ShutdownReason};

/// Listens for signals until the system stops. `shutdown` receives the
/// shutdown requests, `reload` the SIGHUPs.
pub async fn signal_loop(shutdown: Recipient<Shutdown>, reload: Recipient<ReloadConfig>) {
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        tracing::error!(event = "signal_setup_failed");
        return;
    };
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
