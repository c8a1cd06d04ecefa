//! Watching the processes that own session lifetimes.
//!
//! A session started with `owner_pid` (a Claude Code process, whose hooks
//! are short processes of their own) lives until that process exits. The
//! exit is observed event-driven: a pidfd (`pidfd_open`, through `rustix`)
//! becomes readable when its process terminates, and tokio's reactor waits
//! on it — no polling, no timer. A pidfd also pins the process's identity:
//! a pid reused after the exit is never mistaken for the owner.
//!
//! Each watch is one task that tells the drift observer actor once, then ends;
//! the actor aborts it when no lifetime is owned by that pid any more. The
//! number of watches is bounded by the live lifetimes.

// Registering a pidfd with tokio's reactor (`AsyncFd::register_with_interest`)
// is unsafe by signature: the descriptor must outlive the registration.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use actix::prelude::*;
use rustix::process::{pidfd_open, Pid, PidfdFlags};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "drift_observer";

/// The owner `pid` exited.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub struct OwnerGone {
    pub pid: u32,
}

/// A pidfd as a pollable descriptor for tokio's reactor.
struct PidFd(OwnedFd);

impl AsRawFd for PidFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Opens a pidfd for `pid`: `Err` when no such process exists (or it may
/// not be watched), which makes the `owner_pid` unusable.
fn open(pid: u32) -> io::Result<AsyncFd<PidFd>> {
    let raw = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a process id"))?;
    let fd = pidfd_open(raw, PidfdFlags::NONBLOCK).map_err(io::Error::from)?;
    // SAFETY: `PidFd` owns the descriptor (an `OwnedFd`), never replaces
    // it, and closes it only when dropped, which is after the registration
    // that `AsyncFd` drops first.
    Ok(unsafe { AsyncFd::register_with_interest(PidFd(fd), Interest::READABLE) }?)
}

/// Starts watching `pid`; `to` is told once it exits. Must run inside the
/// actor system. Returns the task (abort it to stop watching).
pub fn watch(pid: u32, to: Recipient<OwnerGone>) -> io::Result<tokio::task::JoinHandle<()>> {
    let fd = open(pid)?;
    Ok(actix_rt::spawn(async move {
        // Readable means the process terminated. An error of the reactor
        // is read the same way: the lifetime must not outlive a watch that
        // can no longer tell.
        if let Err(error) = fd.readable().await {
            tracing::warn!(component = COMPONENT, event = "owner_watch_failed", pid, error = %error);
        }
        to.do_send(OwnerGone { pid });
    }))
}

/// Whether `pid` names a process that can be watched now.
pub fn exists(pid: u32) -> bool {
    open(pid).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    struct Sink(Arc<Mutex<Vec<u32>>>);

    impl Actor for Sink {
        type Context = Context<Self>;
    }

    impl Handler<OwnerGone> for Sink {
        type Result = ();
        fn handle(&mut self, msg: OwnerGone, _: &mut Self::Context) {
            self.0.lock().unwrap().push(msg.pid);
        }
    }

    #[test]
    fn an_exited_owner_is_reported_once_and_a_missing_one_is_refused() {
        actix_rt::System::new().block_on(async {
            let seen = Arc::new(Mutex::new(Vec::new()));
            let sink = Sink(seen.clone()).start();
            let mut child = std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .unwrap();
            let pid = child.id();
            assert!(exists(pid));
            let _task = watch(pid, sink.recipient()).unwrap();
            actix_rt::time::sleep(std::time::Duration::from_millis(50)).await;
            assert!(seen.lock().unwrap().is_empty(), "alive: nothing said");
            child.kill().unwrap();
            child.wait().unwrap();
            for _ in 0..200 {
                if !seen.lock().unwrap().is_empty() {
                    break;
                }
                actix_rt::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            assert_eq!(*seen.lock().unwrap(), [pid]);
            assert!(!exists(pid));
            assert!(!exists(0));
            assert!(!exists(u32::MAX));
        });
    }
}
