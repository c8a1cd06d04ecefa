//! The lines and exits of the runner's children, routed: MCP answers,
//! the warm-up's, the listing's lines, the driver's result and progress
//! lines, CGC's markers (lock errors, backend fallback, the reconcile's
//! ready line).

use super::*;

impl Handler<ChildEvent> for SyncRunner {
    type Result = ();
    fn handle(&mut self, msg: ChildEvent, ctx: &mut Self::Context) {
        match msg {
            ChildEvent::Line { id, text, .. } => {
                if self.mcp_line(id, &text, ctx) || self.warm_up_line(id, &text, ctx) {
                    return;
                }
                let Some(run) = self.run.as_ref() else { return };
                let current = run.phase.child();
                if current.is_some_and(|c| c != id) {
                    return;
                }
                if matches!(run.phase, Phase::Syncing { .. }) && self.progress_line(&text, ctx) {
                    return;
                }
                let Some(run) = self.run.as_mut() else { return };
                match &mut run.phase {
                    Phase::Listing { lines, .. } => {
                        if lines.len() < 10_000 {
                            lines.push(text);
                        }
                    }
                    Phase::Probing { result, .. } => {
                        if let Some(parsed) = parse_driver_result(&text) {
                            *result = Some(Box::new(parsed));
                        }
                    }
                    Phase::Syncing { .. } => {
                        if let Some(Active::Driver { result, serial, .. }) = &mut run.active {
                            if let Some(parsed) = parse_driver_result(&text) {
                                // A worker's answer ends the run; one for
                                // another request is not this run's.
                                let expected = *serial;
                                if parsed.exit.is_some() && parsed.serial != Some(expected) {
                                    tracing::warn!(
                                        component = COMPONENT,
                                        event = "driver_worker_stray_answer",
                                        id,
                                        serial = parsed.serial,
                                        expected
                                    );
                                    return;
                                }
                                let answer = parsed.exit;
                                *result = Some(Box::new(parsed));
                                if let Some(code) = answer {
                                    self.worker_answered(id, code, ctx);
                                }
                                return;
                            }
                        }
                        if output_has_lock_error(&text) {
                            run.facts.lock_error = true;
                        }
                        if output_has_backend_fallback(&text) {
                            run.facts.backend_fell_back = true;
                        }
                        if is_index_skip_line(&text) {
                            run.facts.skipped_indexed = true;
                        }
                        let reconciling = matches!(
                            &run.active,
                            Some(Active::Command {
                                strategy: SyncStrategy::Reconcile
                            }) | None
                        );
                        if reconciling && is_watch_stopping_line(&text) {
                            run.facts.saw_stopping = true;
                        }
                        if reconciling && is_watch_ready_line(&text) && !run.facts.saw_ready {
                            run.facts.saw_ready = true;
                            let flight = run.flight;
                            // Reconciled: one SIGINT stops it cleanly (a
                            // second would make it exit 130 mid-stop). If
                            // the spawn reply is not in yet, it goes then.
                            self.request_end(EndRequest::Interrupt);
                            ctx.run_later(INTERRUPT_RETRY, move |act, ctx| {
                                act.interrupt_not_taken(flight, 1, ctx)
                            });
                        }
                    }
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
                let current = self.run.as_ref().and_then(|run| run.phase.child());
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
                        run.facts.cancelled = true;
                    }
                }
                use std::os::unix::process::ExitStatusExt;
                self.child_exited(pid, status.code(), status.signal(), output_tail, ctx);
            }
        }
    }
}
