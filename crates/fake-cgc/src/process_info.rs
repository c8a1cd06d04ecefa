//! Who and where this process is, for the invocation log.

use nix::unistd::{getpgrp, getpid, getppid, getsid};

/// Process identity and working directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: i32,
    pub ppid: i32,
    pub pgid: i32,
    pub sid: i32,
    /// Lossy UTF-8; empty if the directory is gone.
    pub cwd: String,
}

impl ProcessInfo {
    /// The current process.
    pub fn current() -> ProcessInfo {
        ProcessInfo {
            pid: getpid().as_raw(),
            ppid: getppid().as_raw(),
            pgid: getpgrp().as_raw(),
            sid: getsid(None).map_or(-1, |sid| sid.as_raw()),
            cwd: std::env::current_dir()
                .map(|dir| dir.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }
    }
}
