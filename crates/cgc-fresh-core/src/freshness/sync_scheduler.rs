//! `SyncScheduler`: when a sync starts.
//!
//! Owns the batching window and the one queued sync, the single flight
//! (seed 003: one sync at a time, stale completions rejected by id), the
//! per-lifetime budgets ("Lazy, budgeted drift sync", "Errors are
//! contained": retried at most once), the gap of at least
//! `freshness.minSyncGapMs` between two starts (design reference 002), and
//! the one wake-up deadline. It decides on what the drift observer told it
//! ([`Gate`]: the edit epoch, whether edits are still settling, whether a
//! watcher owns freshness) and tells the observer which flight started from
//! which epoch; the observer alone decides what a completion means for the
//! record.

use std::cmp::max;
use std::collections::BTreeMap;

use cgc_fresh_proto::NoticeCondition;

use super::budget::SyncBudget;
use super::budget::{SyncAllowance, SyncCost};
use super::events::{Effect, Input, SyncOutcome};
use super::flight::{FlightId, QueuedSync, SyncKind};
use super::messages::{
    Audience, Ending, Envelope, Gate, OfferText, ToNotices, ToObserver, ToScheduler,
};
use super::notice_text;
use super::policy::FreshnessPolicy;
use super::session::Lifetime;
use super::time::Millis;

/// The sync scheduler of one workspace.
#[derive(Debug, Clone)]
pub struct SyncScheduler {
    policy: FreshnessPolicy,
    queued: Option<QueuedSync>,
    flight: Slot,
    /// The last flight id handed out (the record's `sync_generation`).
    generation: u64,
    /// When the last sync was started (`freshness.minSyncGapMs` counts
    /// from it).
    last_start: Option<Millis>,
    budgets: BTreeMap<Lifetime, Budget>,
    /// The live session whose edit most recently opened or continued the
    /// current episode: it pays for the automatic sync.
    last_editor: Option<Lifetime>,
    /// Drift whose sync nobody is left to pay for: its payer's lifetime
    /// ended before the sync started (or was cancelled with it), an edit
    /// came under an ended name, or a restored record had pending work.
    /// The next lifetime to start pays for it.
    unpaid_drift: bool,
    gate: Gate,
    now: Millis,
}

#[derive(Debug, Clone, Default)]
struct Budget {
    budget: SyncBudget,
    attached: bool,
}

/// The workspace's one sync, as the scheduler knows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Slot {
    #[default]
    Idle,
    Running(RunningSync),
    /// Its outcome counts for nothing; it occupies the workspace until its
    /// terminal report. (Why it drains is the observer's to show.)
    Draining(FlightId),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RunningSync {
    id: FlightId,
    /// The session paying for an automatic sync; `None` for a manual one.
    payer: Option<Lifetime>,
    from_epoch: u64,
    /// Whether an edit or a shell command was still settling when it was
    /// decided (as the observer last said).
    unsettled_at_start: bool,
    /// The classes of work it may spawn (the payer's slots left when it
    /// started; both for a manual sync).
    allowance: SyncAllowance,
    /// The payer's slots it consumed (at spawn), per class: a sync that
    /// falls back from the incremental path to a reconcile spends one of
    /// each.
    consumed_changed_files: bool,
    consumed_whole_repository: bool,
}

impl RunningSync {
    fn consumed(&self, cost: SyncCost) -> bool {
        match cost {
            SyncCost::ChangedFiles => self.consumed_changed_files,
            SyncCost::WholeRepository => self.consumed_whole_repository,
        }
    }

    fn mark_consumed(&mut self, cost: SyncCost) {
        match cost {
            SyncCost::ChangedFiles => self.consumed_changed_files = true,
            SyncCost::WholeRepository => self.consumed_whole_repository = true,
        }
    }
}

impl SyncScheduler {
    /// `generation`: the last flight id of the (restored) record;
    /// `edit_epoch` its epoch; `unpaid_drift`: it had pending work.
    pub fn new(
        policy: FreshnessPolicy,
        generation: u64,
        edit_epoch: u64,
        unpaid_drift: bool,
        now: Millis,
    ) -> Self {
        SyncScheduler {
            policy,
            queued: None,
            flight: Slot::Idle,
            generation,
            last_start: None,
            budgets: BTreeMap::new(),
            last_editor: None,
            unpaid_drift,
            gate: Gate {
                epoch: edit_epoch,
                ..Gate::default()
            },
            now,
        }
    }

    /// Applies a reloaded policy: turning `autoSync` off drops a queued
    /// automatic sync (a running one finishes).
    pub fn set_policy(&mut self, policy: FreshnessPolicy) {
        self.policy = policy;
        if !self.policy.auto_sync && self.queued_automatic() {
            self.queued = None;
        }
    }

    /// Applies one message at `now`.
    pub fn handle(&mut self, now: Millis, message: ToScheduler) -> Vec<Envelope> {
        let mut out = Vec::new();
        match message {
            ToScheduler::Input(input) => self.runner_report(now, input, &mut out),
            ToScheduler::Readiness { gate, recheck } => {
                let settled_now = self.gate.unsettled && !gate.unsettled;
                self.gate = gate;
                if recheck {
                    self.now = max(self.now, now);
                    self.start_due_sync(&mut out);
                }
                if settled_now && self.sync_waits_for_its_window() {
                    out.push(Envelope::Shell(Effect::PrepareSync));
                }
            }
            ToScheduler::LifetimeOpened { lifetime } => {
                self.budgets.insert(
                    lifetime,
                    Budget {
                        budget: SyncBudget::default(),
                        attached: true,
                    },
                );
            }
            ToScheduler::LifetimeReattached { lifetime } => {
                if let Some(budget) = self.budgets.get_mut(&lifetime) {
                    budget.attached = true;
                }
            }
            ToScheduler::LifetimeClosed { lifetime, detached } => {
                self.end_lifetime(lifetime, &mut out);
                if detached {
                    if let Some(budget) = self.budgets.get_mut(&lifetime) {
                        budget.attached = false;
                    }
                } else {
                    self.budgets.remove(&lifetime);
                }
            }
            ToScheduler::DriftObserved { editor, queue_at } => {
                self.last_editor = Some(editor);
                if let Some(due_at) = queue_at {
                    self.queue_automatic(editor, due_at);
                }
            }
            ToScheduler::InheritDrift { payer, due_at } => {
                if self.unpaid_drift && self.queued.is_none() && self.flight == Slot::Idle {
                    self.last_editor = Some(payer);
                    self.queue_automatic(payer, due_at);
                }
            }
            ToScheduler::DriftUnpaid => self.unpaid_drift = true,
            ToScheduler::SyncRequested { requester, epoch } => {
                if let Slot::Running(flight) = self.flight {
                    if flight.from_epoch == epoch && !flight.unsettled_at_start {
                        // The running sync covers every edit the requester
                        // could know of.
                        return out;
                    }
                }
                self.queued = Some(QueuedSync {
                    due_at: now,
                    kind: SyncKind::Manual { requester },
                });
            }
            ToScheduler::WatcherTookOver => {
                self.queued = None;
                if let Slot::Running(flight) = self.flight {
                    self.flight = Slot::Draining(flight.id);
                }
            }
            ToScheduler::WatcherDied {
                owner,
                queue_at,
                error,
            } => {
                if let Some(due_at) = queue_at {
                    self.queue_automatic(owner, due_at);
                }
                let sync_follows = self.queued_sync_will_run();
                let text =
                    notice_text::watcher_died(&self.policy.workspace_root, &error, sync_follows);
                offer_to_all(NoticeCondition::WatcherDied, text, &mut out);
            }
            ToScheduler::WatcherRetired {
                owner,
                queue_at,
                reason,
            } => {
                if let Some(due_at) = queue_at {
                    self.queue_automatic(owner, due_at);
                }
                let sync_follows = self.queued_sync_will_run();
                let text = notice_text::watcher_given_up(
                    &self.policy.workspace_root,
                    &reason,
                    sync_follows,
                );
                offer_to_all(NoticeCondition::WatcherDied, text, &mut out);
            }
            ToScheduler::FreshClaimed => {
                if self.queued_automatic() {
                    self.queued = None;
                }
            }
            ToScheduler::FollowUp { payer, due_at } => {
                // The settled sync's payer may have been detached or ended
                // since the scheduler reported the sync (the observer took
                // the close first): its work stops, so it pays for no
                // follow-up — the drift is the next lifetime's, as when its
                // sync is cancelled (`end_lifetime`).
                let payer = match payer {
                    Some(payer) if !self.is_attached(payer) => {
                        self.unpaid_drift = true;
                        None
                    }
                    payer => payer,
                };
                if self.queued.is_none() && self.policy.auto_sync {
                    if let Some(payer) = self.last_editor.or(payer) {
                        self.queued = Some(QueuedSync {
                            due_at,
                            kind: SyncKind::Automatic { payer },
                        });
                    }
                }
            }
        }
        out
    }

    /// The one time at which the workspace must be woken if nothing else
    /// arrives before; `None` while nothing waits on time (idle, a sync is
    /// running — its report will come — or an automatic sync waits for an
    /// answer that will come, or for a watcher being stopped to exit) —
    /// or the observer's own time to be woken ([`Gate::observer_due_at`]).
    pub fn next_deadline(&self) -> Option<Millis> {
        match (self.gate.observer_due_at, self.sync_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// When the queued sync is due, if one is queued and may start by
    /// time alone.
    fn sync_deadline(&self) -> Option<Millis> {
        if self.flight != Slot::Idle || self.gate.watcher_retiring {
            return None;
        }
        let queued = self.queued?;
        let due = match queued.kind {
            SyncKind::Manual { .. } => queued.due_at,
            SyncKind::Automatic { .. } if self.gate.awaiting_answer => return None,
            SyncKind::Automatic { .. } => self
                .gate
                .settled_by
                .map_or(queued.due_at, |settled| max(queued.due_at, settled)),
        };
        Some(max(due, self.gap_over_at()))
    }

    /// The sync occupying the workspace (running, or draining).
    pub fn current_flight(&self) -> Option<FlightId> {
        match self.flight {
            Slot::Idle => None,
            Slot::Running(flight) => Some(flight.id),
            Slot::Draining(id) => Some(id),
        }
    }

    /// Whether a sync is queued.
    pub fn has_queued(&self) -> bool {
        self.queued.is_some()
    }

    /// Automatic syncs of `cost` `lifetime` spawned (net of busy refunds).
    pub(crate) fn automatic_syncs_spawned(
        &self,
        lifetime: Lifetime,
        cost: SyncCost,
    ) -> Option<u32> {
        self.budgets
            .get(&lifetime)
            .map(|budget| budget.budget.spawned(cost))
    }

    /// The payer of the running automatic sync (for the simulation).
    #[cfg(test)]
    pub(crate) fn running_payer(&self) -> Option<Lifetime> {
        match self.flight {
            Slot::Running(flight) => flight.payer,
            Slot::Idle | Slot::Draining(_) => None,
        }
    }

    /// Whether `lifetime` has a budget (for the simulation).
    #[cfg(test)]
    pub(crate) fn has_budget(&self, lifetime: Lifetime) -> bool {
        self.budgets.contains_key(&lifetime)
    }

    /// Whether `lifetime` is live and not detached: only such a lifetime
    /// pays for an automatic sync.
    fn is_attached(&self, lifetime: Lifetime) -> bool {
        self.budgets
            .get(&lifetime)
            .is_some_and(|budget| budget.attached)
    }

    fn queued_automatic(&self) -> bool {
        matches!(
            self.queued,
            Some(QueuedSync {
                kind: SyncKind::Automatic { .. },
                ..
            })
        )
    }

    /// When the gap after the last sync's start is over
    /// (`freshness.minSyncGapMs`; at once when no sync started yet).
    fn gap_over_at(&self) -> Millis {
        match self.last_start {
            Some(last) => last.plus(self.policy.min_sync_gap_ms),
            None => Millis(0),
        }
    }

    /// Design §4, "Trigger": the first drift arms the window (due at first
    /// edit + batchMs); later edits do not push it back, but the latest
    /// editor becomes the payer. A queued manual sync covers drift already.
    fn queue_automatic(&mut self, payer: Lifetime, due_at: Millis) {
        match &mut self.queued {
            Some(QueuedSync {
                kind:
                    SyncKind::Automatic {
                        payer: queued_payer,
                    },
                ..
            }) => *queued_payer = payer,
            Some(QueuedSync {
                kind: SyncKind::Manual { .. },
                ..
            }) => {}
            None => {
                self.queued = Some(QueuedSync {
                    due_at,
                    kind: SyncKind::Automatic { payer },
                });
            }
        }
    }

    /// A lifetime's work stops: an automatic sync it queued is dropped, and
    /// an automatic sync it is paying for is cancelled — that sync's
    /// eventual report is a stale completion. A manual sync is not tied to
    /// a session.
    fn end_lifetime(&mut self, key: Lifetime, out: &mut Vec<Envelope>) {
        if self.last_editor == Some(key) {
            self.last_editor = None;
        }
        match &mut self.queued {
            Some(QueuedSync {
                kind: SyncKind::Manual { requester },
                ..
            }) if *requester == Some(key) => *requester = None,
            Some(QueuedSync {
                kind: SyncKind::Automatic { payer },
                ..
            }) if *payer == key => {
                self.queued = None;
                self.unpaid_drift = true;
            }
            _ => {}
        }
        if let Slot::Running(flight) = self.flight {
            if flight.payer == Some(key) {
                out.push(Envelope::Shell(Effect::CancelSync { flight: flight.id }));
                self.unpaid_drift = true;
                self.flight = Slot::Draining(flight.id);
                out.push(Envelope::Observer(ToObserver::SyncCancelled {
                    flight: flight.id,
                }));
            }
        }
    }

    /// Starts the queued sync when it is due and the workspace is free.
    /// Spec, "Lazy, budgeted drift sync": an automatic sync waits for the
    /// observed edits to settle, needs a live paying session that has not
    /// stopped on failures, and a free slot of its budget — otherwise the
    /// session gets the one-time budget notice and nothing spawns. A manual
    /// sync starts at once: it is not budgeted, and an edit still being
    /// written when it starts only keeps it from claiming `fresh`.
    ///
    /// While a watcher is verifying (or a comparison runs), a due automatic
    /// sync waits for that answer. While a verified watcher owns freshness,
    /// nothing is started at all; while a watcher is being stopped, nothing
    /// starts until it has exited (it may still hold the embedded
    /// database).
    fn start_due_sync(&mut self, out: &mut Vec<Envelope>) {
        if self.flight != Slot::Idle || self.gate.watcher_retiring {
            return;
        }
        if self.gate.watcher_verified {
            self.queued = None;
            return;
        }
        let Some(queued) = self.queued else {
            return;
        };
        if queued.due_at > self.now || self.gap_over_at() > self.now {
            return;
        }
        match queued.kind {
            SyncKind::Manual { requester } => {
                self.queued = None;
                self.start(None, requester, SyncAllowance::ANY, out);
            }
            SyncKind::Automatic { payer } => {
                if self.gate.unsettled || self.gate.awaiting_answer {
                    return;
                }
                self.queued = None;
                if !self.policy.auto_sync {
                    return;
                }
                // Drift this session cannot pay for is the next
                // lifetime's to sync; a detached lifetime's work stopped.
                self.unpaid_drift = true;
                let Some(budget) = self.budgets.get(&payer).filter(|budget| budget.attached) else {
                    return;
                };
                if budget.budget.is_failing() {
                    return;
                }
                let limits = self.policy.sync_limits();
                let allowance = budget.budget.allowance(limits);
                if !allowance.any() {
                    // Both classes are spent: the notice names the one the
                    // session's syncs usually are.
                    let cost = if limits.changed_files > 0 {
                        SyncCost::ChangedFiles
                    } else {
                        SyncCost::WholeRepository
                    };
                    self.offer_budget_exhausted(payer, cost, out);
                    return;
                }
                self.start(Some(payer), Some(payer), allowance, out);
            }
        }
    }

    /// Decides a sync from the epoch the observer last told, and tells the
    /// observer (which snapshots what it covers and asks the shell to start
    /// it).
    fn start(
        &mut self,
        payer: Option<Lifetime>,
        named: Option<Lifetime>,
        allowance: SyncAllowance,
        out: &mut Vec<Envelope>,
    ) {
        self.generation = self.generation.saturating_add(1);
        self.last_start = Some(self.now);
        self.unpaid_drift = false;
        let id = FlightId(self.generation);
        let from_epoch = self.gate.epoch;
        self.flight = Slot::Running(RunningSync {
            id,
            payer,
            from_epoch,
            unsettled_at_start: self.gate.unsettled,
            allowance,
            consumed_changed_files: false,
            consumed_whole_repository: false,
        });
        out.push(Envelope::Observer(ToObserver::SyncStarted {
            flight: id,
            from_epoch,
            named,
            manual: payer.is_none(),
            allowance,
        }));
    }

    /// Spec, "Budget exhausted": `payer` has no slot for work of `cost`
    /// (the notice is offered once per lifetime; the ledger keeps count).
    fn offer_budget_exhausted(&self, payer: Lifetime, cost: SyncCost, out: &mut Vec<Envelope>) {
        let max = match cost {
            SyncCost::ChangedFiles => self.policy.max_incremental_syncs_per_session,
            SyncCost::WholeRepository => self.policy.max_syncs_per_session,
        };
        let text = notice_text::budget_exhausted(&self.policy.workspace_root, cost, max);
        out.push(Envelope::Notices(ToNotices::Offer {
            audience: Audience::One(payer),
            condition: NoticeCondition::BudgetExhausted,
            text: OfferText::Ready(text),
        }));
    }

    /// A report from the runner about a sync.
    fn runner_report(&mut self, now: Millis, input: Input, out: &mut Vec<Envelope>) {
        match input {
            Input::SyncStrategyFellBack { flight: _, reason } => {
                let text = notice_text::strategy_fell_back(&self.policy.workspace_root, &reason);
                offer_to_all(NoticeCondition::SyncStrategyFellBack, text, out);
            }
            Input::SyncSpawned { flight, pid, cost } => self.spawned(flight, pid, cost, out),
            Input::SyncOverBudget { flight, cost } => {
                if let Slot::Running(running) = self.flight {
                    if running.id == flight {
                        if let Some(payer) = running.payer {
                            self.offer_budget_exhausted(payer, cost, out);
                        }
                    }
                }
                self.end_flight(now, flight, Ending::OverBudget(cost), out)
            }
            Input::SyncBusy { flight, holder } => self.end_flight(
                now,
                flight,
                Ending::Outcome(SyncOutcome::Busy { holder }),
                out,
            ),
            Input::SyncDeclined { flight, reason } => {
                self.end_flight(now, flight, Ending::Declined(reason), out)
            }
            Input::SyncFinished { flight, outcome } => {
                self.end_flight(now, flight, Ending::Outcome(outcome), out)
            }
            // Not a runner report.
            _ => {}
        }
    }

    /// The sync process exists: an automatic sync consumes its payer's slot
    /// of the class it costs now, once per class.
    fn spawned(&mut self, id: FlightId, pid: u32, cost: SyncCost, out: &mut Vec<Envelope>) {
        let Slot::Running(flight) = &mut self.flight else {
            return;
        };
        if flight.id != id {
            return;
        }
        out.push(Envelope::Observer(ToObserver::SyncSpawned {
            flight: id,
            pid,
        }));
        if flight.consumed(cost) {
            return;
        }
        if let Some(payer) = flight.payer {
            flight.mark_consumed(cost);
            if let Some(budget) = self.budgets.get_mut(&payer) {
                budget.budget.consume_slot(cost);
            }
        }
    }

    /// A terminal report about sync `id`. For the running sync it settles
    /// the flight: the budget's part here (refund, retry, failing), the
    /// record's part by the observer. For a draining sync it only frees the
    /// workspace; for any other id it is stale and changes nothing.
    fn end_flight(&mut self, now: Millis, id: FlightId, ending: Ending, out: &mut Vec<Envelope>) {
        let flight = match self.flight {
            Slot::Draining(draining) if draining == id => {
                self.now = max(self.now, now);
                self.flight = Slot::Idle;
                out.push(Envelope::Observer(ToObserver::FlightFreed { flight: id }));
                return;
            }
            Slot::Running(flight) if flight.id == id => flight,
            _ => return,
        };
        self.now = max(self.now, now);
        self.flight = Slot::Idle;
        // The episode the unconfirmed offers belonged to is over.
        out.push(Envelope::Notices(ToNotices::EpisodeOver));
        match &ending {
            Ending::Declined(_)
            | Ending::OverBudget(_)
            | Ending::Outcome(SyncOutcome::NotApplied { .. })
            | Ending::Outcome(SyncOutcome::Busy { .. }) => {
                // Retrying at once would end the same way.
                self.queued = None;
            }
            Ending::Outcome(SyncOutcome::Succeeded) => {
                for budget in self.budgets.values_mut().filter(|budget| budget.attached) {
                    budget.budget.clear_failing();
                }
            }
            Ending::Outcome(SyncOutcome::Failed { .. } | SyncOutcome::TimedOut { .. }) => {
                // Spec, "Errors are contained": the first failure of a
                // session's automatic sync queues one retry, the second
                // stops its automatic syncs until a sync succeeds.
                if let Some(payer) = flight.payer {
                    if let Some(budget) = self.budgets.get_mut(&payer) {
                        let retry = budget.budget.after_failure();
                        if retry && self.policy.auto_sync && self.queued.is_none() {
                            self.queued = Some(QueuedSync {
                                due_at: self.now,
                                kind: SyncKind::Automatic { payer },
                            });
                        }
                    }
                }
            }
            Ending::Outcome(SyncOutcome::Cancelled) => {}
        }
        if let Ending::Outcome(SyncOutcome::Busy { .. }) = ending {
            // Spec, "Sync skipped when busy": no slot is consumed.
            if let Some(budget) = flight.payer.and_then(|payer| self.budgets.get_mut(&payer)) {
                for cost in [SyncCost::ChangedFiles, SyncCost::WholeRepository] {
                    if flight.consumed(cost) {
                        budget.budget.refund_slot(cost);
                    }
                }
            }
        }
        let another_attempt = self.queued_sync_will_run();
        out.push(Envelope::Observer(ToObserver::SyncSettled {
            flight: id,
            ending,
            from_epoch: flight.from_epoch,
            payer: flight.payer,
            another_attempt,
        }));
    }

    /// Whether the queued sync would start when due (as far as is known now).
    /// An automatic sync with budget is queued, nothing runs, and nothing
    /// but its time holds it back: the edits it is for are settled, so the
    /// tree it will sync is the tree now (unless more edits come).
    fn sync_waits_for_its_window(&self) -> bool {
        self.flight == Slot::Idle
            && self.queued_automatic()
            && self.queued_sync_will_run()
            && !self.gate.unsettled
            && !self.gate.awaiting_answer
            && !self.gate.watcher_verified
            && !self.gate.watcher_retiring
    }

    fn queued_sync_will_run(&self) -> bool {
        match self.queued {
            None => false,
            Some(QueuedSync {
                kind: SyncKind::Manual { .. },
                ..
            }) => true,
            Some(QueuedSync {
                kind: SyncKind::Automatic { payer },
                ..
            }) => self.budgets.get(&payer).is_some_and(|budget| {
                !budget.budget.is_failing()
                    && budget.budget.allowance(self.policy.sync_limits()).any()
            }),
        }
    }
}

fn offer_to_all(condition: NoticeCondition, text: String, out: &mut Vec<Envelope>) {
    out.push(Envelope::Notices(ToNotices::Offer {
        audience: Audience::AllAttached,
        condition,
        text: OfferText::Ready(text),
    }));
}
