//! What `/proc` says about a process, read through the `procfs` crate.
//!
//! Why a crate of its own: the service (`cgc-fresh`, a binary) and its
//! benchmarks (`cgc-fresh-bench`, another binary) both ask `/proc` the same
//! questions — is this pid alive, which processes carry this environment
//! variable, what is its start time, how much memory does it use. A binary
//! cannot be a dependency, so the one implementation lives here and both
//! call it. The parsing is `procfs`'s (it handles a `comm` with spaces and
//! parentheses, reads every file of one process through one directory
//! descriptor, and knows each kernel's field layout); this crate only maps
//! its answers to the few facts the service needs and its errors to
//! `io::Error`.
//!
//! Everything here is a snapshot: a process can exit (and its pid be reused)
//! between two reads, so callers treat every answer as "true a moment ago".
//! Errors for processes that vanished or belong to another user are normal
//! and are reported as `io::Error`s (or skipped while scanning), never
//! panics.

// Every dependency is used (dev-dependencies serve only the test targets).
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

use std::io;

use procfs::process::Process;
use procfs::ProcError;

/// The fields of `/proc/<pid>/stat` the service needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: i32,
    /// The executable name as the kernel reports it (at most 15 bytes; may
    /// contain spaces and parentheses).
    pub comm: String,
    /// Single-letter state: `R`, `S`, `D`, `Z` (zombie), `T`, `X`, ...
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
    /// Field 22: start time after boot, in clock ticks. Together with the pid
    /// it identifies one process across pid reuse.
    pub start_time: u64,
}

impl ProcStat {
    /// True for a process that has exited but was not reaped yet.
    pub fn is_zombie(&self) -> bool {
        self.state == 'Z'
    }

    /// True unless the process is a zombie or dead (`X`): such a process
    /// holds no resources but its exit status, and cannot be killed.
    pub fn is_alive(&self) -> bool {
        !matches!(self.state, 'Z' | 'X')
    }
}

impl From<procfs::process::Stat> for ProcStat {
    fn from(stat: procfs::process::Stat) -> Self {
        ProcStat {
            pid: stat.pid,
            comm: stat.comm,
            state: stat.state,
            ppid: stat.ppid,
            pgrp: stat.pgrp,
            session: stat.session,
            start_time: stat.starttime,
        }
    }
}

/// Why a `/proc/<pid>/stat` text could not be understood.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StatParseError {
    #[error("no `(comm)` section in /proc stat line")]
    MissingComm,
    #[error("/proc stat line ends before field {0}")]
    MissingField(usize),
    #[error("/proc stat field {field} is not a number: {value:?}")]
    BadNumber { field: usize, value: String },
}

/// Parses the fields [`ProcStat`] holds from one `/proc/<pid>/stat` line
/// that is already in hand (reading a live process goes through `procfs`:
/// [`read_proc_stat`]).
///
/// Unlike `procfs`, which wants every field a kernel writes, this needs only
/// fields 1–6 and 22, and says which one is missing or malformed. The comm
/// field (2) is wrapped in parentheses but may itself contain spaces and
/// `)`; the kernel never escapes it, so the only safe anchor is the **last**
/// `)` in the line.
pub fn parse_proc_stat(text: &str) -> Result<ProcStat, StatParseError> {
    let open = text.find('(').ok_or(StatParseError::MissingComm)?;
    let close = text.rfind(')').ok_or(StatParseError::MissingComm)?;
    if close < open {
        return Err(StatParseError::MissingComm);
    }
    let pid = parse_number(text[..open].trim(), 1)?;
    let comm = text[open + 1..close].to_string();
    // Fields after comm, numbered from 3 (state).
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    let field = |number: usize| -> Result<&str, StatParseError> {
        rest.get(number - 3)
            .copied()
            .ok_or(StatParseError::MissingField(number))
    };
    let state = field(3)?
        .chars()
        .next()
        .ok_or(StatParseError::MissingField(3))?;
    Ok(ProcStat {
        pid,
        comm,
        state,
        ppid: parse_number(field(4)?, 4)?,
        pgrp: parse_number(field(5)?, 5)?,
        session: parse_number(field(6)?, 6)?,
        start_time: parse_number(field(22)?, 22)?,
    })
}

fn parse_number<T: std::str::FromStr>(value: &str, field: usize) -> Result<T, StatParseError> {
    value.parse().map_err(|_| StatParseError::BadNumber {
        field,
        value: value.to_string(),
    })
}

/// `procfs`'s error as the `io::Error` callers match on: a vanished process
/// is `NotFound`, another user's is `PermissionDenied`.
fn to_io(error: ProcError) -> io::Error {
    match error {
        ProcError::Io(error, _) => error,
        ProcError::NotFound(_) => {
            io::Error::new(io::ErrorKind::NotFound, ProcError::NotFound(None))
        }
        ProcError::PermissionDenied(path) => io::Error::new(
            io::ErrorKind::PermissionDenied,
            ProcError::PermissionDenied(path),
        ),
        other => io::Error::new(io::ErrorKind::InvalidData, other),
    }
}

fn process(pid: i32) -> io::Result<Process> {
    Process::new(pid).map_err(to_io)
}

/// Reads `/proc/<pid>/stat`.
pub fn read_proc_stat(pid: i32) -> io::Result<ProcStat> {
    Ok(process(pid)?.stat().map_err(to_io)?.into())
}

/// The argument vector of a process (`/proc/<pid>/cmdline`). Empty for
/// zombies and kernel threads; an error when it is not UTF-8.
pub fn read_cmdline(pid: i32) -> io::Result<Vec<String>> {
    process(pid)?.cmdline().map_err(to_io)
}

/// The value of `key` in the initial environment of `pid`
/// (`/proc/<pid>/environ`), lossily decoded. `Ok(None)` when the variable
/// is not set.
///
/// Reading another user's process fails with `PermissionDenied`.
pub fn environ_value(pid: i32, key: &str) -> io::Result<Option<String>> {
    env_value_of(&process(pid)?, key)
}

fn env_value_of(process: &Process, key: &str) -> io::Result<Option<String>> {
    let environ = process.environ().map_err(to_io)?;
    Ok(environ
        .get(std::ffi::OsStr::new(key))
        .map(|value| value.to_string_lossy().into_owned()))
}

/// Whether `pid` is a live process; a zombie counts as gone.
pub fn is_alive(pid: i32) -> bool {
    read_proc_stat(pid).is_ok_and(|stat| stat.is_alive())
}

/// Every live process other than this one whose environment has `key` set
/// to a value `matches` accepts, sorted by pid. Processes that vanish or
/// cannot be read while scanning are skipped; zombies are skipped (they
/// hold no resources and cannot be killed).
///
/// Environment and state are read through one directory descriptor per
/// process, so both answers are about the same process even if its pid is
/// reused meanwhile.
pub fn live_processes_with_env(key: &str, matches: impl Fn(&str) -> bool) -> Vec<i32> {
    let own_pid = std::process::id() as i32;
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    let mut pids: Vec<i32> = all
        .filter_map(Result::ok)
        .filter(|process| process.pid() != own_pid)
        .filter(|process| {
            env_value_of(process, key).is_ok_and(|value| value.is_some_and(|v| matches(&v)))
        })
        .filter(|process| {
            process
                .stat()
                .is_ok_and(|stat| !matches!(stat.state, 'Z' | 'X'))
        })
        .map(|process| process.pid())
        .collect();
    pids.sort_unstable();
    pids
}

/// Memory of a process, from `/proc/<pid>/status`, in KiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// `VmRSS`: resident now.
    pub rss_kib: u64,
    /// `VmHWM`: the peak resident size.
    pub peak_rss_kib: u64,
}

/// The resident and peak resident size of `pid`. An error for a kernel
/// thread or a zombie, which report neither.
pub fn memory(pid: i32) -> io::Result<Memory> {
    let status = process(pid)?.status().map_err(to_io)?;
    match (status.vmrss, status.vmhwm) {
        (Some(rss_kib), Some(peak_rss_kib)) => Ok(Memory {
            rss_kib,
            peak_rss_kib,
        }),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("no VmRSS/VmHWM in /proc/{pid}/status"),
        )),
    }
}

/// Context switches of a whole process: the sum over its threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Switches {
    pub voluntary: u64,
    pub nonvoluntary: u64,
    pub threads: usize,
}

/// Sums `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches` over
/// every thread of `pid` (`/proc/<pid>/task/*/status`). A thread that ends
/// during the listing is skipped.
pub fn context_switches(pid: i32) -> io::Result<Switches> {
    let mut sum = Switches::default();
    for task in process(pid)?.tasks().map_err(to_io)? {
        let Ok(status) = task.and_then(|task| task.status()) else {
            continue;
        };
        sum.voluntary += status.voluntary_ctxt_switches.unwrap_or(0);
        sum.nonvoluntary += status.nonvoluntary_ctxt_switches.unwrap_or(0);
        sum.threads += 1;
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    fn a_stat_line_in_hand_is_parsed_by_its_last_parenthesis() {
        let line = "42 (a) b) S 1 42 42 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 77 0 0";
        let stat = parse_proc_stat(line).unwrap();
        assert_eq!(
            (stat.pid, stat.comm.as_str(), stat.start_time),
            (42, "a) b", 77)
        );
        assert_eq!(
            parse_proc_stat("42 (x) S 1 42 42 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 soon"),
            Err(StatParseError::BadNumber {
                field: 22,
                value: "soon".into()
            })
        );
    }

    #[test]
    fn own_stat_matches_own_process() {
        let stat = read_proc_stat(std::process::id() as i32).unwrap();
        assert_eq!(stat.pid, std::process::id() as i32);
        assert!(stat.is_alive());
        assert!(stat.start_time > 0);
    }

    #[test]
    fn a_missing_process_is_not_found() {
        // Above the kernel's pid_max limit (4194304), so never a live pid.
        let error = read_proc_stat(i32::MAX).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        assert!(!is_alive(i32::MAX));
    }

    #[test]
    fn this_process_has_memory_and_threads() {
        let me = std::process::id() as i32;
        let memory = memory(me).unwrap();
        assert!(memory.rss_kib > 0 && memory.peak_rss_kib >= memory.rss_kib);
        assert!(context_switches(me).unwrap().threads >= 1);
    }

    #[test]
    fn a_reaped_child_is_gone() {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        assert!(!is_alive(pid));
    }

    #[test]
    fn processes_are_found_by_an_environment_value() {
        let value = format!("procinfo-test-{}", std::process::id());
        let mut child = Command::new("sleep")
            .arg("30")
            .env("CGC_FRESH_PROCINFO_TEST", &value)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // Right after spawning, the kernel may not have laid out the new
        // environment yet (/proc/<pid>/environ reads empty): look again.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut found = live_processes_with_env("CGC_FRESH_PROCINFO_TEST", |v| v == value);
        while found.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
            found = live_processes_with_env("CGC_FRESH_PROCINFO_TEST", |v| v == value);
        }
        let prefix = live_processes_with_env("CGC_FRESH_PROCINFO_TEST", |v| {
            v.starts_with("procinfo-test-")
        });
        let set = environ_value(pid, "CGC_FRESH_PROCINFO_TEST").unwrap();
        let unset = environ_value(pid, "NO_SUCH_VARIABLE_HERE").unwrap();
        let cmdline = read_cmdline(pid).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(found, vec![pid]);
        assert!(prefix.contains(&pid));
        assert_eq!(set.as_deref(), Some(value.as_str()));
        assert_eq!(unset, None);
        assert_eq!(cmdline, ["sleep", "30"]);
        assert!(live_processes_with_env("CGC_FRESH_PROCINFO_TEST", |v| v == value).is_empty());
    }
}
