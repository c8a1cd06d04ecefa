//! What /proc says about a process: memory, context switches, liveness,
//! and which processes carry a given environment entry. The readers are
//! `cgc-fresh-procinfo`'s, the same ones the service uses; this module only
//! adds the context the benchmark's error messages want.

use anyhow::{Context as _, Result};

pub use cgc_fresh_procinfo::{is_alive, Switches};

/// `VmRSS` of `pid`, in KiB.
pub fn rss_kib(pid: i32) -> Result<u64> {
    Ok(memory(pid)?.rss_kib)
}

/// `VmHWM` (the peak resident size) of `pid`, in KiB.
pub fn peak_rss_kib(pid: i32) -> Result<u64> {
    Ok(memory(pid)?.peak_rss_kib)
}

fn memory(pid: i32) -> Result<cgc_fresh_procinfo::Memory> {
    cgc_fresh_procinfo::memory(pid).with_context(|| format!("reading /proc/{pid}/status"))
}

/// Context switches summed over every thread of `pid`.
pub fn context_switches(pid: i32) -> Result<Switches> {
    cgc_fresh_procinfo::context_switches(pid)
        .with_context(|| format!("reading the threads of /proc/{pid}"))
}

/// Live processes whose environment contains exactly `entry`
/// (`NAME=value`), other than this one.
pub fn processes_with_env_entry(entry: &str) -> Vec<i32> {
    let Some((name, value)) = entry.split_once('=') else {
        return Vec::new();
    };
    cgc_fresh_procinfo::live_processes_with_env(name, |candidate| candidate == value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_has_memory_and_threads() {
        let me = std::process::id() as i32;
        assert!(is_alive(me));
        let rss = rss_kib(me).unwrap();
        assert!(rss > 0);
        // Read after: the peak never falls below an earlier resident size.
        assert!(peak_rss_kib(me).unwrap() >= rss);
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
        // Right after spawning, the kernel may not have laid out the new
        // environment yet (/proc/<pid>/environ reads empty): look again.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut found = processes_with_env_entry(&marker);
        while found.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
            found = processes_with_env_entry(&marker);
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(found, vec![child.id() as i32]);
    }
}
