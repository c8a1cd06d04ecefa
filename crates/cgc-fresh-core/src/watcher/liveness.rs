//! Liveness verification of the managed watcher: the stabilization probe.
//!
//! The spec: after spawning the watcher, verify it is alive and watching
//! within `freshness.watcherLivenessMs` — verifiably, "the watcher child
//! survives a bounded stabilization probe without settling as failed" —
//! and never record `fresh` for a watcher that dies or fails during it.
//!
//! CGC's watcher is *watching* only once it printed its ready line (after
//! its start-up reconcile of `--sync-on-start`: before it, edits are not
//! observed). So a watcher is verified when it printed the ready line
//! **and** stayed alive for the probe after it:
//!
//! - the probe lasts [`WATCHER_STABILIZATION`], at most the liveness
//!   budget itself;
//! - when the ready line comes early, the probe ends within the liveness
//!   budget counted from the spawn (the spec's "within
//!   `watcherLivenessMs`");
//! - when the ready line comes after the budget (a start-up reconcile of a
//!   large repository outlasts it: our documented extension, bounded by
//!   `cgc.maintenanceTimeoutMs`), the probe still follows the line.
//!
//! A watcher that exits before its probe ended was never verified: its
//! exit is a failed verification (`not_verified`), not a death.

use std::time::Duration;

/// How long a watcher must stay alive after its ready line (at most; see
/// [`stabilization_probe`]).
pub const WATCHER_STABILIZATION: Duration = Duration::from_secs(2);

/// How long after its ready line a watcher must stay alive before it is
/// verified, given when the line came (`ready_after_spawn`) and the
/// liveness budget.
pub fn stabilization_probe(ready_after_spawn: Duration, liveness: Duration) -> Duration {
    let probe = WATCHER_STABILIZATION.min(liveness);
    match liveness.checked_sub(ready_after_spawn) {
        Some(left) if !left.is_zero() => probe.min(left),
        _ => probe,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn an_early_ready_line_is_followed_by_the_whole_probe() {
        assert_eq!(stabilization_probe(MS(1_200), MS(15_000)), MS(2_000));
        assert_eq!(stabilization_probe(MS(0), MS(4_000)), MS(2_000));
    }

    #[test]
    fn the_probe_ends_within_the_budget_when_the_line_comes_early() {
        assert_eq!(stabilization_probe(MS(14_500), MS(15_000)), MS(500));
        assert_eq!(stabilization_probe(MS(100), MS(1_000)), MS(900));
    }

    #[test]
    fn a_short_budget_bounds_the_probe() {
        assert_eq!(stabilization_probe(MS(0), MS(300)), MS(300));
    }

    #[test]
    fn a_ready_line_after_the_budget_still_gets_a_probe() {
        assert_eq!(stabilization_probe(MS(15_000), MS(15_000)), MS(2_000));
        assert_eq!(stabilization_probe(MS(600_000), MS(15_000)), MS(2_000));
    }

    #[test]
    fn a_watcher_that_dies_half_a_second_after_its_ready_line_is_inside_the_probe() {
        // The case: ready at once, dead 0.5 s later, 4 s budget.
        assert!(stabilization_probe(MS(10), MS(4_000)) > MS(500));
    }
}
