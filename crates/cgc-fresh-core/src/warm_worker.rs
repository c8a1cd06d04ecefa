//! Whether to start the incremental driver's worker when a session begins
//! (`Effect::WarmWorker`), before any edit asks for a sync.
//!
//! A cold first sync pays CodeGraphContext's import, the driver's API probe
//! and a parse of the whole tree on top of the edit's own work. Started at
//! session start, the worker does all three in the background — without
//! the database: the probe names the backend without opening it, and the
//! prepare parses and resolves the tree as it is — so the session's first
//! edit pays one warm sync.
//!
//! It is started only where it would serve the next sync: the incremental
//! strategy, no watcher owning freshness, no reconcile owed, no earlier
//! verdict that the driver cannot run here, and nothing of the runner's own
//! under way (a sync, an MCP call, a worker already running). With no
//! manifest too: the next sync is then a baseline (the worker compares the
//! graph with the tree), which the prepared tree serves as well. Whether
//! the workspace is indexed at all is asked by the warm-up's consent
//! listing, as the sync would ask it.

/// What the runner knows when a session begins.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WarmFacts {
    /// `cgc.syncStrategy` is `incremental`.
    pub incremental: bool,
    /// `freshness.autoSync`: without it no sync starts by itself.
    pub auto_sync: bool,
    /// `freshness.watch = "on"`: a watcher, not the worker, keeps the graph.
    pub watcher_mode_on: bool,
    /// The last driver run may have left the graph partial: the next sync
    /// reconciles.
    pub must_reconcile: bool,
    /// The driver's probe already answered no for these settings.
    pub probe_refused: bool,
    /// A worker runs already.
    pub worker_running: bool,
    /// A sync, an MCP request or an earlier warm-up is under way.
    pub busy: bool,
}

/// The runner's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarmWorker {
    /// Start the worker (and its probe, when none answered yet), then let
    /// it prepare the tree.
    Start,
    /// Start nothing, for this reason (logged).
    Skip(&'static str),
}

/// Decides whether a session's start warms the worker.
pub fn warm_worker_plan(facts: WarmFacts) -> WarmWorker {
    let skip = if !facts.auto_sync {
        Some("automatic syncs are off")
    } else if !facts.incremental {
        Some("the sync strategy is not incremental")
    } else if facts.watcher_mode_on {
        Some("a watcher keeps the graph")
    } else if facts.must_reconcile {
        Some("the next sync reconciles")
    } else if facts.probe_refused {
        Some("the driver cannot run here")
    } else if facts.worker_running {
        Some("a worker runs already")
    } else if facts.busy {
        Some("the runner is busy")
    } else {
        None
    };
    match skip {
        Some(reason) => WarmWorker::Skip(reason),
        None => WarmWorker::Start,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready() -> WarmFacts {
        WarmFacts {
            incremental: true,
            auto_sync: true,
            ..WarmFacts::default()
        }
    }

    #[test]
    fn an_incremental_workspace_with_automatic_syncs_warms_the_worker_manifest_or_not() {
        assert_eq!(warm_worker_plan(ready()), WarmWorker::Start);
    }

    #[test]
    fn nothing_starts_where_the_worker_would_not_serve_the_next_sync() {
        type Change = fn(&mut WarmFacts);
        let cases: [(&str, Change); 7] = [
            ("autoSync off", |f| f.auto_sync = false),
            ("another strategy", |f| f.incremental = false),
            ("a watcher", |f| f.watcher_mode_on = true),
            ("a reconcile is owed", |f| f.must_reconcile = true),
            ("the probe said no", |f| f.probe_refused = true),
            ("a worker runs", |f| f.worker_running = true),
            ("busy", |f| f.busy = true),
        ];
        for (what, change) in cases {
            let mut facts = ready();
            change(&mut facts);
            assert!(
                matches!(warm_worker_plan(facts), WarmWorker::Skip(_)),
                "{what}: {facts:?}"
            );
        }
    }

    #[test]
    fn with_automatic_syncs_off_the_reason_says_so_whatever_else_holds() {
        let facts = WarmFacts {
            auto_sync: false,
            ..WarmFacts::default()
        };
        assert_eq!(
            warm_worker_plan(facts),
            WarmWorker::Skip("automatic syncs are off")
        );
    }
}
