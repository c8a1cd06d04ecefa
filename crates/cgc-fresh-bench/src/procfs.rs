//! What /proc says about a process: memory, context switches, liveness,
//! and which processes carry a given environment entry.

use std::fs;
use std::path::Path;

use anyhow::{anyhow, Context as _, Result};

/// A `kB` field of /proc/<pid>/status (`VmRSS`, `VmHWM`, ...), in KiB.
pub fn status_kib(pid: i32, field: &str) -> Result<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    status_number(&text, field).ok_or_else(|| anyhow!("no {field} in /proc/{pid}/status"))
}

/// The leading number of a `Name:\tvalue [unit]` line of a status text.
fn status_number(text: &str, field: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        if key != field {
            return None;
        }
        value.split_whitespace().next()?.parse().ok()
    })
}

/// Context switches of a whole process: the sum over its threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Switches {
    pub voluntary: u64,
    pub nonvoluntary: u64,
    pub threads: usize,
}

/// Sums `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches` over
/// every thread in /proc/<pid>/task/*/status.
pub fn context_switches(pid: i32) -> Result<Switches> {
    let tasks = Path::new("/proc").join(pid.to_string()).join("task");
    let mut sum = Switches::default();
    for entry in fs::read_dir(&tasks).with_context(|| format!("listing {}", tasks.display()))? {
        let status_path = entry?.path().join("status");
        // A thread that ended between the listing and the read is skipped.
        let Ok(text) = fs::read_to_string(&status_path) else {
            continue;
        };
        sum.voluntary += status_number(&text, "voluntary_ctxt_switches").unwrap_or(0);
        sum.nonvoluntary += status_number(&text, "nonvoluntary_ctxt_switches").unwrap_or(0);
        sum.threads += 1;
    }
    Ok(sum)
}

/// Whether `pid` is a live process; a zombie counts as gone (it holds no
/// resources but its exit status).
pub fn is_alive(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !matches!(stat_state(&stat), Some('Z') | Some('X') | None),
        Err(_) => false,
    }
}

/// The state letter of a /proc/<pid>/stat line (after the `(comm)` field,
/// which may itself contain spaces and parentheses).
fn stat_state(stat: &str) -> Option<char> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.trim_start().chars().next()
}

/// Live processes whose environment contains exactly `entry`
/// (`NAME=value`), other than this one.
pub fn processes_with_env_entry(entry: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .filter(|pid| *pid != me)
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                environ
                    .split(|b| *b == 0)
                    .any(|var| var == entry.as_bytes())
            })
        })
        .filter(|pid| is_alive(*pid))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_numbers_are_read_by_exact_field_name() {
        let text = "Name:\tcgc-fresh\nVmHWM:\t    9000 kB\nVmRSS:\t    8123 kB\nvoluntary_ctxt_switches:\t12\n";
        assert_eq!(status_number(text, "VmRSS"), Some(8123));
        assert_eq!(status_number(text, "VmHWM"), Some(9000));
        assert_eq!(status_number(text, "voluntary_ctxt_switches"), Some(12));
        assert_eq!(status_number(text, "Vm"), None);
    }

    #[test]
    fn the_state_letter_follows_the_last_parenthesis() {
        assert_eq!(stat_state("42 (a) b) (c) Z 1 2 3"), Some('Z'));
        assert_eq!(stat_state("42 (cgc-fresh) S 1"), Some('S'));
        assert_eq!(stat_state("garbage"), None);
    }

    #[test]
    fn this_process_is_alive_and_has_memory_and_threads() {
        let me = std::process::id() as i32;
        assert!(is_alive(me));
        assert!(status_kib(me, "VmRSS").unwrap() > 0);
        assert!(context_switches(me).unwrap().threads >= 1);
    }

    #[test]
    fn a_reaped_child_is_gone() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        assert!(!is_alive(pid));
    }

    #[test]
    fn processes_are_found_by_an_environment_entry() {
        let marker = format!("CGC_FRESH_BENCH_TEST={}", std::process::id());
        let (name, value) = marker.split_once('=').unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env(name, value)
            .spawn()
            .unwrap();
        let found = processes_with_env_entry(&marker);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(found, vec![child.id() as i32]);
    }
}
