//! What a sync runs, and what its ending means — as pure functions, so the
//! rule that turns a `cgc` exit into a claim about the graph is tested
//! without a process.
//!
//! On CGC 0.6.13 `cgc index .` skips an indexed repository and applies no
//! edits; only `cgc watch --sync-on-start .` (stopped once it is ready) and
//! `cgc update .` bring an indexed graph up to date. See the strategies.

use crate::config::SyncStrategy;
use crate::freshness::SyncOutcome;

/// The argv (after the executable) for one sync: global flags first, since
/// CGC's `--db`/`--db-path`/`--context` are root options.
pub fn sync_argv(strategy: &SyncStrategy, global_args: &[String]) -> Vec<String> {
    let mut argv = global_args.to_vec();
    match strategy {
        SyncStrategy::Reconcile => argv.extend(["watch", "--sync-on-start", "."].map(String::from)),
        SyncStrategy::Update => argv.extend(["update", ".", "--quiet"].map(String::from)),
        SyncStrategy::Index => argv.extend(["index", "."].map(String::from)),
        SyncStrategy::Custom(args) => argv.extend(args.iter().cloned()),
    }
    argv
}

/// The argv that lists indexed repositories (the consent check).
pub fn list_argv(global_args: &[String]) -> Vec<String> {
    let mut argv = global_args.to_vec();
    argv.push("list".into());
    argv
}

/// Whether `cgc list` output names `workspace` as an indexed repository.
/// The listing is a table; a row holds the path as a whole cell.
pub fn listing_mentions_workspace<'a>(
    lines: impl IntoIterator<Item = &'a str>,
    workspace: &str,
) -> bool {
    let workspace = workspace.trim_end_matches('/');
    lines.into_iter().any(|line| {
        line.split(['│', '|', '┃'])
            .map(str::trim)
            .any(|cell| cell.trim_end_matches('/') == workspace)
    })
}

/// True for CGC's "already indexed … Skipping." line of `cgc index`.
pub fn is_index_skip_line(line: &str) -> bool {
    line.contains("already indexed") && line.contains("Skipping")
}

/// What the shell observed about one sync run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncRunFacts {
    /// Exit code, when it exited (not killed by a signal).
    pub exit_code: Option<i32>,
    /// The signal that killed it, if any.
    pub signal: Option<i32>,
    /// `watch` printed its ready line.
    pub saw_ready: bool,
    /// `index` said it skipped an indexed repository.
    pub skipped_indexed: bool,
    /// The output carried CGC's embedded-database lock error.
    pub lock_error: bool,
    /// The time budget ran out and the group was stopped.
    pub timed_out: bool,
    /// The run was cancelled (its session ended).
    pub cancelled: bool,
    /// Who holds the database lock, if a probe after the failure found one.
    pub lock_holder: Option<String>,
    /// The last lines of output, for the record.
    pub output_tail: String,
    /// The time budget, for the message.
    pub timeout_ms: u64,
}

/// Turns an ended run into the outcome the freshness machine judges.
/// Only a run that did what the strategy promises is `Succeeded`.
pub fn classify_sync_exit(strategy: &SyncStrategy, facts: &SyncRunFacts) -> SyncOutcome {
    let how = describe_exit(facts);
    let with_tail = |head: String| {
        let tail = facts.output_tail.trim();
        if tail.is_empty() {
            head
        } else {
            format!("{head}; output ends: {tail}")
        }
    };
    if facts.cancelled {
        return SyncOutcome::Cancelled;
    }
    if facts.timed_out {
        return SyncOutcome::TimedOut {
            error: with_tail(format!(
                "no result within {} ms; stopped ({how})",
                facts.timeout_ms
            )),
        };
    }
    if facts.lock_error {
        let holder = facts
            .lock_holder
            .clone()
            .unwrap_or_else(|| "another CGC process (CGC reported the database lock)".into());
        return SyncOutcome::Busy { holder };
    }
    let exited_ok = facts.exit_code == Some(0);
    match strategy {
        SyncStrategy::Reconcile if exited_ok && facts.saw_ready => SyncOutcome::Succeeded,
        SyncStrategy::Reconcile if exited_ok => SyncOutcome::Failed {
            error: with_tail(
                "cgc watch --sync-on-start exited before it reported the graph synchronised".into(),
            ),
        },
        SyncStrategy::Index if exited_ok && facts.skipped_indexed => SyncOutcome::NotApplied {
            detail: "cgc index skipped the already indexed repository: edits were not applied \
                     (use the reconcile or update strategy)"
                .into(),
        },
        _ if exited_ok => SyncOutcome::Succeeded,
        _ => SyncOutcome::Failed {
            error: with_tail(format!("cgc {how}")),
        },
    }
}

fn describe_exit(facts: &SyncRunFacts) -> String {
    match (facts.exit_code, facts.signal) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => "ended".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn global_args_go_before_the_subcommand() {
        let global = args(&["--db", "kuzudb"]);
        assert_eq!(
            sync_argv(&SyncStrategy::Reconcile, &global),
            args(&["--db", "kuzudb", "watch", "--sync-on-start", "."])
        );
        assert_eq!(
            sync_argv(&SyncStrategy::Update, &global),
            args(&["--db", "kuzudb", "update", ".", "--quiet"])
        );
        assert_eq!(sync_argv(&SyncStrategy::Index, &[]), args(&["index", "."]));
        assert_eq!(
            sync_argv(
                &SyncStrategy::Custom(args(&["index", ".", "--force"])),
                &global
            ),
            args(&["--db", "kuzudb", "index", ".", "--force"])
        );
        assert_eq!(list_argv(&global), args(&["--db", "kuzudb", "list"]));
    }

    #[test]
    fn reconcile_succeeds_only_after_the_ready_line_and_exit_0() {
        let ok = SyncRunFacts {
            exit_code: Some(0),
            saw_ready: true,
            ..Default::default()
        };
        assert_eq!(
            classify_sync_exit(&SyncStrategy::Reconcile, &ok),
            SyncOutcome::Succeeded
        );
        let early = SyncRunFacts {
            exit_code: Some(0),
            saw_ready: false,
            ..Default::default()
        };
        assert!(matches!(
            classify_sync_exit(&SyncStrategy::Reconcile, &early),
            SyncOutcome::Failed { .. }
        ));
        let failed = SyncRunFacts {
            exit_code: Some(1),
            saw_ready: true,
            output_tail: "boom".into(),
            ..Default::default()
        };
        match classify_sync_exit(&SyncStrategy::Reconcile, &failed) {
            SyncOutcome::Failed { error } => assert!(
                error.contains("code 1") && error.contains("boom"),
                "{error}"
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn index_that_skipped_is_not_applied_never_success() {
        let skipped = SyncRunFacts {
            exit_code: Some(0),
            skipped_indexed: true,
            ..Default::default()
        };
        assert!(matches!(
            classify_sync_exit(&SyncStrategy::Index, &skipped),
            SyncOutcome::NotApplied { .. }
        ));
        let ran = SyncRunFacts {
            exit_code: Some(0),
            ..Default::default()
        };
        assert_eq!(
            classify_sync_exit(&SyncStrategy::Index, &ran),
            SyncOutcome::Succeeded
        );
    }

    #[test]
    fn lock_error_is_busy_not_failure_and_timeout_and_cancel_win() {
        let busy = SyncRunFacts {
            exit_code: Some(1),
            lock_error: true,
            lock_holder: Some("pid 9: cgc watch .".into()),
            ..Default::default()
        };
        assert_eq!(
            classify_sync_exit(&SyncStrategy::Update, &busy),
            SyncOutcome::Busy {
                holder: "pid 9: cgc watch .".into()
            }
        );
        let timed = SyncRunFacts {
            signal: Some(2),
            timed_out: true,
            timeout_ms: 5,
            ..Default::default()
        };
        assert!(matches!(
            classify_sync_exit(&SyncStrategy::Update, &timed),
            SyncOutcome::TimedOut { .. }
        ));
        let cancelled = SyncRunFacts {
            cancelled: true,
            timed_out: true,
            ..Default::default()
        };
        assert_eq!(
            classify_sync_exit(&SyncStrategy::Update, &cancelled),
            SyncOutcome::Cancelled
        );
        let killed = SyncRunFacts {
            signal: Some(9),
            ..Default::default()
        };
        assert!(matches!(
            classify_sync_exit(&SyncStrategy::Update, &killed),
            SyncOutcome::Failed { .. }
        ));
    }

    #[test]
    fn listing_matches_whole_path_cells_only() {
        let table = [
            "┏━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━┓",
            "│ ws   │ /tmp/lt/ws │ Project │",
        ];
        assert!(listing_mentions_workspace(table, "/tmp/lt/ws"));
        assert!(!listing_mentions_workspace(table, "/tmp/lt"));
        assert!(!listing_mentions_workspace(table, "/tmp/lt/ws2"));
    }

    #[test]
    fn index_skip_line_is_recognised() {
        assert!(is_index_skip_line(
            "Repository '.' is already indexed with 50 files. Skipping."
        ));
        assert!(!is_index_skip_line(
            "Repository '.' has only 50 of 51 files indexed. Continuing."
        ));
    }
}
