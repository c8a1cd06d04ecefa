//! The invocation log (`FAKE_CGC_LOG`): one JSON object per line, appended
//! with `O_APPEND` and a single `write(2)` per line so that concurrent fakes
//! (and their daemons) never interleave within a line.
//!
//! Each invocation writes a `start` record as soon as its arguments are
//! parsed (so a SIGKILLed run is still visible) and an `end` record when it
//! ends by itself; a `spawn_daemon` grandchild writes a `daemon` record.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::signal_name::SignalName;

/// Environment variables copied into every record, when set.
pub const LOGGED_ENV_VARS: &[&str] = &[
    "COLUMNS",
    "ENABLE_AUTO_WATCH",
    "CGC_FRESH_OWNER",
    "NOTIFY_SOCKET",
    "LISTEN_FDS",
    "LISTEN_PID",
    "WATCHDOG_USEC",
    "HOME",
    "DEFAULT_DATABASE",
    "CGC_RUNTIME_DB_TYPE",
    "DATABASE_TYPE",
];

/// Which moment a record describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    /// The invocation started (arguments parsed).
    Start,
    /// The invocation ended by itself (exit, or death by a signal it saw).
    End,
    /// A `spawn_daemon` grandchild started.
    Daemon,
}

/// How an invocation ended.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Ending {
    /// Exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<i32>,
    /// The signal it died by (it logs just before re-raising it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<SignalName>,
}

/// One line of the invocation log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvocationRecord {
    pub event: Event,
    /// Arguments after the program name.
    pub argv: Vec<String>,
    /// The program name as invoked (`argv[0]`).
    pub program: String,
    /// The scenario key of the subcommand; absent for a usage error or help.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    pub cwd: String,
    /// The [`LOGGED_ENV_VARS`] that are set.
    pub env: BTreeMap<String, String>,
    pub pid: i32,
    pub ppid: i32,
    pub pgid: i32,
    pub sid: i32,
    /// Unix time in milliseconds when the process started.
    pub start_ms: u64,
    /// SIGINT was inherited as ignored.
    pub sigint_ignored: bool,
    /// Every signal inherited as ignored (SIGPIPE excepted).
    pub ignored_signals: Vec<SignalName>,
    /// Every signal in the inherited blocked mask.
    pub blocked_signals: Vec<SignalName>,
    /// 0-based count of earlier invocations of this subcommand under the
    /// same scenario file (end records only, when a scenario is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invocation: Option<u64>,
    /// The scenario entry used (`scenario:watch`, `scenario:watch[1]`,
    /// `scenario:default`), or `builtin` when no entry applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behaviour: Option<String>,
    /// Unix time in milliseconds at the end (end records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ms: Option<u64>,
    /// How it ended (end records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub how: Option<Ending>,
    /// The signal whose graceful reaction led to the exit, e.g. `INT` for a
    /// watch stopped by SIGINT (end records; `how` then says `{"exit": 0}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled_signal: Option<SignalName>,
    /// Signals caught during the run, with counts (end records).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub signals_received: BTreeMap<String, u32>,
    /// A problem of the fake itself (bad scenario, lock file not creatable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Daemon records: pid of the fake that spawned it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawned_by: Option<i32>,
}

/// The selected environment variables of this process.
pub fn logged_env() -> BTreeMap<String, String> {
    LOGGED_ENV_VARS
        .iter()
        .filter_map(|name| {
            std::env::var_os(name)
                .map(|value| ((*name).to_owned(), value.to_string_lossy().into_owned()))
        })
        .collect()
}

/// Unix time in milliseconds.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        })
}

/// Where records go.
#[derive(Debug, Clone)]
pub struct InvocationLog {
    path: PathBuf,
}

impl InvocationLog {
    /// The log named by `FAKE_CGC_LOG`, if set and not empty.
    pub fn from_env() -> Option<InvocationLog> {
        std::env::var_os("FAKE_CGC_LOG")
            .filter(|path| !path.is_empty())
            .map(|path| InvocationLog { path: path.into() })
    }

    /// A log at `path`.
    pub fn at(path: impl Into<PathBuf>) -> InvocationLog {
        InvocationLog { path: path.into() }
    }

    /// Appends one record as one line with a single `write(2)`.
    pub fn append(&self, record: &InvocationRecord) -> io::Result<()> {
        let mut line = serde_json::to_vec(record).map_err(io::Error::other)?;
        line.push(b'\n');
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        let written = file.write(&line)?;
        if written < line.len() {
            // Only on a full disk or similar; finish the line rather than
            // leave half a record.
            file.write_all(&line[written..])?;
        }
        Ok(())
    }

    /// Appends, reporting a failure on stderr instead of failing the run.
    pub fn append_or_warn(&self, record: &InvocationRecord) {
        if let Err(error) = self.append(record) {
            eprintln!(
                "fake-cgc: cannot append to log {}: {error}",
                self.path.display()
            );
        }
    }
}

/// A line of the log that is not a record.
#[derive(Debug, thiserror::Error)]
pub enum ReadLogError {
    #[error("cannot read {path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("{path} line {line}: {source}")]
    Parse {
        path: String,
        line: usize,
        source: serde_json::Error,
    },
}

/// Reads every record of a log; a missing file is an empty log. A last line
/// without its newline (a write in progress) is skipped.
pub fn read_records(path: &Path) -> Result<Vec<InvocationRecord>, ReadLogError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(ReadLogError::Io {
                path: path.display().to_string(),
                source,
            })
        }
    };
    let complete = match text.rfind('\n') {
        Some(end) => &text[..end],
        None => "",
    };
    complete
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| {
            serde_json::from_str(line).map_err(|source| ReadLogError::Parse {
                path: path.display().to_string(),
                line: index + 1,
                source,
            })
        })
        .collect()
}
