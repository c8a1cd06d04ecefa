//! The scenario file: which [`Behaviour`] each subcommand invocation gets.
//!
//! ```json
//! {"watch": [{"steps": [{"stdout": "boom"}], "exit": 1}, "builtin"],
//!  "index": {"steps": [{"sleep_ms": 200}], "exit": 0},
//!  "default": "builtin"}
//! ```
//!
//! A key maps to one behaviour or to a list used per invocation (the n-th
//! invocation of that subcommand takes the n-th entry, later ones the last).
//! `"builtin"` stands for the fake's built-in behaviour of that subcommand.
//! Subcommands without a key use `"default"`, then the built-in.

mod behaviour;
mod lines;

use std::path::Path;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use behaviour::{
    Behaviour, DaemonSpec, Death, LockSpec, SignalReaction, Step, StepError, StopScript,
    WriteFileSpec, DEFAULT_DAEMON_SLEEP_MS,
};
pub use lines::{KnownText, Line, Lines};

/// A scenario file's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<Entry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<Entry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<Entry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doctor: Option<Entry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list: Option<Entry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Entry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<Entry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub find: Option<Entry>,
    /// For every subcommand without its own key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Entry>,
}

/// The value of a scenario key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Entry {
    /// Per invocation: the n-th invocation takes the n-th, later ones the last.
    Sequence(Vec<BehaviourSpec>),
    /// Every invocation.
    One(BehaviourSpec),
}

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // By hand, so that an error inside a behaviour is reported as such
        // instead of "did not match any variant".
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::Array(items) => items
                .into_iter()
                .enumerate()
                .map(|(position, item)| {
                    BehaviourSpec::deserialize(item)
                        .map_err(|error| D::Error::custom(format!("entry {position}: {error}")))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Entry::Sequence),
            single => BehaviourSpec::deserialize(single)
                .map(Entry::One)
                .map_err(D::Error::custom),
        }
    }
}

/// A scripted behaviour, or `"builtin"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BehaviourSpec {
    /// The fake's built-in behaviour for the subcommand.
    Builtin,
    /// A script.
    Script(Behaviour),
}

impl Serialize for BehaviourSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            BehaviourSpec::Builtin => serializer.serialize_str("builtin"),
            BehaviourSpec::Script(behaviour) => behaviour.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for BehaviourSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::String(word) if word == "builtin" => Ok(BehaviourSpec::Builtin),
            serde_json::Value::String(word) => Err(D::Error::custom(format!(
                "a behaviour is an object or \"builtin\", not {word:?}"
            ))),
            object => Behaviour::deserialize(object)
                .map(BehaviourSpec::Script)
                .map_err(D::Error::custom),
        }
    }
}

/// The scenario file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid scenario {path}: {source}")]
    Parse {
        path: String,
        source: serde_json::Error,
    },
    #[error("scenario key {key:?} has an empty list")]
    EmptySequence { key: String },
}

/// The behaviour chosen for one invocation and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// `None` = the built-in behaviour.
    pub script: Option<Behaviour>,
    /// For the log: `"builtin"`, `"scenario:watch"`, `"scenario:watch[1]"`,
    /// `"scenario:default"`.
    pub source: String,
}

impl Scenario {
    /// Reads and parses a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let display = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: display.clone(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| ScenarioError::Parse {
            path: display,
            source,
        })
    }

    /// The entry of a subcommand key (`"watch"`, ...), if the scenario has one.
    pub fn entry(&self, key: &str) -> Option<&Entry> {
        match key {
            "index" => self.index.as_ref(),
            "update" => self.update.as_ref(),
            "watch" => self.watch.as_ref(),
            "doctor" => self.doctor.as_ref(),
            "list" => self.list.as_ref(),
            "version" => self.version.as_ref(),
            "query" => self.query.as_ref(),
            "find" => self.find.as_ref(),
            "default" => self.default.as_ref(),
            _ => None,
        }
    }

    /// The behaviour for the `invocation`-th (0-based) run of `key`.
    pub fn select(&self, key: &str, invocation: u64) -> Result<Selection, ScenarioError> {
        let (entry_key, entry) = match self.entry(key) {
            Some(entry) => (key, entry),
            None => match self.default.as_ref() {
                Some(entry) => ("default", entry),
                None => {
                    return Ok(Selection {
                        script: None,
                        source: "builtin".to_owned(),
                    })
                }
            },
        };
        let (spec, source) = match entry {
            Entry::One(spec) => (spec, format!("scenario:{entry_key}")),
            Entry::Sequence(specs) => {
                let last =
                    specs
                        .len()
                        .checked_sub(1)
                        .ok_or_else(|| ScenarioError::EmptySequence {
                            key: entry_key.to_owned(),
                        })?;
                let position = usize::try_from(invocation).unwrap_or(usize::MAX).min(last);
                (
                    &specs[position],
                    format!("scenario:{entry_key}[{position}]"),
                )
            }
        };
        Ok(Selection {
            script: match spec {
                BehaviourSpec::Builtin => None,
                BehaviourSpec::Script(behaviour) => Some(behaviour.clone()),
            },
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(json: &str) -> Scenario {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn sequences_stick_to_their_last_entry() {
        let scenario = scenario(r#"{"watch": [{"exit": 1}, {"exit": 2}]}"#);
        let exits: Vec<i32> = (0..4)
            .map(|n| scenario.select("watch", n).unwrap().script.unwrap().exit)
            .collect();
        assert_eq!(exits, [1, 2, 2, 2]);
        assert_eq!(
            scenario.select("watch", 1).unwrap().source,
            "scenario:watch[1]"
        );
    }

    #[test]
    fn default_then_builtin() {
        let with_default = scenario(r#"{"index": "builtin", "default": {"exit": 7}}"#);
        assert_eq!(with_default.select("index", 0).unwrap().script, None);
        let doctor = with_default.select("doctor", 0).unwrap();
        assert_eq!(doctor.script.unwrap().exit, 7);
        assert_eq!(doctor.source, "scenario:default");
        let empty = Scenario::default();
        assert_eq!(empty.select("doctor", 0).unwrap().source, "builtin");
    }

    #[test]
    fn rejects_unknown_keys_and_empty_lists() {
        assert!(serde_json::from_str::<Scenario>(r#"{"wach": {}}"#).is_err());
        assert!(serde_json::from_str::<Scenario>(r#"{"watch": "bultin"}"#).is_err());
        let empty = scenario(r#"{"watch": []}"#);
        assert!(matches!(
            empty.select("watch", 0),
            Err(ScenarioError::EmptySequence { .. })
        ));
    }
}
