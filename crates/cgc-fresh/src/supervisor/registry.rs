//! The registry of live children, persisted so that a later instance of the
//! service can clean up after one that died without doing so.
//!
//! Written atomically (temp file, fsync, rename) on every change. A missing
//! or corrupt file is survived with a warning: it only ever makes the
//! start-up sweep less thorough, and the owner-token scan covers that.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

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
    pub generation: u64,
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
        match fs::read(&self.path) {
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
}

/// Writes `bytes` to `path` through a temp file in the same directory:
/// readers see the old content or the new, never a torn one.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

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
                generation: 1,
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
    }
}
