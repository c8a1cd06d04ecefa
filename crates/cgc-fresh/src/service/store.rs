//! `FreshnessStore`: the freshness record on disk (`state.json`).
//!
//! Written atomically (temp file, fsync, rename) whenever what the record
//! tells a person changes: status, sync and stale times, error, watcher,
//! sync generation. Changes of only the edit counter or the pending-path
//! count — one per agent edit — ride along with the next such write instead
//! of costing an fsync each: after a restart the status is `unknown` and
//! neither counter means anything across it. A failed
//! write is logged once, reported in the state frame, and the service goes
//! on (fail-open): the record in memory stays authoritative, and the older
//! file is withdrawn (removed, else emptied) so that it cannot go on saying
//! `fresh` when that is no longer true. After a restart
//! the record is read back and the machine turns it into `unknown`.

use std::path::PathBuf;

use cgc_fresh_core::freshness::FreshnessRecord;

use crate::paths::ensure_private_dir;
use crate::supervisor::registry::write_atomically;

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "drift_observer";

pub struct FreshnessStore {
    dir: PathBuf,
    file: PathBuf,
    /// The last record written, with the per-edit counters blanked.
    written: Option<FreshnessRecord>,
    /// The last write's error, while writes keep failing.
    failing: Option<String>,
}

/// What reading the file found.
pub enum Restored {
    Missing,
    Found(FreshnessRecord),
    Unreadable(String),
}

impl FreshnessStore {
    pub fn new(dir: PathBuf, file: PathBuf) -> Self {
        FreshnessStore {
            dir,
            file,
            written: None,
            failing: None,
        }
    }

    pub fn load(&self) -> Restored {
        match std::fs::read_to_string(&self.file) {
            Ok(text) => match FreshnessRecord::from_json(&text) {
                Ok(record) => Restored::Found(record),
                Err(error) => Restored::Unreadable(error.to_string()),
            },
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Restored::Missing,
            Err(error) => Restored::Unreadable(error.to_string()),
        }
    }

    /// Writes the record if what it says to a person changed (or the last
    /// write failed); on failure remembers (and logs once) why.
    pub fn save(&mut self, record: &FreshnessRecord) {
        let meaning = without_counters(record);
        if self.failing.is_none() && self.written.as_ref() == Some(&meaning) {
            return;
        }
        let result = record
            .to_json()
            .map_err(|e| e.to_string())
            .and_then(|json| {
                ensure_private_dir(&self.dir).map_err(|e| e.to_string())?;
                write_atomically(&self.file, json.as_bytes()).map_err(|e| e.to_string())
            });
        match result {
            Ok(()) => {
                self.written = Some(meaning);
                if self.failing.take().is_some() {
                    tracing::info!(component = COMPONENT, event = "state_write_recovered", path = %self.file.display());
                }
            }
            Err(error) => {
                if self.failing.is_none() {
                    tracing::error!(component = COMPONENT, event = "state_write_failed", path = %self.file.display(), error = %error);
                    self.withdraw_stale_file();
                }
                self.failing = Some(format!(
                    "state file {} not written: {error}",
                    self.file.display()
                ));
            }
        }
    }

    /// After a failed write the file on disk still holds an older record,
    /// which may say `fresh` when that is no longer true. It must not
    /// outlive the truth: the file is removed (which works on a full disk),
    /// else emptied in place — an empty record reads as unreadable, never
    /// as `fresh`. Both are tried without following a link at the path.
    fn withdraw_stale_file(&mut self) {
        self.written = None;
        if std::fs::symlink_metadata(&self.file).is_err() {
            return; // nothing there (or not even a directory to hold it)
        }
        let outcome = match std::fs::remove_file(&self.file) {
            Ok(()) => Ok("removed"),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return,
            Err(remove_error) => truncate_in_place(&self.file)
                .map(|()| "emptied")
                .map_err(|error| format!("remove: {remove_error}; empty: {error}")),
        };
        match outcome {
            Ok(how) => {
                tracing::warn!(component = COMPONENT, event = "state_file_withdrawn", path = %self.file.display(), how)
            }
            Err(error) => {
                tracing::error!(component = COMPONENT, event = "state_file_withdraw_failed", path = %self.file.display(), error = %error)
            }
        }
    }

    /// Why writes are failing, if they are.
    pub fn failure(&self) -> Option<&str> {
        self.failing.as_deref()
    }
}

/// Empties a regular file at `path` without following a link there.
fn truncate_in_place(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map(drop)
}

/// The record as far as a person reads it: the per-edit counters blanked.
fn without_counters(record: &FreshnessRecord) -> FreshnessRecord {
    let mut meaning = record.clone();
    meaning.edit_epoch = 0;
    meaning.pending = Default::default();
    meaning
}
