//! The watcher's lines and exit, routed: its ready line starts the
//! stabilization probe, an applied file is reported, a backend fallback
//! stops it; its exit is judged by the run (`WatcherRun`) and may restart
//! it.

use super::*;

impl Handler<ChildEvent> for WatcherSupervisor {
    type Result = ();
    fn handle(&mut self, msg: ChildEvent, ctx: &mut Self::Context) {
        match msg {
            ChildEvent::Line { id, text } => {
                let ours = self
                    .running
                    .as_ref()
                    .is_some_and(|running| running.run.owns_line(id));
                if !ours {
                    return;
                }
                if output_has_backend_fallback(&text) {
                    self.fell_back(id);
                } else if is_watch_ready_line(&text) {
                    // CGC prints it twice: the first one counts.
                    let first = self
                        .running
                        .as_mut()
                        .is_some_and(|running| running.run.ready(now()));
                    if first {
                        self.start_probe(ctx);
                    }
                } else if let Some(path) = watch_applied_path(&text) {
                    let path = match std::path::Path::new(path).strip_prefix(&self.workspace) {
                        Ok(relative) => relative.display().to_string(),
                        Err(_) => path.to_string(),
                    };
                    let Some(running) = self.running.as_ref() else {
                        return;
                    };
                    if let Some(event) = running.run.applied(path) {
                        let session = running.run.session().clone();
                        self.report(&session, event);
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
                if self
                    .running
                    .as_ref()
                    .is_some_and(|running| !running.run.owns_exit(id))
                {
                    return;
                }
                let Some(mut running) = self.running.take() else {
                    return;
                };
                running.cancel_timers(ctx, true);
                let session = running.run.session().clone();
                let exit = WatcherExit {
                    pid: pid as u32,
                    status: describe(status),
                    output_tail,
                    during_shutdown,
                };
                let (first, then) = running.run.exited(exit);
                if let Some(event) = first {
                    // It ended before its spawn reply was processed.
                    self.report(&session, event);
                }
                let event = match then {
                    AfterExit::Restart {
                        previous,
                        replaced_child,
                    } => {
                        tracing::info!(component = COMPONENT, event = "watcher_restarting", session = %session, previous, exit = %describe(status));
                        self.spawn_watcher(session, Some(previous), ctx);
                        if let Some(next) = self.running.as_mut() {
                            next.run.replacing(replaced_child);
                        }
                        return;
                    }
                    AfterExit::Report(event) => event,
                };
                self.report(&session, event);
                if let Some(next) = self.deferred.take() {
                    if self.attempted.contains(&next) {
                        self.spawn(next, ctx);
                    }
                }
            }
        }
    }
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        _ => "ended".into(),
    }
}
