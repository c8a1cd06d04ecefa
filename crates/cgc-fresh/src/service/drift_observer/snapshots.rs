//! The manifest around a sync: the snapshot of the tree taken before it
//! starts, committed as what the graph holds once it succeeded, and the
//! watcher's reference walk.

use super::*;

impl DriftObserverActor {
    /// Walks the tree for sync `flight` on the blocking pool; the result is
    /// kept for the sync's success (`SyncReport`).
    pub(super) fn take_snapshot(
        &mut self,
        flight: FlightId,
        taken_at: i64,
        ctx: &mut Context<Self>,
    ) {
        self.snapshot = Some(Snapshot {
            flight,
            state: SnapshotState::Taking { commit: false },
        });
        let root = self.workspace.clone();
        let walk = tokio::task::spawn_blocking(move || {
            manifest::timed(|| manifest::snapshot(&root, taken_at, MAX_MANIFEST_FILES))
        });
        ctx.spawn(
            actix::fut::wrap_future::<_, Self>(walk).map(move |joined, act, _| {
                let taken_manifest = match &joined {
                    Ok((Ok(taken), _)) => Some(taken.clone()),
                    _ => None,
                };
                act.dispatch_run(flight, taken_manifest.as_ref());
                let Some(snapshot) = act.snapshot.as_mut().filter(|s| s.flight == flight) else {
                    return;
                };
                match joined {
                    Ok((Ok(taken), ms)) => {
                        let files = match &taken {
                            Manifest::Recorded(recorded) => Some(recorded.files.len()),
                            Manifest::TooLarge { .. } => None,
                        };
                        tracing::info!(component = COMPONENT, event = "manifest_snapshot", flight = flight.0, files, too_large = files.is_none(), ms = ms as u64);
                        let taken = Arc::new(taken);
                        match snapshot.state {
                            SnapshotState::Taking { commit: true } => {
                                act.snapshot = None;
                                act.commit_manifest(taken);
                            }
                            _ => snapshot.state = SnapshotState::Ready(taken),
                        }
                    }
                    Ok((Err(error), _)) => {
                        tracing::warn!(component = COMPONENT, event = "manifest_snapshot_failed", flight = flight.0, error = %error);
                        act.snapshot = None;
                    }
                    Err(error) => {
                        tracing::warn!(component = COMPONENT, event = "manifest_snapshot_failed", flight = flight.0, error = %error);
                        act.snapshot = None;
                    }
                }
            }),
        );
    }

    /// Hands sync `flight` to the runner once its snapshot is `taken`
    /// (`None`: the walk failed). Its files: the reported paths and what
    /// changed between the manifest and the snapshot; the whole workspace
    /// when either is unknown (no manifest yet, a tree too large, a failed
    /// walk, a path-less edit).
    pub(super) fn dispatch_run(&mut self, flight: FlightId, taken: Option<&Manifest>) {
        let Some(pending) = self.pending_run.take_if(|p| p.run.flight == flight) else {
            return;
        };
        let PendingRun { mut run, cancelled } = pending;
        let unreported = match (self.manifest.as_deref(), taken) {
            (Some(Manifest::Recorded(before)), Some(Manifest::Recorded(now))) => {
                Some(changed_paths(before, &now.files))
            }
            _ => None,
        };
        run.paths = match (run.paths.take(), unreported) {
            (Some(mut reported), Some(unreported)) => {
                tracing::info!(
                    component = COMPONENT,
                    event = "sync_files",
                    flight = flight.0,
                    reported = reported.len(),
                    unreported = unreported.len()
                );
                reported.extend(unreported);
                reported.sort();
                reported.dedup();
                Some(reported)
            }
            _ => None,
        };
        if let Some(runner) = &self.runner {
            runner.do_send(run);
            if cancelled {
                runner.do_send(CancelRun { flight });
            }
        }
    }

    /// A sync ended: its snapshot becomes the manifest if it succeeded
    /// (now, or when the walk is done), else it is dropped.
    pub(super) fn sync_ended(&mut self, flight: FlightId, succeeded: bool) {
        if succeeded {
            self.last_synced = Some(flight);
        }
        let Some(snapshot) = self.snapshot.as_mut().filter(|s| s.flight == flight) else {
            return;
        };
        if !succeeded {
            self.snapshot = None;
            return;
        }
        match &snapshot.state {
            SnapshotState::Taking { .. } => {
                snapshot.state = SnapshotState::Taking { commit: true };
            }
            SnapshotState::Ready(taken) => {
                let taken = taken.clone();
                self.snapshot = None;
                self.commit_manifest(taken);
            }
        }
    }

    /// `taken` describes the graph from now on; written to disk off the
    /// actor's thread.
    pub(super) fn commit_manifest(&mut self, taken: Arc<Manifest>) {
        self.manifest = Some(taken.clone());
        let file = self.manifest_file.clone();
        tokio::task::spawn_blocking(move || match manifest::save(&file, &taken) {
            Ok(()) => {
                tracing::info!(component = COMPONENT, event = "manifest_written", path = %file.display())
            }
            Err(error) => {
                tracing::warn!(component = COMPONENT, event = "manifest_write_failed", error = %error)
            }
        });
    }

    /// A shell command is called: while a watcher runs, the tree as it is
    /// now is what the command's changes are found against (unless an
    /// open command's reference is kept already). Walked on the blocking
    /// pool; comparisons waiting for it start when it is in.
    pub(super) fn take_watch_reference(&mut self, ctx: &mut Context<Self>) {
        if self.watch_reference.is_some() || !self.machine.watcher_takes_edits() {
            return;
        }
        self.watch_reference = Some(WatchReference::Taking);
        let root = self.workspace.clone();
        let taken_at = manifest::walk_start_ns();
        let walk = tokio::task::spawn_blocking(move || {
            manifest::timed(|| manifest::snapshot(&root, taken_at, MAX_MANIFEST_FILES))
        });
        ctx.spawn(
            actix::fut::wrap_future::<_, Self>(walk).map(move |joined, act, ctx| {
                if !matches!(act.watch_reference, Some(WatchReference::Taking)) {
                    return;
                }
                act.watch_reference = Some(match joined {
                    Ok((Ok(taken @ Manifest::Recorded(_)), ms)) => {
                        tracing::info!(component = COMPONENT, event = "watch_reference_taken", ms = ms as u64);
                        WatchReference::Ready(Arc::new(taken))
                    }
                    Ok((Ok(Manifest::TooLarge { .. }), _)) => WatchReference::Failed,
                    Ok((Err(error), _)) => {
                        tracing::warn!(component = COMPONENT, event = "watch_reference_failed", error = %error);
                        WatchReference::Failed
                    }
                    Err(error) => {
                        tracing::warn!(component = COMPONENT, event = "watch_reference_failed", error = %error);
                        WatchReference::Failed
                    }
                });
                for input in act.compare_probes(ctx) {
                    act.apply(input, ctx);
                }
                act.schedule_state_flush(ctx);
            }),
        );
    }
}
