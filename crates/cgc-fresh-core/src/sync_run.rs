//! One sync run, from the freshness machine's `StartSync` to its last
//! report: whether it may run at all (consent), what it starts (the
//! configured command, the incremental driver, or the driver's API probe
//! first), its phases (listing → probing → syncing), how its child is asked
//! to end, and what each line and the child's end mean for the run.
//!
//! The `SyncRunner` actor keeps one [`SyncRunState`] per run and carries
//! out what it answers: it spawns, writes the request to the worker, arms
//! the timers, sends the signals and the reports. Nothing here spawns,
//! reads a clock or touches a file.
//!
//! The rules:
//! - **consent**: a sync runs when `lifecycle.autoCreate` is on or the
//!   workspace is known to be indexed (a listing said so, or its
//!   `.codegraphcontext` marker is there); a session a listing already
//!   answered "not indexed" is declined without asking again; otherwise
//!   `cgc list` is asked first ([`consent`]);
//! - **what runs**: the plan ([`crate::sync_plan::plan_sync`]) and the
//!   probe's answer decide ([`start_step`]): an unavailable driver
//!   reconciles and says why, an unknown one is probed first;
//! - **the budget**: work of a class the run's allowance has no slot for
//!   is not started ([`SyncRunState::admits`]);
//! - **each class of cost is reported spawned once** per run, before the
//!   run's end, even when the child exits before its spawn is known;
//! - **an end request is never downgraded nor repeated**: a stop after an
//!   interrupt goes; an interrupt or a second stop after a stop does not;
//!   one asked before the child's id is known is sent when it is;
//! - **the reconcile's ready line** asks for one SIGINT; it is sent again
//!   (at most [`INTERRUPT_ATTEMPTS`] in all) only while `cgc watch` has not
//!   said it is stopping;
//! - **a worker's answer for another request** is not this run's;
//! - **a worker that ended without reading the request** is replaced once
//!   ([`crate::sync_plan::unanswered_worker_exit`]);
//! - **the listing's lines are bounded** ([`LISTING_LINES_KEPT`]).

use std::collections::BTreeSet;

use crate::cgc_markers::{
    is_watch_ready_line, is_watch_stopping_line, output_has_backend_fallback, output_has_lock_error,
};
use crate::config::SyncStrategy;
use crate::freshness::{FlightId, SessionKey, SyncAllowance, SyncCost, SyncOutcome};
use crate::sync_exit::{
    after_command, after_driver, listing_verdict, probe_verdict, ChildEnd, ListingVerdict,
    NextReconcile,
};
use crate::sync_plan::{
    classify_baseline_exit, classify_driver_exit, classify_sync_exit, is_index_skip_line,
    parse_driver_result, unanswered_worker_exit, DriverResult, DriverVerdict, SyncRun,
    SyncRunFacts, UnansweredWorkerExit,
};

mod notes;
#[cfg(test)]
mod tests;

pub use notes::{command_note, driver_note, StrategyNote};

/// How a fallback reason begins when the installed CGC cannot run the
/// incremental driver (its API probe failed, no interpreter): the person
/// is told once (`driver_unavailable` in the strategy report).
pub const DRIVER_UNAVAILABLE: &str = "the incremental driver is unavailable";

/// How many lines of `cgc list` a run keeps (a listing longer than that
/// is not one of CGC's).
pub const LISTING_LINES_KEPT: usize = 10_000;

/// How many SIGINTs a reconcile gets in all after its ready line.
pub const INTERRUPT_ATTEMPTS: u32 = 4;

/// The driver's API probe answer: `Ok` (with a note when the CGC version
/// is unproven but allowed), or `Err` with why the driver is unavailable.
pub type ProbeAnswer = Result<Option<String>, String>;

/// The fallback reason for a driver that is unavailable for `reason`.
pub fn driver_unavailable(reason: &str) -> String {
    format!("{DRIVER_UNAVAILABLE}: {reason}")
}

/// What is known about the consent to sync (the spec's "never create an
/// index the person did not ask for").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConsentFacts {
    /// `lifecycle.autoCreate`.
    pub auto_create: bool,
    /// A listing of this service's said the workspace is indexed.
    pub known_indexed: bool,
    /// The workspace's `.codegraphcontext` marker is there.
    pub marker_present: bool,
    /// A listing already said "not indexed" for this run's session.
    pub session_known_unindexed: bool,
}

/// What consent allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consent {
    /// Run the sync.
    Granted,
    /// Decline it (not indexed, `autoCreate` off), without a listing.
    Declined,
    /// Ask `cgc list` first.
    AskListing,
}

/// The consent rule (module doc).
pub fn consent(facts: ConsentFacts) -> Consent {
    if facts.auto_create || facts.known_indexed || facts.marker_present {
        Consent::Granted
    } else if facts.session_known_unindexed {
        Consent::Declined
    } else {
        Consent::AskListing
    }
}

/// What a run starts, once it may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartStep {
    /// A `cgc` command of this strategy; `fallback` says why it replaces
    /// the configured `incremental`.
    Command {
        strategy: SyncStrategy,
        fallback: Option<String>,
    },
    /// The driver on `paths`; with `baseline` (why nothing proves what the
    /// graph holds), also every file the graph does not hold as a
    /// from-scratch index would.
    Driver {
        paths: Vec<String>,
        baseline: Option<String>,
    },
    /// The driver's API probe, before it is used.
    Probe,
}

/// What the `plan` runs, given the driver probe's answer so far.
pub fn start_step(plan: SyncRun, probe: Option<&ProbeAnswer>) -> StartStep {
    let (paths, baseline) = match plan {
        SyncRun::Command {
            strategy,
            fallback_reason,
        } => {
            return StartStep::Command {
                strategy,
                fallback: fallback_reason,
            }
        }
        SyncRun::Incremental { paths } => (paths, None),
        SyncRun::Baseline { reason } => (Vec::new(), Some(reason)),
    };
    match probe {
        Some(Ok(_)) => StartStep::Driver { paths, baseline },
        Some(Err(reason)) => unavailable(reason),
        None => StartStep::Probe,
    }
}

/// The reconcile that replaces a driver unavailable for `reason`.
pub fn unavailable(reason: &str) -> StartStep {
    StartStep::Command {
        strategy: SyncStrategy::Reconcile,
        fallback: Some(driver_unavailable(reason)),
    }
}

/// Where a run is.
#[derive(Debug, Clone, PartialEq)]
pub enum RunPhase {
    /// `cgc list` is running to decide whether the workspace is indexed.
    Listing { lines: Vec<String> },
    /// The driver's API probe is running.
    Probing {
        /// Boxed, as in [`RunWork::Driver`].
        result: Option<Box<DriverResult>>,
    },
    /// The sync itself is running (or about to).
    Syncing,
}

/// What the syncing phase runs.
#[derive(Debug, Clone, PartialEq)]
pub enum RunWork {
    Driver {
        paths: Vec<String>,
        /// A baseline request: the driver finds the changed files by
        /// comparing the graph with the tree.
        baseline: bool,
        /// Boxed: a result is large, and most runs hold none.
        result: Option<Box<DriverResult>>,
        /// The worker request this run waits for the answer to.
        serial: u64,
        /// A new worker took this request after the first one ended
        /// without reading it.
        retried: bool,
    },
    Command {
        strategy: SyncStrategy,
    },
}

/// How the run asks its child to end before it exits by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndRequest {
    /// Reconciled (the ready line was seen): one SIGINT, after which the
    /// child finishes cleanly; the time budget still bounds it.
    /// Escalating after the short stop grace turned slow clean exits on a
    /// loaded machine into kills, and so into failed syncs.
    Interrupt,
    /// Cancelled or out of time: the supervisor's full stop.
    Stop(&'static str),
}

/// A request to the driver's worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverRequest {
    pub serial: u64,
    pub paths: Vec<String>,
    pub baseline: bool,
}

/// Which time budget bounds a child: the CLI's (`cgc.timeoutMs`, the
/// listing and the probe) or maintenance's (`cgc.maintenanceTimeoutMs`,
/// the sync).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildBudget {
    Cli,
    Maintenance,
}

/// What to do now that the run's child is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildStart {
    /// Write this request to it (a worker taking the run's request).
    pub request: Option<DriverRequest>,
    /// Ask it to end (asked before its id was known).
    pub end: Option<EndRequest>,
    /// The budget to arm.
    pub budget: ChildBudget,
    /// Report this class of cost spawned (the first child of its class).
    pub spawned: Option<SyncCost>,
}

/// What a line of the run's child meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineStep {
    /// Kept or noted; nothing to do.
    Noted,
    /// A worker's answer for another request (`serial`): not this run's.
    Stray { serial: Option<u64>, expected: u64 },
    /// The worker answered this run's request with the exit code a one-shot
    /// driver would have ended with: the run ends as if it had.
    Answered { code: i32 },
    /// The reconcile's ready line, first seen: ask the child to end
    /// ([`EndRequest::Interrupt`]) and look again later
    /// ([`SyncRunState::interrupt_again`]).
    Reconciled,
}

/// How the run's child ended, as the supervisor reported it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChildExit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// The last lines of its output.
    pub tail: String,
}

/// What the run's end is judged against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitContext<'a> {
    /// The workspace as the listing names it.
    pub workspace: &'a str,
    /// `cgc.timeoutMs` (the listing's and the probe's budget).
    pub cli_timeout_ms: u64,
    /// `cgc.maintenanceTimeoutMs` (the sync's).
    pub maintenance_timeout_ms: u64,
    /// The configured strategy (for a child that ended before the run knew
    /// what it ran).
    pub strategy: &'a SyncStrategy,
}

/// What the end of the run's child means.
#[derive(Debug, Clone, PartialEq)]
pub enum ExitStep {
    /// The consent listing's verdict. After `Indexed` the run goes on
    /// (its state is back to syncing): start it again.
    Listed(ListingVerdict),
    /// The probe answered: keep the answer and start again.
    Probed(ProbeAnswer),
    /// The driver cannot apply this change: reconcile, for `reason`.
    Fallback { reason: String },
    /// The run is over with `outcome`; `next` is what it does to "the next
    /// sync must reconcile".
    Finished {
        outcome: SyncOutcome,
        next: NextReconcile,
        /// What the driver applied, when it succeeded (for the log).
        applied: Option<Applied>,
    },
}

/// A driver run that succeeded.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    pub files: usize,
    pub baseline: bool,
    pub result: Option<Box<DriverResult>>,
}

/// [`ExitStep`] with the `Spawned` report that must come first.
#[derive(Debug, Clone, PartialEq)]
pub struct ExitReport {
    pub spawned: Option<SyncCost>,
    pub step: ExitStep,
}

/// One sync run's state (module doc).
#[derive(Debug, Clone)]
pub struct SyncRunState {
    flight: FlightId,
    session: Option<SessionKey>,
    /// The changed paths (`None`: the whole workspace).
    paths: Option<Vec<String>>,
    allowance: SyncAllowance,
    phase: RunPhase,
    /// What the syncing phase runs (set when it starts).
    work: Option<RunWork>,
    /// The current child's supervisor id, once its spawn is known.
    child: Option<u64>,
    facts: SyncRunFacts,
    /// What was asked of the child so far (sent once its id is known).
    end_requested: Option<EndRequest>,
    /// The classes whose `Spawned` went out.
    spawned_reported: BTreeSet<SyncCost>,
}

impl SyncRunState {
    /// A run of `flight` for `session` over `paths` (`None`: the whole
    /// workspace), allowed work of the classes `allowance` has slots for.
    pub fn new(
        flight: FlightId,
        session: Option<SessionKey>,
        paths: Option<Vec<String>>,
        allowance: SyncAllowance,
    ) -> Self {
        SyncRunState {
            flight,
            session,
            paths,
            allowance,
            phase: RunPhase::Syncing,
            work: None,
            child: None,
            facts: SyncRunFacts::default(),
            end_requested: None,
            spawned_reported: BTreeSet::new(),
        }
    }

    pub fn flight(&self) -> FlightId {
        self.flight
    }

    pub fn session(&self) -> Option<&SessionKey> {
        self.session.as_ref()
    }

    pub fn paths(&self) -> Option<&[String]> {
        self.paths.as_deref()
    }

    pub fn phase(&self) -> &RunPhase {
        &self.phase
    }

    pub fn work(&self) -> Option<&RunWork> {
        self.work.as_ref()
    }

    /// The child the run waits for, once its spawn is known.
    pub fn child(&self) -> Option<u64> {
        self.child
    }

    pub fn facts(&self) -> &SyncRunFacts {
        &self.facts
    }

    /// Whether the run was asked to end (cancelled, out of time, reconciled).
    pub fn end_requested(&self) -> Option<EndRequest> {
        self.end_requested
    }

    /// Whether the run's allowance has a slot for work of `cost`.
    pub fn admits(&self, cost: SyncCost) -> bool {
        self.allowance.allows(cost)
    }

    /// The class of cost of what the syncing phase runs. A baseline parses
    /// the whole tree and reads the whole graph: it pays from the
    /// whole-repository allowance.
    pub fn cost(&self) -> SyncCost {
        match self.work {
            Some(RunWork::Driver {
                baseline: false, ..
            }) => SyncCost::ChangedFiles,
            _ => SyncCost::WholeRepository,
        }
    }

    /// A new child of the run's: none known yet, nothing asked of it, no
    /// fact of the last one's kept.
    fn new_child(&mut self, phase: RunPhase) {
        self.phase = phase;
        self.child = None;
        self.facts = SyncRunFacts::default();
        self.end_requested = None;
    }

    /// `cgc list` is started for consent.
    pub fn begin_listing(&mut self) {
        self.new_child(RunPhase::Listing { lines: Vec::new() });
    }

    /// The driver's API probe is started.
    pub fn begin_probe(&mut self) {
        self.new_child(RunPhase::Probing { result: None });
    }

    /// A `cgc` command of `strategy` is started as the sync.
    pub fn begin_command(&mut self, strategy: SyncStrategy) {
        self.new_child(RunPhase::Syncing);
        self.work = Some(RunWork::Command { strategy });
    }

    /// The driver's `request` is the sync; `retried` when a new worker
    /// takes it after the first ended without reading it.
    pub fn begin_driver(&mut self, request: DriverRequest, retried: bool) {
        self.new_child(RunPhase::Syncing);
        self.work = Some(RunWork::Driver {
            paths: request.paths,
            baseline: request.baseline,
            result: None,
            serial: request.serial,
            retried,
        });
    }

    /// The run's child is `id`: a spawn replied, or the
    /// live worker takes the request (`takes_request`: a worker).
    pub fn child_started(&mut self, id: u64, takes_request: bool) -> ChildStart {
        self.child = Some(id);
        let request = match &self.work {
            Some(RunWork::Driver {
                paths,
                baseline,
                serial,
                ..
            }) if takes_request
                && self.end_requested.is_none()
                && self.phase == RunPhase::Syncing =>
            {
                Some(DriverRequest {
                    serial: *serial,
                    paths: paths.clone(),
                    baseline: *baseline,
                })
            }
            _ => None,
        };
        let syncing = self.phase == RunPhase::Syncing;
        ChildStart {
            request,
            end: self.end_requested,
            budget: if syncing {
                ChildBudget::Maintenance
            } else {
                ChildBudget::Cli
            },
            spawned: if syncing { self.spawned() } else { None },
        }
    }

    /// The class to report spawned, unless it was reported already.
    fn spawned(&mut self) -> Option<SyncCost> {
        let cost = self.cost();
        self.spawned_reported.insert(cost).then_some(cost)
    }

    /// Asks the child to end, unless it was already asked as much or more:
    /// the child and what to send it, when its id is known (otherwise it
    /// goes with [`SyncRunState::child_started`]).
    pub fn request_end(&mut self, request: EndRequest) -> Option<(u64, EndRequest)> {
        match (self.end_requested, request) {
            (Some(EndRequest::Stop(_)), _)
            | (Some(EndRequest::Interrupt), EndRequest::Interrupt) => return None,
            _ => {}
        }
        self.end_requested = Some(request);
        self.child.map(|id| (id, request))
    }

    /// The run's session ended: it stops, and reports `Cancelled`.
    pub fn cancel(&mut self) -> Option<(u64, EndRequest)> {
        self.facts.cancelled = true;
        self.request_end(EndRequest::Stop("sync cancelled: its session ended"))
    }

    /// The run's time budget ran out: it stops, and reports a time-out.
    pub fn time_out(&mut self) -> Option<(u64, EndRequest)> {
        self.facts.timed_out = true;
        self.request_end(EndRequest::Stop("time budget exhausted"))
    }

    /// An orderly shutdown stopped the child: a cancellation, not a
    /// failure to record (and show again after a restart).
    pub fn stopped_by_shutdown(&mut self) {
        self.facts.cancelled = true;
    }

    /// The reconcile's SIGINT went `sent` times: the child to send it to
    /// again, when `cgc watch` has not said it is stopping and the
    /// attempts are not used up. CGC 0.6.13 waits for it in
    /// `threading.Event().wait()`, which a SIGINT the kernel hands to one
    /// of its other threads does not wake (seen on FalkorDB Lite, whose
    /// client runs two more threads, on a loaded machine). Never once the
    /// stopping line is out: a second SIGINT then makes it exit 130.
    pub fn interrupt_again(&self, sent: u32) -> Option<u64> {
        let waiting = self.facts.saw_ready
            && !self.facts.saw_stopping
            && self.end_requested == Some(EndRequest::Interrupt);
        self.child.filter(|_| waiting && sent < INTERRUPT_ATTEMPTS)
    }

    /// A line of the run's child (the driver's progress lines are taken
    /// before this).
    pub fn line(&mut self, text: &str) -> LineStep {
        match &mut self.phase {
            RunPhase::Listing { lines } => {
                if lines.len() < LISTING_LINES_KEPT {
                    lines.push(text.to_string());
                }
                LineStep::Noted
            }
            RunPhase::Probing { result } => {
                if let Some(parsed) = parse_driver_result(text) {
                    *result = Some(Box::new(parsed));
                }
                LineStep::Noted
            }
            RunPhase::Syncing => self.sync_line(text),
        }
    }

    fn sync_line(&mut self, text: &str) -> LineStep {
        if let Some(RunWork::Driver { result, serial, .. }) = &mut self.work {
            if let Some(parsed) = parse_driver_result(text) {
                let expected = *serial;
                if parsed.exit.is_some() && parsed.serial != Some(expected) {
                    return LineStep::Stray {
                        serial: parsed.serial,
                        expected,
                    };
                }
                let answer = parsed.exit;
                *result = Some(Box::new(parsed));
                return match answer {
                    Some(code) => LineStep::Answered { code },
                    None => LineStep::Noted,
                };
            }
        }
        let facts = &mut self.facts;
        facts.lock_error |= output_has_lock_error(text);
        facts.backend_fell_back |= output_has_backend_fallback(text);
        facts.skipped_indexed |= is_index_skip_line(text);
        let reconciling = matches!(
            &self.work,
            Some(RunWork::Command {
                strategy: SyncStrategy::Reconcile
            }) | None
        );
        if reconciling && is_watch_stopping_line(text) {
            facts.saw_stopping = true;
        }
        if reconciling && is_watch_ready_line(text) && !facts.saw_ready {
            facts.saw_ready = true;
            return LineStep::Reconciled;
        }
        LineStep::Noted
    }

    /// The request to give a new worker when the one applying it exited
    /// (`code`) before answering: `None` when the run ends with that exit
    /// instead ([`unanswered_worker_exit`]).
    pub fn retry_unanswered(
        &self,
        code: Option<i32>,
        during_shutdown: bool,
    ) -> Option<(Vec<String>, bool)> {
        let Some(RunWork::Driver {
            paths,
            baseline,
            result: None,
            retried,
            ..
        }) = &self.work
        else {
            return None;
        };
        let cancelled = self.facts.cancelled || during_shutdown || self.end_requested.is_some();
        match unanswered_worker_exit(code, cancelled, self.facts.timed_out, *retried) {
            UnansweredWorkerExit::Retry => Some((paths.clone(), *baseline)),
            UnansweredWorkerExit::End => None,
        }
    }

    /// The run's child ended: what that means. `lock_holder` is asked only
    /// when the output carried CGC's lock error (who holds it, for the
    /// record).
    pub fn exited(
        &mut self,
        exit: ChildExit,
        context: &ExitContext<'_>,
        lock_holder: impl FnOnce() -> Option<String>,
    ) -> ExitReport {
        let phase = std::mem::replace(&mut self.phase, RunPhase::Syncing);
        let (spawned, step) = match phase {
            RunPhase::Listing { lines } => (None, self.listed(&lines, exit, context)),
            RunPhase::Probing { result } => (None, self.probed(result.as_deref(), exit, context)),
            RunPhase::Syncing => (self.spawned(), self.synced(exit, context, lock_holder)),
        };
        ExitReport { spawned, step }
    }

    fn probed(
        &self,
        result: Option<&DriverResult>,
        exit: ChildExit,
        context: &ExitContext<'_>,
    ) -> ExitStep {
        if self.facts.cancelled {
            return finished(SyncOutcome::Cancelled, NextReconcile::Unchanged);
        }
        let end = ChildEnd {
            code: exit.code,
            signal: exit.signal,
            timed_out: self.facts.timed_out,
            ..ChildEnd::default()
        };
        ExitStep::Probed(probe_verdict(
            result,
            end,
            context.cli_timeout_ms,
            &exit.tail,
        ))
    }

    fn listed(&mut self, lines: &[String], exit: ChildExit, context: &ExitContext<'_>) -> ExitStep {
        let end = ChildEnd {
            code: exit.code,
            signal: exit.signal,
            timed_out: self.facts.timed_out,
            cancelled: self.facts.cancelled,
            fell_back: output_has_backend_fallback(&lines.join("\n"))
                || output_has_backend_fallback(&exit.tail),
        };
        let verdict = listing_verdict(
            context.workspace,
            lines,
            end,
            context.cli_timeout_ms,
            &exit.tail,
        );
        if verdict == ListingVerdict::Indexed {
            self.new_child(RunPhase::Syncing);
            self.spawned_reported.clear();
        }
        ExitStep::Listed(verdict)
    }

    fn synced(
        &mut self,
        exit: ChildExit,
        context: &ExitContext<'_>,
        lock_holder: impl FnOnce() -> Option<String>,
    ) -> ExitStep {
        let facts = &mut self.facts;
        facts.exit_code = exit.code;
        facts.signal = exit.signal;
        facts.timeout_ms = context.maintenance_timeout_ms;
        facts.lock_error |= output_has_lock_error(&exit.tail);
        facts.backend_fell_back |= output_has_backend_fallback(&exit.tail);
        if facts.lock_error {
            facts.lock_holder = lock_holder();
        }
        facts.output_tail = exit.tail;
        match &self.work {
            Some(RunWork::Driver {
                paths,
                baseline,
                result,
                ..
            }) => {
                let verdict = if *baseline {
                    classify_baseline_exit(result.as_deref(), &self.facts)
                } else {
                    classify_driver_exit(paths, result.as_deref(), &self.facts)
                };
                match verdict {
                    DriverVerdict::Fallback { reason } => ExitStep::Fallback { reason },
                    DriverVerdict::Outcome(outcome) => {
                        let applied = (outcome == SyncOutcome::Succeeded).then(|| Applied {
                            files: paths.len(),
                            baseline: *baseline,
                            result: result.clone(),
                        });
                        ExitStep::Finished {
                            next: after_driver(&outcome),
                            outcome,
                            applied,
                        }
                    }
                }
            }
            Some(RunWork::Command { strategy }) => {
                let outcome = classify_sync_exit(strategy, &self.facts);
                let next = after_command(strategy, &outcome);
                finished(outcome, next)
            }
            None => finished(
                classify_sync_exit(context.strategy, &self.facts),
                NextReconcile::Unchanged,
            ),
        }
    }
}

fn finished(outcome: SyncOutcome, next: NextReconcile) -> ExitStep {
    ExitStep::Finished {
        outcome,
        next,
        applied: None,
    }
}
