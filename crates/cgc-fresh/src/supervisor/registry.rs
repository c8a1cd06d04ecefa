//! The registry of live children, persisted so that a later instance of the
//! service can clean up after one that died without doing so.
//!
//! It lives in the workspace's state directory (`children.json`, beside the
//! instance lock that guards it; see `instance_lock.rs`). Written atomically
//! (`atomic_file.rs`) on every change, read without following a symlink,
//! and removed when the service stops with no child left. A missing or
//! corrupt file is survived with a warning: it only ever makes the start-up
//! sweep less thorough, and the owner-token scan covers that. Its content is
//! never trusted on its own: the sweep checks every entry against the
//! running process (`supervisor/sweep.rs`).

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use crate::atomic_file::write_atomically;

/// One live child as recorded on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryEntry {
    pub id: u64,
    pub kind: String,
    pub session: Option<String>,
    pub pid: i32,
    pub pgid: i32,
    /// `/proc/<pid>/stat` start time (clock ticks): tells a reused pid apart.
    pub start_time: u64,
    pub owner_token: String,
}

/// The file's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryFile {
    pub version: u32,
    pub service_pid: u32,
    pub service_token: String,
    pub children: Vec<RegistryEntry>,
}

/// Reads and writes the registry at one path.
#[derive(Debug, Clone)]
pub struct Registry {
    path: PathBuf,
}

/// What reading an earlier registry found.
#[derive(Debug)]
pub enum Loaded {
    Missing,
    Found(RegistryFile),
    Corrupt(String),
}

impl Registry {
    pub fn new(path: PathBuf) -> Registry {
        Registry { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn load(&self) -> Loaded {
        let read = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(&self.path)
            .and_then(|mut file| {
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes).map(|_| bytes)
            });
        match read {
            Ok(bytes) => match serde_json::from_slice::<RegistryFile>(&bytes) {
                Ok(file) => Loaded::Found(file),
                Err(e) => Loaded::Corrupt(e.to_string()),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => Loaded::Missing,
            Err(e) => Loaded::Corrupt(e.to_string()),
        }
    }

    /// Replaces the file atomically.
    pub fn store(&self, file: &RegistryFile) -> io::Result<()> {
        write_atomically(
            &self.path,
            &serde_json::to_vec_pretty(file).map_err(io::Error::other)?,
        )
    }

    /// Removes the file (nothing to sweep after a clean stop). A missing
    /// file is fine.
    pub fn remove(&self) -> io::Result<()> {
        match fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registry_written_with_the_old_generation_field_still_loads() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::new(dir.path().join("r.json"));
        std::fs::write(
            registry.path(),
            r#"{"version":1,"service_pid":7,"service_token":"t","children":[
                {"id":3,"kind":"sync","session":null,"pid":9,"pgid":9,
                 "start_time":5,"owner_token":"t.3","generation":3}]}"#,
        )
        .unwrap();
        let Loaded::Found(file) = registry.load() else {
            panic!("the old layout must still load")
        };
        assert_eq!(file.children[0].pid, 9);
        // Written again, the unused field is gone.
        registry.store(&file).unwrap();
        let text = std::fs::read_to_string(registry.path()).unwrap();
        assert!(!text.contains("generation"), "{text}");
    }

    #[test]
    fn round_trips_and_reports_missing_and_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::new(dir.path().join("r.json"));
        assert!(matches!(registry.load(), Loaded::Missing));
        let file = RegistryFile {
            version: 1,
            service_pid: 7,
            service_token: "t".into(),
            children: vec![RegistryEntry {
                id: 1,
                kind: "sync".into(),
                session: Some("s".into()),
                pid: 10,
                pgid: 10,
                start_time: 99,
                owner_token: "t.1".into(),
            }],
        };
        registry.store(&file).unwrap();
        match registry.load() {
            Loaded::Found(read) => assert_eq!(read, file),
            other => panic!("{other:?}"),
        }
        fs::write(registry.path(), b"{ torn").unwrap();
        assert!(matches!(registry.load(), Loaded::Corrupt(_)));
        // No temp files are left behind.
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        registry.remove().unwrap();
        assert!(matches!(registry.load(), Loaded::Missing));
        registry.remove().unwrap();
    }

    #[test]
    fn a_symlink_at_the_registry_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere.json");
        fs::write(
            &target,
            br#"{"version":1,"service_pid":1,"service_token":"t","children":[]}"#,
        )
        .unwrap();
        let path = dir.path().join("r.json");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert!(matches!(Registry::new(path).load(), Loaded::Corrupt(_)));
    }
}
