//! What a sync's child ending means: the classification of its exit (the
//! rules are `cgc_fresh_core::sync_plan`'s), the fallback to the reconcile,
//! and the report to the machine.

use super::*;

/// ` (last output: …)` for a message, or nothing.
pub(super) fn last_line(tail: &str) -> String {
    match tail.lines().rev().find(|line| !line.trim().is_empty()) {
        Some(line) => format!(" (last output: {})", line.trim()),
        None => String::new(),
    }
}

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
                if run.facts.cancelled {
                    self.report(run.flight, SyncEvent::Finished(SyncOutcome::Cancelled));
                    return;
                }
                let workspace = self.workspace.display().to_string();
                let conclusive = code == Some(0) && !run.facts.timed_out;
                let indexed = conclusive
                    && listing_mentions_workspace(lines.iter().map(String::as_str), &workspace);
                tracing::info!(
                    component = COMPONENT,
                    event = "consent_listing",
                    indexed,
                    conclusive,
                    code,
                    signal,
                    timed_out = run.facts.timed_out
                );
                if !conclusive {
                    // Not knowing is not "not indexed": nothing is created
                    // (consent), nothing is remembered, and the failure is
                    // said as what it is. The machine's retry rule applies.
                    let how = if run.facts.timed_out {
                        format!("timed out after {} ms", self.settings.cgc.timeout_ms)
                    } else {
                        match (code, signal) {
                            (Some(code), _) => format!("exited with code {code}"),
                            (None, Some(signal)) => format!("was killed by signal {signal}"),
                            (None, None) => "ended without a status".to_string(),
                        }
                    };
                    let mut error =
                        format!("could not tell whether {workspace} is indexed: `cgc list` {how}");
                    let tail = tail.trim();
                    if !tail.is_empty() {
                        error.push_str("; output ends: ");
                        error.push_str(tail);
                    }
                    self.report(
                        run.flight,
                        SyncEvent::Finished(SyncOutcome::Failed { error }),
                    );
                    return;
                }
                if indexed {
                    self.known_indexed = true;
                    run.phase = Phase::Syncing { child: None };
                    run.facts = SyncRunFacts::default();
                    run.end_requested = None;
                    run.spawned_reported.clear();
                    self.run = Some(run);
                    self.start_sync(ctx);
                } else {
                    self.known_unindexed.insert(run.session.clone());
                    self.report(
                        run.flight,
                        SyncEvent::Declined {
                            reason: declined_reason(&self.workspace),
                        },
                    );
                }
            }
            Phase::Probing { ref result, .. } => {
                if run.facts.cancelled {
                    self.report(run.flight, SyncEvent::Finished(SyncOutcome::Cancelled));
                    return;
                }
                let answer = match probe_answer(result.as_deref(), code) {
                    Some(answer) => answer,
                    None if run.facts.timed_out => Err(format!(
                        "its API probe gave no answer within {} ms",
                        self.settings.cgc.timeout_ms
                    )),
                    None => Err(format!(
                        "its API probe ended with {}{}",
                        match (code, signal) {
                            (Some(code), _) => format!("exit code {code}"),
                            (None, Some(signal)) => format!("signal {signal}"),
                            (None, None) => "no status".to_string(),
                        },
                        last_line(&tail)
                    )),
                };
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
                                match &outcome {
                                    SyncOutcome::Succeeded => {
                                        self.must_reconcile = None;
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
                                    SyncOutcome::Busy { .. } | SyncOutcome::NotApplied { .. } => {}
                                    SyncOutcome::Failed { error }
                                    | SyncOutcome::TimedOut { error } => {
                                        self.must_reconcile = Some(format!(
                                            "the last incremental sync did not finish ({error})"
                                        ));
                                    }
                                    SyncOutcome::Cancelled => {
                                        self.must_reconcile = Some(
                                            "the last incremental sync was stopped before it finished"
                                                .into(),
                                        );
                                    }
                                }
                                self.report(run.flight, SyncEvent::Finished(outcome));
                            }
                        }
                    }
                    Some(Active::Command { strategy }) => {
                        let outcome = classify_sync_exit(&strategy, &run.facts);
                        if outcome == SyncOutcome::Succeeded
                            && matches!(strategy, SyncStrategy::Reconcile | SyncStrategy::Update)
                        {
                            self.must_reconcile = None;
                        }
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
}
