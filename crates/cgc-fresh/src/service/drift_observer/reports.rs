//! What the other actors report to the observer: a sync's events (its
//! strategy, progress and end), the scheduler's queue, the watcher's
//! state, and a reloaded configuration.

use super::*;

impl Handler<SyncNoted> for DriftObserverActor {
    type Result = ();
    fn handle(&mut self, msg: SyncNoted, ctx: &mut Self::Context) {
        let SyncReport { flight, event } = msg.0;
        if event.ends_the_run()
            && self
                .sync_progress
                .as_ref()
                .is_some_and(|(f, _)| *f == flight)
        {
            self.sync_progress = None;
        }
        match event {
            SyncEvent::Progress(progress) => {
                self.sync_progress = Some((flight, progress));
                self.state_dirty = true;
                self.schedule_state_flush(ctx);
            }
            SyncEvent::Finished(outcome) => {
                self.sync_ended(flight, matches!(outcome, SyncOutcome::Succeeded))
            }
            SyncEvent::Busy { .. } | SyncEvent::Declined { .. } | SyncEvent::OverBudget { .. } => {
                self.sync_ended(flight, false)
            }
            SyncEvent::Spawned { .. } => {}
            SyncEvent::Strategy { note, fallback, .. } => {
                // Which strategy runs, and why when it is a fallback: shown
                // in the state's `detail` until the next sync says otherwise.
                if fallback {
                    tracing::info!(component = COMPONENT, event = "sync_fallback", flight = flight.0, detail = %note);
                }
                self.sync_note = Some(note);
                self.state_dirty = true;
                self.schedule_state_flush(ctx);
            }
        }
    }
}

impl Handler<SchedulerQueued> for DriftObserverActor {
    type Result = ();
    fn handle(&mut self, msg: SchedulerQueued, ctx: &mut Self::Context) {
        self.scheduler_queued = msg.0;
        self.state_dirty = true;
        self.schedule_state_flush(ctx);
    }
}

impl Handler<WatcherReport> for DriftObserverActor {
    type Result = ();
    fn handle(&mut self, msg: WatcherReport, ctx: &mut Self::Context) {
        if msg.backend.is_some() {
            self.backend = msg.backend;
        }
        let session = msg.session;
        let mode = self.config.settings.freshness.watch;
        let input = match msg.event {
            WatcherEvent::Started { pid } => Input::WatcherStarted { session, mode, pid },
            WatcherEvent::SpawnFailed { error } => Input::WatcherSpawnFailed {
                session,
                mode,
                error,
            },
            WatcherEvent::Verified { pid } => Input::WatcherVerified { session, pid },
            WatcherEvent::Failed { pid, error } => Input::WatcherFailed {
                session,
                pid,
                error,
            },
            WatcherEvent::Died { pid, error } => Input::WatcherDied {
                session,
                pid,
                error,
            },
            WatcherEvent::Busy { holder } => Input::WatcherBusy {
                session,
                mode,
                holder,
            },
            WatcherEvent::DeclinedBackend { answer } => Input::WatcherDeclined {
                session,
                reason: WatcherDecline::Backend(answer),
            },
            WatcherEvent::DeclinedUnindexed => Input::WatcherDeclined {
                session,
                reason: WatcherDecline::Unindexed,
            },
            WatcherEvent::Stopped { pid } => Input::WatcherStopped { session, pid },
            WatcherEvent::Restarted { previous, pid } => Input::WatcherRestarted {
                session,
                previous,
                pid,
            },
            WatcherEvent::Applied { pid, path } => Input::WatcherApplied { session, pid, path },
        };
        self.apply(input, ctx);
    }
}

impl Handler<ConfigChanged> for DriftObserverActor {
    type Result = ();
    fn handle(&mut self, msg: ConfigChanged, ctx: &mut Self::Context) {
        self.config = msg.0;
        let policy = policy(&self.config.settings, &self.workspace);
        self.machine.set_policy(policy.clone());
        // The scheduler's policy is the machine's: it follows the mail the
        // machine wrote under the old one (the runner, the watcher and
        // the backend detector take the configuration from the config
        // actor themselves).
        self.flush_mail();
        if let Some(scheduler) = &self.scheduler {
            scheduler.do_send(SchedulerPolicy(policy));
        }
        self.check_cgc_executable();
        self.schedule_state_flush(ctx);
    }
}
