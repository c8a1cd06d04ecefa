//! Signal plumbing, async-signal-safe: the handler only bumps an atomic
//! counter and writes one byte to a non-blocking self-pipe, so a waiting
//! loop wakes at once without polling. Everything else (printing, logging,
//! exiting) happens in the main loop.
//!
//! Like the real CLI (a Python program), the fake leaves a signal that it
//! inherited as ignored ignored, and never changes the inherited signal mask:
//! that is exactly what a supervisor must reset before `exec`, and what the
//! tests check. `SIGPIPE` is not reported as inherited because the Rust
//! runtime sets it to ignored before `main`.

// The fake reproduces what the real CLI does at the system level (raw
// signal dispositions, fork/setsid daemons, fcntl locks), which takes
// system calls without safe wrappers here; every block says why it is sound.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::time::Duration;

use nix::fcntl::OFlag;
use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal};

use crate::signal_name::SignalName;

/// One counter per signal number (Linux has 64 signals).
const SIGNAL_SLOTS: usize = 65;

static RECEIVED: [AtomicU32; SIGNAL_SLOTS] = [const { AtomicU32::new(0) }; SIGNAL_SLOTS];

/// Write end of the self-pipe, or -1 before [`SignalWaiter::new`].
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn record_signal(number: libc::c_int) {
    // SAFETY: reading and restoring this thread's errno is what a handler
    // must do so that the interrupted code sees its own errno.
    let saved_errno = unsafe { *libc::__errno_location() };
    if let Some(counter) = usize::try_from(number)
        .ok()
        .and_then(|slot| RECEIVED.get(slot))
    {
        counter.fetch_add(1, Ordering::SeqCst);
    }
    let fd = WAKE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        let byte = 1u8;
        // SAFETY: write(2) is async-signal-safe; a full pipe (EAGAIN) is
        // fine because a wake-up is already pending then.
        unsafe { libc::write(fd, std::ptr::addr_of!(byte).cast(), 1) };
    }
    // SAFETY: see above.
    unsafe { *libc::__errno_location() = saved_errno };
}

/// How many times `signal` arrived since start-up.
pub fn received_count(signal: SignalName) -> u32 {
    RECEIVED
        .get(signal.0 as usize)
        .map_or(0, |counter| counter.load(Ordering::SeqCst))
}

/// Every signal that arrived at least once, with its count.
pub fn received_counts() -> Vec<(SignalName, u32)> {
    Signal::iterator()
        .map(SignalName)
        .map(|signal| (signal, received_count(signal)))
        .filter(|(_, count)| *count > 0)
        .collect()
}

fn set_action(signal: SignalName, handler: SigHandler) -> nix::Result<()> {
    let action = SigAction::new(handler, SaFlags::SA_RESTART, SigSet::empty());
    // SAFETY: the handler is async-signal-safe (see `record_signal`).
    unsafe { signal::sigaction(signal.0, &action) }.map(drop)
}

/// Counts `signal` instead of acting on it.
pub fn catch(signal: SignalName) -> nix::Result<()> {
    set_action(signal, SigHandler::Handler(record_signal))
}

/// Sets `signal` to `SIG_IGN`.
pub fn ignore(signal: SignalName) -> nix::Result<()> {
    set_action(signal, SigHandler::SigIgn)
}

/// Restores the default disposition of `signal`.
pub fn restore_default(signal: SignalName) -> nix::Result<()> {
    set_action(signal, SigHandler::SigDfl)
}

/// Dies by `signal` the way an uncaught signal kills a process: default
/// disposition, unblocked, raised. Falls back to exit code 128+signal if
/// the signal's default action does not terminate.
pub fn die_by(signal: SignalName) -> ! {
    // Failures are moot: the fallback below still ends the process.
    let _ = restore_default(signal);
    let mut only_this = SigSet::empty();
    only_this.add(signal.0);
    let _ = signal::sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&only_this), None);
    let _ = signal::raise(signal.0);
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: _exit(2) ends the process without running any Rust code.
    unsafe { libc::_exit(128 + signal.0 as libc::c_int) }
}

/// The signal state a process found at start-up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InheritedSignals {
    /// Signals whose disposition was `SIG_IGN` (SIGPIPE excluded).
    pub ignored: Vec<SignalName>,
    /// Signals in the blocked mask.
    pub blocked: Vec<SignalName>,
}

impl InheritedSignals {
    /// Reads the current dispositions and mask without changing them.
    pub fn inspect() -> InheritedSignals {
        let blocked_set = SigSet::thread_get_mask().unwrap_or_else(|_| SigSet::empty());
        let ignored = Signal::iterator()
            .filter(|signal| *signal != Signal::SIGPIPE && is_ignored(*signal))
            .map(SignalName)
            .collect();
        let blocked = Signal::iterator()
            .filter(|signal| blocked_set.contains(*signal))
            .map(SignalName)
            .collect();
        InheritedSignals { ignored, blocked }
    }

    /// True if `signal` was inherited as ignored.
    pub fn is_ignored(&self, signal: SignalName) -> bool {
        self.ignored.contains(&signal)
    }
}

fn is_ignored(signal: Signal) -> bool {
    // SAFETY: a null new action only queries the current one.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    let status = unsafe { libc::sigaction(signal as libc::c_int, std::ptr::null(), &mut current) };
    status == 0 && current.sa_sigaction == libc::SIG_IGN
}

/// Waits for a signal with a timeout, through the self-pipe.
pub struct SignalWaiter {
    read_end: OwnedFd,
}

impl SignalWaiter {
    /// Creates the self-pipe; call once, before catching any signal.
    pub fn new() -> io::Result<SignalWaiter> {
        let (read_end, write_end) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
        // The write end lives as long as the process: the handler uses it.
        WAKE_FD.store(write_end.into_raw_fd(), Ordering::SeqCst);
        Ok(SignalWaiter { read_end })
    }

    /// Returns after `timeout` (`None` = no limit) or as soon as a signal
    /// arrives, whichever is first. Spurious early returns are possible;
    /// callers re-check their state.
    pub fn wait(&self, timeout: Option<Duration>) {
        let timeout_ms = timeout.map_or(-1, |timeout| {
            // Round up so that a deadline is not missed by a millisecond.
            let ms = timeout.as_micros().div_ceil(1000);
            libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
        });
        let mut poll_fd = libc::pollfd {
            fd: self.read_end.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; EINTR just returns early.
        let ready = unsafe { libc::poll(&mut poll_fd, 1, timeout_ms) };
        if ready > 0 {
            self.drain();
        }
    }

    fn drain(&self) {
        let mut buffer = [0u8; 64];
        loop {
            // SAFETY: reading into a local buffer from our non-blocking fd.
            let read = unsafe {
                libc::read(
                    self.read_end.as_raw_fd(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                )
            };
            if read <= 0 {
                break;
            }
        }
    }
}

/// Restores the default disposition of each of `signals`, unblocks every
/// signal and detaches from the self-pipe: for a forked daemon that must be
/// killable like a fresh process.
pub fn reset_for_daemon(signals: &[SignalName]) {
    for signal in signals {
        let _ = restore_default(*signal);
    }
    let _ = signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
    WAKE_FD.store(-1, Ordering::SeqCst);
}
