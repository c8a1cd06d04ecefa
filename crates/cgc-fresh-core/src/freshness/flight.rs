//! The one sync a workspace may have in flight, and the one queued behind it.
//!
//! Spec, "Lazy, budgeted drift sync": the extension MUST deduplicate with any
//! in-flight sync. Design §4: one sync in flight at most; requests during a
//! flight coalesce into the single follow-up. Design reference (seed 003,
//! "the group state machine"): single-flight, stale completions rejected by
//! generation, and every completion — success, live non-success, stale — is
//! a defined transition.
//!
//! A flight exists from the machine's `StartSync` until the shell's terminal
//! report about it (`SyncBusy`, `SyncDeclined` or `SyncFinished`). When the
//! session that paid for an automatic flight ends, the flight is cancelled
//! and *drains*: it makes no claim any more, but it still occupies the
//! workspace until its process is reported gone, so the next sync does not
//! find our own dying `cgc` holding the database lock. A running flight also
//! drains, without being stopped, when a verified watcher takes over the
//! workspace's freshness: stopping a sync part-way could leave the graph
//! between states, and its outcome no longer decides anything.

use cgc_fresh_proto::FreshnessStatus;

use super::epoch::EditTracker;
use super::pending_paths::PendingPaths;
use super::session::Lifetime;
use super::time::Millis;

/// Identifies one sync the machine decided to start. Ids grow for the whole
/// life of a workspace record (they continue after a restart), so a report
/// naming any other id is stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlightId(pub u64);

impl FlightId {
    /// The number behind the id.
    pub const fn get(self) -> u64 {
        self.0
    }
}

/// Why a sync runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyncKind {
    /// Drift-triggered; `payer`'s budget pays for it.
    Automatic { payer: Lifetime },
    /// A person asked; `requester` is the session they asked from, if any.
    /// Not budgeted, not tied to the session.
    Manual { requester: Option<Lifetime> },
}

/// A sync waiting to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueuedSync {
    /// Not before this time (the batching window; `now` for a request).
    pub(crate) due_at: Millis,
    pub(crate) kind: SyncKind,
}

/// A running sync as the drift observer sees it: the snapshot its start
/// decided on, which decides what its success may claim.
#[derive(Debug, Clone)]
pub(crate) struct Flight {
    pub(crate) id: FlightId,
    /// The edit epoch the scheduler started the sync from (the last one it
    /// was told; never newer than the observer's at the start).
    epoch_at_start: u64,
    /// Whether an observed edit was still being written at the start.
    unsettled_at_start: bool,
    /// When the first edit this sync may not cover was observed: the oldest
    /// edit unsettled at the start, else the first edit after it.
    first_uncovered_at: Option<Millis>,
    /// The pending batch this sync took.
    pub(crate) paths: PendingPaths,
    /// The status before the sync, restored if it ends without a claim.
    pub(crate) status_before: FreshnessStatus,
    /// The sync process, once spawned.
    pub(crate) pid: Option<u32>,
}

impl Flight {
    /// Snapshots what the sync starting now can cover. The start is the
    /// decision and precedes the spawn, so whatever is observed after this
    /// moment counts as not covered — the conservative side.
    pub(crate) fn start(
        id: FlightId,
        from_epoch: u64,
        edits: &EditTracker,
        paths: PendingPaths,
        status_before: FreshnessStatus,
    ) -> Self {
        Flight {
            id,
            epoch_at_start: from_epoch,
            unsettled_at_start: edits.has_unsettled(),
            first_uncovered_at: edits.earliest_unsettled_at(),
            paths,
            status_before,
            pid: None,
        }
    }

    /// An edit was observed at `at` while this sync runs.
    pub(crate) fn note_edit(&mut self, at: Millis) {
        self.first_uncovered_at.get_or_insert(at);
    }

    /// Whether a success of this sync covers every observed edit, given the
    /// epoch now: none was observed after the epoch it started from, and
    /// none was unsettled at its start. (Spec, "No false freshness".) The
    /// compare-and-set of the `fresh` claim.
    pub(crate) fn covers_every_edit(&self, edit_epoch_now: u64) -> bool {
        edit_epoch_now == self.epoch_at_start && !self.unsettled_at_start
    }

    /// The edit epoch the sync started from.
    pub(crate) fn epoch_at_start(&self) -> u64 {
        self.epoch_at_start
    }

    /// Whether edits that were still being written at the start may have
    /// landed after the sync read them.
    pub(crate) fn had_unsettled_edits(&self) -> bool {
        self.unsettled_at_start
    }

    /// When the first edit this sync may not cover was observed.
    pub(crate) fn first_uncovered_at(&self) -> Option<Millis> {
        self.first_uncovered_at
    }
}

/// The workspace's sync slot.
#[derive(Debug, Clone, Default)]
pub(crate) enum FlightSlot {
    /// No sync exists.
    #[default]
    Idle,
    /// A sync runs and its outcome counts.
    Running(Box<Flight>),
    /// A sync whose outcome counts for nothing any more, still occupying
    /// the workspace until its terminal report.
    Draining(FlightId, DrainCause),
}

/// Why a flight drains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DrainCause {
    /// Cancelled (its paying session ended): its process is being stopped.
    Cancelled,
    /// A verified watcher owns freshness now: the sync runs to its end.
    Superseded,
}

impl FlightSlot {
    /// The id of the sync occupying the slot.
    pub(crate) fn id(&self) -> Option<FlightId> {
        match self {
            FlightSlot::Idle => None,
            FlightSlot::Running(flight) => Some(flight.id),
            FlightSlot::Draining(id, _) => Some(*id),
        }
    }

    /// Whether no sync exists.
    pub(crate) fn is_idle(&self) -> bool {
        matches!(self, FlightSlot::Idle)
    }
}
