//! The start-up sweep: kill what an earlier instance of this service left
//! running (it was SIGKILLed, or the machine's OOM killer took it).
//!
//! Two nets: every recorded group whose leader's start time still matches
//! (so a reused pid is never touched), and every process that still carries
//! an owner token of this workspace — which is what finds a grandchild that
//! daemonized into its own session and so escaped its group.

use crate::process::proc_info::{processes_with_owner_prefix, read_proc_stat};

use super::registry::{Loaded, Registry};

/// What the sweep did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    pub groups_killed: Vec<i32>,
    pub stale_entries: usize,
    pub token_holders_killed: Vec<i32>,
    pub registry_problem: Option<String>,
}

/// Sweeps leftovers of earlier instances of the service for this workspace.
/// `workspace_prefix` is the owner-token prefix every instance for this
/// workspace uses; `own_token` is ours (never swept).
pub fn sweep_leftovers(
    registry: &Registry,
    workspace_prefix: &str,
    own_token: &str,
) -> SweepReport {
    let mut report = SweepReport::default();
    match registry.load() {
        Loaded::Missing => {}
        Loaded::Corrupt(problem) => report.registry_problem = Some(problem),
        Loaded::Found(file) => {
            for entry in file.children {
                let matches = read_proc_stat(entry.pid)
                    .map(|stat| stat.start_time == entry.start_time)
                    .unwrap_or(false);
                if matches && entry.pgid > 1 {
                    // SAFETY: killpg on a group whose leader we verified by start time.
                    unsafe { libc::killpg(entry.pgid, libc::SIGKILL) };
                    report.groups_killed.push(entry.pgid);
                } else {
                    report.stale_entries += 1;
                }
            }
        }
    }
    let own_prefix = format!("{own_token}.");
    for pid in processes_with_owner_prefix(workspace_prefix) {
        let ours = crate::process::proc_info::owner_token_of(pid)
            .is_some_and(|t| t.starts_with(&own_prefix));
        if ours {
            continue;
        }
        // SAFETY: kill on a pid that carries this workspace's owner token.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        report.token_holders_killed.push(pid);
    }
    report
}
