//! Replacing a small file atomically: readers see the old content or the
//! new one, never a torn one, and a crash leaves one of the two.
//!
//! Used for the child registry (`supervisor/registry.rs`) and the freshness
//! record (`service/store.rs`). The temp file beside the target is where a
//! careless write could do harm, so it is created, never reused:
//!
//! - `O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC`, mode 0600: an existing file
//!   or a symlink planted at the temp name is never opened, truncated or
//!   followed — the open fails and the next name is tried;
//! - a unique name: `.<name>.<pid>.<counter>.tmp`, so two writers (two
//!   threads, or a service and a refused second one) never share one;
//! - the content is fsynced before the rename, and the directory after it,
//!   so the new name survives a crash;
//! - on any failure the temp file is removed; the target is untouched.
//!
//! `rename(2)` replaces the target's directory entry, never what a symlink
//! at the target points to.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// How many names are tried before giving up (each taken by another file).
const NAME_ATTEMPTS: u32 = 16;

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `path` through a fresh temp file in the same directory.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} has no file name", path.display()),
            )
        })?;
    let (tmp, mut file) = create_temp(dir, &name)?;
    let result = (|| {
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)?;
        // The rename is durable once the directory is.
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        // Gone already when the rename happened; otherwise ours to remove.
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Creates a new, empty, user-only temp file for `name` in `dir`.
fn create_temp(dir: &Path, name: &str) -> io::Result<(PathBuf, File)> {
    let mut last = None;
    for _ in 0..NAME_ATTEMPTS {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
        {
            Ok(file) => return Ok((tmp, file)),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => last = Some(error),
            Err(error) => return Err(error),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no temp file name was free")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replaces_the_file_user_only_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomically(&path, b"one").unwrap();
        write_atomically(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        assert_eq!(names(dir.path()), vec!["state.json"]);
    }

    #[test]
    fn a_symlink_at_the_target_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        let path = dir.path().join("children.json");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        write_atomically(&path, b"{}").unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert!(!fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(&path).unwrap(), b"{}");
    }

    #[test]
    fn a_symlink_planted_at_a_temp_name_is_skipped_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, b"precious").unwrap();
        // Plant links at the next few names this process would use.
        let next = COUNTER.load(Ordering::Relaxed);
        for n in next..next + 4 {
            let tmp = dir
                .path()
                .join(format!(".r.json.{}.{n}.tmp", std::process::id()));
            std::os::unix::fs::symlink(&victim, tmp).unwrap();
        }
        write_atomically(&dir.path().join("r.json"), b"new").unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert_eq!(fs::read(dir.path().join("r.json")).unwrap(), b"new");
    }

    #[test]
    fn a_failed_write_removes_its_temp_file_and_keeps_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x");
        write_atomically(&path, b"old").unwrap();
        // A directory at the target: the rename fails.
        let blocked = dir.path().join("d");
        fs::create_dir(&blocked).unwrap();
        fs::write(blocked.join("inside"), b"").unwrap();
        assert!(write_atomically(&blocked, b"new").is_err());
        assert_eq!(names(dir.path()), vec!["d", "x"]);
        assert_eq!(fs::read(&path).unwrap(), b"old");
        // A read-only directory: the temp file cannot be created at all.
        let ro = dir.path().join("ro");
        fs::create_dir(&ro).unwrap();
        fs::set_permissions(&ro, fs::Permissions::from_mode(0o500)).unwrap();
        let result = write_atomically(&ro.join("f"), b"new");
        // (root ignores the mode; then the write simply succeeds.)
        if result.is_err() {
            assert!(names(&ro).is_empty());
        }
    }
}
