//! The typed messages the three sub-machines of a workspace exchange.
//!
//! [`super::DriftObserver`] (sessions, edits, the record), [`super::SyncScheduler`]
//! (when a sync starts, the single flight, budgets, the gap) and
//! [`super::Notices`] (the per-lifetime ledgers and delivery) share no state:
//! each knows of the others only what these messages told it. Between two
//! machines messages keep their order (one mailbox per receiver); across
//! machines any interleaving is allowed, and every rule stays on the
//! conservative side when a message arrives late (a sync started from an
//! older edit epoch than the observer's never claims `fresh`).
//!
//! [`super::Freshness`] delivers them synchronously, depth first, in the
//! order they were sent; the simulation test (`simulation.rs`) delivers
//! them in orders proptest chooses.

use cgc_fresh_proto::NoticeCondition;

use super::budget::{SyncAllowance, SyncCost};
use super::events::{Effect, Input};
use super::flight::FlightId;
use super::session::{Lifetime, SessionKey};
use super::time::Millis;

/// Where a message goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Envelope {
    Observer(ToObserver),
    Scheduler(ToScheduler),
    Notices(ToNotices),
    /// A decision for the shell (the effect leaves the core).
    Shell(Effect),
}

/// What the drift observer receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToObserver {
    /// A harness event, a probe's answer, a watcher report or a wake-up.
    Input(Input),
    /// The scheduler started sync `flight`, deciding on `from_epoch` (the
    /// last edit epoch it was told). The observer snapshots what the sync
    /// can cover and tells the shell to start it.
    SyncStarted {
        flight: FlightId,
        from_epoch: u64,
        /// The paying (automatic) or requesting (manual) lifetime.
        named: Option<Lifetime>,
        manual: bool,
        /// The classes of work it may spawn.
        allowance: SyncAllowance,
    },
    /// The sync process of `flight` exists.
    SyncSpawned { flight: FlightId, pid: u32 },
    /// `flight` ended; `from_epoch` is the epoch it started from (the
    /// compare-and-set of the `fresh` claim), `payer` its payer (a
    /// follow-up's fallback payer), `another_attempt` whether a sync the
    /// scheduler queued will run (the failure notice says so).
    SyncSettled {
        flight: FlightId,
        ending: Ending,
        from_epoch: u64,
        payer: Option<Lifetime>,
        another_attempt: bool,
    },
    /// `flight` was cancelled (its payer's lifetime ended): it claims
    /// nothing and drains.
    SyncCancelled { flight: FlightId },
    /// The draining `flight` is gone: the workspace is free.
    FlightFreed { flight: FlightId },
}

/// How a sync that occupied the workspace ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    Declined(String),
    /// It needed work of a class its payer has no slot of left.
    OverBudget(SyncCost),
    Outcome(super::events::SyncOutcome),
}

/// What the sync scheduler receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToScheduler {
    /// A runner report (`SyncBusy`, `SyncDeclined`, `SyncStrategyFellBack`,
    /// `SyncSpawned`, `SyncFinished`).
    Input(Input),
    /// What the observer knows that decides whether a due automatic sync
    /// may start, sent after every observation; `recheck`: the observation
    /// was taken, so due work may start now.
    Readiness { gate: Gate, recheck: bool },
    /// A lifetime began: it gets a budget.
    LifetimeOpened { lifetime: Lifetime },
    /// A detached lifetime was re-attached.
    LifetimeReattached { lifetime: Lifetime },
    /// A lifetime's work stops (`detached`: it is kept for a replay).
    LifetimeClosed { lifetime: Lifetime, detached: bool },
    /// `editor`'s edit opened or continued the drift episode; with
    /// `queue_at` (autoSync) an automatic sync is due then.
    DriftObserved {
        editor: Lifetime,
        queue_at: Option<Millis>,
    },
    /// A lifetime began while drift nobody paid for was left: it pays, if
    /// no sync is queued or running.
    InheritDrift { payer: Lifetime, due_at: Millis },
    /// Drift no live session pays for (an edit under an ended name).
    DriftUnpaid,
    /// A person asked for a sync; it is due at once — unless the running
    /// sync started from `epoch` with every edit settled (it covers them
    /// all), which the request then joins. The observer joins such
    /// requests itself; this covers one that crossed the start.
    SyncRequested {
        requester: Option<Lifetime>,
        epoch: u64,
    },
    /// A watcher was verified: nothing queued runs, a running sync drains.
    WatcherTookOver,
    /// The verified watcher of `owner` died: with `queue_at` an automatic
    /// sync `owner` pays is due then; the scheduler offers the notice,
    /// which says whether a sync follows.
    WatcherDied {
        owner: Lifetime,
        queue_at: Option<Millis>,
        error: String,
    },
    /// Restarting the watcher of `owner` did not catch up with the edits
    /// made while it started up: it is being stopped and lazy mode takes
    /// over. With `queue_at` an automatic sync `owner` pays is due then —
    /// it starts only once the watcher has exited ([`Gate::watcher_retiring`]);
    /// the scheduler offers the notice, which says whether a sync follows.
    WatcherRetired {
        owner: Lifetime,
        queue_at: Option<Millis>,
        reason: String,
    },
    /// A deferred `fresh` was claimed: a queued automatic sync is moot.
    FreshClaimed,
    /// A success could not claim `fresh`: one follow-up, due at `due_at`,
    /// paid by the latest editor (else `payer`).
    FollowUp {
        payer: Option<Lifetime>,
        due_at: Millis,
    },
}

/// The observer's answer to "may a due automatic sync start?".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Gate {
    /// The edit epoch now: a sync started on it claims `fresh` only if it
    /// is still the epoch when the sync succeeds.
    pub epoch: u64,
    /// An observed edit or a shell command is still within its settle
    /// window.
    pub unsettled: bool,
    /// When every such edit and command will have settled at the latest.
    pub settled_by: Option<Millis>,
    /// An answer is awaited that decides whether a sync is needed: a
    /// watcher being verified, or a tree comparison.
    pub awaiting_answer: bool,
    /// A verified watcher owns freshness: nothing starts.
    pub watcher_verified: bool,
    /// A watcher is being stopped (it may still hold the embedded
    /// database): nothing starts until it has exited.
    pub watcher_retiring: bool,
    /// The observer's own time to be woken: when a watcher restart that
    /// waits for edits to settle may be due, or when the verified
    /// watcher's wait for an edit reaches `freshness.watcherApplyMs`. The
    /// scheduler keeps the one wake-up, so it wakes for this too.
    pub observer_due_at: Option<Millis>,
}

/// What the notices machine receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToNotices {
    /// A lifetime began: it gets a ledger.
    LifetimeOpened {
        session: SessionKey,
    },
    LifetimeReattached {
        lifetime: Lifetime,
    },
    /// Ended: its ledger goes; `detached`: kept, but it hears no offer to
    /// every session until re-attached.
    LifetimeClosed {
        lifetime: Lifetime,
        detached: bool,
    },
    /// Offer the notice for `condition` to `audience`, once per lifetime.
    Offer {
        audience: Audience,
        condition: NoticeCondition,
        text: OfferText,
    },
    /// A sync settled or a watcher took over: offers nobody confirmed may
    /// be made again.
    EpisodeOver,
    /// A connection carrying `session` received its notice.
    Delivered {
        session: SessionKey,
        condition: NoticeCondition,
    },
}

/// Who a notice is offered to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// One lifetime (attached or detached).
    One(Lifetime),
    /// Every attached lifetime: a sync's or the watcher's outcome concerns
    /// everyone working in the workspace.
    AllAttached,
}

/// A notice's text. The staleness notice is offered on every edit and
/// almost always already offered, so it is formatted only when due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OfferText {
    Ready(String),
    PossiblyStale { tool: String, auto_sync: bool },
}
