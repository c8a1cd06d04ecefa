//! The last resort: stopping the service when its event loop is wedged.
//!
//! Every orderly stop goes through the event loop: the signal stream is
//! polled there, the lifecycle actor stops the children there. If the loop
//! is stuck (a handler that never returns, a deadlock), SIGTERM and SIGINT
//! would do nothing at all, and the children — including daemonized
//! grandchildren that `PR_SET_PDEATHSIG` does not reach — would outlive a
//! service that the person or systemd finally SIGKILLs.
//!
//! So a small thread of its own holds its own SIGTERM and SIGINT handlers
//! (`signal-hook`'s iterator; its handlers run alongside the event loop's).
//! The first signal is left to the event loop. Each later one fires the
//! last resort when
//! - the event loop does not answer a probe within [`PROBE_WAIT`] (the
//!   signal loop answers as soon as it runs at all), or
//! - it is the third or later and arrives [`BOUND`] or more after the first:
//!   the loop runs, but the graceful stop and its escalation have had their
//!   chance.
//!
//! Firing kills every child group and every process carrying this
//! instance's owner token (`panic_hook::kill_everything_now`, the panic
//! hook's own cleanup) and ends the process at once with [`EXIT_WEDGED`].
//! In normal operation it never fires: the first signal is the loop's, a
//! second one finds the loop answering (and escalating by itself), and the
//! service has exited long before a third one arrives ten seconds later.

use std::io;
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use signal_hook::iterator::Signals;
use tokio::sync::mpsc;

use crate::process::signal::Signal;
use crate::supervisor::panic_hook;

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "last_resort";

/// How long the event loop has to answer a probe.
pub const PROBE_WAIT: Duration = Duration::from_secs(2);

/// From the first signal on, how long the graceful stop may take before a
/// third signal ends the process even though the loop answers.
pub const BOUND: Duration = Duration::from_secs(10);

/// The exit code after the last resort fired (`EX_SOFTWARE`: an internal
/// error; the panic hook's is 101).
pub const EXIT_WEDGED: i32 = 70;

/// A question from the last-resort thread: is the event loop running?
pub struct Probe(std_mpsc::SyncSender<()>);

impl Probe {
    /// Says yes.
    pub fn answer(self) {
        // The thread may have stopped waiting; nothing to do then.
        let _ = self.0.try_send(());
    }
}

/// The probes the event loop answers (see `signals::signal_loop`).
pub struct Probes(mpsc::UnboundedReceiver<Probe>);

impl Probes {
    /// The next probe; `None` once the thread is gone.
    pub async fn next(&mut self) -> Option<Probe> {
        self.0.recv().await
    }
}

/// Installs the thread's SIGTERM and SIGINT handlers (synchronously, before
/// this returns) and starts the thread.
pub fn install() -> io::Result<Probes> {
    let signals = Signals::new([Signal::TERM, Signal::INT].map(Signal::number))?;
    let (probe_tx, probe_rx) = mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name("last-resort".into())
        .spawn(move || watch(signals, &probe_tx))?;
    Ok(Probes(probe_rx))
}

/// What the thread decides on one signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// The first signal: the event loop's to handle.
    LeaveToLoop,
    /// A later one: ask the loop whether it runs.
    Probe,
    /// Fire without asking.
    Fire,
}

/// Counts the stop signals and applies the rules of the module docs.
#[derive(Debug, Default)]
struct Escalation {
    first: Option<Instant>,
    count: u32,
}

impl Escalation {
    fn on_signal(&mut self, now: Instant) -> Verdict {
        self.count += 1;
        let Some(first) = self.first else {
            self.first = Some(now);
            return Verdict::LeaveToLoop;
        };
        if self.count >= 3 && now.saturating_duration_since(first) >= BOUND {
            Verdict::Fire
        } else {
            Verdict::Probe
        }
    }
}

fn watch(mut signals: Signals, probes: &mpsc::UnboundedSender<Probe>) {
    let mut escalation = Escalation::default();
    for signo in signals.forever() {
        let signal = Signal::from_raw(signo);
        let why = match escalation.on_signal(Instant::now()) {
            Verdict::LeaveToLoop => continue,
            Verdict::Probe if loop_answers(probes, PROBE_WAIT) => continue,
            Verdict::Probe => "the event loop does not answer",
            Verdict::Fire => "the service is still running long after the first signal",
        };
        fire(signal, escalation.count, why);
    }
}

/// Whether the event loop answers a probe within `wait`. With the loop gone
/// (the system is stopping) the process is about to exit by itself: it
/// gets `wait` to do so.
fn loop_answers(probes: &mpsc::UnboundedSender<Probe>, wait: Duration) -> bool {
    let (answer_tx, answer_rx) = std_mpsc::sync_channel(1);
    if probes.send(Probe(answer_tx)).is_err() {
        std::thread::sleep(wait);
        return false;
    }
    answer_rx.recv_timeout(wait).is_ok()
}

fn fire(signal: Signal, signals: u32, why: &str) -> ! {
    tracing::error!(
        component = COMPONENT,
        event = "last_resort",
        signal = signal.name(),
        signals,
        why,
        action = "kill_children_and_exit"
    );
    let killed = panic_hook::kill_everything_now();
    tracing::error!(
        component = COMPONENT,
        event = "last_resort_cleanup",
        killed,
        exit_code = EXIT_WEDGED
    );
    // `_exit`: no exit handlers, nothing that could wait for a lock the
    // wedged thread holds.
    signal_hook::low_level::exit(EXIT_WEDGED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_signal_is_the_loops_and_later_ones_probe_it() {
        let start = Instant::now();
        let mut escalation = Escalation::default();
        assert_eq!(escalation.on_signal(start), Verdict::LeaveToLoop);
        assert_eq!(escalation.on_signal(start), Verdict::Probe);
        assert_eq!(
            escalation.on_signal(start + BOUND - Duration::from_millis(1)),
            Verdict::Probe
        );
        assert_eq!(escalation.on_signal(start + BOUND), Verdict::Fire);
    }

    #[test]
    fn a_second_signal_after_the_bound_still_probes_first() {
        let start = Instant::now();
        let mut escalation = Escalation::default();
        escalation.on_signal(start);
        assert_eq!(
            escalation.on_signal(start + BOUND * 2),
            Verdict::Probe,
            "the loop escalates a second signal by itself"
        );
        assert_eq!(escalation.on_signal(start + BOUND * 2), Verdict::Fire);
    }

    #[test]
    fn an_answered_probe_is_seen_and_a_missing_one_is_not() {
        let (probe_tx, mut probe_rx) = mpsc::unbounded_channel::<Probe>();
        let answering = std::thread::spawn(move || {
            if let Some(probe) = probe_rx.blocking_recv() {
                probe.answer();
            }
            // Now receives but never answers.
            let unanswered = probe_rx.blocking_recv();
            drop(unanswered);
        });
        assert!(loop_answers(&probe_tx, Duration::from_secs(10)));
        assert!(!loop_answers(&probe_tx, Duration::from_millis(50)));
        answering.join().unwrap();
        assert!(!loop_answers(&probe_tx, Duration::from_millis(1)));
    }
}
