//! Executes a behaviour's steps, with signals and the `die_after_ms` timer
//! checked whenever the script waits (and before every step).
//!
//! The runner decides how the run ends ([`Outcome`]); logging the end and
//! actually exiting is the caller's job.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::daemon::{self, DaemonContext};
use crate::db_lock::{self, LockAttempt};
use crate::scenario::{Death, KnownText, Lines, LockSpec, SignalReaction, Step, StopScript};
use crate::signal_name::SignalName;
use crate::signals::{self, SignalWaiter};

/// How often a busy `hold_lock` retries.
const LOCK_RETRY_INTERVAL: Duration = Duration::from_millis(100);

/// The signals the runner reacts to.
const WATCHED_SIGNALS: [SignalName; 3] = [SignalName::INT, SignalName::TERM, SignalName::HUP];

/// How a run ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Exit with `code`; `handled_signal` is the signal whose reaction ended
    /// the run, if any.
    Exit {
        code: i32,
        handled_signal: Option<SignalName>,
    },
    /// Die by this signal.
    DieBySignal(SignalName),
    /// The fake itself failed (e.g. could not create the lock file).
    FakeError(String),
}

impl Outcome {
    fn exit(code: i32) -> Outcome {
        Outcome::Exit {
            code,
            handled_signal: None,
        }
    }
}

/// Whether a graceful stop is already under way (a second SIGINT then
/// interrupts it, exit 130, like Python's KeyboardInterrupt in the real one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    Stopping,
}

/// Something that ends or redirects a wait.
enum Interrupt {
    Signal(SignalName),
    Timer(Death),
}

/// The reactions and environment a run needs.
pub struct RunSettings<'a> {
    pub waiter: &'a SignalWaiter,
    pub cwd: &'a Path,
    pub daemon: DaemonContext<'a>,
    pub on_sigint: SignalReaction,
    pub on_sigterm: SignalReaction,
}

/// Runs one behaviour.
pub struct Runner<'a> {
    settings: RunSettings<'a>,
    /// Signals already acted upon, per entry of [`WATCHED_SIGNALS`].
    acted_upon: [u32; WATCHED_SIGNALS.len()],
    timer: Option<(Instant, Death)>,
    held_locks: Vec<File>,
}

impl<'a> Runner<'a> {
    pub fn new(settings: RunSettings<'a>) -> Runner<'a> {
        Runner {
            settings,
            acted_upon: [0; WATCHED_SIGNALS.len()],
            timer: None,
            held_locks: Vec::new(),
        }
    }

    /// Runs `steps`, then exits with `exit` unless something ended it first.
    pub fn run(mut self, steps: &[Step], exit: i32) -> Outcome {
        let outcome = match self.run_steps(steps, Phase::Running) {
            Ok(()) => Outcome::exit(exit),
            Err(outcome) => outcome,
        };
        // Locks stay held until the process is gone, as with the real one:
        // closing the files here would release them before the end is logged.
        std::mem::forget(std::mem::take(&mut self.held_locks));
        outcome
    }

    fn run_steps(&mut self, steps: &[Step], phase: Phase) -> Result<(), Outcome> {
        for step in steps {
            self.pause_until(Some(Instant::now()), phase)?;
            self.run_step(step, phase)?;
        }
        Ok(())
    }

    fn run_step(&mut self, step: &Step, phase: Phase) -> Result<(), Outcome> {
        match step {
            Step::Sleep { ms } => {
                self.pause_until(Some(Instant::now() + Duration::from_millis(*ms)), phase)
            }
            Step::Stdout(lines) => {
                print_lines(&mut io::stdout().lock(), lines);
                Ok(())
            }
            Step::Stderr(lines) => {
                print_lines(&mut io::stderr().lock(), lines);
                Ok(())
            }
            Step::HoldLock(spec) => self.hold_lock(spec, phase),
            Step::SpawnDaemon(spec) => daemon::spawn(spec, &self.settings.daemon)
                .map_err(|error| Outcome::FakeError(format!("spawn_daemon: {error}"))),
            Step::Hang => self.pause_until(None, phase),
            Step::DieAfter { ms, death } => {
                self.timer = Some((Instant::now() + Duration::from_millis(*ms), *death));
                Ok(())
            }
            Step::WriteFile(spec) => {
                let path = db_lock::resolve_path(&spec.path, self.settings.cwd);
                if spec.if_missing && path.exists() {
                    return Ok(());
                }
                path.parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| std::fs::write(&path, &spec.content))
                    .map_err(|error| {
                        Outcome::FakeError(format!("write_file {}: {error}", path.display()))
                    })
            }
        }
    }

    /// Takes the lock, retrying while busy for the spec's budget; then the
    /// real lock error and exit 1.
    fn hold_lock(&mut self, spec: &LockSpec, phase: Phase) -> Result<(), Outcome> {
        let path = db_lock::resolve_path(&spec.path, self.settings.cwd);
        let give_up_at = Instant::now() + Duration::from_millis(spec.busy_timeout_ms);
        loop {
            match db_lock::try_lock(&path) {
                Ok(LockAttempt::Held(file)) => {
                    self.held_locks.push(file);
                    return Ok(());
                }
                Ok(LockAttempt::Busy) if Instant::now() < give_up_at => {
                    let retry_at = (Instant::now() + LOCK_RETRY_INTERVAL).min(give_up_at);
                    self.pause_until(Some(retry_at), phase)?;
                }
                Ok(LockAttempt::Busy) => {
                    let error = KnownText::LockError {
                        path: path.to_string_lossy().into_owned(),
                    };
                    print_lines(&mut io::stdout().lock(), &error.into());
                    return Err(Outcome::exit(1));
                }
                Err(error) => {
                    return Err(Outcome::FakeError(format!(
                        "hold_lock {}: {error}",
                        path.display()
                    )))
                }
            }
        }
    }

    /// Waits until `deadline` (`None` = forever), reacting to signals and
    /// the timer meanwhile; `Err` when one of them ends the run.
    fn pause_until(&mut self, deadline: Option<Instant>, phase: Phase) -> Result<(), Outcome> {
        loop {
            if let Some(interrupt) = self.next_interrupt() {
                self.react(interrupt, phase)?;
                continue;
            }
            let now = Instant::now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                return Ok(());
            }
            let wake_at = match (deadline, self.timer.map(|(at, _)| at)) {
                (Some(deadline), Some(timer)) => Some(deadline.min(timer)),
                (deadline, timer) => deadline.or(timer),
            };
            self.settings
                .waiter
                .wait(wake_at.map(|at| at.saturating_duration_since(now)));
        }
    }

    fn next_interrupt(&mut self) -> Option<Interrupt> {
        for (position, signal) in WATCHED_SIGNALS.iter().enumerate() {
            if signals::received_count(*signal) > self.acted_upon[position] {
                self.acted_upon[position] += 1;
                return Some(Interrupt::Signal(*signal));
            }
        }
        match self.timer {
            Some((at, death)) if Instant::now() >= at => {
                self.timer = None;
                Some(Interrupt::Timer(death))
            }
            _ => None,
        }
    }

    /// `Ok` = carry on; `Err` = the run ends with this outcome.
    fn react(&mut self, interrupt: Interrupt, phase: Phase) -> Result<(), Outcome> {
        let signal = match interrupt {
            Interrupt::Timer(Death::Signal(signal)) => return Err(Outcome::DieBySignal(signal)),
            Interrupt::Timer(Death::Exit(code)) => return Err(Outcome::exit(code)),
            Interrupt::Signal(signal) => signal,
        };
        let reaction = match signal {
            SignalName::INT => self.settings.on_sigint.clone(),
            SignalName::TERM => self.settings.on_sigterm.clone(),
            _ => SignalReaction::Die,
        };
        match (reaction, phase) {
            (SignalReaction::Ignore, _) => Ok(()),
            (SignalReaction::Stop(_), Phase::Stopping) if signal == SignalName::INT => {
                Err(Outcome::Exit {
                    code: 130,
                    handled_signal: Some(signal),
                })
            }
            (SignalReaction::Stop(script), Phase::Running) => Err(self.stop(&script, signal)),
            (SignalReaction::Die | SignalReaction::Stop(_), _) => Err(Outcome::DieBySignal(signal)),
        }
    }

    fn stop(&mut self, script: &StopScript, signal: SignalName) -> Outcome {
        print_lines(&mut io::stdout().lock(), &script.stdout);
        print_lines(&mut io::stderr().lock(), &script.stderr);
        match self.run_steps(&script.steps, Phase::Stopping) {
            Ok(()) => Outcome::Exit {
                code: script.exit,
                handled_signal: Some(signal),
            },
            Err(outcome) => outcome,
        }
    }
}

/// Prints each line and flushes after it, so a reader sees it at once.
/// Write errors (a closed pipe) are ignored: the script goes on.
fn print_lines(stream: &mut impl Write, lines: &Lines) {
    for line in lines.render() {
        let _ = writeln!(stream, "{line}").and_then(|()| stream.flush());
    }
}
