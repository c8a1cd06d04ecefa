//! Starting the watcher: the lock probe, the spawn through the supervisor
//! with CGC's app logs let through (the `sitecustomize` shim), and what
//! the spawn's answer means for the run.

use super::*;

impl WatcherSupervisor {
    /// Spawns `session`'s watcher; `restart_of`: the process it replaces
    /// (then its outcome is reported as `Restarted`, or as a `Failed` of
    /// that process).
    pub(super) fn spawn_watcher(
        &mut self,
        session: SessionKey,
        restart_of: Option<u32>,
        ctx: &mut Context<Self>,
    ) {
        if let Some(running) = &self.running {
            if running.run.session_ended() {
                // The ended lifetime's watcher is still being stopped (it
                // may hold the embedded database until it exits): this one
                // starts once it is gone.
                tracing::info!(component = COMPONENT, event = "watcher_deferred", session = %session, until_gone = %running.run.session());
                self.deferred = Some(session);
            } else {
                tracing::info!(component = COMPONENT, event = "watcher_already_running", session = %session);
            }
            return;
        }
        if let Some(holder) = find_lock_holder(
            &self.workspace,
            &self.home,
            &self.settings.cgc.global_args,
            COMPONENT,
        ) {
            self.report(&session, held_by(restart_of, holder));
            return;
        }
        self.running = Some(Running {
            run: WatcherRun::spawning(session.clone(), restart_of, now()),
            timer: None,
            deadline: None,
            probe: None,
        });
        let mut args = self.settings.cgc.global_args.clone();
        // --sync-on-start: the fresh claim at verification is only true if
        // the watcher first reconciles edits made before it started.
        args.extend(["watch", "--sync-on-start", "."].map(String::from));
        let spawn = self.supervisor.send(SpawnChild {
            program: PathBuf::from(&self.settings.cgc.executable),
            args,
            env_set: self.logging_env(),
            kind: ChildKind::Watcher,
            session: Some(session.clone()),
            requester: ctx.address().recipient(),
            piped_stdin: false,
        });
        let liveness = Duration::from_millis(self.settings.freshness.watcher_liveness_ms);
        let budget = Duration::from_millis(self.settings.cgc.maintenance_timeout_ms);
        ctx.spawn(spawn.into_actor(self).map(move |result, act, ctx| {
            let Some(running) = act.running.as_mut().filter(|r| *r.run.session() == session) else {
                return;
            };
            match result {
                Ok(Ok(started)) => {
                    let spawned = running.run.spawned(started.id, started.pid as u32);
                    running.timer = Some(ctx.run_later(liveness, |act, _| {
                        // Alive, but alive is not verified: its start-up
                        // reconcile may still be rewriting the graph.
                        if let Some(running) = act.running.as_mut() {
                            running.timer = None;
                            if !running.run.is_verified() {
                                tracing::info!(component = COMPONENT, event = "watcher_still_reconciling", session = %running.run.session(), "alive past freshness.watcherLivenessMs without its ready line; not verified");
                            }
                        }
                    }));
                    running.deadline = Some(ctx.run_later(budget, move |act, ctx| {
                        act.give_up(budget, ctx)
                    }));
                    act.report(&session, spawned.report);
                    if spawned.probe_now {
                        act.start_probe(ctx);
                    }
                }
                Ok(Err(error)) => {
                    act.running = None;
                    act.report(&session, spawn_failed(restart_of, error.to_string()));
                }
                Err(error) => {
                    act.running = None;
                    act.report(&session, spawn_failed(restart_of, error.to_string()));
                }
            }
        }));
    }

    /// The child's environment on top of the service's: CGC's app logs at
    /// INFO, and the shim that lets them through, if it could be written
    /// (without it the watcher reports nothing applied, and edits made
    /// while it runs keep the record `possibly_stale`: honest, not fresh).
    fn logging_env(&self) -> Vec<(String, String)> {
        let mut env = vec![("ENABLE_APP_LOGS".to_string(), "INFO".to_string())];
        let written = crate::paths::ensure_private_dir(&self.shim_dir)
            .map_err(|error| error.to_string())
            .and_then(|()| {
                crate::atomic_file::write_atomically(
                    &self.shim_dir.join("sitecustomize.py"),
                    WATCH_LOGGING_SHIM.as_bytes(),
                )
                .map_err(|error| error.to_string())
            });
        match written {
            Ok(()) => {
                let mut path = self.shim_dir.display().to_string();
                if let Some(old) = std::env::var_os("PYTHONPATH").filter(|old| !old.is_empty()) {
                    path.push(':');
                    path.push_str(&old.to_string_lossy());
                }
                env.push(("PYTHONPATH".to_string(), path));
            }
            Err(error) => {
                tracing::warn!(component = COMPONENT, event = "watch_logging_unavailable", dir = %self.shim_dir.display(), error = %error);
            }
        }
        env
    }
}
