//! The freshness state machines: whether a workspace's code graph can be
//! trusted, and when to sync it.
//!
//! Three pure sub-machines that share no state and exchange typed messages
//! (`messages.rs`): [`DriftObserver`] (sessions and their
//! lifetimes, edit epochs, pending paths, probes, the watcher's effect, the
//! record — its only writer), [`SyncScheduler`] (the batching window, the
//! single flight and its one follow-up, per-lifetime budgets, the gap
//! between two starts, the one wake-up deadline) and [`Notices`] (the
//! per-lifetime ledgers). The service runs each as an actor; a `fresh`
//! claim is a compare-and-set on the edit epoch the scheduler started the
//! sync from, so a message that arrives late can cost a sync, never a
//! false `fresh` (`simulation.rs` delivers the messages in orders proptest
//! chooses).
//!
//! [`Freshness`] composes the three and delivers their messages
//! synchronously, in the order they were sent: [`Freshness::handle`] takes
//! one [`Input`] (a session or tool event from the harness, a person's sync
//! request, the shell's report about a sync, or the passing of a deadline)
//! with the time it happened, and returns [`Effect`]s (start or cancel a
//! sync, show a notice, persist the record). [`Freshness::next_deadline`]
//! is the one one-shot wake-up the shell arms; it is `None` whenever nothing
//! waits on time, so an idle workspace runs no timer. Nothing here reads a
//! clock, spawns, or touches a file.
//!
//! ```
//! use cgc_fresh_core::freshness::{
//!     Effect, Freshness, FreshnessPolicy, Input, Millis, SyncCost, SyncOutcome,
//! };
//! use cgc_fresh_proto::{FreshnessStatus, SessionStartReason};
//!
//! let mut machine = Freshness::new(FreshnessPolicy::with_defaults("/home/ann/proj"), None, Millis(0));
//! machine.handle(Millis(0), Input::SessionStarted {
//!     session: "s1".into(), instance: "pi-1".into(), reason: SessionStartReason::Startup,
//!     connection: None, owner: None,
//! });
//! machine.handle(Millis(10), Input::ToolCall {
//!     session: "s1".into(), tool: "edit".into(), paths: vec!["src/main.rs".into()],
//!     not_indexed: 0,
//! });
//! machine.handle(Millis(20), Input::ToolResult { session: "s1".into(), tool: "edit".into(), ok: true });
//! assert_eq!(machine.record().status, FreshnessStatus::PossiblyStale);
//! assert_eq!(machine.next_deadline(), Some(Millis(510))); // first edit + batchMs
//!
//! let effects = machine.handle(Millis(510), Input::Wake);
//! let Some(&Effect::StartSync { flight, .. }) = effects.first() else { panic!() };
//! machine.handle(Millis(600), Input::SyncSpawned { flight, pid: 4711, cost: SyncCost::WholeRepository });
//! machine.handle(Millis(900), Input::SyncFinished { flight, outcome: SyncOutcome::Succeeded });
//! assert_eq!(machine.record().status, FreshnessStatus::Fresh);
//! assert_eq!(machine.next_deadline(), None);
//! ```
//!
//! # Where each rule lives
//!
//! | spec rule / design point | where |
//! |---|---|
//! | "Freshness state tracking": last successful sync time and a conservative dirty condition, shared by every surface | [`FreshnessRecord`] (`record.rs`), written only by [`DriftObserver`]; [`DriftObserver::state_frame`] |
//! | "Dirty after observed edits": possibly stale with the time of the first observed edit | `observe_edit`, `mark_drift` (`drift_observer/edits.rs`) |
//! | "Conservative drift observation without probing": edits are seen from tool calls (and, for shell tools, a stat comparison with the manifest when the command ends), placed lexically after the shell resolved them to real paths, no spawn at call time | `workspace_path.rs`, `observe_edit`; the scheduler waits for the batching window |
//! | "No false freshness": fresh only if no edit after, or unsettled at, the sync's start | `epoch.rs` (settling), `Flight::covers_every_edit` (`flight.rs`), `settle_succeeded` (`drift_observer/syncs.rs`): a compare-and-set on the `from_epoch` of `SyncStarted`/`SyncSettled` (`messages.rs`) |
//! | "Lazy, budgeted drift sync": first drift triggers one sync after `batchMs`, dedup with the in-flight sync, `maxSyncsPerSession`, busy skip | `queue_automatic`, `start_due_sync`, `end_flight` (`sync_scheduler.rs`), `budget.rs`, `flight.rs`, `settle_busy` (`drift_observer/syncs.rs`) |
//! | Design reference 002: at least `minSyncGapMs` between two sync starts | `gap_over_at`, `start_due_sync`, `next_deadline` (`sync_scheduler.rs`) |
//! | "One-time human-facing staleness notices": once per (session, condition), counted on delivery, only on the session's own connections | `notices.rs` (`Offer`, `Delivered`), `ledger.rs`, `notice_text.rs` |
//! | "Errors are contained": recorded, surfaced, retried at most once per session | `settle_failed` (`drift_observer/syncs.rs`), `end_flight` and `SyncBudget::after_failure` (`sync_scheduler.rs`, `budget.rs`) |
//! | "Freshness observation rebinds on session replacement": budget and ledger per session lifetime, record shared, idempotent registration | `session.rs`, `session_started`, `close_lifetime` (`drift_observer/sessions.rs`); `LifetimeOpened`/`LifetimeClosed` to the scheduler (budgets) and the notices (ledgers) |
//! | Shell edits: a shell command's changes found against the manifest; no claim while one is uncompared | `probe.rs`, `shell_result`, `probe_answered`, `claim_deferred` (`drift_observer/edits.rs`) |
//! | Seed 002: bounded pending batch collapsing into a whole-workspace marker | `pending_paths.rs` |
//! | Seed 003: single flight, stale completions rejected, every completion a defined transition | `flight.rs`, `end_flight` (`sync_scheduler.rs`), `settle` (`drift_observer/syncs.rs`) |
//! | "Opt-in continuous watcher mode": one attempt per session, the watcher belongs to its session | [`DriftObserver::watcher_attempt_allowed`], `LiveSession::watcher_attempted` (`session.rs`), `end_lifetime`; the gate itself is [`crate::watcher::gate()`] |
//! | "Watcher liveness verification before the fresh claim": nothing claimed while verifying; verified → `fresh` + start notice; failed → `not_verified` + error + notice, lazy mode resumes | `watcher_slot.rs`, `drift_observer/watcher.rs` (`watcher_verified`, `watcher_not_verified`) |
//! | "Verified watcher owns freshness": edits open no stale episode, no sync starts | `drift_from`, `Gate::watcher_verified` in `start_due_sync`, `SyncRequested` in `take` ([`Freshness::watcher_owns_freshness`]) |
//! | "Watcher start blocked by lock": no spawn, busy notice naming the holder, lazy mode, no `fresh` | `watcher_skipped_busy` |
//! | "Unindexed workspace stays watcher-free", "Embedded backend never auto-spawns": one-time notice explaining the decline | `watcher_declined` |
//! | Design §5: death after verification drops to `possibly_stale` at once | `watcher_died`, `watcher_gone`; the scheduler's `WatcherDied` (the follow-up sync and its notice) |
//! | An edit the watcher's observer can never report (made during its start-up or restart, still being written at spawn, a shell command called before verification, no path named, an ignore file) waits as unobserved: once everything settled the watcher is restarted; after [`MAX_WATCHER_RESTARTS`] in a row it is stopped and lazy mode takes over | `AwaitingWatcher::needs_restart` (`watcher_slot.rs`); `restart_watcher_if_due`, `watcher_caught_up`, `retire_watcher`, `await_if_unseen_by_observer` (`drift_observer/watcher.rs`); `Gate::observer_due_at`, `Gate::watcher_retiring` and `WatcherRetired` in `start_due_sync`/`next_deadline` (`sync_scheduler.rs`) |
//! | Files CGC does not index are no drift (in lazy and watcher mode) | `call_target` (`drift_observer.rs`), `Input::ToolCall::not_indexed` (decided by the shell) |
//! | The three sub-machines hold the rules whatever order their messages arrive in | `simulation.rs` |
//!
//! # Choices the spec leaves open
//!
//! - **Who pays.** An automatic sync is paid from the budget of the live
//!   session whose edit most recently opened or continued the episode. If
//!   that session ends before the sync is due (or while it runs), the sync
//!   is dropped (cancelled) — and a follow-up of a sync it paid for that
//!   comes after it ended or was detached is not its to pay (the scheduler
//!   may settle the sync before it hears of the end); the record stays
//!   possibly stale, and the next session lifetime to start — new, or a
//!   restarted service's first — pays for it as its first drift, after
//!   `batchMs` (so the notice's "a background sync follows shortly" comes
//!   true). The same holds for an edit under an ended session's name and
//!   for pending work in a restored record. Drift a verified watcher left
//!   when it stopped is not such drift: the next session's own watcher,
//!   or its next drift, covers it.
//! - **Shell commands.** A `freshness.shellTools` call opens a probe; its
//!   result makes the shell compare the tree with the manifest of the last
//!   successful sync ([`Effect::ProbeWorkspace`]); changes are an observed
//!   edit of those paths, settled at once; no change does nothing. While a
//!   probe is open a success that covers every edit defers its `fresh`
//!   claim until the last probe answers "unchanged" (`probe.rs`).
//! - **Settling before a start.** An automatic sync that is due waits until
//!   every observed edit settled (by `tool_result`, or `settleMs` after its
//!   call): a sync started under a half-written edit could not claim
//!   `fresh`, and would waste a slot. A manual sync starts at once; an edit
//!   unsettled at its start keeps it from claiming `fresh`.
//! - **Follow-ups.** Drift or requests during a flight coalesce into one
//!   queued sync (a request makes it manual). A success that cannot claim
//!   `fresh` queues exactly one follow-up — the coalesced one, or an
//!   automatic one. Busy, declined and not-applied outcomes drop the queue
//!   (retrying at once would end the same way); the next drift may try
//!   again. A cancelled sync keeps the queue.
//! - **Status after a sync without a claim** (failed, timed out, cancelled,
//!   declined): `possibly_stale` when an uncovered edit exists; otherwise
//!   the previous status when no process ran (the graph was not touched);
//!   otherwise `possibly_stale`, since a process stopped part-way may have
//!   left the graph between states — except that `unknown` stays `unknown`.
//! - **Which sessions hear what.** Staleness and budget notices go to the
//!   session concerned; sync outcomes (completed, busy, failed, not applied,
//!   declined) to every live session.
//! - **Undelivered notices.** An offered notice is not repeated until a sync
//!   settles; after that, one nobody confirmed may be offered again.
//! - **Unannounced sessions.** A modifying `tool_call` from a session never
//!   seen starts a lifetime for it (missing an edit would risk a false
//!   `fresh`); a session replaced by a new extension instance ends the old
//!   lifetime — cancelling its automatic sync — and starts a new one.
//! - **Stale completion.** A report about a cancelled sync makes no claim
//!   and changes no record; it only frees the workspace for the next sync
//!   (the process it reported on is gone), which may then start.
//!
//! # The managed watcher
//!
//! The shell decides with [`crate::watcher::gate()`] and the lock probe,
//! runs `cgc watch`, times the liveness probe, and reports; the machine
//! decides what the reports mean for freshness.
//!
//! - **One attempt per session, one watcher per workspace.** A session
//!   lifetime makes at most one attempt, reported by exactly one of
//!   `WatcherStarted`, `WatcherSpawnFailed`, `WatcherBusy` or
//!   `WatcherDeclined`, and only while no watcher runs
//!   ([`Freshness::watcher_attempt_allowed`]); any other attempt report is
//!   ignored. A later session (a replacement included) has its own attempt.
//! - **Stale reports.** Reports about a started watcher name its session
//!   and pid; one naming a session that is not live or a pid that is not
//!   the running watcher's changes nothing. A session's end (or
//!   replacement) ends its watcher here at once — the shell stops the
//!   process — so a `WatcherStopped` after the end, or a late
//!   `WatcherVerified` from a verification that was under way, is stale.
//! - **While verifying,** nothing is claimed and lazy mode runs as usual —
//!   edits open episodes and notices, manual syncs start — except that an
//!   automatic sync that comes due waits for the verification to settle:
//!   verified, the watcher covers the drift; failed or stopped, the sync
//!   starts then. (Started at once it would mostly meet our own watcher's
//!   lock on an embedded backend and end busy.) The shell must settle every
//!   started watcher (verified, failed, died or stopped), as it answers
//!   every `StartSync`.
//! - **Verified.** The status is `fresh` (the watcher keeps the graph
//!   current; the shell starts it so that it reconciles the working tree
//!   first), `stale_since`, pending work and `last_error` are cleared, the
//!   watcher-start notice goes to every live session. Until it ends, edits
//!   from any session are counted but open no episode, no sync starts, a
//!   queued sync is dropped and a person's request joins the watcher. A sync
//!   that was running drains without being stopped: its completion changes
//!   nothing (a slot it consumed stays consumed).
//! - **Failed before verification** (or not spawned): `not_verified`, the
//!   error in `last_error`, the not-verified notice; never a `fresh` for
//!   it. Whether a report counts as before or after verification is the
//!   machine's own record, whichever of `WatcherFailed`/`WatcherDied` the
//!   shell sent (a ready line followed by a death is a death).
//! - **Died after verification:** `possibly_stale` at once with
//!   `stale_since` = the death and the whole workspace pending, the error
//!   recorded, the died notice; the death opens a drift episode, so an
//!   automatic sync paid by the watcher's session follows after `batchMs`.
//! - **Stopped on purpose, or its session ended:** the watcher facts are
//!   cleared, no notice. A verified watcher leaves `possibly_stale` from
//!   that moment (nothing observes changes for it any more, and it may have
//!   missed the last ones); no sync is queued — the next drift or a request
//!   syncs.
//! - **Busy / declined:** nothing ran. Busy records `skipped_busy` with the
//!   holder in `last_error`; declined leaves the status as it was. Both
//!   record the watcher facts and notify every live session once; lazy
//!   mode goes on. While a sync runs, a watcher outcome that would set the
//!   status leaves it to the sync's completion.
//! - **Restart.** A watcher never survives the service: its facts are
//!   dropped with the status.

mod budget;
pub use budget::{SyncAllowance, SyncCost};
mod drift_observer;
mod epoch;
mod events;
mod flight;
mod ledger;
mod machine;
mod messages;
pub mod notice_text;
mod notices;
mod pending_paths;
mod policy;
mod probe;
mod record;
mod session;
mod sync_scheduler;
mod time;
#[cfg(any(test, feature = "model"))]
pub mod watcher_model;
mod watcher_slot;
pub use watcher_slot::{
    watcher_applies_to, IGNORE_FILE_NAMES, MAX_WATCHER_RESTARTS, WATCHED_SUFFIXES,
};
mod workspace_path;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod simulation;
#[cfg(test)]
mod tests;

pub use drift_observer::DriftObserver;
pub use events::{Effect, Input, SyncOutcome, TreeChanges, WatcherDecline};
pub use flight::FlightId;
pub use machine::{route, Freshness, TakenNotice};
pub use messages::{
    Audience, Ending, Envelope, Gate, OfferText, ToNotices, ToObserver, ToScheduler,
};
pub use notices::{Held, Notices};
pub use pending_paths::{PendingPaths, MAX_PENDING_PATHS, MAX_PENDING_PATH_BYTES};
pub use policy::{
    FreshnessPolicy, DEFAULT_BATCH_MS, DEFAULT_MAX_SYNCS_PER_SESSION, DEFAULT_MIN_SYNC_GAP_MS,
    DEFAULT_MODIFYING_TOOLS, DEFAULT_SETTLE_MS, DEFAULT_SHELL_TOOLS,
};
pub use probe::{ProbeId, MAX_RUNNING_PROBES};
pub use record::{FreshnessRecord, PendingSummary, RecordError, WatcherRecord, RECORD_VERSION};
pub use session::{
    ConnectionId, Lifetime, OwnerPid, SessionKey, MAX_ENDED_SESSIONS, MAX_LIVE_SESSIONS,
};
pub use sync_scheduler::SyncScheduler;
pub use time::Millis;
pub use workspace_path::{PathPlacement, WorkspaceRoot};
