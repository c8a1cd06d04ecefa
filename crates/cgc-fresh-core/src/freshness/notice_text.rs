//! The words of the notices: written for the person at the harness.
//!
//! Spec, "One-time human-facing staleness notices": notices are for people
//! and MUST NOT be placed into the agent's context or prompt. Each says what
//! happened, to which workspace, and what the person can do about it.
//! Facts that come from outside (errors, lock holders) are clipped so a
//! notice stays a line or two.

use crate::freshness::SyncCost;
use cgc_fresh_proto::{NoticeCondition, NoticeLevel};

/// The longest excerpt of an outside fact (error text, holder) a notice
/// quotes, in characters.
const MAX_FACT_CHARS: usize = 300;

/// How the person can sync by hand.
const SYNC_HINT: &str = "run `cgc-fresh sync` (or `/cgc-fresh sync` in the agent)";

/// How loud the notice for `condition` is.
pub fn level(condition: NoticeCondition) -> NoticeLevel {
    match condition {
        NoticeCondition::PossiblyStale
        | NoticeCondition::SyncCompleted
        | NoticeCondition::WatcherStarted => NoticeLevel::Info,
        NoticeCondition::SyncFailed
        | NoticeCondition::WatcherNotVerified
        | NoticeCondition::WatcherDied
        | NoticeCondition::StateWriteFailed => NoticeLevel::Error,
        NoticeCondition::SyncSkippedBusy
        | NoticeCondition::SyncNotApplied
        | NoticeCondition::SyncDeclinedUnindexed
        | NoticeCondition::BudgetExhausted
        | NoticeCondition::WatcherDeclinedBackend
        | NoticeCondition::WatcherDeclinedUnindexed
        | NoticeCondition::WatcherSkippedBusy
        | NoticeCondition::SyncStrategyFellBack => NoticeLevel::Warning,
    }
}

/// An edit made the graph possibly stale.
pub fn possibly_stale(workspace: &str, tool: &str, auto_sync: bool) -> String {
    let next = if auto_sync {
        format!("A background sync follows shortly; to sync now, {SYNC_HINT}.")
    } else {
        format!("Automatic sync is off; to update the graph, {SYNC_HINT}.")
    };
    format!(
        "The code graph of {workspace} may be stale: `{}` edited files. {next}",
        clip(tool)
    )
}

/// A sync completed after every observed edit.
pub fn sync_completed(workspace: &str) -> String {
    format!("The code graph of {workspace} is up to date with every observed edit.")
}

/// The configured strategy could not run; a full reconcile ran instead.
pub fn strategy_fell_back(workspace: &str, reason: &str) -> String {
    format!(
        "The fast incremental sync of {workspace} is not available ({}); syncs run a full \
         reconcile instead, which is exact but re-reads the whole repository.",
        clip(reason)
    )
}

/// A sync was skipped because another process holds the database.
pub fn sync_skipped_busy(workspace: &str, holder: &str) -> String {
    format!(
        "Sync of {workspace} skipped: the graph database is held by another process ({}). \
         Nothing was indexed and the graph may be stale; once it is free, {SYNC_HINT}.{}",
        clip(holder),
        mcp_server_hint(holder)
    )
}

/// A sync failed or timed out.
pub fn sync_failed(workspace: &str, error: &str, another_attempt_follows: bool) -> String {
    let next = if another_attempt_follows {
        "Another attempt follows."
    } else {
        "No automatic retry follows."
    };
    format!(
        "Sync of {workspace} failed: {}. The graph may be stale. {next} To try again, {SYNC_HINT}.",
        clip(error)
    )
}

/// A sync ran but applied nothing.
pub fn sync_not_applied(workspace: &str, detail: &str) -> String {
    format!(
        "Sync of {workspace} ran but applied no changes ({}), so the graph may still be stale. \
         The `reconcile` sync strategy (`cgc.syncStrategy`) applies edits to an indexed workspace.",
        clip(detail)
    )
}

/// A sync was not started (e.g. the workspace has no index and creating one
/// needs consent).
pub fn sync_declined(workspace: &str, reason: &str) -> String {
    format!(
        "No sync of {workspace} was started: {}. The graph is not updated.",
        clip(reason)
    )
}

/// A session used up its automatic syncs of a class (`cost`): the sync its
/// edits need is of that class.
pub fn budget_exhausted(workspace: &str, cost: SyncCost, max_syncs: u32) -> String {
    let syncs = if max_syncs == 1 { "sync" } else { "syncs" };
    let kind = match cost {
        SyncCost::WholeRepository => "whole-repository",
        SyncCost::ChangedFiles => "incremental",
    };
    format!(
        "This session has used its {max_syncs} automatic {kind} {syncs} of {workspace} \
         (`{}`); the code graph stays possibly stale. To update it, {SYNC_HINT}.",
        cost.key()
    )
}

/// A watcher was verified alive and now keeps the graph current.
pub fn watcher_started(workspace: &str, pid: u32) -> String {
    format!(
        "A CGC watcher (`cgc watch`, pid {pid}) now keeps the code graph of {workspace} current; \
         edits need no sync while it runs. It stops when this session ends."
    )
}

/// `auto` mode declined the watcher because of the backend.
pub fn watcher_declined_backend(workspace: &str, answer: &str) -> String {
    format!(
        "No watcher was started for {workspace}: `freshness.watch` is `auto` and the graph \
         backend is {}, which is not a server backend (neo4j, falkordb-remote). Edits are synced \
         lazily instead. To watch anyway, set `freshness.watch` to `on` (the watcher then holds \
         an embedded database's lock while it runs).",
        clip(answer)
    )
}

/// `auto` mode declined the watcher because the workspace has no index.
pub fn watcher_declined_unindexed(workspace: &str) -> String {
    format!(
        "No watcher was started for {workspace}: the workspace has no code graph index yet \
         (no `.codegraphcontext/`), and `auto` watching never creates one. To index it, run \
         `cgc index .` in the workspace; the watcher is considered again next session."
    )
}

/// The watcher failed (or could not be spawned) before it was verified.
pub fn watcher_not_verified(workspace: &str, error: &str) -> String {
    format!(
        "The watcher for {workspace} failed before it was verified: {}. The graph is not claimed \
         fresh; edits are synced lazily instead, and the watcher is tried again next session. \
         To sync now, {SYNC_HINT}.",
        clip(error)
    )
}

/// The verified watcher exited.
pub fn watcher_died(workspace: &str, error: &str, sync_follows: bool) -> String {
    let next = if sync_follows {
        "A background sync follows shortly."
    } else {
        "No automatic sync follows."
    };
    format!(
        "The watcher for {workspace} exited: {}. The code graph may be stale from now on; edits \
         are synced lazily again. {next} To sync now, {SYNC_HINT}; the watcher is tried again \
         next session.",
        clip(error)
    )
}

/// The watcher was stopped because restarting it did not catch up with
/// the edits made while it started up.
pub fn watcher_given_up(workspace: &str, reason: &str, sync_follows: bool) -> String {
    let next = if sync_follows {
        "A background sync follows shortly."
    } else {
        "No automatic sync follows."
    };
    format!(
        "The watcher for {workspace} was stopped: {}. The code graph may be stale; edits are \
         synced lazily from now on. {next} To sync now, {SYNC_HINT}; the watcher is tried again \
         next session.",
        clip(reason)
    )
}

/// The verified watcher has not applied every edit within
/// `freshness.watcherApplyMs`: a stale episode under the watcher.
pub fn watcher_lagging(workspace: &str, files: usize, bound_ms: u64) -> String {
    format!(
        "The code graph of {workspace} may be stale: the watcher has not applied {files} edited \
         file(s) within {} s. It is still running; the graph is reported fresh again once it \
         has applied them.",
        seconds(bound_ms)
    )
}

/// The watcher was not started because another process holds the database.
pub fn watcher_skipped_busy(workspace: &str, holder: &str) -> String {
    format!(
        "No watcher was started for {workspace}: the graph database is held by another process \
         ({}). Edits are synced lazily instead; the watcher is tried again next session.{}",
        clip(holder),
        mcp_server_hint(holder)
    )
}

/// What to do when the holder is CGC's own MCP server: it holds the
/// embedded database for its whole life, so every sync of the session
/// would be skipped — waiting does not help, replacing it does.
fn mcp_server_hint(holder: &str) -> &'static str {
    if is_cgc_mcp_server(holder) {
        " That process is CGC's MCP server, which holds the database for as long as it runs: \
         configure `cgc-fresh mcp` in its place (the same tools, without holding the database; \
         `cgc-fresh install --harness claude-code` does it for Claude Code)."
    } else {
        ""
    }
}

/// Whether a holder description (`pid 7: /venv/bin/python /venv/bin/cgc
/// mcp start`) is CGC's MCP server: a `cgc` or `codegraphcontext`
/// program word followed, later on the line, by the words `mcp start`.
pub fn is_cgc_mcp_server(holder: &str) -> bool {
    let words: Vec<&str> = holder.split_whitespace().collect();
    let Some(program) = words.iter().position(|word| {
        let name = word.rsplit('/').next().unwrap_or(word);
        matches!(name, "cgc" | "codegraphcontext")
    }) else {
        return false;
    };
    words[program + 1..]
        .windows(2)
        .any(|pair| pair == ["mcp", "start"])
}

/// Milliseconds as seconds for people: `30`, `1.5`.
fn seconds(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        (ms / 1000).to_string()
    } else {
        format!("{:.1}", ms as f64 / 1000.0)
    }
}

/// `fact` cut to [`MAX_FACT_CHARS`] characters, on one line.
fn clip(fact: &str) -> String {
    let one_line: String = fact
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= MAX_FACT_CHARS {
        return one_line;
    }
    let mut clipped: String = one_line.chars().take(MAX_FACT_CHARS).collect();
    clipped.push('…');
    clipped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_condition_has_a_level() {
        for condition in NoticeCondition::ALL {
            let _ = level(condition);
        }
        assert_eq!(level(NoticeCondition::SyncFailed), NoticeLevel::Error);
        assert_eq!(level(NoticeCondition::SyncCompleted), NoticeLevel::Info);
    }

    #[test]
    fn stale_text_names_the_workspace_the_cause_and_the_remedy() {
        let text = possibly_stale("/home/ann/proj", "edit", true);
        assert!(text.contains("/home/ann/proj"), "{text}");
        assert!(text.contains("`edit`"), "{text}");
        assert!(text.contains("cgc-fresh sync"), "{text}");
        assert!(text.contains("/cgc-fresh sync"), "{text}");
        assert!(possibly_stale("/w", "edit", false).contains("Automatic sync is off"));
    }

    #[test]
    fn busy_text_names_the_holder() {
        let text = sync_skipped_busy("/w", "pid 4242: cgc watch .");
        assert!(text.contains("pid 4242: cgc watch ."), "{text}");
    }

    #[test]
    fn outside_facts_are_clipped_to_one_short_line() {
        let error = format!("line one\nline two {}", "x".repeat(1_000));
        let text = sync_failed("/w", &error, false);
        assert!(!text.contains('\n'), "{text}");
        assert!(text.contains('…'), "{text}");
        assert!(text.chars().count() < 500, "{text}");
    }

    #[test]
    fn watcher_texts_name_the_workspace_and_the_cause() {
        let texts = [
            watcher_started("/w", 4242),
            watcher_declined_backend("/w", "kuzudb (environment DEFAULT_DATABASE)"),
            watcher_declined_unindexed("/w"),
            watcher_not_verified("/w", "exit status 1: Database Configuration Error"),
            watcher_died("/w", "killed by signal 9", true),
            watcher_skipped_busy("/w", "pid 7: cgc mcp start"),
        ];
        for text in &texts {
            assert!(text.contains("/w"), "{text}");
            assert!(!text.contains('\n'), "{text}");
        }
        assert!(texts[0].contains("pid 4242"));
        assert!(texts[1].contains("kuzudb (environment DEFAULT_DATABASE)"));
        assert!(texts[1].contains("`on`"), "what the person can do");
        assert!(texts[2].contains("cgc index ."));
        assert!(texts[3].contains("Database Configuration Error"));
        assert!(texts[3].contains("cgc-fresh sync"));
        assert!(texts[4].contains("killed by signal 9"));
        assert!(texts[4].contains("background sync follows"));
        assert!(watcher_died("/w", "x", false).contains("No automatic sync follows"));
        assert!(texts[5].contains("pid 7: cgc mcp start"));
        assert!(texts[5].contains("`cgc-fresh mcp`"), "{}", texts[5]);
    }

    #[test]
    fn a_busy_text_about_cgcs_mcp_server_says_what_to_use_instead() {
        let holder = "pid 7: /opt/venv/bin/python3 /opt/venv/bin/cgc mcp start";
        let text = sync_skipped_busy("/w", holder);
        assert!(
            text.contains("configure `cgc-fresh mcp` in its place"),
            "{text}"
        );
        assert!(
            text.contains("cgc-fresh install --harness claude-code"),
            "{text}"
        );
        for other in [
            "pid 7: cgc watch .",
            "pid 7: /opt/venv/bin/cgc index .",
            "pid 7: my-mcp start cgc",
            "pid 7: [cgc]",
            "pid 7",
        ] {
            assert!(!is_cgc_mcp_server(other), "{other}");
            assert!(
                !sync_skipped_busy("/w", other).contains("cgc-fresh mcp"),
                "{other}"
            );
        }
        assert!(is_cgc_mcp_server("pid 9: codegraphcontext mcp start"));
        assert!(is_cgc_mcp_server("pid 9: cgc --database kuzudb mcp start"));
    }

    #[test]
    fn budget_text_counts_syncs() {
        let whole = budget_exhausted("/w", SyncCost::WholeRepository, 1);
        assert!(
            whole.contains("1 automatic whole-repository sync of"),
            "{whole}"
        );
        assert!(whole.contains("`freshness.maxSyncsPerSession`"), "{whole}");
        let changed = budget_exhausted("/w", SyncCost::ChangedFiles, 500);
        assert!(
            changed.contains("500 automatic incremental syncs of"),
            "{changed}"
        );
        assert!(
            changed.contains("`freshness.maxIncrementalSyncsPerSession`"),
            "{changed}"
        );
    }
}
