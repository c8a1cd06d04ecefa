//! Whether a session's watcher may be spawned.
//!
//! Spec, "Opt-in continuous watcher mode": `off` never spawns a watcher
//! (and runs no detection); `on` spawns it unconditionally on every
//! backend — the person accepted the watcher's trade-offs, the embedded
//! database lock included — subject only to the shell's lock probe; `auto`
//! spawns only when the backend is a server backend and the workspace is
//! already indexed (spec, "Auto mode never spawns on an unindexed
//! workspace": watching never implies creating an index). The third
//! condition of `auto`, liveness, is checked after the spawn by the shell
//! and recorded by the freshness machine.
//!
//! The attempt is one per session: the freshness machine records each
//! session's attempt (started, busy, declined or failed to spawn) and
//! [`crate::freshness::Freshness::watcher_attempt_allowed`] says whether a
//! session may still try. A failed or declined attempt is not retried
//! before the next session.
//!
//! In `auto` the index condition is checked before the backend one: it is
//! a directory check, while detection may run `cgc doctor` (seconds, or
//! the whole `cgc.timeoutMs` against a server that never answers). An
//! unindexed workspace is therefore declined as unindexed whatever its
//! backend — both reasons hold, and the cheaper one is given.

use crate::config::WatchMode;
use crate::freshness::WatcherDecline;

use super::backend::BackendAnswer;

/// What to do about a session's watcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateDecision {
    /// `off`: no watcher, and no detection either.
    Skip,
    /// `auto` on an indexed workspace, backend not yet detected: detect
    /// it, then ask again.
    NeedBackend,
    /// Spawn the watcher (after the lock probe).
    Spawn,
    /// `auto`, and the backend is embedded or could not be determined.
    DeclineBackend { answer: BackendAnswer },
    /// `auto`, and the workspace has no index (`.codegraphcontext/`).
    DeclineUnindexed,
}

impl GateDecision {
    /// The decline to report to the freshness machine, for the two
    /// declining decisions.
    pub fn decline(&self) -> Option<WatcherDecline> {
        match self {
            GateDecision::DeclineBackend { answer } => {
                Some(WatcherDecline::Backend(answer.to_string()))
            }
            GateDecision::DeclineUnindexed => Some(WatcherDecline::Unindexed),
            GateDecision::Skip | GateDecision::NeedBackend | GateDecision::Spawn => None,
        }
    }
}

/// The watcher decision for `mode`, the detected `backend` (`None` until
/// detected) and whether the workspace is `indexed` (its
/// `.codegraphcontext/` directory exists — the presence check CGC's own
/// watcher uses).
pub fn gate(mode: WatchMode, backend: Option<&BackendAnswer>, indexed: bool) -> GateDecision {
    match mode {
        WatchMode::Off => GateDecision::Skip,
        WatchMode::On => GateDecision::Spawn,
        WatchMode::Auto if !indexed => GateDecision::DeclineUnindexed,
        WatchMode::Auto => match backend {
            None => GateDecision::NeedBackend,
            Some(answer) if answer.backend.is_server() => GateDecision::Spawn,
            Some(answer) => GateDecision::DeclineBackend {
                answer: answer.clone(),
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watcher::backend::{decide, Backend, BackendSource};

    fn detected(backend: Backend) -> BackendAnswer {
        BackendAnswer {
            backend,
            source: BackendSource::Doctor,
        }
    }

    fn every_answer() -> Vec<Option<BackendAnswer>> {
        let mut answers: Vec<Option<BackendAnswer>> = [
            Backend::Neo4j,
            Backend::FalkordbRemote,
            Backend::Kuzudb,
            Backend::Falkordb,
            Backend::Ladybugdb,
            Backend::Other("memgraph".into()),
            Backend::Unknown,
        ]
        .into_iter()
        .map(|backend| Some(detected(backend)))
        .collect();
        answers.push(None);
        answers
    }

    // ---- Requirement: Opt-in continuous watcher mode ---------------------

    #[test]
    fn on_mode_spawns_unconditionally() {
        for answer in every_answer() {
            for indexed in [true, false] {
                assert_eq!(
                    gate(WatchMode::On, answer.as_ref(), indexed),
                    GateDecision::Spawn,
                    "{answer:?}, indexed {indexed}"
                );
            }
        }
    }

    #[test]
    fn off_mode_never_spawns() {
        for answer in every_answer() {
            for indexed in [true, false] {
                let decision = gate(WatchMode::Off, answer.as_ref(), indexed);
                assert_eq!(decision, GateDecision::Skip, "{answer:?}");
                assert_eq!(decision.decline(), None, "no notice either");
            }
        }
    }

    #[test]
    fn watcher_spawns_when_every_condition_holds() {
        // The gating half of "Watcher keeps the graph current": `on`, or
        // `auto` with every condition met, spawns. The rest of the scenario
        // is `watcher_keeps_the_graph_current` in the freshness tests.
        assert_eq!(gate(WatchMode::On, None, true), GateDecision::Spawn);
        let server = detected(Backend::Neo4j);
        assert_eq!(
            gate(WatchMode::Auto, Some(&server), true),
            GateDecision::Spawn
        );
    }

    // ---- Requirement: Backend-aware watcher detection --------------------

    #[test]
    fn server_backend_satisfies_the_backend_condition() {
        for backend in [Backend::Neo4j, Backend::FalkordbRemote] {
            let answer = detected(backend);
            assert_eq!(
                gate(WatchMode::Auto, Some(&answer), true),
                GateDecision::Spawn
            );
        }
    }

    #[test]
    fn embedded_backend_never_auto_spawns() {
        for backend in [
            Backend::Kuzudb,
            Backend::Falkordb,
            Backend::Ladybugdb,
            Backend::Other("memgraph".into()),
        ] {
            let answer = detected(backend);
            let decision = gate(WatchMode::Auto, Some(&answer), true);
            assert_eq!(
                decision,
                GateDecision::DeclineBackend {
                    answer: answer.clone()
                }
            );
            assert_eq!(
                decision.decline(),
                Some(WatcherDecline::Backend(answer.to_string()))
            );
        }
    }

    #[test]
    fn unknown_backend_fails_open_to_the_conservative_answer() {
        // Doctor timed out, no .env: detection answers Unknown, and Unknown
        // is embedded for spawning.
        let answer = decide(None, None, None);
        assert_eq!(answer.backend, Backend::Unknown);
        let decision = gate(WatchMode::Auto, Some(&answer), true);
        assert_eq!(
            decision,
            GateDecision::DeclineBackend {
                answer: answer.clone()
            }
        );
        let Some(WatcherDecline::Backend(text)) = decision.decline() else {
            panic!("a backend decline");
        };
        assert!(text.starts_with("unknown (not determined"), "{text}");
    }

    #[test]
    fn auto_mode_asks_for_detection_only_when_it_matters() {
        assert_eq!(gate(WatchMode::Auto, None, true), GateDecision::NeedBackend);
        assert_eq!(
            gate(WatchMode::Auto, None, false),
            GateDecision::DeclineUnindexed,
            "an unindexed workspace needs no detection"
        );
    }

    // ---- Requirement: Auto mode never spawns on an unindexed workspace ---

    #[test]
    fn unindexed_workspace_stays_watcher_free() {
        for answer in every_answer() {
            let decision = gate(WatchMode::Auto, answer.as_ref(), false);
            assert_eq!(decision, GateDecision::DeclineUnindexed, "{answer:?}");
            assert_eq!(decision.decline(), Some(WatcherDecline::Unindexed));
        }
    }
}
