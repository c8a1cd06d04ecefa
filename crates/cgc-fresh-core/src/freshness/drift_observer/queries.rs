//! What the observer tells the shell without changing: the record, the
//! sessions, the running flight, and the state frame with its `detail`.

use super::*;

impl DriftObserver {
    /// The observer's clock: the latest time of a taken observation.
    pub fn now(&self) -> Millis {
        self.now
    }

    /// The workspace's record, as persisted and reported.
    pub fn record(&self) -> &FreshnessRecord {
        &self.record
    }

    /// Sets the record's pending summary: the pending batch plus the one
    /// in flight.
    pub fn refresh_pending(&mut self) {
        self.record.pending = self.pending_summary();
    }

    pub fn policy(&self) -> &FreshnessPolicy {
        &self.policy
    }

    pub fn set_policy(&mut self, policy: FreshnessPolicy) {
        self.root = WorkspaceRoot::new(&policy.workspace_root);
        self.policy = policy;
    }

    pub fn pending_paths(&self) -> &PendingPaths {
        &self.pending
    }

    pub(crate) fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    #[cfg(test)]
    pub(crate) fn watcher(&self) -> &WatcherSlot {
        &self.watcher
    }

    /// The live (attached) lifetime of `session`, if any.
    pub fn current_lifetime(&self, session: &str) -> Option<SessionKey> {
        match self.sessions.known(session) {
            Known::Live(lifetime) => self.sessions.key(lifetime),
            Known::Detached(_) | Known::Ended | Known::Unknown => None,
        }
    }

    /// Whether `session` names a live, attached lifetime (started, not
    /// ended, not detached).
    pub fn is_live(&self, session: &str) -> bool {
        matches!(self.sessions.known(session), Known::Live(_))
    }

    /// The process that owns `session`'s lifetime, if one does (the shell
    /// watches it and reports [`Input::OwnerExited`]).
    pub fn owner(&self, session: &SessionKey) -> Option<OwnerPid> {
        if !self.sessions.is_current(session) {
            return None;
        }
        self.sessions.owner(session.lifetime)
    }

    /// Whether any lifetime is still owned by `pid` (else its watch can go).
    pub fn owns_any(&self, pid: OwnerPid) -> bool {
        !self.sessions.owned_by(pid).is_empty()
    }

    /// The open connections that carry `session`'s lifetime: a notice for
    /// it counts as delivered only when one of them received it.
    pub fn carriers(&self, session: &SessionKey) -> Vec<ConnectionId> {
        if !self.sessions.is_current(session) {
            return Vec::new();
        }
        self.sessions.carriers(session.lifetime).collect()
    }

    /// Whether a `session_start{session}` from `instance` would be taken
    /// (see [`crate::freshness::Freshness::admits_session`]).
    pub fn admits_session(&self, session: &str, instance: &str) -> bool {
        self.sessions.admits(session, instance)
    }

    /// Whether `session` may make its watcher attempt now (see
    /// [`crate::freshness::Freshness::watcher_attempt_allowed`]).
    pub fn watcher_attempt_allowed(&self, session: &SessionKey) -> bool {
        self.attempt_opener(session).is_some()
    }

    /// Whether a verified watcher owns the workspace's freshness.
    pub fn watcher_owns_freshness(&self) -> bool {
        self.watcher.is_verified()
    }

    /// Whether a watcher runs that edits wait for (verifying, verified or
    /// restarting): the shell then compares a shell command's changes with
    /// the tree as it was at the command's call, not with the manifest of
    /// the last sync (the watcher applied what changed since).
    pub fn watcher_takes_edits(&self) -> bool {
        self.watcher.takes_edits()
    }

    /// Whether a shell command's probe is open (running or comparing).
    pub fn shell_commands_open(&self) -> bool {
        !self.probes.is_empty()
    }

    /// The sync occupying the workspace as far as the observer was told
    /// (running, or draining).
    pub fn current_flight(&self) -> Option<FlightId> {
        self.flight.id()
    }

    /// The workspace-relative paths the running flight `id` took (what its
    /// sync must cover), sorted; `None` when they are not known file by file
    /// (the whole-workspace marker) or `id` is not the running flight.
    pub fn flight_paths(&self, id: FlightId) -> Option<Vec<String>> {
        match &self.flight {
            FlightSlot::Running(flight)
                if flight.id == id && !flight.paths.is_whole_workspace() =>
            {
                Some(flight.paths.paths().map(str::to_string).collect())
            }
            _ => None,
        }
    }

    /// The state frame the observer can fill in; `queued`: whether the
    /// scheduler has a sync queued (its `detail` says so). The backend is
    /// not known here; the shell adds it.
    pub fn state_frame(&self, queued: bool) -> StateFrame {
        let record = &self.record;
        StateFrame {
            workspace: self.policy.workspace_root.clone(),
            status: record.status,
            last_synced_at: record.last_synced_at.map(Millis::get),
            stale_since: record.stale_since.map(Millis::get),
            last_error: record.last_error.clone(),
            edit_epoch: record.edit_epoch,
            syncing: matches!(self.flight, FlightSlot::Running(_)),
            watcher: record.watcher.as_ref().map(|watcher| WatcherFacts {
                mode: watcher.mode.clone(),
                state: watcher.state.clone(),
                pid: watcher.pid,
                since: watcher.since.map(Millis::get),
            }),
            backend: None,
            detail: self.detail(queued),
            warnings: Vec::new(),
            progress: None,
        }
    }

    pub(super) fn detail(&self, queued: bool) -> Option<String> {
        match &self.flight {
            FlightSlot::Running(flight) => Some(match flight.pid {
                Some(pid) => format!("sync {} running (pid {pid})", flight.id.get()),
                None => format!("sync {} starting", flight.id.get()),
            }),
            FlightSlot::Draining(id, DrainCause::Cancelled) => {
                Some(format!("sync {} cancelled, stopping", id.get()))
            }
            FlightSlot::Draining(id, DrainCause::Superseded) => Some(format!(
                "sync {} superseded by the watcher, finishing",
                id.get()
            )),
            FlightSlot::Idle if self.deferred_claim.is_some() => Some(
                "synced; fresh once the changes of a running shell command are compared"
                    .to_string(),
            ),
            FlightSlot::Idle if queued && self.watcher.is_verifying() => {
                Some("a sync waits for the watcher's verification".to_string())
            }
            FlightSlot::Idle if self.watcher.is_retiring() => {
                Some("the watcher is being stopped; lazy mode has taken over".to_string())
            }
            FlightSlot::Idle if queued => Some("a sync is queued".to_string()),
            FlightSlot::Idle if self.watcher.is_restarting() => Some(
                "the watcher is restarting: its start-up reconcile applies edits its observer \
                 could not see"
                    .to_string(),
            ),
            FlightSlot::Idle if self.watcher.is_verified() && self.awaiting.needs_restart() => {
                Some(format!(
                    "the watcher has not yet applied {} edited file(s); it restarts to apply \
                     those its observer could not see once they are written",
                    self.awaiting.len()
                ))
            }
            FlightSlot::Idle if self.watcher.is_verified() && !self.awaiting.is_empty() => {
                Some(format!(
                    "the watcher has not yet applied {} edited file(s)",
                    self.awaiting.len()
                ))
            }
            FlightSlot::Idle if self.restored && self.record.status == FreshnessStatus::Unknown => {
                Some("restored from disk; unknown until a sync completes".to_string())
            }
            FlightSlot::Idle => None,
        }
    }
}
