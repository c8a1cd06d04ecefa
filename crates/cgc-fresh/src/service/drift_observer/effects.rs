//! The core observer's decisions (`Effect`s), carried out: start or cancel
//! a sync, warm the worker, stop a lifetime's children, watch owners,
//! restart or stop the watcher.

use super::*;

impl DriftObserverActor {
    pub(super) fn carry_out(&mut self, effect: Effect) {
        match effect {
            Effect::StartSync {
                flight,
                session,
                manual,
                allowance,
            } => {
                tracing::info!(
                    component = COMPONENT,
                    // The scheduler logged the decision; this is its start.
                    event = "sync_starting",
                    flight = flight.0,
                    session = session.as_ref().map(tracing::field::display),
                    manual,
                    may_spawn = ?allowance
                );
                // What CGC indexes may have changed unseen: read anew.
                self.index_rules = None;
                // The snapshot's clock starts now, before the runner can
                // spawn anything (`manifest.rs`, "Snapshot rule").
                self.snapshots_to_take
                    .push((flight, manifest::walk_start_ns()));
                // The runner is told once the snapshot is taken: the files
                // a sync applies are the reported ones and whatever else the
                // tree says changed since the last successful sync.
                self.pending_run = Some(PendingRun {
                    run: RunSync {
                        flight,
                        session,
                        paths: self.machine.flight_paths(flight),
                        allowance,
                    },
                    cancelled: false,
                });
            }
            Effect::WarmWorker => {
                tracing::debug!(
                    component = COMPONENT,
                    event = "decision",
                    decision = "warm_worker",
                    manifest = self.manifest.is_some()
                );
                if let Some(runner) = &self.runner {
                    runner.do_send(crate::service::sync_runner::WarmUp);
                }
            }
            Effect::PrepareSync => {
                tracing::debug!(
                    component = COMPONENT,
                    event = "decision",
                    decision = "prepare_sync"
                );
                if let Some(runner) = &self.runner {
                    runner.do_send(PrepareSync);
                }
            }
            Effect::ProbeWorkspace { probe } => {
                tracing::debug!(
                    component = COMPONENT,
                    event = "decision",
                    decision = "probe_workspace",
                    probe = probe.get()
                );
                self.probes_waiting.push(probe);
            }
            Effect::CancelSync { flight } => {
                tracing::info!(
                    component = COMPONENT,
                    event = "sync_cancelling",
                    flight = flight.0
                );
                match self.pending_run.as_mut() {
                    // Not yet told to run: it is told to run and to stop,
                    // so that it answers with the flight's one terminal
                    // report, as every started flight must.
                    Some(pending) if pending.run.flight == flight => pending.cancelled = true,
                    _ => {
                        if let Some(runner) = &self.runner {
                            runner.do_send(CancelRun { flight });
                        }
                    }
                }
            }
            // Offered, pushed and counted by the notices actor.
            Effect::Notice { .. } => {
                tracing::warn!(component = COMPONENT, event = "unrouted", effect = ?effect)
            }
            Effect::SessionOpened {
                session,
                reattached,
            } => {
                let event = if reattached {
                    "session_reattached"
                } else {
                    "session_opened"
                };
                tracing::info!(component = COMPONENT, event, session = %session);
                if let Some(pid) = self.machine.owner(&session) {
                    self.owners_to_watch.push(pid);
                }
                if self.machine.watcher_attempt_allowed(&session) {
                    if let Some(watcher) = &self.watcher {
                        watcher.do_send(SessionBegan { session });
                    }
                }
            }
            Effect::SessionClosed { session, detached } => {
                let event = if detached {
                    "session_detached"
                } else {
                    "session_closed"
                };
                tracing::info!(component = COMPONENT, event, session = %session);
                self.unwatch_unowned();
                // The same cleanup on every path: children, consent,
                // watcher and backend answers of this lifetime.
                self.supervisor.do_send(StopSession {
                    session: session.clone(),
                });
                if let Some(runner) = &self.runner {
                    runner.do_send(ForgetSession(session.clone()));
                }
                if let Some(detector) = &self.detector {
                    detector.do_send(ForgetBackend(session.clone()));
                }
                if let Some(watcher) = &self.watcher {
                    watcher.do_send(SessionGone { session });
                }
            }
            Effect::RestartWatcher { session, pid } => {
                tracing::info!(component = COMPONENT, event = "decision", decision = "restart_watcher", session = %session, pid);
                if let Some(watcher) = &self.watcher {
                    watcher.do_send(RestartWatcher { session, pid });
                }
            }
            Effect::StopWatcher { session, pid } => {
                tracing::info!(component = COMPONENT, event = "decision", decision = "stop_watcher", session = %session, pid);
                if let Some(watcher) = &self.watcher {
                    watcher.do_send(StopWatcher { session, pid });
                }
            }
            Effect::RecordChanged => self.state_dirty = true,
        }
    }
}
