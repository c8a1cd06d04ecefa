//! Accepting clients on the service's Unix socket.
//!
//! Each accepted stream is checked with `SO_PEERCRED`: a peer whose UID is
//! not ours gets one `forbidden` error frame and is closed before any of its
//! bytes are read. Everyone else gets a `Connection` actor.
//!
//! When `accept` fails (EMFILE at the descriptor limit, with thousands of
//! connections held) the loop pauses 50 ms so it does not spin, and says so
//! once, then at most one summary per [`ACCEPT_FAILURE_REPORT_EVERY`] with
//! the number of failures it kept quiet, and once more when it accepts
//! again: a warning every 50 ms would flood the journal while a descriptor
//! shortage lasts.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use actix::prelude::*;
use cgc_fresh_proto::{encode_server_frame, Envelope, ErrorCode, ErrorFrame, ServerFrame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

use super::connection::Connection;
use super::drift_observer::DriftObserverActor;
use super::messages::Peer;

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "listener";

static NEXT_CONN: AtomicU64 = AtomicU64::new(1);

/// At most one `accept_failed` summary per this long while failures last.
pub const ACCEPT_FAILURE_REPORT_EVERY: Duration = Duration::from_secs(10);

/// The pause after a failed `accept`, so a shortage does not spin the loop.
const ACCEPT_FAILURE_PAUSE: Duration = Duration::from_millis(50);

/// What to log about a run of failed accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureReport {
    /// The first failure of a run: log it.
    First,
    /// A summary is due: this many failures were not logged since the last.
    Summary { suppressed: u64 },
    /// Keep quiet (counted for the next summary).
    Quiet,
}

/// A run of accept failures, rate-limited (time is an input).
#[derive(Debug, Default)]
pub struct AcceptFailures {
    /// When the last report of the current run was logged.
    reported_at: Option<Instant>,
    /// Failures since then, not logged.
    suppressed: u64,
    /// Failures in the current run.
    total: u64,
}

impl AcceptFailures {
    /// A failed accept at `now`.
    pub fn failed(&mut self, now: Instant) -> FailureReport {
        self.total += 1;
        match self.reported_at {
            None => {
                self.reported_at = Some(now);
                FailureReport::First
            }
            Some(at) if now.saturating_duration_since(at) >= ACCEPT_FAILURE_REPORT_EVERY => {
                self.reported_at = Some(now);
                let suppressed = std::mem::take(&mut self.suppressed) + 1;
                FailureReport::Summary { suppressed }
            }
            Some(_) => {
                self.suppressed += 1;
                FailureReport::Quiet
            }
        }
    }

    /// An accept succeeded: ends a run of failures, returning
    /// `(not yet reported, all in the run)` if there was one.
    pub fn recovered(&mut self) -> Option<(u64, u64)> {
        self.reported_at?;
        let run = (self.suppressed, self.total);
        *self = AcceptFailures::default();
        Some(run)
    }
}

/// Runs the accept loop until the system stops.
pub async fn accept_loop(
    listener: UnixListener,
    max_line_bytes: usize,
    workspace: Addr<DriftObserverActor>,
) {
    let our_uid = nix::unistd::geteuid().as_raw();
    let mut failures = AcceptFailures::default();
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => {
                if let Some((suppressed, total)) = failures.recovered() {
                    tracing::info!(
                        component = COMPONENT,
                        event = "accept_recovered",
                        suppressed,
                        failures = total
                    );
                }
                stream
            }
            Err(error) => {
                // EMFILE and friends: say so (rate-limited) and keep
                // accepting; a short pause keeps a descriptor shortage from
                // spinning the loop.
                match failures.failed(Instant::now()) {
                    FailureReport::First => {
                        tracing::warn!(component = COMPONENT, event = "accept_failed", error = %error)
                    }
                    FailureReport::Summary { suppressed } => tracing::warn!(
                        component = COMPONENT,
                        event = "accept_failed",
                        error = %error,
                        suppressed,
                        window_ms = ACCEPT_FAILURE_REPORT_EVERY.as_millis() as u64,
                    ),
                    FailureReport::Quiet => {}
                }
                tokio::time::sleep(ACCEPT_FAILURE_PAUSE).await;
                continue;
            }
        };
        let conn = NEXT_CONN.fetch_add(1, Ordering::Relaxed);
        let peer = match stream.peer_cred() {
            Ok(cred) => Peer {
                pid: cred.pid(),
                uid: cred.uid(),
            },
            Err(error) => {
                tracing::warn!(component = COMPONENT, event = "peer_cred_failed", conn, error = %error);
                continue;
            }
        };
        if peer.uid != our_uid {
            tracing::warn!(
                component = COMPONENT,
                event = "peer_refused",
                conn,
                peer_pid = peer.pid,
                peer_uid = peer.uid,
                our_uid
            );
            actix_rt::spawn(refuse(stream, peer.uid));
            continue;
        }
        Connection::start(conn, peer, stream, max_line_bytes, workspace.clone());
    }
}

async fn refuse(mut stream: UnixStream, uid: u32) {
    let frame = Envelope::new(ServerFrame::Error(ErrorFrame::new(
        ErrorCode::Forbidden,
        format!("uid {uid} may not use this service; only its owner may"),
    )));
    let _ = stream.write_all(&encode_server_frame(&frame)).await;
    let _ = stream.shutdown().await;
    // Drain (bounded) what the peer already sent: closing a Unix socket with
    // unread input resets it, and the peer would lose the error frame.
    let mut sink = [0u8; 4096];
    let drain = async {
        let mut total = 0usize;
        while total < 64 * 1024 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), drain).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_failures_is_logged_once_then_summarised_every_window() {
        let t0 = Instant::now();
        let mut failures = AcceptFailures::default();
        assert_eq!(failures.failed(t0), FailureReport::First);
        let step = ACCEPT_FAILURE_PAUSE;
        let mut at = t0;
        let mut quiet = 0;
        while at + step < t0 + ACCEPT_FAILURE_REPORT_EVERY {
            at += step;
            assert_eq!(failures.failed(at), FailureReport::Quiet);
            quiet += 1;
        }
        assert_eq!(quiet, 199);
        assert_eq!(
            failures.failed(t0 + ACCEPT_FAILURE_REPORT_EVERY),
            FailureReport::Summary { suppressed: 200 }
        );
        assert_eq!(
            failures.failed(t0 + ACCEPT_FAILURE_REPORT_EVERY + step),
            FailureReport::Quiet
        );
        assert_eq!(failures.recovered(), Some((1, 202)));
        // A new run starts with a warning of its own.
        assert_eq!(failures.recovered(), None);
        assert_eq!(failures.failed(at), FailureReport::First);
    }
}
