//! One service per workspace.
//!
//! The service holds an exclusive `flock` on `<id>.lock` in the runtime
//! directory for its whole life and writes its pid into it. A second
//! `serve` for the same workspace fails to take the lock and reports the
//! holder instead of stealing the socket; a socket file left by a service
//! that died holds no lock, so it is known to be stale and is replaced.
//! `flock` is released by the kernel when the holder dies, however it dies.
//!
//! The lock file carries the sticky bit: the XDG runtime directory (and the
//! temp directory of the fallback) may be cleaned periodically, and
//! `systemd-tmpfiles` leaves files with the sticky bit alone, as the XDG
//! base directory specification provides. If the file goes all the same
//! (`rm -rf` of the directory), the socket guard takes the lock again on a
//! new file at once (see `service/socket_guard.rs`).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The held lock; dropping it releases the workspace.
#[derive(Debug)]
pub struct InstanceLock {
    /// Held open for the life of the lock: closing it releases the lock.
    file: File,
}

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("already running (pid {})", .pid.map(|p| p.to_string()).unwrap_or_else(|| "unknown".into()))]
    Held { pid: Option<u32> },
    #[error("cannot open lock file {path}: {source}")]
    Io { path: String, source: io::Error },
}

impl InstanceLock {
    /// Takes the lock without waiting and records our pid in it.
    pub fn acquire(path: &Path) -> Result<InstanceLock, LockError> {
        let io_err = |source| LockError::Io {
            path: path.display().to_string(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(io_err)?;
        // SAFETY: flock on a descriptor we own; no memory is passed.
        let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if locked != 0 {
            return Err(LockError::Held {
                pid: read_pid(&mut file),
            });
        }
        file.set_len(0).map_err(io_err)?;
        file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        writeln!(file, "{}", std::process::id()).map_err(io_err)?;
        file.flush().map_err(io_err)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o1600))
            .map_err(io_err)?;
        Ok(InstanceLock { file })
    }

    /// Whether `path` still names the file this lock holds (not deleted,
    /// not replaced by another file).
    pub fn is_at(&self, path: &Path) -> bool {
        match (self.file.metadata(), std::fs::symlink_metadata(path)) {
            (Ok(held), Ok(there)) => held.dev() == there.dev() && held.ino() == there.ino(),
            _ => false,
        }
    }
}

fn read_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_acquire_reports_the_holder_pid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.lock");
        let first = InstanceLock::acquire(&path).unwrap();
        // flock locks belong to the open file description, so a second
        // open in the same process conflicts just like another process.
        match InstanceLock::acquire(&path) {
            Err(LockError::Held { pid }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected Held, got {other:?}"),
        }
        drop(first);
        assert!(InstanceLock::acquire(&path).is_ok());
    }

    #[test]
    fn the_lock_file_is_sticky_and_knows_when_it_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.lock");
        let lock = InstanceLock::acquire(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o1600);
        assert!(lock.is_at(&path));
        std::fs::remove_file(&path).unwrap();
        assert!(!lock.is_at(&path));
        // A new file at the path is not the one held, and can be locked.
        let again = InstanceLock::acquire(&path).unwrap();
        assert!(!lock.is_at(&path));
        assert!(again.is_at(&path));
    }
}
