//! The start-up sweep: kill what an earlier instance of this service left
//! running (it was SIGKILLed, or the machine's OOM killer took it).
//!
//! Nothing is killed on the word of the registry file alone, nor because a
//! process merely carries this workspace's token prefix. Every child (and
//! everything it starts) carries `CGC_FRESH_OWNER=cgc-fresh:<ws-id>:<pid>-<start>.<child>`,
//! where `<pid>-<start>` names the service instance that started it: its pid
//! and its start time in clock ticks (`/proc/<pid>/stat` field 22), which
//! together name one process across pid reuse. A process is a leftover —
//! and is killed — only if
//!
//! 1. it carries an owner token with this workspace's prefix,
//! 2. the token is not ours, and
//! 3. the instance the token names is dead: no process with that pid, a
//!    zombie, or a process with another start time.
//!
//! So a live service of the same workspace (one that lost its lock, or an
//! older version that kept its lock elsewhere) keeps its children, and a
//! process without our token is never touched.
//!
//! Two nets, both under that rule:
//!
//! - **registry entries** (`children.json`): the group is killed only if
//!   the recorded leader still runs with the recorded start time, still
//!   leads the recorded group, and itself carries a leftover token. A
//!   forged entry naming an unrelated process is left alone and counted as
//!   stale, with the reason.
//! - **token holders**: every process carrying a leftover token — what
//!   finds a grandchild that daemonized into its own session and so escaped
//!   its group.
//!
//! The decision is a plain function over a [`ProcessView`] so that it can
//! be tested without processes; [`sweep_leftovers`] reads `/proc` and kills.

use crate::process::proc_info::{
    owner_token_of, processes_with_owner_prefix, read_proc_stat, ProcStat,
};

use crate::process::kill;
use crate::process::signal::Signal;

use super::registry::{Loaded, Registry};
use super::InstanceId;

/// What the sweep needs to know about processes (from `/proc`, or a table
/// in tests). Every answer is a snapshot.
pub trait ProcessView {
    /// The process's stat, `None` when it is gone or unreadable.
    fn stat(&self, pid: i32) -> Option<ProcStat>;
    /// Its owner token, `None` when it has none or it cannot be read.
    fn owner_token(&self, pid: i32) -> Option<String>;
    /// Live processes (not this one) whose owner token starts with `prefix`.
    fn token_holders(&self, prefix: &str) -> Vec<i32>;
}

/// The real processes, through `/proc`.
pub struct LiveProcesses;

impl ProcessView for LiveProcesses {
    fn stat(&self, pid: i32) -> Option<ProcStat> {
        read_proc_stat(pid).ok()
    }
    fn owner_token(&self, pid: i32) -> Option<String> {
        owner_token_of(pid)
    }
    fn token_holders(&self, prefix: &str) -> Vec<i32> {
        processes_with_owner_prefix(prefix)
    }
}

/// Why a process (or a registry entry) was not killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spared {
    /// The token is this instance's.
    Ours,
    /// The instance the token names is running.
    InstanceAlive,
    /// The process carries no owner token (or it cannot be read).
    NoToken,
    /// Its token belongs to another workspace.
    OtherWorkspace,
    /// Its token has our prefix but names no instance we can check.
    Unverifiable,
    /// Registry entry: no process with that pid now.
    LeaderGone,
    /// Registry entry: a process with that pid, started at another time.
    StartTimeDiffers,
    /// Registry entry: the process does not lead the recorded group.
    NotGroupLeader,
    /// Registry entry: a group id no process group can have.
    BadGroup,
}

impl Spared {
    pub fn as_str(self) -> &'static str {
        match self {
            Spared::Ours => "ours",
            Spared::InstanceAlive => "instance_alive",
            Spared::NoToken => "no_owner_token",
            Spared::OtherWorkspace => "other_workspace",
            Spared::Unverifiable => "unverifiable_token",
            Spared::LeaderGone => "leader_gone",
            Spared::StartTimeDiffers => "start_time_differs",
            Spared::NotGroupLeader => "not_group_leader",
            Spared::BadGroup => "bad_group",
        }
    }
}

/// What the sweep decided.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SweepPlan {
    /// Process groups to SIGKILL (from registry entries).
    pub groups: Vec<i32>,
    /// Processes to SIGKILL (leftover token holders).
    pub pids: Vec<i32>,
    /// Registry entries not acted on: (recorded pid, why).
    pub stale: Vec<(i32, Spared)>,
    /// Token holders left alone (other than ours): (pid, why).
    pub spared: Vec<(i32, Spared)>,
    pub registry_problem: Option<String>,
}

/// What the sweep did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    pub groups_killed: Vec<i32>,
    pub stale_entries: usize,
    pub token_holders_killed: Vec<i32>,
    pub plan: SweepPlan,
    pub registry_problem: Option<String>,
}

/// Whether the process carrying `token` is a leftover of a dead instance of
/// this workspace (`Ok`) or why it is not.
pub fn judge_token(
    view: &dyn ProcessView,
    token: Option<&str>,
    workspace_prefix: &str,
    own: InstanceId,
) -> Result<(), Spared> {
    let token = token.ok_or(Spared::NoToken)?;
    if !token.starts_with(workspace_prefix) {
        return Err(Spared::OtherWorkspace);
    }
    let instance = InstanceId::from_token(token, workspace_prefix).ok_or(Spared::Unverifiable)?;
    if instance == own {
        return Err(Spared::Ours);
    }
    let alive = view
        .stat(instance.pid)
        .is_some_and(|stat| stat.start_time == instance.start_time && !stat.is_zombie());
    if alive {
        return Err(Spared::InstanceAlive);
    }
    Ok(())
}

/// Decides what to kill: see the module docs.
pub fn plan_sweep(
    loaded: Loaded,
    view: &dyn ProcessView,
    workspace_prefix: &str,
    own: InstanceId,
) -> SweepPlan {
    let mut plan = SweepPlan::default();
    match loaded {
        Loaded::Missing => {}
        Loaded::Corrupt(problem) => plan.registry_problem = Some(problem),
        Loaded::Found(file) => {
            for entry in file.children {
                let verdict = (|| {
                    if entry.pgid <= 1 || entry.pid <= 1 {
                        return Err(Spared::BadGroup);
                    }
                    let stat = view.stat(entry.pid).ok_or(Spared::LeaderGone)?;
                    if stat.start_time != entry.start_time {
                        return Err(Spared::StartTimeDiffers);
                    }
                    if stat.pgrp != entry.pgid {
                        return Err(Spared::NotGroupLeader);
                    }
                    let token = view.owner_token(entry.pid);
                    judge_token(view, token.as_deref(), workspace_prefix, own)
                })();
                match verdict {
                    Ok(()) if !plan.groups.contains(&entry.pgid) => plan.groups.push(entry.pgid),
                    Ok(()) => {}
                    Err(why) => plan.stale.push((entry.pid, why)),
                }
            }
        }
    }
    for pid in view.token_holders(workspace_prefix) {
        let token = view.owner_token(pid);
        match judge_token(view, token.as_deref(), workspace_prefix, own) {
            Ok(()) => plan.pids.push(pid),
            Err(Spared::Ours) => {}
            Err(why) => plan.spared.push((pid, why)),
        }
    }
    plan
}

/// Sweeps leftovers of earlier instances of the service for this workspace.
/// `workspace_prefix` is the owner-token prefix every instance for this
/// workspace uses; `own` is this instance (never swept).
pub fn sweep_leftovers(
    registry: &Registry,
    workspace_prefix: &str,
    own: InstanceId,
) -> SweepReport {
    let mut plan = plan_sweep(registry.load(), &LiveProcesses, workspace_prefix, own);
    // Groups whose leader we verified by start time, group and a leftover
    // owner token; pids carrying a token of a dead instance of ours.
    for &pgid in &plan.groups {
        let _ = kill::signal_group(pgid, Signal::KILL);
    }
    for &pid in &plan.pids {
        kill::kill_process(pid);
    }
    SweepReport {
        groups_killed: plan.groups.clone(),
        stale_entries: plan.stale.len(),
        token_holders_killed: plan.pids.clone(),
        registry_problem: plan.registry_problem.take(),
        plan,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervisor::registry::{RegistryEntry, RegistryFile};
    use std::collections::HashMap;

    const WS: &str = "cgc-fresh:0123456789abcdef:";

    /// A process table: pid → (stat, token).
    #[derive(Default)]
    struct Table(HashMap<i32, (ProcStat, Option<String>)>);

    impl Table {
        fn with(mut self, pid: i32, pgrp: i32, start: u64, token: Option<&str>) -> Table {
            self.0.insert(
                pid,
                (
                    ProcStat {
                        pid,
                        comm: "p".into(),
                        state: 'S',
                        ppid: 1,
                        pgrp,
                        session: pgrp,
                        start_time: start,
                    },
                    token.map(str::to_string),
                ),
            );
            self
        }
        fn zombie(mut self, pid: i32) -> Table {
            if let Some((stat, _)) = self.0.get_mut(&pid) {
                stat.state = 'Z';
            }
            self
        }
    }

    impl ProcessView for Table {
        fn stat(&self, pid: i32) -> Option<ProcStat> {
            self.0.get(&pid).map(|(stat, _)| stat.clone())
        }
        fn owner_token(&self, pid: i32) -> Option<String> {
            self.0.get(&pid).and_then(|(_, token)| token.clone())
        }
        fn token_holders(&self, prefix: &str) -> Vec<i32> {
            let mut pids: Vec<i32> = self
                .0
                .iter()
                .filter(|(_, (stat, token))| {
                    !stat.is_zombie() && token.as_deref().is_some_and(|t| t.starts_with(prefix))
                })
                .map(|(pid, _)| *pid)
                .collect();
            pids.sort();
            pids
        }
    }

    const OWN: InstanceId = InstanceId {
        pid: 100,
        start_time: 5000,
    };

    fn registry(entries: &[(i32, i32, u64)]) -> Loaded {
        Loaded::Found(RegistryFile {
            version: 1,
            service_pid: 1,
            service_token: format!("{WS}1-1"),
            children: entries
                .iter()
                .enumerate()
                .map(|(i, &(pid, pgid, start_time))| RegistryEntry {
                    id: i as u64 + 1,
                    kind: "sync".into(),
                    session: None,
                    pid,
                    pgid,
                    start_time,
                    owner_token: format!("{WS}1-1.{}", i + 1),
                })
                .collect(),
        })
    }

    #[test]
    fn leftovers_of_a_dead_instance_are_killed_by_group_and_by_token() {
        // Instance 50 (started at 400) is gone; its sync (group 60) and a
        // daemon in its own session (70) remain.
        let token = format!("{WS}50-400.1");
        let table = Table::default()
            .with(OWN.pid, OWN.pid, OWN.start_time, None)
            .with(60, 60, 900, Some(&token))
            .with(70, 70, 950, Some(&token));
        let plan = plan_sweep(registry(&[(60, 60, 900)]), &table, WS, OWN);
        assert_eq!(plan.groups, vec![60]);
        assert_eq!(plan.pids, vec![60, 70]);
        assert!(plan.stale.is_empty() && plan.spared.is_empty(), "{plan:?}");
    }

    #[test]
    fn a_reused_instance_pid_counts_as_dead() {
        // Pid 50 runs again, but it is another process (another start).
        let token = format!("{WS}50-400.1");
        let table = Table::default()
            .with(50, 50, 401, None)
            .with(70, 70, 950, Some(&token));
        assert_eq!(plan_sweep(Loaded::Missing, &table, WS, OWN).pids, vec![70]);
        // And a zombie instance is dead too.
        let table =
            Table::default()
                .with(50, 50, 400, None)
                .zombie(50)
                .with(70, 70, 950, Some(&token));
        assert_eq!(plan_sweep(Loaded::Missing, &table, WS, OWN).pids, vec![70]);
    }

    #[test]
    fn children_of_a_live_instance_and_our_own_are_spared() {
        let live = format!("{WS}50-400.1");
        let ours = format!("{WS}{}-{}.3", OWN.pid, OWN.start_time);
        let table = Table::default()
            .with(50, 50, 400, None)
            .with(60, 60, 900, Some(&live))
            .with(61, 61, 901, Some(&ours));
        let plan = plan_sweep(registry(&[(60, 60, 900), (61, 61, 901)]), &table, WS, OWN);
        assert!(plan.groups.is_empty() && plan.pids.is_empty(), "{plan:?}");
        assert_eq!(
            plan.stale,
            vec![(60, Spared::InstanceAlive), (61, Spared::Ours)]
        );
        assert_eq!(plan.spared, vec![(60, Spared::InstanceAlive)]);
    }

    #[test]
    fn a_forged_registry_entry_naming_an_unrelated_process_is_stale() {
        // `setsid sleep 60`: its own group, the right start time, no token.
        let table = Table::default().with(80, 80, 1234, None).with(
            81,
            81,
            99,
            Some("cgc-fresh:ffffffffffffffff:1-1.1"),
        );
        let plan = plan_sweep(
            registry(&[(80, 80, 1234), (81, 81, 99), (82, 82, 5), (80, 90, 1234)]),
            &table,
            WS,
            OWN,
        );
        assert!(plan.groups.is_empty() && plan.pids.is_empty(), "{plan:?}");
        assert_eq!(
            plan.stale,
            vec![
                (80, Spared::NoToken),
                (81, Spared::OtherWorkspace),
                (82, Spared::LeaderGone),
                (80, Spared::NotGroupLeader),
            ]
        );
    }

    #[test]
    fn registry_entries_must_match_start_time_and_a_sane_group() {
        let token = format!("{WS}50-400.1");
        let table = Table::default().with(60, 60, 900, Some(&token));
        let plan = plan_sweep(registry(&[(60, 60, 899), (60, 1, 900)]), &table, WS, OWN);
        assert!(plan.groups.is_empty());
        assert_eq!(
            plan.stale,
            vec![(60, Spared::StartTimeDiffers), (60, Spared::BadGroup)]
        );
        // The token net still finds the process itself.
        assert_eq!(plan.pids, vec![60]);
    }

    #[test]
    fn a_token_with_our_prefix_but_no_instance_is_left_alone() {
        let table = Table::default()
            .with(60, 60, 900, Some(&format!("{WS}garbage")))
            .with(61, 61, 900, Some(&format!("{WS}12-x.1")));
        let plan = plan_sweep(Loaded::Missing, &table, WS, OWN);
        assert!(plan.pids.is_empty());
        assert_eq!(
            plan.spared,
            vec![(60, Spared::Unverifiable), (61, Spared::Unverifiable)]
        );
    }

    #[test]
    fn a_corrupt_registry_is_reported_and_the_token_net_still_runs() {
        let token = format!("{WS}50-400.1");
        let table = Table::default().with(70, 70, 950, Some(&token));
        let plan = plan_sweep(Loaded::Corrupt("torn".into()), &table, WS, OWN);
        assert_eq!(plan.registry_problem.as_deref(), Some("torn"));
        assert_eq!(plan.pids, vec![70]);
    }
}
