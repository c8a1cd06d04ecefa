//! Session lifetimes: opened by `session_start` or implicitly by a first
//! frame, rebound on replacement, closed by a shutdown or when their
//! carriers and owner are gone.

use super::*;

impl DriftObserver {
    /// The live lifetime of `name`, starting one without an instance when
    /// the name was never seen (the scheduler and the notices hear of it).
    pub(super) fn live_or_implicit(
        &mut self,
        name: &str,
        out: &mut Vec<Envelope>,
    ) -> Option<Lifetime> {
        let unknown = self.sessions.known(name) == Known::Unknown;
        let key = self.sessions.live_or_implicit(name)?;
        if unknown {
            self.opened(key, out);
        }
        Some(key)
    }

    /// Tells the scheduler and the notices that lifetime `key` began.
    pub(super) fn opened(&mut self, key: Lifetime, out: &mut Vec<Envelope>) {
        out.push(Envelope::Scheduler(ToScheduler::LifetimeOpened {
            lifetime: key,
        }));
        if let Some(session) = self.sessions.key(key) {
            out.push(Envelope::Notices(ToNotices::LifetimeOpened { session }));
        }
    }

    /// A `session_start`: registers it (making room by ending the oldest
    /// detached lifetime when the table is full), and closes what a
    /// replacement ended.
    pub(super) fn session_started(
        &mut self,
        now: Millis,
        name: String,
        instance: &str,
        connection: Option<ConnectionId>,
        owner: Option<OwnerPid>,
        out: &mut Vec<Envelope>,
    ) -> bool {
        let mut taken = false;
        if let Some(oldest) = self.sessions.oldest_detached_if_full(&name, instance) {
            self.catch_up(now);
            self.sessions.end(&oldest.name);
            self.close_lifetime(oldest, false, out);
            taken = true;
        }
        match self.sessions.register(&name, instance, connection, owner) {
            Registration::Unchanged | Registration::Refused => taken,
            Registration::Started { started, replaced } => {
                self.catch_up(now);
                self.opened(started, out);
                if let Some(old) = replaced {
                    let old = SessionKey {
                        name: name.clone(),
                        lifetime: old,
                    };
                    self.close_lifetime(old, false, out);
                }
                // Drift no sync covered — a session that ended before its
                // automatic sync started, or work pending in a record
                // restored after a restart — is this lifetime's first
                // drift: it pays for the sync the staleness notice promised
                // (if the scheduler has nothing queued or running).
                if self.policy.auto_sync
                    && self.deferred_claim.is_none()
                    && !self.watcher.is_verified()
                    && matches!(
                        self.record.status,
                        FreshnessStatus::PossiblyStale | FreshnessStatus::Unknown
                    )
                {
                    out.push(Envelope::Scheduler(ToScheduler::InheritDrift {
                        payer: started,
                        due_at: now.plus(self.policy.batch_ms),
                    }));
                }
                out.push(Envelope::Shell(Effect::SessionOpened {
                    session: SessionKey {
                        name,
                        lifetime: started,
                    },
                    reattached: false,
                }));
                if self.policy.auto_sync && !self.watcher.is_verified() {
                    out.push(Envelope::Shell(Effect::WarmWorker));
                }
                true
            }
            Registration::Reattached(lifetime) => {
                self.catch_up(now);
                out.push(Envelope::Scheduler(ToScheduler::LifetimeReattached {
                    lifetime,
                }));
                out.push(Envelope::Notices(ToNotices::LifetimeReattached {
                    lifetime,
                }));
                // Work the detach left undone is picked up again: drift not
                // yet covered queues an automatic sync this lifetime pays.
                if self.policy.auto_sync
                    && self.record.status == FreshnessStatus::PossiblyStale
                    && !self.watcher.is_verified()
                {
                    out.push(Envelope::Scheduler(ToScheduler::DriftObserved {
                        editor: lifetime,
                        queue_at: Some(now.plus(self.policy.batch_ms)),
                    }));
                }
                out.push(Envelope::Shell(Effect::SessionOpened {
                    session: SessionKey { name, lifetime },
                    reattached: true,
                }));
                true
            }
        }
    }

    /// A session lifetime's work stops: it ended (shutdown, replaced by a
    /// new instance, or made room for another) or was detached (`detached`:
    /// every connection that carried it closed). Its edits are settled, its
    /// running shell commands compared, its watcher is gone; the scheduler
    /// drops or cancels the automatic sync it pays for, the notices keep or
    /// drop its ledger. The shell is told to stop the lifetime's children.
    /// Ends the live lifetimes of `names` (a `session_shutdown`, or their
    /// owner process exited); returns whether any was live.
    pub(super) fn end_sessions(
        &mut self,
        now: Millis,
        names: impl IntoIterator<Item = String>,
        out: &mut Vec<Envelope>,
    ) -> bool {
        let mut ended = false;
        for name in names {
            let Some(lifetime) = self.sessions.end(&name) else {
                continue;
            };
            if !ended {
                // Sessions and edit settling are independent state: the
                // order of this and the `end` above does not matter.
                self.catch_up(now);
                ended = true;
            }
            self.close_lifetime(SessionKey { name, lifetime }, false, out);
        }
        ended
    }

    pub(super) fn close_lifetime(
        &mut self,
        session: SessionKey,
        detached: bool,
        out: &mut Vec<Envelope>,
    ) {
        self.end_lifetime(session.lifetime, out);
        out.push(Envelope::Scheduler(ToScheduler::LifetimeClosed {
            lifetime: session.lifetime,
            detached,
        }));
        out.push(Envelope::Notices(ToNotices::LifetimeClosed {
            lifetime: session.lifetime,
            detached,
        }));
        out.push(Envelope::Shell(Effect::SessionClosed { session, detached }));
    }

    pub(super) fn end_lifetime(&mut self, key: Lifetime, out: &mut Vec<Envelope>) {
        self.edits.end_session(key);
        for probe in self.probes.end_session(key) {
            out.push(Envelope::Shell(Effect::ProbeWorkspace { probe }));
        }
        if self
            .watcher
            .running()
            .is_some_and(|watcher| watcher.owner == key)
        {
            self.watcher_gone();
        }
    }
}
