//! Progress of a long sync: which reports of a running sync reach the
//! person, and when (the design's §11: work that lasts longer than ~2 s
//! reports progress in the state frames).
//!
//! A sync reports steps — a [`SyncPhase`] and, where the phase counts
//! files, how many of how many are done — from two sources: the driver's
//! `CGC_FRESH_PROGRESS {json}` lines ([`parse_driver_progress`]) and CGC's
//! own reconcile, whose output the shell maps to a phase (CGC prints no
//! counts when its output is not a terminal). The [`ProgressGate`] decides
//! what a state frame shows:
//!
//! - nothing during a sync's first [`SHOW_AFTER_MS`]: a warm sync ends
//!   within it, and a progress line that appears for an instant only
//!   flickers;
//! - from then on the latest step, published at once when the phase
//!   changes and at most every [`REFRESH_MS`] while only the counts move
//!   (every subscriber gets a frame per publication; a file-by-file
//!   stream would be thousands of frames).
//!
//! Time is an input: the gate says when it next wants to be woken, and the
//! shell wakes it then.

use cgc_fresh_proto::{SyncPhase, SyncProgress};
use serde::Deserialize;

use crate::freshness::Millis;

/// How long a sync runs before its progress is shown.
pub const SHOW_AFTER_MS: u64 = 2_000;

/// The shortest gap between two publications within one phase.
pub const REFRESH_MS: u64 = 500;

/// The prefix of the driver's progress lines.
pub const DRIVER_PROGRESS_PREFIX: &str = "CGC_FRESH_PROGRESS ";

/// One report of a running sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgressStep {
    /// What it is doing.
    pub phase: SyncPhase,
    /// Files done and files to do in this phase, when the phase counts.
    pub counts: Option<(u64, u64)>,
}

impl ProgressStep {
    /// A step that counts nothing.
    pub const fn phase(phase: SyncPhase) -> Self {
        ProgressStep {
            phase,
            counts: None,
        }
    }

    /// A step with `done` of `total` files; `done` is capped at `total`
    /// (a report that says more were done than there are is not believed
    /// past the total).
    pub fn counted(phase: SyncPhase, done: u64, total: u64) -> Self {
        ProgressStep {
            phase,
            counts: Some((done.min(total), total)),
        }
    }
}

/// A driver progress line: its request's serial (`None` for the worker's
/// prepare, which parses ahead of the request that waits for it) and its
/// step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverProgress {
    /// The request the line is for.
    pub serial: Option<u64>,
    /// What it reports.
    pub step: ProgressStep,
}

#[derive(Deserialize)]
struct WireProgress {
    #[serde(default)]
    serial: Option<u64>,
    phase: String,
    #[serde(default)]
    done: Option<u64>,
    #[serde(default)]
    total: Option<u64>,
}

/// The driver's progress line `CGC_FRESH_PROGRESS {"serial": N, "phase":
/// "parsing", "done": 340, "total": 2032}`, if `line` is a well-formed one.
/// A phase this version does not know, or counts given by halves, make
/// the line not one (the sync goes on; only its progress is not shown).
pub fn parse_driver_progress(line: &str) -> Option<DriverProgress> {
    let json = line.trim_end().strip_prefix(DRIVER_PROGRESS_PREFIX)?;
    let wire: WireProgress = serde_json::from_str(json).ok()?;
    let phase = SyncPhase::from_wire(&wire.phase)?;
    let step = match (wire.done, wire.total) {
        (Some(done), Some(total)) => ProgressStep::counted(phase, done, total),
        (None, None) => ProgressStep::phase(phase),
        _ => return None,
    };
    Some(DriverProgress {
        serial: wire.serial,
        step,
    })
}

/// What one running sync has shown of its progress, and what it will show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressGate {
    since: Millis,
    latest: ProgressStep,
    shown: Option<(ProgressStep, Millis)>,
}

impl ProgressGate {
    /// A sync that started at `since` and has reported nothing yet.
    pub fn start(since: Millis) -> Self {
        ProgressGate {
            since,
            latest: ProgressStep::phase(SyncPhase::Starting),
            shown: None,
        }
    }

    /// The sync reported `step` at `now`: the progress to publish now, if
    /// any.
    pub fn observe(&mut self, step: ProgressStep, now: Millis) -> Option<SyncProgress> {
        self.latest = step;
        self.publish_due(now)
    }

    /// The wake-up the gate asked for ([`ProgressGate::next_wake`]) came
    /// at `now`: the progress to publish now, if any.
    pub fn wake(&mut self, now: Millis) -> Option<SyncProgress> {
        self.publish_due(now)
    }

    /// When the gate wants to be woken: at the end of the quiet start, or
    /// when a held-back step may be published; `None` when nothing waits.
    pub fn next_wake(&self) -> Option<Millis> {
        match self.shown {
            None => Some(self.shown_from()),
            Some((shown, _)) if shown == self.latest => None,
            Some((_, at)) => Some(Millis(at.get().saturating_add(REFRESH_MS))),
        }
    }

    /// What state frames show now (`None` before anything was published).
    pub fn shown(&self) -> Option<SyncProgress> {
        self.shown.map(|(step, _)| self.progress(step))
    }

    fn shown_from(&self) -> Millis {
        Millis(self.since.get().saturating_add(SHOW_AFTER_MS))
    }

    fn publish_due(&mut self, now: Millis) -> Option<SyncProgress> {
        if now < self.shown_from() {
            return None;
        }
        let due = match self.shown {
            None => true,
            Some((shown, _)) if shown == self.latest => false,
            Some((shown, _)) if shown.phase != self.latest.phase => true,
            Some((_, at)) => now.get() >= at.get().saturating_add(REFRESH_MS),
        };
        if !due {
            return None;
        }
        self.shown = Some((self.latest, now));
        Some(self.progress(self.latest))
    }

    fn progress(&self, step: ProgressStep) -> SyncProgress {
        SyncProgress {
            phase: step.phase,
            done: step.counts.map(|(done, _)| done),
            total: step.counts.map(|(_, total)| total),
            since: self.since.get(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const T0: u64 = 1_000_000;

    fn at(ms: u64) -> Millis {
        Millis(T0 + ms)
    }

    fn parsing(done: u64) -> ProgressStep {
        ProgressStep::counted(SyncPhase::Parsing, done, 2_032)
    }

    #[test]
    fn nothing_is_shown_during_the_first_two_seconds() {
        let mut gate = ProgressGate::start(at(0));
        assert_eq!(gate.observe(parsing(10), at(100)), None);
        assert_eq!(gate.observe(parsing(900), at(1_999)), None);
        assert_eq!(gate.shown(), None);
        assert_eq!(gate.next_wake(), Some(at(SHOW_AFTER_MS)));
    }

    #[test]
    fn the_latest_step_is_shown_when_the_quiet_start_ends() {
        let mut gate = ProgressGate::start(at(0));
        gate.observe(parsing(900), at(1_500));
        let shown = gate.wake(at(2_000)).expect("published at 2 s");
        assert_eq!(
            shown,
            SyncProgress {
                phase: SyncPhase::Parsing,
                done: Some(900),
                total: Some(2_032),
                since: T0,
            }
        );
        assert_eq!(gate.shown(), Some(shown));
        assert_eq!(gate.next_wake(), None, "nothing new waits");
    }

    #[test]
    fn a_sync_that_reported_nothing_shows_starting() {
        let mut gate = ProgressGate::start(at(0));
        let shown = gate.wake(at(2_500)).expect("published");
        assert_eq!(shown.phase, SyncPhase::Starting);
        assert_eq!((shown.done, shown.total), (None, None));
    }

    #[test]
    fn counts_within_a_phase_are_published_at_most_every_refresh() {
        let mut gate = ProgressGate::start(at(0));
        assert!(gate.observe(parsing(100), at(2_000)).is_some());
        assert_eq!(gate.observe(parsing(110), at(2_100)), None);
        assert_eq!(gate.observe(parsing(120), at(2_499)), None);
        assert_eq!(gate.next_wake(), Some(at(2_000 + REFRESH_MS)));
        let shown = gate.wake(at(2_500)).expect("the held-back count");
        assert_eq!(shown.done, Some(120));
        assert_eq!(
            gate.observe(parsing(130), at(3_000)).map(|p| p.done),
            Some(Some(130))
        );
    }

    #[test]
    fn a_new_phase_is_published_at_once() {
        let mut gate = ProgressGate::start(at(0));
        gate.observe(parsing(100), at(2_000));
        let shown = gate
            .observe(ProgressStep::phase(SyncPhase::Reading), at(2_010))
            .expect("a phase change is not held back");
        assert_eq!(shown.phase, SyncPhase::Reading);
        assert_eq!((shown.done, shown.total), (None, None));
    }

    #[test]
    fn an_unchanged_step_is_not_published_again() {
        let mut gate = ProgressGate::start(at(0));
        gate.observe(parsing(5), at(2_000));
        assert_eq!(gate.observe(parsing(5), at(9_000)), None);
        assert_eq!(gate.wake(at(9_000)), None);
    }

    #[test]
    fn counts_past_the_total_are_capped() {
        assert_eq!(
            ProgressStep::counted(SyncPhase::Writing, 9, 4).counts,
            Some((4, 4))
        );
    }

    #[test]
    fn a_driver_line_is_read_with_its_serial_and_counts() {
        let line =
            r#"CGC_FRESH_PROGRESS {"done": 340, "phase": "parsing", "serial": 7, "total": 2032}"#;
        assert_eq!(
            parse_driver_progress(line),
            Some(DriverProgress {
                serial: Some(7),
                step: parsing(340),
            })
        );
        let prepare = r#"CGC_FRESH_PROGRESS {"phase": "linking", "serial": null}"#;
        assert_eq!(
            parse_driver_progress(prepare),
            Some(DriverProgress {
                serial: None,
                step: ProgressStep::phase(SyncPhase::Linking),
            })
        );
    }

    #[test]
    fn malformed_driver_lines_are_not_progress() {
        for line in [
            r#"CGC_FRESH_RESULT {"phase": "parsing"}"#,
            r#"CGC_FRESH_PROGRESS {"phase": "dancing"}"#,
            r#"CGC_FRESH_PROGRESS {"phase": "parsing", "done": 3}"#,
            r#"CGC_FRESH_PROGRESS {"phase": "parsing", "total": 3}"#,
            r#"CGC_FRESH_PROGRESS {"phase": "parsing", "done": -1, "total": 3}"#,
            r#"CGC_FRESH_PROGRESS {"phase": "parsing", "done": "3", "total": 3}"#,
            r#"CGC_FRESH_PROGRESS not json"#,
            "",
        ] {
            assert_eq!(parse_driver_progress(line), None, "{line}");
        }
    }

    proptest! {
        /// Whatever the reports and wake-ups, nothing is shown before the
        /// quiet start ends, publications within a phase are at least
        /// REFRESH_MS apart, and what is shown is always the latest
        /// report once the gate has no wake-up left.
        #[test]
        fn publications_follow_the_rules(
            events in proptest::collection::vec(
                (0u64..400, proptest::option::of((0usize..4, 0u64..50))),
                1..60,
            )
        ) {
            let phases = [SyncPhase::Parsing, SyncPhase::Reading, SyncPhase::Writing, SyncPhase::Linking];
            let mut gate = ProgressGate::start(at(0));
            let mut now = 0u64;
            let mut last: Option<(SyncProgress, u64)> = None;
            let mut latest = ProgressStep::phase(SyncPhase::Starting);
            for (gap, report) in events {
                now += gap;
                let published = match report {
                    Some((phase, done)) => {
                        latest = ProgressStep::counted(phases[phase], done, 50);
                        gate.observe(latest, at(now))
                    }
                    None => gate.wake(at(now)),
                };
                if let Some(progress) = published {
                    prop_assert!(now >= SHOW_AFTER_MS);
                    if let Some((previous, when)) = &last {
                        if previous.phase == progress.phase {
                            prop_assert!(now - when >= REFRESH_MS);
                        }
                    }
                    last = Some((progress, now));
                }
            }
            if let Some(wake) = gate.next_wake() {
                let later = wake.get().max(at(now).get());
                gate.wake(Millis(later));
            }
            prop_assert_eq!(gate.next_wake(), None);
            prop_assert_eq!(gate.shown(), Some(gate.progress(latest)));
        }
    }
}
