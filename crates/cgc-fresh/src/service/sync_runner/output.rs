//! The lines and exits of the runner's children, routed: MCP answers,
//! the warm-up's, the listing's lines, the driver's result and progress
//! lines, CGC's markers (lock errors, backend fallback, the reconcile's
//! ready line).

use super::*;
use cgc_fresh_core::sync_run::LineStep;

impl Handler<ChildEvent> for SyncRunner {
    type Result = ();
    fn handle(&mut self, msg: ChildEvent, ctx: &mut Self::Context) {
        match msg {
            ChildEvent::Line { id, text, .. } => {
                if self.mcp_line(id, &text, ctx) || self.warm_up_line(id, &text, ctx) {
                    return;
                }
                let Some(run) = self.run.as_ref() else { return };
                if run.state.child().is_some_and(|c| c != id) {
                    return;
                }
                if run.state.phase() == &RunPhase::Syncing && self.progress_line(&text, ctx) {
                    return;
                }
                let Some(run) = self.run.as_mut() else { return };
                match run.state.line(&text) {
                    LineStep::Noted => {}
                    LineStep::Stray { serial, expected } => tracing::warn!(
                        component = COMPONENT,
                        event = "driver_worker_stray_answer",
                        id,
                        serial,
                        expected
                    ),
                    LineStep::Answered { code } => self.worker_answered(id, code, ctx),
                    // Reconciled: one SIGINT stops it cleanly (a second
                    // would make it exit 130 mid-stop). If the spawn reply
                    // is not in yet, it goes then.
                    LineStep::Reconciled => self.reconciled(ctx),
                }
            }
            ChildEvent::Exited {
                id,
                pid,
                status,
                output_tail,
                during_shutdown,
            } => {
                self.mcp_worker_exited(id, pid, &status, ctx);
                if self.warm_up_child_exited(id, status.code(), ctx) {
                    return;
                }
                let current = self.run.as_ref().and_then(|run| run.state.child());
                match self.workers.exited(id, current == Some(id)) {
                    WorkerExit::Retired => {
                        tracing::info!(component = COMPONENT, event = "driver_worker_exited", id, pid, status = %status, retired = true);
                        return;
                    }
                    WorkerExit::IdleCurrent => {
                        // Its idle exit, or it died: the next sync starts
                        // another.
                        tracing::info!(component = COMPONENT, event = "driver_worker_exited", id, pid, status = %status, applying = false);
                        return;
                    }
                    WorkerExit::ApplyingCurrent => {
                        tracing::info!(component = COMPONENT, event = "driver_worker_exited", id, pid, status = %status, applying = true);
                        if self.replace_unanswering_worker(id, status.code(), during_shutdown, ctx)
                        {
                            return;
                        }
                    }
                    WorkerExit::NotAWorker => {}
                }
                // Only one child of ours runs at a time; `None` means its
                // spawn reply is not processed yet, and this is its exit.
                if current.is_some_and(|c| c != id) {
                    return;
                }
                // Stopped by an orderly shutdown: a cancellation, not a
                // failure to record (and show again after a restart).
                if during_shutdown {
                    if let Some(run) = self.run.as_mut() {
                        run.state.stopped_by_shutdown();
                    }
                }
                use std::os::unix::process::ExitStatusExt;
                self.child_exited(pid, status.code(), status.signal(), output_tail, ctx);
            }
        }
    }
}
