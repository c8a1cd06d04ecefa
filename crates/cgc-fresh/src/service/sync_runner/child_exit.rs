//! A sync's child ended: its meaning is the core's
//! (`cgc_fresh_core::sync_exit` for the listing, the probe and the next
//! reconcile; `cgc_fresh_core::sync_plan` for the sync's outcome); here
//! it is carried out — the next step of the run, the fallback to the
//! reconcile, the report to the machine.

use cgc_fresh_core::sync_exit::{
    after_command, after_driver, listing_verdict, probe_verdict, ChildEnd, ListingVerdict,
    NextReconcile,
};

use super::*;

impl SyncRunner {
    pub(super) fn child_exited(
        &mut self,
        pid: i32,
        code: Option<i32>,
        signal: Option<i32>,
        tail: String,
        ctx: &mut Context<Self>,
    ) {
        let Some(mut run) = self.run.take() else {
            return;
        };
        if let Some(timer) = run.timer.take() {
            ctx.cancel_future(timer);
        }
        match run.phase {
            Phase::Listing { lines, .. } => {
                let workspace = self.workspace.display().to_string();
                let end = ChildEnd {
                    code,
                    signal,
                    timed_out: run.facts.timed_out,
                    cancelled: run.facts.cancelled,
                    fell_back: output_has_backend_fallback(&lines.join("\n"))
                        || output_has_backend_fallback(&tail),
                };
                let verdict =
                    listing_verdict(&workspace, &lines, end, self.settings.cgc.timeout_ms, &tail);
                tracing::info!(
                    component = COMPONENT,
                    event = "consent_listing",
                    by = "sync",
                    indexed = verdict == ListingVerdict::Indexed,
                    conclusive = matches!(
                        verdict,
                        ListingVerdict::Indexed | ListingVerdict::NotIndexed
                    ),
                    code,
                    signal,
                    timed_out = run.facts.timed_out
                );
                match verdict {
                    ListingVerdict::Cancelled => {
                        self.report(run.flight, SyncEvent::Finished(SyncOutcome::Cancelled));
                    }
                    // Not knowing is not "not indexed": nothing is created
                    // (consent), nothing is remembered. The machine's
                    // retry rule applies.
                    ListingVerdict::Inconclusive { error } => self.report(
                        run.flight,
                        SyncEvent::Finished(SyncOutcome::Failed { error }),
                    ),
                    ListingVerdict::Indexed => {
                        self.known_indexed = true;
                        run.phase = Phase::Syncing { child: None };
                        run.facts = SyncRunFacts::default();
                        run.end_requested = None;
                        run.spawned_reported.clear();
                        self.run = Some(run);
                        self.start_sync(ctx);
                    }
                    ListingVerdict::NotIndexed => {
                        self.known_unindexed.insert(run.session.clone());
                        self.report(
                            run.flight,
                            SyncEvent::Declined {
                                reason: declined_reason(&self.workspace),
                            },
                        );
                    }
                }
            }
            Phase::Probing { ref result, .. } => {
                if run.facts.cancelled {
                    self.report(run.flight, SyncEvent::Finished(SyncOutcome::Cancelled));
                    return;
                }
                let end = ChildEnd {
                    code,
                    signal,
                    timed_out: run.facts.timed_out,
                    ..ChildEnd::default()
                };
                let answer =
                    probe_verdict(result.as_deref(), end, self.settings.cgc.timeout_ms, &tail);
                tracing::info!(
                    component = COMPONENT,
                    event = "driver_probe_result",
                    ok = answer.is_ok(),
                    reason = answer.as_ref().err(),
                    unproven = answer.as_ref().ok().and_then(|note| note.as_deref())
                );
                self.probe = Some(answer.clone());
                self.run = Some(run);
                match answer {
                    // Planned again, now that the probe answered.
                    Ok(_) => self.start_sync(ctx),
                    Err(reason) => self.start_command(
                        SyncStrategy::Reconcile,
                        Some(format!("{DRIVER_UNAVAILABLE}: {reason}")),
                        ctx,
                    ),
                }
            }
            Phase::Syncing { .. } => {
                if let Some(event) = run.spawned_report(pid as u32) {
                    self.report(run.flight, event);
                }
                run.facts.exit_code = code;
                run.facts.signal = signal;
                run.facts.timeout_ms = self.settings.cgc.maintenance_timeout_ms;
                if output_has_lock_error(&tail) {
                    run.facts.lock_error = true;
                }
                if output_has_backend_fallback(&tail) {
                    run.facts.backend_fell_back = true;
                }
                if run.facts.lock_error {
                    run.facts.lock_holder = self.lock_holder();
                }
                run.facts.output_tail = tail;
                match run.active.clone() {
                    Some(Active::Driver {
                        paths,
                        baseline,
                        result,
                        ..
                    }) => {
                        let verdict = if baseline {
                            classify_baseline_exit(result.as_deref(), &run.facts)
                        } else {
                            classify_driver_exit(&paths, result.as_deref(), &run.facts)
                        };
                        match verdict {
                            DriverVerdict::Fallback { reason } => {
                                self.run = Some(run);
                                self.start_command(SyncStrategy::Reconcile, Some(reason), ctx);
                            }
                            DriverVerdict::Outcome(outcome) => {
                                if outcome == SyncOutcome::Succeeded {
                                    tracing::info!(
                                            component = COMPONENT,
                                            event = "incremental_applied",
                                            flight = run.flight.0,
                                            files = paths.len(),
                                            baseline,
                                            relinked = result.as_ref().and_then(|r| r.relinked),
                                            timings = ?result.as_ref().map(|r| &r.timings)
                                    );
                                }
                                self.next_reconcile(after_driver(&outcome));
                                self.report(run.flight, SyncEvent::Finished(outcome));
                            }
                        }
                    }
                    Some(Active::Command { strategy }) => {
                        let outcome = classify_sync_exit(&strategy, &run.facts);
                        self.next_reconcile(after_command(&strategy, &outcome));
                        self.report(run.flight, SyncEvent::Finished(outcome));
                    }
                    None => {
                        let outcome =
                            classify_sync_exit(&self.settings.cgc.sync_strategy, &run.facts);
                        self.report(run.flight, SyncEvent::Finished(outcome));
                    }
                }
            }
        }
    }

    /// Carries out what an outcome does to "the next sync must reconcile".
    fn next_reconcile(&mut self, next: NextReconcile) {
        match next {
            NextReconcile::Unchanged => {}
            NextReconcile::Clear => self.must_reconcile = None,
            NextReconcile::Require(why) => self.must_reconcile = Some(why),
        }
    }
}
