//! A sync's child ended: its meaning is the core's
//! (`cgc_fresh_core::sync_run::SyncRunState::exited`, built on
//! `sync_exit` and `sync_plan`); here it is carried out — the next step of
//! the run, the fallback to the reconcile, the report to the machine.

use cgc_fresh_core::sync_exit::{ListingVerdict, NextReconcile};
use cgc_fresh_core::sync_run::{unavailable, ChildExit, ExitContext, ExitStep};

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
        let workspace = self.workspace.display().to_string();
        let context = ExitContext {
            workspace: &workspace,
            cli_timeout_ms: self.settings.cgc.timeout_ms,
            maintenance_timeout_ms: self.settings.cgc.maintenance_timeout_ms,
            strategy: &self.settings.cgc.sync_strategy,
        };
        let exit = ChildExit { code, signal, tail };
        let report = run.state.exited(exit, &context, || self.lock_holder());
        let flight = run.flight();
        if let Some(cost) = report.spawned {
            self.report(
                flight,
                SyncEvent::Spawned {
                    pid: pid as u32,
                    cost,
                },
            );
        }
        match report.step {
            ExitStep::Listed(verdict) => {
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
                    timed_out = run.state.facts().timed_out
                );
                match verdict {
                    ListingVerdict::Cancelled => {
                        self.report(flight, SyncEvent::Finished(SyncOutcome::Cancelled));
                    }
                    // Not knowing is not "not indexed": nothing is created
                    // (consent), nothing is remembered. The machine's
                    // retry rule applies.
                    ListingVerdict::Inconclusive { error } => {
                        self.report(flight, SyncEvent::Finished(SyncOutcome::Failed { error }))
                    }
                    ListingVerdict::Indexed => {
                        self.known_indexed = true;
                        self.run = Some(run);
                        self.start_sync(ctx);
                    }
                    ListingVerdict::NotIndexed => {
                        self.known_unindexed.insert(run.state.session().cloned());
                        self.report(
                            flight,
                            SyncEvent::Declined {
                                reason: declined_reason(&self.workspace),
                            },
                        );
                    }
                }
            }
            ExitStep::Probed(answer) => {
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
                    Err(reason) => self.start(unavailable(&reason), ctx),
                }
            }
            ExitStep::Fallback { reason } => {
                self.run = Some(run);
                self.start(
                    StartStep::Command {
                        strategy: SyncStrategy::Reconcile,
                        fallback: Some(reason),
                    },
                    ctx,
                );
            }
            ExitStep::Finished {
                outcome,
                next,
                applied,
            } => {
                if let Some(applied) = applied {
                    tracing::info!(
                        component = COMPONENT,
                        event = "incremental_applied",
                        flight = flight.0,
                        files = applied.files,
                        baseline = applied.baseline,
                        relinked = applied.result.as_ref().and_then(|r| r.relinked),
                        timings = ?applied.result.as_ref().map(|r| &r.timings)
                    );
                }
                self.next_reconcile(next);
                self.report(flight, SyncEvent::Finished(outcome));
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
