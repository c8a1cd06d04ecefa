//! The runner's side of a long sync's progress: it reads what the running
//! child says of its work (the driver's `CGC_FRESH_PROGRESS` lines, the
//! phases of CGC's reconcile), feeds the run's [`ProgressGate`] with the
//! clock, wakes the gate when it asks to be, and reports what the gate
//! publishes (`SyncEvent::Progress`) for the state frames. The rules of
//! what is shown and when are the gate's (`cgc_fresh_core::sync_progress`).

use actix::prelude::*;
use cgc_fresh_core::config::SyncStrategy;
use cgc_fresh_core::freshness::FlightId;
use cgc_fresh_core::sync_progress::{parse_driver_progress, ProgressGate, ProgressStep};
use cgc_fresh_proto::{SyncPhase, SyncProgress};

use super::{RunWork, SyncEvent, SyncRunner, COMPONENT};
use crate::process::cgc_markers::reconcile_phase;
use crate::service::clock;

/// A run's progress: its gate and the wake-up armed for it.
pub(super) struct RunProgress {
    gate: ProgressGate,
    wake: Option<SpawnHandle>,
}

impl RunProgress {
    /// A run that starts now.
    pub(super) fn start() -> Self {
        RunProgress {
            gate: ProgressGate::start(clock::now()),
            wake: None,
        }
    }
}

impl SyncRunner {
    /// `text`, a line of the running sync's child, as progress: true when
    /// it was the driver's progress line (nothing else is in it); a line
    /// of CGC's reconcile is progress and output both, so it is never
    /// consumed.
    pub(super) fn progress_line(&mut self, text: &str, ctx: &mut Context<Self>) -> bool {
        let Some(run) = self.run.as_ref() else {
            return false;
        };
        match run.state.work() {
            Some(RunWork::Driver { serial, .. }) => {
                let Some(report) = parse_driver_progress(text) else {
                    return false;
                };
                // The worker's prepare (no serial) parses for the request
                // that waits for it; another request's lines are not ours.
                if report.serial.is_none_or(|s| s == *serial) {
                    self.observe_progress(report.step, ctx);
                }
                true
            }
            Some(RunWork::Command {
                strategy: SyncStrategy::Reconcile,
            }) => {
                if let Some(phase) = reconcile_phase(text) {
                    self.observe_progress(ProgressStep::phase(phase), ctx);
                }
                false
            }
            _ => false,
        }
    }

    /// What the sync phase runs from its spawn on, before it says more:
    /// CGC's own index and update say nothing, so the phase is known only
    /// from the command.
    pub(super) fn progress_spawned(&mut self, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_ref() else { return };
        let phase = match run.state.work() {
            Some(RunWork::Command {
                strategy: SyncStrategy::Update | SyncStrategy::Index,
            }) => SyncPhase::Indexing,
            _ => return,
        };
        self.observe_progress(ProgressStep::phase(phase), ctx);
    }

    fn observe_progress(&mut self, step: ProgressStep, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_mut() else { return };
        let published = run.progress.gate.observe(step, clock::now());
        let flight = run.flight();
        self.publish_progress(flight, published);
        self.arm_progress_wake(ctx);
    }

    /// Arms the gate's wake-up for the current run, unless one is armed:
    /// one that comes early wakes a gate with nothing due, which re-arms.
    pub(super) fn arm_progress_wake(&mut self, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_mut() else { return };
        if run.progress.wake.is_some() {
            return;
        }
        let Some(at) = run.progress.gate.next_wake() else {
            return;
        };
        let flight = run.flight();
        let after = at.get().saturating_sub(clock::now().get());
        run.progress.wake = Some(
            ctx.run_later(std::time::Duration::from_millis(after), move |act, ctx| {
                act.progress_woken(flight, ctx)
            }),
        );
    }

    fn progress_woken(&mut self, flight: FlightId, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_mut().filter(|run| run.flight() == flight) else {
            return;
        };
        run.progress.wake = None;
        let published = run.progress.gate.wake(clock::now());
        self.publish_progress(flight, published);
        self.arm_progress_wake(ctx);
    }

    fn publish_progress(&self, flight: FlightId, published: Option<SyncProgress>) {
        let Some(progress) = published else { return };
        tracing::info!(
            component = COMPONENT,
            event = "sync_progress",
            flight = flight.0,
            phase = progress.phase.as_str(),
            done = progress.done,
            total = progress.total
        );
        self.report_to.do_send(super::SyncReport {
            flight,
            event: SyncEvent::Progress(progress),
        });
    }
}
