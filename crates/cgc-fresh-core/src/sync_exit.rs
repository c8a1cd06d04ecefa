//! What the end of a sync run's child means, before the sync itself is
//! classified ([`crate::sync_plan::classify_sync_exit`] and the driver's
//! classifiers): the consent listing's verdict, the driver probe's answer,
//! and whether the next sync must reconcile.
//!
//! The rules:
//! - a listing that did not end with 0 in time is *inconclusive*, never
//!   "not indexed": nothing is created (consent), nothing is remembered,
//!   and the failure is said as what it is;
//! - so is a listing of another database than the graph's (CGC said it
//!   fell back to another backend: an empty KùzuDB lists nothing), unless
//!   it names the workspace anyway;
//! - a probe that gave no answer is an unavailable driver, with how it
//!   ended (the sync then reconciles);
//! - a driver run that may have left the graph partial (failed, out of
//!   time, stopped) makes the next sync reconcile; a driver success, or a
//!   reconcile or update that succeeded, clears that.

use crate::config::SyncStrategy;
use crate::freshness::SyncOutcome;
use crate::sync_plan::{listing_mentions_workspace, probe_answer, DriverResult};

/// How a child ended, as the supervisor reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChildEnd {
    /// Its output said CGC went on with another database backend than
    /// the configured one.
    pub fell_back: bool,
    /// Its exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
    /// The run's time budget ran out first.
    pub timed_out: bool,
    /// The run was cancelled.
    pub cancelled: bool,
}

/// What the consent listing (`cgc list`) says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListingVerdict {
    /// The run was cancelled meanwhile.
    Cancelled,
    /// The workspace is indexed.
    Indexed,
    /// The workspace is not indexed.
    NotIndexed,
    /// It could not be told; why, for the sync's failure.
    Inconclusive { error: String },
}

/// The listing's verdict on `workspace` from its `lines`, how it ended
/// (`end`, its budget `timeout_ms`) and its output's `tail`.
pub fn listing_verdict(
    workspace: &str,
    lines: &[String],
    end: ChildEnd,
    timeout_ms: u64,
    tail: &str,
) -> ListingVerdict {
    if end.cancelled {
        return ListingVerdict::Cancelled;
    }
    if end.code != Some(0) || end.timed_out {
        let how = if end.timed_out {
            format!("timed out after {timeout_ms} ms")
        } else {
            match (end.code, end.signal) {
                (Some(code), _) => format!("exited with code {code}"),
                (None, Some(signal)) => format!("was killed by signal {signal}"),
                (None, None) => "ended without a status".to_string(),
            }
        };
        let mut error = format!("could not tell whether {workspace} is indexed: `cgc list` {how}");
        let tail = tail.trim();
        if !tail.is_empty() {
            error.push_str("; output ends: ");
            error.push_str(tail);
        }
        return ListingVerdict::Inconclusive { error };
    }
    if listing_mentions_workspace(lines.iter().map(String::as_str), workspace) {
        ListingVerdict::Indexed
    } else if end.fell_back {
        ListingVerdict::Inconclusive {
            error: format!(
                "could not tell whether {workspace} is indexed: `cgc list` read another \
                 database backend than the graph's (the configured one did not start)"
            ),
        }
    } else {
        ListingVerdict::NotIndexed
    }
}

/// The driver probe's answer: `Ok` with a note when the CGC version is
/// unproven but allowed, `Err` with why the driver is unavailable.
pub fn probe_verdict(
    result: Option<&DriverResult>,
    end: ChildEnd,
    timeout_ms: u64,
    tail: &str,
) -> Result<Option<String>, String> {
    if let Some(answer) = probe_answer(result, end.code) {
        return answer;
    }
    if end.timed_out {
        return Err(format!(
            "its API probe gave no answer within {timeout_ms} ms"
        ));
    }
    let how = match (end.code, end.signal) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        (None, None) => "no status".to_string(),
    };
    Err(format!("its API probe ended with {how}{}", last_line(tail)))
}

/// ` (last output: …)` for a message, or nothing.
pub fn last_line(tail: &str) -> String {
    match tail.lines().rev().find(|line| !line.trim().is_empty()) {
        Some(line) => format!(" (last output: {})", line.trim()),
        None => String::new(),
    }
}

/// What a sync's outcome does to "the next sync must reconcile".
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextReconcile {
    /// Leave it as it is.
    Unchanged,
    /// The graph is whole again: clear it.
    Clear,
    /// The graph may be partial: the next sync reconciles, for this reason.
    Require(String),
}

/// After the driver's run ended with `outcome`.
pub fn after_driver(outcome: &SyncOutcome) -> NextReconcile {
    match outcome {
        SyncOutcome::Succeeded => NextReconcile::Clear,
        SyncOutcome::Busy { .. } | SyncOutcome::NotApplied { .. } => NextReconcile::Unchanged,
        SyncOutcome::Failed { error } | SyncOutcome::TimedOut { error } => NextReconcile::Require(
            format!("the last incremental sync did not finish ({error})"),
        ),
        SyncOutcome::Cancelled => NextReconcile::Require(
            "the last incremental sync was stopped before it finished".into(),
        ),
    }
}

/// After a command of `strategy` ended with `outcome`: only a whole
/// reconcile or update that succeeded makes the graph whole.
pub fn after_command(strategy: &SyncStrategy, outcome: &SyncOutcome) -> NextReconcile {
    let whole = matches!(strategy, SyncStrategy::Reconcile | SyncStrategy::Update);
    if whole && *outcome == SyncOutcome::Succeeded {
        NextReconcile::Clear
    } else {
        NextReconcile::Unchanged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WS: &str = "/home/u/proj";

    fn exited(code: i32) -> ChildEnd {
        ChildEnd {
            code: Some(code),
            ..ChildEnd::default()
        }
    }

    fn listing(rows: &[&str]) -> Vec<String> {
        rows.iter().map(|r| r.to_string()).collect()
    }

    #[test]
    fn a_listing_that_names_the_workspace_says_indexed() {
        let lines = listing(&["│ proj │ /home/u/proj │ 12 │"]);
        assert_eq!(
            listing_verdict(WS, &lines, exited(0), 1000, ""),
            ListingVerdict::Indexed
        );
        let other = listing(&["│ x │ /home/u/other │ 1 │"]);
        assert_eq!(
            listing_verdict(WS, &other, exited(0), 1000, ""),
            ListingVerdict::NotIndexed
        );
    }

    #[test]
    fn a_listing_that_failed_is_inconclusive_never_not_indexed() {
        let empty = listing(&["No repositories indexed yet."]);
        match listing_verdict(WS, &empty, exited(1), 1000, " boom \n") {
            ListingVerdict::Inconclusive { error } => assert_eq!(
                error,
                "could not tell whether /home/u/proj is indexed: `cgc list` exited with code 1; \
                 output ends: boom"
            ),
            other => panic!("{other:?}"),
        }
        let timed_out = ChildEnd {
            code: Some(0),
            timed_out: true,
            ..ChildEnd::default()
        };
        assert!(matches!(
            listing_verdict(WS, &empty, timed_out, 1500, ""),
            ListingVerdict::Inconclusive { error } if error.ends_with("timed out after 1500 ms")
        ));
        let killed = ChildEnd {
            signal: Some(9),
            ..ChildEnd::default()
        };
        assert!(matches!(
            listing_verdict(WS, &empty, killed, 1500, ""),
            ListingVerdict::Inconclusive { error } if error.ends_with("was killed by signal 9")
        ));
        let cancelled = ChildEnd {
            cancelled: true,
            ..exited(0)
        };
        assert_eq!(
            listing_verdict(WS, &empty, cancelled, 1500, ""),
            ListingVerdict::Cancelled
        );
    }

    #[test]
    fn a_listing_of_another_backend_is_inconclusive_unless_it_names_the_workspace() {
        let fell_back = ChildEnd {
            fell_back: true,
            ..exited(0)
        };
        let empty = listing(&["No repositories indexed yet."]);
        assert!(matches!(
            listing_verdict(WS, &empty, fell_back, 1000, ""),
            ListingVerdict::Inconclusive { error } if error.contains("another database backend")
        ));
        let named = listing(&["│ proj │ /home/u/proj │ 12 │"]);
        assert_eq!(
            listing_verdict(WS, &named, fell_back, 1000, ""),
            ListingVerdict::Indexed
        );
    }

    #[test]
    fn a_probe_without_an_answer_says_how_it_ended() {
        assert_eq!(
            probe_verdict(None, exited(2), 1000, "a\nlast words\n\n"),
            Err("its API probe ended with exit code 2 (last output: last words)".into())
        );
        let timed_out = ChildEnd {
            timed_out: true,
            ..ChildEnd::default()
        };
        assert_eq!(
            probe_verdict(None, timed_out, 1000, ""),
            Err("its API probe gave no answer within 1000 ms".into())
        );
        let answered = DriverResult {
            protocol: Some(crate::sync_plan::DRIVER_PROTOCOL),
            ok: true,
            ..DriverResult::default()
        };
        assert_eq!(
            probe_verdict(Some(&answered), exited(0), 1000, ""),
            Ok(None)
        );
    }

    #[test]
    fn a_driver_of_another_protocol_is_not_run() {
        for protocol in [None, Some(0), Some(2)] {
            let answered = DriverResult {
                protocol,
                ok: true,
                ..DriverResult::default()
            };
            let verdict = probe_verdict(Some(&answered), exited(0), 1000, "");
            assert!(
                matches!(&verdict, Err(why) if why.contains("this service speaks 1")),
                "{protocol:?}: {verdict:?}"
            );
        }
    }

    #[test]
    fn a_driver_run_that_may_have_left_the_graph_partial_requires_a_reconcile() {
        assert_eq!(after_driver(&SyncOutcome::Succeeded), NextReconcile::Clear);
        assert!(matches!(
            after_driver(&SyncOutcome::Failed { error: "x".into() }),
            NextReconcile::Require(why) if why.contains("(x)")
        ));
        assert!(matches!(
            after_driver(&SyncOutcome::TimedOut { error: "t".into() }),
            NextReconcile::Require(_)
        ));
        assert!(matches!(
            after_driver(&SyncOutcome::Cancelled),
            NextReconcile::Require(_)
        ));
        assert_eq!(
            after_driver(&SyncOutcome::Busy {
                holder: "pid 1".into()
            }),
            NextReconcile::Unchanged
        );
    }

    #[test]
    fn only_a_whole_sync_that_succeeded_clears_the_reconcile() {
        let ok = SyncOutcome::Succeeded;
        assert_eq!(
            after_command(&SyncStrategy::Reconcile, &ok),
            NextReconcile::Clear
        );
        assert_eq!(
            after_command(&SyncStrategy::Update, &ok),
            NextReconcile::Clear
        );
        assert_eq!(
            after_command(&SyncStrategy::Index, &ok),
            NextReconcile::Unchanged
        );
        let failed = SyncOutcome::Failed { error: "x".into() };
        assert_eq!(
            after_command(&SyncStrategy::Reconcile, &failed),
            NextReconcile::Unchanged
        );
    }
}
