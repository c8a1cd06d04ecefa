//! Signals, turned into messages.
//!
//! SIGTERM and SIGINT start a graceful shutdown; a second one during the
//! shutdown escalates (every child group is SIGKILLed at once). SIGHUP
//! reloads the configuration and is never a shutdown.
//!
//! The handlers are `signal-hook`'s and the stream is `signal-hook-tokio`'s:
//! the handler only records the signal and wakes the stream, which this
//! task polls on the event loop. Should the event loop ever be wedged, that
//! stream is never polled; [`super::last_resort`] keeps handlers of its own
//! on a thread of its own for that case, and this loop answers its probes.

use std::io;

use actix::prelude::*;
use futures_util::StreamExt;
use signal_hook_tokio::Signals;

use super::last_resort::{self, Probes};
use super::messages::{ReloadConfig, Shutdown, ShutdownReason};
use crate::process::signal::Signal;

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "signals";

/// The service's signal handlers, installed. Installing is synchronous and
/// happens before the socket is bound: a client that can connect must also
/// be able to stop us gracefully (a handler installed lazily, on the first
/// poll of a spawned task, leaves a window where SIGTERM kills the process
/// outright and leaves its socket behind).
pub struct SignalStreams {
    signals: Signals,
    probes: Probes,
}

impl SignalStreams {
    /// Installs the SIGTERM, SIGINT and SIGHUP handlers, and the last-resort
    /// thread with its own SIGTERM and SIGINT handlers. Must run inside the
    /// runtime.
    pub fn install() -> io::Result<SignalStreams> {
        let signals = Signals::new([Signal::TERM, Signal::INT, Signal::HUP].map(Signal::number))?;
        let probes = last_resort::install()?;
        Ok(SignalStreams { signals, probes })
    }
}

/// Listens for signals until the system stops. `shutdown` receives the
/// shutdown requests, `reload` the SIGHUPs. Answers the last-resort
/// thread's probes: that it runs at all shows the event loop is not wedged.
pub async fn signal_loop(
    streams: SignalStreams,
    shutdown: Recipient<Shutdown>,
    reload: Recipient<ReloadConfig>,
) {
    let SignalStreams {
        mut signals,
        mut probes,
    } = streams;
    let mut probes_open = true;
    let mut stopping = false;
    loop {
        let signal = tokio::select! {
            signo = signals.next() => match signo {
                Some(signo) => Signal::from_raw(signo),
                None => return,
            },
            probe = probes.next(), if probes_open => {
                match probe {
                    Some(probe) => probe.answer(),
                    None => probes_open = false,
                }
                continue;
            }
        };
        if signal == Signal::HUP {
            tracing::info!(
                component = COMPONENT,
                event = "signal",
                signal = signal.name(),
                action = "reload_config"
            );
            reload.do_send(ReloadConfig);
            continue;
        }
        let reason = if stopping {
            ShutdownReason::SecondSignal(signal)
        } else {
            ShutdownReason::Signal(signal)
        };
        tracing::info!(
            component = COMPONENT,
            event = "signal",
            signal = signal.name(),
            action = if stopping { "escalate" } else { "shutdown" }
        );
        stopping = true;
        shutdown.do_send(Shutdown { reason });
    }
}
