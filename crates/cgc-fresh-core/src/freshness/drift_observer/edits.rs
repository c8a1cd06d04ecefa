//! Edits observed: a tool call's paths placed in the workspace, the
//! drift they open (or the watcher they wait for), and the shell
//! commands whose edits are known only once their probe is compared.

use super::*;

impl DriftObserver {
    /// What a modifying call edited: `None` when it named only paths CGC
    /// does not index (`not_indexed`, decided by the shell by CGC's own
    /// rules — the graph holds nothing of them) or outside the workspace.
    pub(super) fn call_target(&self, paths: &[String], not_indexed: usize) -> Option<EditTarget> {
        if paths.is_empty() && not_indexed > 0 {
            return None;
        }
        self.edit_target(paths)
    }

    /// Where a modifying call's `paths` land: `None` when every one is
    /// outside the workspace. A call with no paths at all may have touched
    /// anything, so it counts (the conservative reading).
    pub(super) fn edit_target(&self, paths: &[String]) -> Option<EditTarget> {
        if paths.is_empty() {
            return Some(EditTarget::Unknown);
        }
        let inside: Vec<String> = paths
            .iter()
            .filter_map(|path| match self.root.place(path) {
                PathPlacement::Inside(relative) => Some(relative),
                PathPlacement::Outside => None,
            })
            .collect();
        (!inside.is_empty()).then_some(EditTarget::Paths(inside))
    }

    /// Spec, "Conservative drift observation without probing" and "Dirty
    /// after observed edits": an observed edit marks the workspace possibly
    /// stale from its first edit on, offers the one-time staleness notice,
    /// and (autoSync) arms the batching window — without starting anything.
    pub(super) fn observe_edit(
        &mut self,
        key: Lifetime,
        tool: &str,
        target: EditTarget,
        out: &mut Vec<Envelope>,
    ) {
        let now = self.now;
        self.record.edit_epoch = self.record.edit_epoch.saturating_add(1);
        let id = self.record.edit_epoch;
        self.edits
            .record_call(key, tool, now, self.policy.settle_ms, Some(id));
        self.drift_from(key, tool, target, out);
    }

    /// What an observed edit of live lifetime `key` does, once counted.
    pub(super) fn drift_from(
        &mut self,
        key: Lifetime,
        tool: &str,
        target: EditTarget,
        out: &mut Vec<Envelope>,
    ) {
        let now = self.now;
        if self.watcher.takes_edits() {
            self.await_watcher(&target);
        }
        if self.watcher.is_verified() {
            // Spec, "Verified watcher owns freshness": the watcher applies
            // this edit when it lands; no stale episode opens and no sync
            // starts, but `fresh` waits until the watcher reports the edit
            // applied. The edit is still counted and tracked until settled,
            // so that the lazy path has the whole picture if the watcher
            // goes away.
            return;
        }
        self.mark_drift(target);
        out.push(Envelope::Notices(ToNotices::Offer {
            audience: Audience::One(key),
            condition: NoticeCondition::PossiblyStale,
            text: OfferText::PossiblyStale {
                tool: tool.to_string(),
                auto_sync: self.policy.auto_sync,
            },
        }));
        out.push(Envelope::Scheduler(ToScheduler::DriftObserved {
            editor: key,
            queue_at: self
                .policy
                .auto_sync
                .then(|| now.plus(self.policy.batch_ms)),
        }));
    }

    /// An edit observed while a watcher runs: it waits for the watcher's
    /// word that it was applied. While the watcher is verified the record
    /// is `syncing` until then — the watcher is applying it: no stale
    /// episode, no notice and no sync (spec, "Verified watcher owns
    /// freshness"); only a wait longer than `freshness.watcherApplyMs`
    /// opens one (`open_lag_episode_if_due`). Before verification the lazy
    /// drift goes on as well; an edit made during CGC's start-up reconcile
    /// (a first start or a restart) may be missed by it (the observer is
    /// scheduled only after the reconcile): it waits as unobserved, which
    /// calls for a restart (`drift_observer/watcher.rs`) unless the watcher
    /// reports that path applied first.
    pub(super) fn await_watcher(&mut self, target: &EditTarget) {
        let observable = matches!(self.watcher, WatcherSlot::Verified(_));
        let now = self.now;
        match target {
            EditTarget::Unknown => self.awaiting.mark_unknown(now),
            EditTarget::Paths(paths) => {
                for path in paths {
                    self.awaiting.insert(path.clone(), observable, now);
                }
            }
        }
        if self.watcher.is_verified() && !self.awaiting.is_empty() {
            self.watcher_applying();
        }
    }

    /// A shell tool's result: the command's probe is compared now (an
    /// unknown or ended name's too: the command ran). Under a running
    /// watcher too: its observer sees the changes, but only the comparison
    /// says which files must wait for its word that they are applied.
    pub(super) fn shell_result(
        &mut self,
        now: Millis,
        session: &str,
        tool: &str,
        out: &mut Vec<Envelope>,
    ) -> bool {
        self.catch_up(now);
        let probe = match self.sessions.known(session) {
            Known::Live(key) => self.probes.result(key, tool),
            Known::Detached(_) | Known::Ended | Known::Unknown => self.probes.orphan_result(tool),
        };
        out.push(Envelope::Shell(Effect::ProbeWorkspace { probe }));
        true
    }

    /// The comparison for `probe` answered. Changes are an edit of the
    /// command's session, settled at once (the command ended); for a name
    /// that is not live any more, an orphan edit. Then a deferred claim
    /// may be made.
    pub(super) fn probe_answered(
        &mut self,
        now: Millis,
        probe: ProbeId,
        changes: TreeChanges,
        out: &mut Vec<Envelope>,
    ) -> bool {
        let Some(answered) = self.probes.answer(probe) else {
            return false;
        };
        self.catch_up(now);
        let target = match changes {
            TreeChanges::Unchanged => None,
            TreeChanges::Paths(paths) if paths.is_empty() => None,
            TreeChanges::Paths(paths) => self.edit_target(&paths),
            TreeChanges::WholeWorkspace => Some(EditTarget::Unknown),
        };
        if let Some(target) = target {
            self.record.edit_epoch = self.record.edit_epoch.saturating_add(1);
            self.await_if_unseen_by_observer(answered.called_at, &target);
            let live = answered
                .session
                .and_then(|lifetime| self.sessions.key(lifetime))
                .filter(|key| self.sessions.is_current(key));
            match live {
                Some(key) => self.drift_from(key.lifetime, &answered.tool, target, out),
                None if self.watcher.is_verified() => self.await_watcher(&target),
                None => {
                    if self.watcher.takes_edits() {
                        self.await_watcher(&target);
                    }
                    self.mark_drift(target);
                    out.push(Envelope::Scheduler(ToScheduler::DriftUnpaid));
                }
            }
        }
        self.claim_deferred(out);
        true
    }

    /// Claims `fresh` for a success that covered every edit but waited for
    /// shell commands: once no probe is open, if no edit was observed since
    /// and nothing is pending. Any edit since drops the claim (that edit's
    /// drift queued its own sync).
    pub(super) fn claim_deferred(&mut self, out: &mut Vec<Envelope>) {
        let Some(epoch) = self.deferred_claim else {
            return;
        };
        if epoch != self.record.edit_epoch
            || !self.flight.is_idle()
            || !self.pending.is_empty()
            || self.watcher.is_verified()
        {
            self.deferred_claim = None;
            return;
        }
        if !self.probes.is_empty() {
            return;
        }
        self.deferred_claim = None;
        out.push(Envelope::Scheduler(ToScheduler::FreshClaimed));
        self.record.status = FreshnessStatus::Fresh;
        self.record.stale_since = None;
        let text = notice_text::sync_completed(&self.policy.workspace_root);
        offer_to_all(NoticeCondition::SyncCompleted, text, out);
    }

    /// An edit under the name of a session that already ended: counted,
    /// unsettled until `settleMs` (no result can settle it), the record made
    /// possibly stale — and nothing else: no session, no budget, no notice,
    /// no automatic sync now (there is no live session to pay for one; the
    /// next lifetime to start pays for it, or the next live drift or a
    /// person's `sync` covers it).
    pub(super) fn observe_orphan_edit(&mut self, target: EditTarget, out: &mut Vec<Envelope>) {
        let now = self.now;
        self.record.edit_epoch = self.record.edit_epoch.saturating_add(1);
        self.edits.record_orphan(now, self.policy.settle_ms);
        if self.watcher.takes_edits() {
            self.await_watcher(&target);
        }
        if self.watcher.is_verified() {
            return;
        }
        self.mark_drift(target);
        out.push(Envelope::Scheduler(ToScheduler::DriftUnpaid));
    }

    /// What every observed edit does to the record: its paths join the
    /// pending batch, the episode's `stale_since` is set if open, and the
    /// status drops to possibly stale — unless a sync is running, whose
    /// completion then decides (it may miss this edit).
    pub(super) fn mark_drift(&mut self, target: EditTarget) {
        let now = self.now;
        match target {
            EditTarget::Unknown => self.pending.mark_whole_workspace(),
            EditTarget::Paths(paths) => {
                for path in paths {
                    self.pending.insert(path);
                }
            }
        }
        self.record.stale_since.get_or_insert(now);
        match &mut self.flight {
            FlightSlot::Running(flight) => flight.note_edit(now),
            FlightSlot::Idle | FlightSlot::Draining(..) => {
                self.record.status = FreshnessStatus::PossiblyStale;
            }
        }
    }
}
