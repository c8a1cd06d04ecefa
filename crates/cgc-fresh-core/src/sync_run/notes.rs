//! What a run says it runs, for the status `detail` the person reads:
//! the strategy, why it is not the configured one, and (for the driver)
//! how many files or which baseline, and whether the CGC version is
//! unproven.

use super::{ProbeAnswer, DRIVER_UNAVAILABLE};
use crate::config::SyncStrategy;

/// What the run says it runs, for the status `detail`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrategyNote {
    pub note: String,
    /// It is not the configured strategy.
    pub fallback: bool,
    /// The fallback is because the driver is unavailable.
    pub driver_unavailable: bool,
}

/// The note of a `strategy` command, with the reason it replaces
/// `incremental`.
pub fn command_note(strategy: &SyncStrategy, fallback: Option<&str>) -> StrategyNote {
    let note = match fallback {
        Some(reason) => format!("sync strategy {strategy} (instead of incremental: {reason})"),
        None => format!("sync strategy {strategy}"),
    };
    StrategyNote {
        note,
        fallback: fallback.is_some(),
        driver_unavailable: fallback.is_some_and(|reason| reason.starts_with(DRIVER_UNAVAILABLE)),
    }
}

/// The note of a driver run on `files` changed files, or from a
/// `baseline`; on a CGC the driver was not proven against (the person
/// allowed it, the probe's note), every sync says so.
pub fn driver_note(
    files: usize,
    baseline: Option<&str>,
    probe: Option<&ProbeAnswer>,
) -> StrategyNote {
    let unproven = match probe {
        Some(Ok(Some(note))) => format!("; {note}"),
        _ => String::new(),
    };
    let note = match baseline {
        Some(reason) => format!(
            "sync strategy incremental from a baseline: the changed files are found by \
             comparing the graph with the tree ({reason}{unproven})"
        ),
        None => format!("sync strategy incremental ({files} changed file(s){unproven})"),
    };
    StrategyNote {
        note,
        fallback: false,
        driver_unavailable: false,
    }
}
