//! Syncs: a flight started, and settled by its outcome — the record's
//! status, the epoch it covers, and the notices it offers.

use super::*;

/// Offers the notice for `condition` to every attached lifetime: a sync's
/// or the watcher's outcome concerns everyone working in the workspace.
pub(super) fn offer_to_all(condition: NoticeCondition, text: String, out: &mut Vec<Envelope>) {
    out.push(Envelope::Notices(ToNotices::Offer {
        audience: Audience::AllAttached,
        condition,
        text: OfferText::Ready(text),
    }));
}

impl DriftObserver {
    /// The scheduler cancelled `flight` (its payer's lifetime ended): it
    /// claims nothing; what it took is pending again.
    pub(super) fn cancelled(&mut self, id: FlightId) {
        if !matches!(&self.flight, FlightSlot::Running(flight) if flight.id == id) {
            return;
        }
        if let FlightSlot::Running(flight) = std::mem::take(&mut self.flight) {
            self.record.status = self.status_without_claim(&flight);
            self.pending.merge(flight.paths);
            self.flight = FlightSlot::Draining(flight.id, DrainCause::Cancelled);
        }
    }

    /// The scheduler decided sync `id` from `from_epoch`: snapshots the
    /// unsettled edits and the pending batch, and asks the shell to start
    /// it.
    pub(super) fn start(
        &mut self,
        id: FlightId,
        from_epoch: u64,
        named: Option<Lifetime>,
        manual: bool,
        allowance: SyncAllowance,
        out: &mut Vec<Envelope>,
    ) {
        self.record.sync_generation = id.get();
        self.deferred_claim = None;
        let flight = Flight::start(
            id,
            from_epoch,
            &self.edits,
            self.pending.take(),
            self.record.status,
        );
        self.record.status = FreshnessStatus::Syncing;
        out.push(Envelope::Shell(Effect::StartSync {
            flight: id,
            session: named.and_then(|key| self.sessions.key(key)),
            manual,
            allowance,
        }));
        self.flight = FlightSlot::Running(Box::new(flight));
    }

    /// The scheduler settled sync `id`: what it means for the record.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn settle(
        &mut self,
        now: Millis,
        id: FlightId,
        ending: Ending,
        from_epoch: u64,
        payer: Option<Lifetime>,
        another_attempt: bool,
        out: &mut Vec<Envelope>,
    ) -> bool {
        match &self.flight {
            FlightSlot::Running(flight) if flight.id == id => {}
            FlightSlot::Draining(draining, _) if *draining == id => {
                // The scheduler settled it before it heard that the flight
                // drains (a watcher took over): it claims nothing.
                self.catch_up(now);
                self.flight = FlightSlot::Idle;
                return true;
            }
            _ => return false,
        }
        self.catch_up(now);
        let FlightSlot::Running(flight) = std::mem::take(&mut self.flight) else {
            return false;
        };
        match ending {
            Ending::Declined(reason) => self.settle_declined(*flight, reason, out),
            Ending::OverBudget(_) => {
                // The scheduler told the payer (the budget notice); the
                // graph was not touched by this class of work.
                self.record.status = self.status_without_claim(&flight);
                self.pending.merge(flight.paths);
            }
            Ending::Outcome(SyncOutcome::Succeeded) => {
                self.settle_succeeded(*flight, from_epoch, payer, out)
            }
            Ending::Outcome(SyncOutcome::NotApplied { detail }) => {
                self.settle_not_applied(*flight, detail, out)
            }
            Ending::Outcome(SyncOutcome::Failed { error }) => {
                self.settle_failed(*flight, error, another_attempt, out)
            }
            Ending::Outcome(SyncOutcome::TimedOut { error }) => {
                self.settle_failed(*flight, format!("timed out: {error}"), another_attempt, out)
            }
            Ending::Outcome(SyncOutcome::Busy { holder }) => self.settle_busy(*flight, holder, out),
            Ending::Outcome(SyncOutcome::Cancelled) => {
                self.record.status = self.status_without_claim(&flight);
                self.pending.merge(flight.paths);
            }
        }
        true
    }

    /// Spec, "Fresh after a completed sync" and "No false freshness": a
    /// success claims `fresh` only when it covers every observed edit — the
    /// epoch it started from is still the current one, and nothing was
    /// unsettled at its start. Otherwise the sync's time is recorded, the
    /// record stays possibly stale from the first uncovered edit, and the
    /// scheduler queues exactly one follow-up.
    pub(super) fn settle_succeeded(
        &mut self,
        flight: Flight,
        from_epoch: u64,
        payer: Option<Lifetime>,
        out: &mut Vec<Envelope>,
    ) {
        let now = self.now;
        self.record.last_synced_at = Some(now);
        self.record.last_error = None;
        if from_epoch == flight.epoch_at_start() && flight.covers_every_edit(self.record.edit_epoch)
        {
            if !self.probes.is_empty() {
                // A shell command ran during the sync (or still runs): what
                // it changed is known only when its comparison answers. No
                // claim until then; "unchanged" makes it.
                self.deferred_claim = Some(self.record.edit_epoch);
                self.record.status = FreshnessStatus::PossiblyStale;
                self.record.stale_since.get_or_insert(now);
                return;
            }
            self.record.status = FreshnessStatus::Fresh;
            self.record.stale_since = None;
            let text = notice_text::sync_completed(&self.policy.workspace_root);
            offer_to_all(NoticeCondition::SyncCompleted, text, out);
            return;
        }
        self.record.status = FreshnessStatus::PossiblyStale;
        let first_uncovered = flight
            .first_uncovered_at()
            .or(self.record.stale_since)
            .unwrap_or(now);
        self.record.stale_since = Some(first_uncovered);
        if flight.had_unsettled_edits() {
            self.pending.merge(flight.paths);
        }
        out.push(Envelope::Scheduler(ToScheduler::FollowUp {
            payer,
            due_at: max(now, first_uncovered.plus(self.policy.batch_ms)),
        }));
    }

    /// A sync that applied nothing never claims `fresh`. Retrying would
    /// apply nothing again (the scheduler dropped its queue); the next
    /// drift or a request may try again.
    pub(super) fn settle_not_applied(
        &mut self,
        flight: Flight,
        detail: String,
        out: &mut Vec<Envelope>,
    ) {
        self.record.status = FreshnessStatus::PossiblyStale;
        let text = notice_text::sync_not_applied(&self.policy.workspace_root, &detail);
        self.record.last_error = Some(detail);
        self.pending.merge(flight.paths);
        offer_to_all(NoticeCondition::SyncNotApplied, text, out);
    }

    /// Spec, "Errors are contained": the failure is recorded and surfaced
    /// (the scheduler decided whether another attempt follows). The status
    /// is decided by [`DriftObserver::status_without_claim`].
    pub(super) fn settle_failed(
        &mut self,
        flight: Flight,
        error: String,
        another_attempt: bool,
        out: &mut Vec<Envelope>,
    ) {
        self.record.status = self.status_without_claim(&flight);
        self.pending.merge(flight.paths);
        let text = notice_text::sync_failed(&self.policy.workspace_root, &error, another_attempt);
        self.record.last_error = Some(error);
        offer_to_all(NoticeCondition::SyncFailed, text, out);
    }

    /// Spec, "Sync skipped when busy": nothing was indexed, the state says
    /// skipped-as-busy, a one-time notice names the holder (the scheduler
    /// refunded the slot and retries nothing in a loop).
    pub(super) fn settle_busy(&mut self, flight: Flight, holder: String, out: &mut Vec<Envelope>) {
        self.record.status = FreshnessStatus::SkippedBusy;
        let text = notice_text::sync_skipped_busy(&self.policy.workspace_root, &holder);
        self.record.last_error = Some(format!("the graph database is held by {holder}"));
        self.pending.merge(flight.paths);
        offer_to_all(NoticeCondition::SyncSkippedBusy, text, out);
    }

    /// The shell did not start the sync (e.g. no index, and creating one
    /// needs consent). Nothing ran; asking again would be declined again.
    pub(super) fn settle_declined(
        &mut self,
        flight: Flight,
        reason: String,
        out: &mut Vec<Envelope>,
    ) {
        self.record.status = self.status_without_claim(&flight);
        let text = notice_text::sync_declined(&self.policy.workspace_root, &reason);
        self.record.last_error = Some(reason);
        self.pending.merge(flight.paths);
        offer_to_all(NoticeCondition::SyncDeclinedUnindexed, text, out);
    }

    /// The status after a sync that ended without a claim (failed, timed
    /// out, cancelled, declined):
    /// - an uncovered edit exists: `possibly_stale`;
    /// - no process ever ran (declined, a spawn that failed, cancelled
    ///   before spawning): the graph was not touched, so the status the
    ///   sync replaced comes back;
    /// - a process ran and stopped part-way: it may have left the graph
    ///   between states, so `possibly_stale` — except that `unknown` stays
    ///   `unknown` (a failed sync adds no knowledge). Never `fresh`.
    pub(super) fn status_without_claim(&self, flight: &Flight) -> FreshnessStatus {
        if self.record.stale_since.is_some() {
            FreshnessStatus::PossiblyStale
        } else if flight.pid.is_none() {
            flight.status_before
        } else if flight.status_before == FreshnessStatus::Unknown {
            FreshnessStatus::Unknown
        } else {
            FreshnessStatus::PossiblyStale
        }
    }

    /// Work not yet covered: the pending batch plus the one in flight.
    pub(super) fn pending_summary(&self) -> PendingSummary {
        match &self.flight {
            FlightSlot::Running(flight) => self.pending.union_summary(&flight.paths),
            FlightSlot::Idle | FlightSlot::Draining(..) => self.pending.summary(),
        }
    }
}
