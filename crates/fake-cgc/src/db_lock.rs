//! The embedded-database lock, taken exactly as Kùzu takes it: a POSIX
//! advisory write lock (`fcntl(F_SETLK)`, `F_WRLCK`, whole file) on the
//! database file, held until the process ends. Another process's
//! `fcntl(F_GETLK)` then reports `F_WRLCK` and this process's pid.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Resolves a scenario path: `~/` is `$HOME`, a relative path is relative
/// to the working directory.
pub fn resolve_path(path: &str, cwd: &Path) -> PathBuf {
    let expanded = match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    };
    if expanded.is_absolute() {
        expanded
    } else {
        cwd.join(expanded)
    }
}

/// The outcome of one attempt.
pub enum LockAttempt {
    /// We hold the lock for as long as the file stays open.
    Held(File),
    /// Another process holds a conflicting lock.
    Busy,
}

/// Opens (creating parent directories and the file if missing) and tries
/// to write-lock the whole file once, without waiting.
pub fn try_lock(path: &Path) -> io::Result<LockAttempt> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o644)
        .open(path)?;
    let request = libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0, // whole file, however long it grows
        l_pid: 0,
    };
    loop {
        match nix::fcntl::fcntl(file.as_raw_fd(), nix::fcntl::FcntlArg::F_SETLK(&request)) {
            Ok(_) => return Ok(LockAttempt::Held(file)),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EACCES) => {
                return Ok(LockAttempt::Busy)
            }
            Err(errno) => return Err(errno.into()),
        }
    }
}
