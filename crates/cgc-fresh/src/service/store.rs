//! `FreshnessStore`: the freshness record on disk (`state.json`).
//!
//! Written atomically (temp file, fsync, rename) whenever what the record
//! tells a person changes: status, sync and stale times, error, watcher,
//! sync generation. Changes of only the edit counter or the pending-path
//! count — one per agent edit — ride along with the next such write instead
//! of costing an fsync each: after a restart the status is `unknown` and
//! neither counter means anything across it. A failed
//! write is logged once, reported in the state frame, and the service goes
//! on (fail-open): the record in memory stays authoritative. After a restart
//! the record is read back and the machine turns it into `unknown`.

use std::path::PathBuf;

use cgc_fresh_core::freshness::FreshnessRecord;

use crate::paths::ensure_private_dir;
use crate::supervisor::registry::write_atomically;

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
                    tracing::info!(event = "state_write_recovered", path = %self.file.display());
                }
            }
            Err(error) => {
                if self.failing.is_none() {
                    tracing::error!(event = "state_write_failed", path = %self.file.display(), error = %error);
                }
                self.failing = Some(format!(
                    "state file {} not written: {error}",
                    self.file.display()
                ));
            }
        }
    }

    /// Why writes are failing, if they are.
    pub fn failure(&self) -> Option<&str> {
        self.failing.as_deref()
    }
}

/// The record as far as a person reads it: the per-edit counters blanked.
fn without_counters(record: &FreshnessRecord) -> FreshnessRecord {
    let mut meaning = record.clone();
    meaning.edit_epoch = 0;
    meaning.pending = Default::default();
    meaning
}
