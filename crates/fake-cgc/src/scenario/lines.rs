//! Output lines in a scenario: literal strings, or references to the real
//! CGC texts in [`crate::texts`] (`{"cgc": "ready"}`), so that a test does not
//! copy emoji and spacing by hand.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::texts;

/// A text the real `cgc` prints, with its parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cgc", rename_all = "snake_case", deny_unknown_fields)]
pub enum KnownText {
    /// [`texts::WATCH_READY`].
    Ready,
    /// [`texts::WATCH_ALREADY_INDEXED`].
    AlreadyIndexedWatching,
    /// [`texts::WATCH_ALREADY_INDEXED_SYNCING`].
    AlreadyIndexedSyncing,
    /// [`texts::WATCH_NOT_INDEXED`].
    NotIndexedScanning,
    /// [`texts::WATCH_INITIAL_SCAN_COMPLETE`].
    InitialScanComplete,
    /// [`texts::WATCH_STOPPING`].
    Stopping,
    /// [`texts::WATCH_STOPPED`].
    Stopped,
    /// `Repository '<repo>' is already indexed with <files> files. Skipping.`
    AlreadyIndexed {
        files: u64,
        #[serde(default = "current_dir_repo")]
        repo: String,
    },
    /// `Repository '<repo>' has only <indexed> of <total> files indexed. Continuing.`
    PartiallyIndexed {
        indexed: u64,
        total: u64,
        #[serde(default = "current_dir_repo")]
        repo: String,
    },
    /// The two-line lock error for `path` (both lines).
    LockError { path: String },
    /// `   Default database: <database> (source: <source>)`.
    DefaultDatabase { database: String, source: String },
    /// `CodeGraphContext <version>`.
    Version,
    /// `Error: Path does not exist: <path>`.
    PathMissing { path: String },
    /// [`texts::NEO4J_NOT_CONFIGURED`].
    Neo4jNotConfigured,
    /// `Successfully finished indexing: <path>`.
    IndexFinished { path: String },
}

fn current_dir_repo() -> String {
    ".".to_owned()
}

impl KnownText {
    /// The printed lines (one, except for the lock error).
    pub fn render(&self) -> Vec<String> {
        let one = |text: &str| vec![text.to_owned()];
        match self {
            KnownText::Ready => one(texts::WATCH_READY),
            KnownText::AlreadyIndexedWatching => one(texts::WATCH_ALREADY_INDEXED),
            KnownText::AlreadyIndexedSyncing => one(texts::WATCH_ALREADY_INDEXED_SYNCING),
            KnownText::NotIndexedScanning => one(texts::WATCH_NOT_INDEXED),
            KnownText::InitialScanComplete => one(texts::WATCH_INITIAL_SCAN_COMPLETE),
            KnownText::Stopping => one(texts::WATCH_STOPPING),
            KnownText::Stopped => one(texts::WATCH_STOPPED),
            KnownText::AlreadyIndexed { files, repo } => {
                vec![texts::already_indexed_line(repo, *files)]
            }
            KnownText::PartiallyIndexed {
                indexed,
                total,
                repo,
            } => vec![texts::partially_indexed_line(repo, *indexed, *total)],
            KnownText::LockError { path } => vec![
                texts::lock_error_line(path),
                texts::LOCK_ERROR_HINT.to_owned(),
            ],
            KnownText::DefaultDatabase { database, source } => {
                vec![texts::default_database_line(database, source)]
            }
            KnownText::Version => vec![texts::version_line()],
            KnownText::PathMissing { path } => vec![texts::path_missing_line(path)],
            KnownText::Neo4jNotConfigured => one(texts::NEO4J_NOT_CONFIGURED),
            KnownText::IndexFinished { path } => vec![texts::index_finished_line(path)],
        }
    }
}

/// One entry of a `stdout`/`stderr` list: a literal line or a known text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Line {
    /// Printed as is (it should not contain a newline).
    Literal(String),
    /// A text of the real CLI.
    Known(KnownText),
}

impl<'de> Deserialize<'de> for Line {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Dispatch by JSON type by hand: an untagged derive would hide the
        // reason a known-text object was rejected (e.g. a misspelt name).
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::String(text) => Ok(Line::Literal(text)),
            object @ serde_json::Value::Object(_) => KnownText::deserialize(object)
                .map(Line::Known)
                .map_err(D::Error::custom),
            other => Err(D::Error::custom(format!(
                "an output line is a string or a {{\"cgc\": ...}} object, not {other}"
            ))),
        }
    }
}

/// The value of `stdout`/`stderr`: one line, or a list of lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lines(pub Vec<Line>);

impl Lines {
    /// The printed lines, known texts expanded.
    pub fn render(&self) -> Vec<String> {
        self.0
            .iter()
            .flat_map(|line| match line {
                Line::Literal(text) => vec![text.clone()],
                Line::Known(known) => known.render(),
            })
            .collect()
    }

    /// True when there is nothing to print.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<&str> for Lines {
    fn from(text: &str) -> Self {
        Lines(vec![Line::Literal(text.to_owned())])
    }
}

impl From<KnownText> for Lines {
    fn from(known: KnownText) -> Self {
        Lines(vec![Line::Known(known)])
    }
}

impl Serialize for Lines {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Lines {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::Array(items) => items
                .into_iter()
                .map(|item| Line::deserialize(item).map_err(D::Error::custom))
                .collect::<Result<Vec<_>, _>>()
                .map(Lines),
            single => Line::deserialize(single)
                .map(|line| Lines(vec![line]))
                .map_err(D::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(json: &str) -> Result<Vec<String>, serde_json::Error> {
        serde_json::from_str::<Lines>(json).map(|lines| lines.render())
    }

    #[test]
    fn literal_known_and_lists() {
        assert_eq!(lines(r#""hi""#).unwrap(), ["hi"]);
        assert_eq!(lines(r#"{"cgc": "ready"}"#).unwrap(), [texts::WATCH_READY]);
        assert_eq!(
            lines(r#"["a", {"cgc": "lock_error", "path": "/db/kuzudb"}]"#).unwrap(),
            [
                "a",
                "Database Connection Error: IO exception: Could not set lock on file : /db/kuzudb",
                texts::LOCK_ERROR_HINT
            ]
        );
        assert_eq!(
            lines(r#"{"cgc": "already_indexed", "files": 50}"#).unwrap(),
            ["Repository '.' is already indexed with 50 files. Skipping."]
        );
    }

    #[test]
    fn errors_name_the_problem() {
        let error = lines(r#"{"cgc": "redy"}"#).unwrap_err().to_string();
        assert!(error.contains("redy"), "{error}");
        assert!(lines("3").is_err());
    }

    #[test]
    fn serializes_back() {
        let original = Lines(vec![
            Line::Literal("x".into()),
            Line::Known(KnownText::PathMissing { path: "p".into() }),
        ]);
        let json = serde_json::to_string(&original).unwrap();
        assert_eq!(serde_json::from_str::<Lines>(&json).unwrap(), original);
    }
}
