//! What one invocation does: ordered steps, how it ends, and how it reacts
//! to signals. The JSON shape is documented in the crate docs.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::lines::Lines;
use crate::signal_name::SignalName;

/// Default life time of a `spawn_daemon` grandchild: outlives any test, yet
/// a leak is bounded.
pub const DEFAULT_DAEMON_SLEEP_MS: u64 = 3_600_000;

/// One invocation's script.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Behaviour {
    /// Run in order; a `hang` step waits until a signal or timer ends the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,
    /// Exit code once every step has run.
    #[serde(default)]
    pub exit: i32,
    /// Reaction to SIGINT; absent = the subcommand's built-in reaction
    /// (watch: the graceful stop lines, exit 0; others: exit 130).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_sigint: Option<SignalReaction>,
    /// Reaction to SIGTERM; absent = die by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_sigterm: Option<SignalReaction>,
    /// Shorthand for `"on_sigint": "ignore"` (a stuck child).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignore_sigint: bool,
}

/// What a signal does to the invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignalReaction {
    /// `"die"`: killed by the signal (the default disposition).
    Die,
    /// `"ignore"`: the signal is set to `SIG_IGN`.
    Ignore,
    /// An object: run the stop script, then exit.
    Stop(StopScript),
}

/// A graceful stop: `stdout` lines, then `stderr` lines, then `steps`, then
/// exit with `exit`. A further SIGINT during the stop makes it exit 130
/// at once, like the real watcher.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopScript {
    #[serde(default, skip_serializing_if = "Lines::is_empty")]
    pub stdout: Lines,
    #[serde(default, skip_serializing_if = "Lines::is_empty")]
    pub stderr: Lines,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,
    #[serde(default)]
    pub exit: i32,
}

impl Serialize for SignalReaction {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            SignalReaction::Die => serializer.serialize_str("die"),
            SignalReaction::Ignore => serializer.serialize_str("ignore"),
            SignalReaction::Stop(script) => script.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for SignalReaction {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::String(word) => match word.as_str() {
                "die" => Ok(SignalReaction::Die),
                "ignore" => Ok(SignalReaction::Ignore),
                other => Err(D::Error::custom(format!(
                    "a signal reaction is \"die\", \"ignore\" or an object, not {other:?}"
                ))),
            },
            object => StopScript::deserialize(object)
                .map(SignalReaction::Stop)
                .map_err(D::Error::custom),
        }
    }
}

/// How a `die_after_ms` timer ends the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Death {
    /// Killed by this signal (its default disposition restored first).
    Signal(SignalName),
    /// Exits with this code.
    Exit(i32),
}

/// A `hold_lock` target: a path, or a path with a retry budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockSpec {
    /// The database file; relative to the working directory, `~/` = `$HOME`.
    pub path: String,
    /// When the lock is taken by another process, retry this long before
    /// printing the real lock error and exiting 1 (the real one: ~9 s).
    pub busy_timeout_ms: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LockSpecObject {
    path: String,
    #[serde(default)]
    busy_timeout_ms: u64,
}

impl Serialize for LockSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.busy_timeout_ms == 0 {
            serializer.serialize_str(&self.path)
        } else {
            LockSpecObject {
                path: self.path.clone(),
                busy_timeout_ms: self.busy_timeout_ms,
            }
            .serialize(serializer)
        }
    }
}

impl<'de> Deserialize<'de> for LockSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::String(path) => Ok(LockSpec {
                path,
                busy_timeout_ms: 0,
            }),
            object => LockSpecObject::deserialize(object)
                .map(|spec| LockSpec {
                    path: spec.path,
                    busy_timeout_ms: spec.busy_timeout_ms,
                })
                .map_err(D::Error::custom),
        }
    }
}

/// A `spawn_daemon` grandchild.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonSpec {
    /// How long the daemon lives; absent = [`DEFAULT_DAEMON_SLEEP_MS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleep_ms: Option<u64>,
}

/// A `write_file` step (the real `cgc index` writes `.cgcignore`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteFileSpec {
    /// Relative to the working directory; parent directories are created.
    pub path: String,
    #[serde(default)]
    pub content: String,
    /// Leave an existing file alone.
    #[serde(default)]
    pub if_missing: bool,
}

/// One step of a behaviour. In JSON each step is an object with exactly one
/// action key (`die_after_ms` may add `signal` or `exit`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawStep", into = "RawStep")]
pub enum Step {
    /// `{"sleep_ms": N}`.
    Sleep { ms: u64 },
    /// `{"stdout": lines}`: print, flushing after each line.
    Stdout(Lines),
    /// `{"stderr": lines}`.
    Stderr(Lines),
    /// `{"hold_lock": path | {"path", "busy_timeout_ms"}}`: take a real fcntl
    /// write lock on the whole file and keep it until the process ends.
    HoldLock(LockSpec),
    /// `{"spawn_daemon": {"sleep_ms": N}}`: a double-forked grandchild in its
    /// own session.
    SpawnDaemon(DaemonSpec),
    /// `{"hang": true}`: wait until a signal or a timer ends the run.
    Hang,
    /// `{"die_after_ms": N, "signal": "KILL"}` or `{"die_after_ms": N,
    /// "exit": 3}`: arm a timer that runs alongside the following steps.
    DieAfter { ms: u64, death: Death },
    /// `{"write_file": {"path", "content", "if_missing"}}`.
    WriteFile(WriteFileSpec),
}

/// The JSON form of a [`Step`]; every key optional, validated on conversion.
#[derive(Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sleep_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stdout: Option<Lines>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stderr: Option<Lines>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hold_lock: Option<LockSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spawn_daemon: Option<DaemonSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hang: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    die_after_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    signal: Option<SignalName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exit: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    write_file: Option<WriteFileSpec>,
}

/// A step object that is not exactly one action.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    #[error("a step needs one action key (sleep_ms, stdout, stderr, hold_lock, spawn_daemon, hang, die_after_ms, write_file)")]
    NoAction,
    #[error("a step has one action key, found {0}")]
    SeveralActions(String),
    #[error("\"signal\" and \"exit\" belong to a die_after_ms step, and only one of them")]
    MisplacedDeath,
    #[error("\"hang\" must be true")]
    HangFalse,
}

impl TryFrom<RawStep> for Step {
    type Error = StepError;

    fn try_from(raw: RawStep) -> Result<Self, Self::Error> {
        let actions: Vec<&str> = [
            ("sleep_ms", raw.sleep_ms.is_some()),
            ("stdout", raw.stdout.is_some()),
            ("stderr", raw.stderr.is_some()),
            ("hold_lock", raw.hold_lock.is_some()),
            ("spawn_daemon", raw.spawn_daemon.is_some()),
            ("hang", raw.hang.is_some()),
            ("die_after_ms", raw.die_after_ms.is_some()),
            ("write_file", raw.write_file.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, present)| present.then_some(name))
        .collect();
        if actions.len() > 1 {
            return Err(StepError::SeveralActions(actions.join(", ")));
        }
        let death = match (raw.signal, raw.exit) {
            (Some(_), Some(_)) => return Err(StepError::MisplacedDeath),
            (Some(signal), None) => Some(Death::Signal(signal)),
            (None, Some(code)) => Some(Death::Exit(code)),
            (None, None) => None,
        };
        if death.is_some() && raw.die_after_ms.is_none() {
            return Err(StepError::MisplacedDeath);
        }
        let step = if let Some(ms) = raw.sleep_ms {
            Step::Sleep { ms }
        } else if let Some(lines) = raw.stdout {
            Step::Stdout(lines)
        } else if let Some(lines) = raw.stderr {
            Step::Stderr(lines)
        } else if let Some(lock) = raw.hold_lock {
            Step::HoldLock(lock)
        } else if let Some(daemon) = raw.spawn_daemon {
            Step::SpawnDaemon(daemon)
        } else if let Some(hang) = raw.hang {
            if !hang {
                return Err(StepError::HangFalse);
            }
            Step::Hang
        } else if let Some(ms) = raw.die_after_ms {
            Step::DieAfter {
                ms,
                death: death.unwrap_or(Death::Signal(SignalName::KILL)),
            }
        } else if let Some(file) = raw.write_file {
            Step::WriteFile(file)
        } else {
            return Err(StepError::NoAction);
        };
        Ok(step)
    }
}

impl From<Step> for RawStep {
    fn from(step: Step) -> Self {
        let mut raw = RawStep::default();
        match step {
            Step::Sleep { ms } => raw.sleep_ms = Some(ms),
            Step::Stdout(lines) => raw.stdout = Some(lines),
            Step::Stderr(lines) => raw.stderr = Some(lines),
            Step::HoldLock(lock) => raw.hold_lock = Some(lock),
            Step::SpawnDaemon(daemon) => raw.spawn_daemon = Some(daemon),
            Step::Hang => raw.hang = Some(true),
            Step::DieAfter { ms, death } => {
                raw.die_after_ms = Some(ms);
                match death {
                    Death::Signal(signal) => raw.signal = Some(signal),
                    Death::Exit(code) => raw.exit = Some(code),
                }
            }
            Step::WriteFile(file) => raw.write_file = Some(file),
        }
        raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let behaviour: Behaviour = serde_json::from_str(
            r#"{"steps": [{"sleep_ms": 300},
                          {"stdout": "✓ Already indexed. Synchronizing current files..."},
                          {"stderr": "..."},
                          {"hold_lock": "path/to/db/file"},
                          {"spawn_daemon": {"sleep_ms": 600000}},
                          {"die_after_ms": 50, "exit": 3},
                          {"hang": true}],
                "exit": 0,
                "on_sigint": {"stdout": ["🛑 Stopping watcher...", "✓ Watcher stopped."], "exit": 0},
                "on_sigterm": "die"}"#,
        )
        .unwrap();
        assert_eq!(behaviour.steps.len(), 7);
        assert_eq!(behaviour.steps[0], Step::Sleep { ms: 300 });
        assert_eq!(
            behaviour.steps[5],
            Step::DieAfter {
                ms: 50,
                death: Death::Exit(3)
            }
        );
        assert_eq!(behaviour.steps[6], Step::Hang);
        assert_eq!(behaviour.on_sigterm, Some(SignalReaction::Die));
        match behaviour.on_sigint {
            Some(SignalReaction::Stop(script)) => assert_eq!(script.stdout.render().len(), 2),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn die_after_defaults_to_kill() {
        let step: Step = serde_json::from_str(r#"{"die_after_ms": 10}"#).unwrap();
        assert_eq!(
            step,
            Step::DieAfter {
                ms: 10,
                death: Death::Signal(SignalName::KILL)
            }
        );
    }

    #[test]
    fn rejects_malformed_steps() {
        for bad in [
            r#"{}"#,
            r#"{"sleep_ms": 1, "stdout": "x"}"#,
            r#"{"stdout": "x", "exit": 1}"#,
            r#"{"die_after_ms": 1, "exit": 1, "signal": "KILL"}"#,
            r#"{"hang": false}"#,
            r#"{"slep_ms": 1}"#,
            r#"{"die_after_ms": 1, "signal": "NOPE"}"#,
        ] {
            assert!(serde_json::from_str::<Step>(bad).is_err(), "{bad}");
        }
        assert!(serde_json::from_str::<Behaviour>(r#"{"stepz": []}"#).is_err());
        assert!(serde_json::from_str::<Behaviour>(r#"{"on_sigint": "dance"}"#).is_err());
    }

    #[test]
    fn round_trips() {
        let behaviour = Behaviour {
            steps: vec![
                Step::HoldLock(LockSpec {
                    path: "db".into(),
                    busy_timeout_ms: 5,
                }),
                Step::SpawnDaemon(DaemonSpec::default()),
                Step::DieAfter {
                    ms: 1,
                    death: Death::Signal(SignalName::TERM),
                },
                Step::WriteFile(WriteFileSpec {
                    path: ".cgcignore".into(),
                    content: "x\n".into(),
                    if_missing: true,
                }),
            ],
            exit: 4,
            on_sigint: Some(SignalReaction::Ignore),
            on_sigterm: Some(SignalReaction::Stop(StopScript {
                exit: 9,
                ..StopScript::default()
            })),
            ignore_sigint: true,
        };
        let json = serde_json::to_string(&behaviour).unwrap();
        assert_eq!(serde_json::from_str::<Behaviour>(&json).unwrap(), behaviour);
    }
}
