//! Who keeps the workspace's service alive: client connections, the
//! processes that own session lifetimes (watched through a pidfd), and the
//! idle exit once none is left.

use super::*;

impl Handler<ConnectionOpened> for DriftObserverActor {
    type Result = ();
    fn handle(&mut self, msg: ConnectionOpened, ctx: &mut Self::Context) {
        self.clients += 1;
        tracing::debug!(
            component = COMPONENT,
            event = "client_count",
            conn = msg.conn,
            clients = self.clients
        );
        if let Some(timer) = self.idle_timer.take() {
            ctx.cancel_future(timer);
        }
    }
}

impl Handler<ConnectionClosed> for DriftObserverActor {
    type Result = ();
    fn handle(&mut self, msg: ConnectionClosed, ctx: &mut Self::Context) {
        self.clients = self.clients.saturating_sub(1);
        self.arm_idle_exit(ctx);
        self.flush_mail();
        if let Some(notices) = &self.notices {
            notices.do_send(Unsubscribe(msg.conn));
        }
        self.instances.remove(&msg.conn);
        // Sessions this connection was the last carrier of are detached
        // (their work stops) until a replayed session_start takes them up.
        self.apply(
            Input::ConnectionClosed {
                connection: msg.conn,
            },
            ctx,
        );
    }
}

impl Handler<OwnerGone> for DriftObserverActor {
    type Result = ();
    fn handle(&mut self, msg: OwnerGone, ctx: &mut Self::Context) {
        tracing::info!(
            component = COMPONENT,
            event = "owner_exited",
            owner_pid = msg.pid
        );
        self.owner_watches.remove(&msg.pid);
        self.apply(Input::OwnerExited { pid: msg.pid }, ctx);
    }
}

impl DriftObserverActor {
    /// Watches `pid`, the owner of a live lifetime, unless it is watched.
    pub(super) fn watch_owner(&mut self, pid: u32, ctx: &mut Context<Self>) {
        if self.owner_watches.contains_key(&pid) {
            return;
        }
        match owner_watch::watch(pid, ctx.address().recipient()) {
            Ok(task) => {
                tracing::info!(
                    component = COMPONENT,
                    event = "owner_watched",
                    owner_pid = pid
                );
                self.owner_watches.insert(pid, task);
            }
            // Gone between the check and the watch: it ended already.
            Err(error) => {
                tracing::info!(component = COMPONENT, event = "owner_gone", owner_pid = pid, error = %error);
                ctx.address().do_send(OwnerGone { pid });
            }
        }
    }

    /// Drops the watches of processes that own no live lifetime any more.
    pub(super) fn unwatch_unowned(&mut self) {
        let machine = &self.machine;
        self.owner_watches.retain(|pid, task| {
            let keep = machine.owns_any(*pid);
            if !keep {
                task.abort();
            }
            keep
        });
    }

    /// Idle exit (`service.idleExitMs` > 0): a one-shot timer armed when the
    /// last client leaves, never a periodic tick. When it fires with still
    /// no client, no sync and no child, the service stops; the record is on
    /// disk and socket activation starts it again on the next connection.
    pub(super) fn arm_idle_exit(&mut self, ctx: &mut Context<Self>) {
        let Some(idle) = self.config.settings.service.idle_exit() else {
            return;
        };
        if self.clients > 0 || self.idle_timer.is_some() {
            return;
        }
        self.idle_timer = Some(ctx.run_later(idle, |act, ctx| {
            act.idle_timer = None;
            if act.clients > 0 || act.machine.current_flight().is_some() {
                return;
            }
            let lifecycle = act.lifecycle.clone();
            ctx.spawn(act.supervisor.send(LiveChildren).into_actor(act).map(
                move |live, act, ctx| {
                    if live.unwrap_or(1) == 0 && act.clients == 0 {
                        tracing::info!(
                            component = COMPONENT,
                            event = "idle_exit",
                            idle_ms = act.config.settings.service.idle_exit_ms
                        );
                        lifecycle.do_send(Shutdown {
                            reason: ShutdownReason::IdleExit,
                        });
                    } else {
                        act.arm_idle_exit(ctx);
                    }
                },
            ));
        }));
    }
}
