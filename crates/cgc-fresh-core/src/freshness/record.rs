//! The workspace's freshness record: what the shell persists as
//! `state.json` and what every status surface reads.
//!
//! Spec, "Freshness state tracking": the extension SHALL maintain a freshness
//! state for the active workspace — last successful sync time and a
//! conservative dirty condition — and SHALL expose it to other surfaces.
//! Spec, "Freshness observation rebinds on session replacement": the shared
//! freshness state store persists across the rebind. So the record belongs
//! to the workspace, not to a session, and survives a service restart —
//! except its status, which a restart turns into `unknown` (never `fresh`).

use cgc_fresh_proto::{FreshnessStatus, StateFrame};
use serde::{Deserialize, Serialize};

use super::time::Millis;

/// The record layout version written by this code. A file with another
/// version is not read (the service starts from `unknown`).
pub const RECORD_VERSION: u32 = 1;

/// A record that could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The text is not a record (not JSON, or a field of the wrong kind).
    #[error("the freshness record is malformed: {0}")]
    Malformed(#[from] serde_json::Error),
    /// The record was written by a layout this code does not read.
    #[error(
        "the freshness record has layout version {found}; this build reads version {supported}"
    )]
    UnsupportedVersion {
        /// The version in the file.
        found: u32,
        /// [`RECORD_VERSION`].
        supported: u32,
    },
}

/// How much edited work no completed sync covers yet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingSummary {
    /// Individual workspace-relative paths pending (0 once collapsed).
    pub paths: u32,
    /// The batch collapsed into "the whole workspace" (too many paths, an
    /// edit whose target was unknown, or pending work from before a restart).
    pub whole_workspace: bool,
}

impl PendingSummary {
    /// Whether anything is pending.
    pub fn is_empty(&self) -> bool {
        self.paths == 0 && !self.whole_workspace
    }
}

/// Facts about the managed watcher, kept for the status surfaces. The
/// freshness machine sets them from the watcher reports; a restart drops
/// them (a watcher never survives the service).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatcherRecord {
    /// The configured mode: `off`, `on` or `auto`.
    pub mode: String,
    /// The watcher's state: `verifying`, `verified`, `not_verified`,
    /// `died`, `skipped_busy`, `declined_backend` or `declined_unindexed`
    /// (a stopped watcher leaves no facts).
    pub state: String,
    /// The watcher's process id while one runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// When the watcher entered `state`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Millis>,
}

/// The persisted freshness of one workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FreshnessRecord {
    /// Layout version, [`RECORD_VERSION`] when written by this code.
    pub version: u32,
    /// The freshness status.
    pub status: FreshnessStatus,
    /// When the last sync that ran to success completed (it may not have
    /// covered every edit; `status` says whether it did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_synced_at: Option<Millis>,
    /// When the first edit that no completed sync covers was observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_since: Option<Millis>,
    /// The last sync problem, for people (cleared by a successful sync).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Counts every observed edit, across sessions and restarts.
    pub edit_epoch: u64,
    /// The id of the last sync started; flight ids continue from it after a
    /// restart, so a report about a sync from before the restart can never
    /// be mistaken for one started after it.
    #[serde(default)]
    pub sync_generation: u64,
    /// Edited work not yet covered.
    #[serde(default)]
    pub pending: PendingSummary,
    /// The managed watcher, when one is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watcher: Option<WatcherRecord>,
}

impl FreshnessRecord {
    /// The record of a workspace nothing is known about yet.
    pub fn unknown() -> Self {
        FreshnessRecord {
            version: RECORD_VERSION,
            status: FreshnessStatus::Unknown,
            last_synced_at: None,
            stale_since: None,
            last_error: None,
            edit_epoch: 0,
            sync_generation: 0,
            pending: PendingSummary::default(),
            watcher: None,
        }
    }

    /// What a record read back from disk still tells while no service has
    /// observed the workspace since it was written: times, error and edit
    /// epoch stand, the status is `unknown` — never `fresh`, whatever the
    /// file says — and no watcher runs (a watcher never outlives its
    /// service). The same rule serves a restarted service and `status`
    /// without a service.
    pub fn unobserved(mut self) -> FreshnessRecord {
        self.version = RECORD_VERSION;
        self.status = FreshnessStatus::Unknown;
        self.watcher = None;
        self
    }

    /// The `state` frame for a record read from disk while no service runs
    /// for `workspace`: the live frame's shape, with the [`unobserved`]
    /// status and a `detail` naming the status the file recorded.
    ///
    /// [`unobserved`]: FreshnessRecord::unobserved
    pub fn unobserved_state_frame(&self, workspace: &str) -> StateFrame {
        let recorded = self.status;
        let record = self.clone().unobserved();
        StateFrame {
            workspace: workspace.to_string(),
            status: record.status,
            last_synced_at: record.last_synced_at.map(Millis::get),
            stale_since: record.stale_since.map(Millis::get),
            last_error: record.last_error,
            edit_epoch: record.edit_epoch,
            syncing: false,
            watcher: None,
            backend: None,
            detail: Some(format!(
                "not observed (no service running); last recorded status {}",
                recorded.as_str().replace('_', " ")
            )),
            warnings: Vec::new(),
            progress: None,
        }
    }

    /// The record as the JSON text the shell writes.
    pub fn to_json(&self) -> Result<String, RecordError> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    /// Reads a record written by [`FreshnessRecord::to_json`]; refuses other
    /// layout versions.
    pub fn from_json(text: &str) -> Result<Self, RecordError> {
        #[derive(Deserialize)]
        struct VersionOnly {
            version: u32,
        }
        let VersionOnly { version } = serde_json::from_str(text)?;
        if version != RECORD_VERSION {
            return Err(RecordError::UnsupportedVersion {
                found: version,
                supported: RECORD_VERSION,
            });
        }
        Ok(serde_json::from_str(text)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> FreshnessRecord {
        FreshnessRecord {
            status: FreshnessStatus::PossiblyStale,
            last_synced_at: Some(Millis(1_000)),
            stale_since: Some(Millis(2_000)),
            last_error: Some("exit status 1".into()),
            edit_epoch: 7,
            sync_generation: 3,
            pending: PendingSummary {
                paths: 2,
                whole_workspace: false,
            },
            watcher: Some(WatcherRecord {
                mode: "on".into(),
                state: "running".into(),
                pid: Some(4242),
                since: Some(Millis(500)),
            }),
            ..FreshnessRecord::unknown()
        }
    }

    #[test]
    fn round_trips_through_json() {
        let record = sample();
        let text = record.to_json().unwrap();
        assert!(text.contains("\"status\": \"possibly_stale\""), "{text}");
        assert!(text.contains("\"stale_since\": 2000"), "{text}");
        assert_eq!(FreshnessRecord::from_json(&text).unwrap(), record);
    }

    #[test]
    fn absent_optional_facts_are_omitted_and_read_back_as_none() {
        let text = FreshnessRecord::unknown().to_json().unwrap();
        assert!(!text.contains("last_synced_at"), "{text}");
        assert!(!text.contains("watcher"), "{text}");
        assert_eq!(
            FreshnessRecord::from_json(&text).unwrap(),
            FreshnessRecord::unknown()
        );
    }

    #[test]
    fn another_layout_version_is_refused() {
        let text = r#"{"version": 2, "status": "fresh", "edit_epoch": 1}"#;
        match FreshnessRecord::from_json(text) {
            Err(RecordError::UnsupportedVersion { found, supported }) => {
                assert_eq!((found, supported), (2, RECORD_VERSION));
            }
            other => panic!("expected a version refusal, got {other:?}"),
        }
    }

    #[test]
    fn an_unobserved_record_never_says_fresh_and_keeps_its_facts() {
        let record = FreshnessRecord {
            status: FreshnessStatus::Fresh,
            ..sample()
        };
        let unobserved = record.clone().unobserved();
        assert_eq!(unobserved.status, FreshnessStatus::Unknown);
        assert_eq!(unobserved.watcher, None);
        assert_eq!(unobserved.last_synced_at, record.last_synced_at);
        let frame = record.unobserved_state_frame("/w");
        assert_eq!(frame.status, FreshnessStatus::Unknown);
        assert!(!frame.syncing);
        assert_eq!(frame.watcher, None);
        assert_eq!(frame.last_error.as_deref(), Some("exit status 1"));
        assert_eq!(frame.stale_since, Some(2_000));
        assert_eq!(
            frame.detail.as_deref(),
            Some("not observed (no service running); last recorded status fresh")
        );
    }

    #[test]
    fn garbage_is_malformed_not_a_panic() {
        assert!(matches!(
            FreshnessRecord::from_json("{\"version\": 1, \"status\": 5}"),
            Err(RecordError::Malformed(_))
        ));
        assert!(matches!(
            FreshnessRecord::from_json("not json"),
            Err(RecordError::Malformed(_))
        ));
    }
}
