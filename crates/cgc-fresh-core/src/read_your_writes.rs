//! Read-your-writes for `cgc-fresh mcp`: when an agent's query is answered.
//!
//! A tool call that arrives while the workspace has edits the graph does
//! not hold yet ([`edits_pending`]) waits for the sync — or the watcher —
//! that covers them, at most
//! `mcp.readYourWritesMs` after its arrival; past that bound it is answered
//! from the graph as it is. The answer itself never says which (the agent
//! gets CGC's result, not freshness text); the shell logs the wait.
//!
//! Time is an input (milliseconds on any monotonic clock): the shell asks
//! again whenever the state changes and once at the deadline.

use cgc_fresh_proto::FreshnessStatus;

/// Whether the graph lacks edits seen so far, from the state: an open
/// stale episode (`stale_since`: unsettled, unsynced, or a sync under
/// way), or a verified watcher still applying edits (`syncing` with no
/// stale episode).
pub fn edits_pending(status: FreshnessStatus, stale_since: Option<u64>) -> bool {
    stale_since.is_some() || status == FreshnessStatus::Syncing
}

/// What to do with a waiting tool call now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadDecision {
    /// Answer now. `waited_ms` since it arrived; `caught_up`: the graph
    /// covers every edit seen (false: the bound passed first).
    Answer { waited_ms: u64, caught_up: bool },
    /// Keep it; ask again when the state changes, or at `until_ms`.
    Wait { until_ms: u64 },
}

/// The decision for a call that arrived at `arrived_ms`, at `now_ms`, when
/// `edits_pending` says whether the graph lacks edits seen so far.
pub fn read_your_writes(
    edits_pending: bool,
    arrived_ms: u64,
    now_ms: u64,
    bound_ms: u64,
) -> ReadDecision {
    let waited_ms = now_ms.saturating_sub(arrived_ms);
    if !edits_pending {
        return ReadDecision::Answer {
            waited_ms,
            caught_up: true,
        };
    }
    let until_ms = arrived_ms.saturating_add(bound_ms);
    if now_ms >= until_ms {
        return ReadDecision::Answer {
            waited_ms,
            caught_up: false,
        };
    }
    ReadDecision::Wait { until_ms }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_are_pending_in_a_stale_episode_and_while_a_watcher_applies_them() {
        assert!(edits_pending(FreshnessStatus::PossiblyStale, Some(5)));
        assert!(edits_pending(FreshnessStatus::Syncing, Some(5)));
        assert!(
            edits_pending(FreshnessStatus::Syncing, None),
            "a watcher applying"
        );
        assert!(edits_pending(FreshnessStatus::SkippedBusy, Some(5)));
        assert!(!edits_pending(FreshnessStatus::Fresh, None));
        assert!(
            !edits_pending(FreshnessStatus::Unknown, None),
            "nothing seen"
        );
        assert!(!edits_pending(FreshnessStatus::NotVerified, None));
    }

    #[test]
    fn a_graph_that_covers_every_edit_answers_at_once() {
        assert_eq!(
            read_your_writes(false, 1_000, 1_000, 3_000),
            ReadDecision::Answer {
                waited_ms: 0,
                caught_up: true
            }
        );
    }

    #[test]
    fn pending_edits_make_the_call_wait_until_the_bound() {
        assert_eq!(
            read_your_writes(true, 1_000, 1_500, 3_000),
            ReadDecision::Wait { until_ms: 4_000 }
        );
        assert_eq!(
            read_your_writes(true, 1_000, 3_999, 3_000),
            ReadDecision::Wait { until_ms: 4_000 }
        );
    }

    #[test]
    fn the_sync_that_covers_the_edits_releases_the_call_with_its_wait() {
        assert_eq!(
            read_your_writes(false, 1_000, 2_250, 3_000),
            ReadDecision::Answer {
                waited_ms: 1_250,
                caught_up: true
            }
        );
    }

    #[test]
    fn past_the_bound_the_graph_answers_as_it_is() {
        assert_eq!(
            read_your_writes(true, 1_000, 4_000, 3_000),
            ReadDecision::Answer {
                waited_ms: 3_000,
                caught_up: false
            }
        );
    }

    #[test]
    fn a_zero_bound_never_waits_and_time_going_backwards_waits_nothing_extra() {
        assert_eq!(
            read_your_writes(true, 1_000, 1_000, 0),
            ReadDecision::Answer {
                waited_ms: 0,
                caught_up: false
            }
        );
        assert_eq!(
            read_your_writes(true, 5_000, 1_000, 3_000),
            ReadDecision::Wait { until_ms: 8_000 }
        );
        assert_eq!(
            read_your_writes(true, u64::MAX - 1, u64::MAX - 1, 3_000),
            ReadDecision::Wait { until_ms: u64::MAX }
        );
    }
}
