//! Sending signals to what the service started, through `nix`'s safe
//! calls, and the one function that kills every process carrying an owner
//! token.
//!
//! Four paths kill by owner token: a child's exit (its stragglers), the stop
//! escalation (the same, after the group), the panic hook and the second
//! signal (every process of this instance), and the start-up sweep (the
//! processes of dead instances it planned). They all go through
//! [`kill_token_holders`] or [`kill_process`], so one rule decides what may
//! be signalled: never pid 0 or 1, never this process's own group.

use nix::errno::Errno;
use nix::sys::signal::{self as nix_signal, Signal as NixSignal};
use nix::unistd::{getpgrp, Pid};

use super::proc_info::{
    describe_process, owner_token_of, processes_with_owner_prefix, processes_with_owner_token,
};
use super::signal::Signal;

/// Whether `pgid` names a process group the service may signal: not 0 or
/// 1 (those address us or everyone), not this process's own group.
pub fn group_is_signallable(pgid: i32) -> bool {
    pgid > 1 && Pid::from_raw(pgid) != getpgrp()
}

/// Sends `signal` to process group `pgid`. Refuses a group that is not
/// signallable (`EPERM`).
pub fn signal_group(pgid: i32, signal: Signal) -> Result<(), Errno> {
    if !group_is_signallable(pgid) {
        return Err(Errno::EPERM);
    }
    nix_signal::killpg(Pid::from_raw(pgid), to_nix(signal)?)
}

/// Sends `signal` to process `pid` (> 1).
pub fn signal_process(pid: i32, signal: Signal) -> Result<(), Errno> {
    if pid <= 1 {
        return Err(Errno::EPERM);
    }
    nix_signal::kill(Pid::from_raw(pid), to_nix(signal)?)
}

/// SIGKILLs process `pid`; whether it was delivered.
pub fn kill_process(pid: i32) -> bool {
    signal_process(pid, Signal::KILL).is_ok()
}

/// Which owner tokens [`kill_token_holders`] kills.
#[derive(Debug, Clone, Copy)]
pub enum Tokens<'a> {
    /// Exactly this token (one child and everything it started).
    Exactly(&'a str),
    /// Every token starting with this prefix (an instance, a workspace).
    StartingWith(&'a str),
}

/// A process [`kill_token_holders`] killed, and what it was (its command
/// line, read just before).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Killed {
    pub pid: i32,
    pub process: String,
}

/// SIGKILLs every live process whose owner token matches `tokens`, except
/// those `spare` keeps; returns what was killed. No grace: what is left
/// once its child (or its instance) is gone holds nothing worth a graceful
/// stop.
pub fn kill_token_holders(tokens: Tokens<'_>, spare: impl Fn(i32, &str) -> bool) -> Vec<Killed> {
    let candidates: Vec<(i32, String)> = match tokens {
        Tokens::Exactly("") | Tokens::StartingWith("") => Vec::new(),
        Tokens::Exactly(token) => processes_with_owner_token(token)
            .into_iter()
            .map(|pid| (pid, token.to_owned()))
            .collect(),
        Tokens::StartingWith(prefix) => processes_with_owner_prefix(prefix)
            .into_iter()
            .filter_map(|pid| Some((pid, owner_token_of(pid)?)))
            .collect(),
    };
    let mut killed = Vec::new();
    for (pid, token) in candidates {
        if spare(pid, &token) {
            continue;
        }
        let process = describe_process(pid);
        if kill_process(pid) {
            killed.push(Killed { pid, process });
        }
    }
    killed
}

fn to_nix(signal: Signal) -> Result<NixSignal, Errno> {
    NixSignal::try_from(signal.number())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_group_and_the_special_ids_are_never_signalled() {
        assert!(!group_is_signallable(0));
        assert!(!group_is_signallable(1));
        assert!(!group_is_signallable(-5));
        assert!(!group_is_signallable(getpgrp().as_raw()));
        assert_eq!(signal_group(0, Signal::KILL), Err(Errno::EPERM));
        assert_eq!(signal_process(1, Signal::KILL), Err(Errno::EPERM));
        assert!(!kill_process(0));
    }

    #[test]
    fn token_holders_are_killed_by_exact_token_or_prefix_and_spared_on_request() {
        let token = format!("cgc-fresh-test-kill:{}", std::process::id());
        let spawn = |suffix: &str| {
            std::process::Command::new("sleep")
                .arg("30")
                .env(
                    super::super::proc_info::OWNER_TOKEN_VAR,
                    format!("{token}{suffix}"),
                )
                .spawn()
                .unwrap()
        };
        let mut exact = spawn("");
        let mut other = spawn(".7");
        let mut spared = spawn(".8");
        // Right after spawning, /proc/<pid>/environ may read empty: wait
        // until the three are visible.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while processes_with_owner_prefix(&token).len() < 3 && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let pids = |killed: Vec<Killed>| killed.into_iter().map(|k| k.pid).collect::<Vec<_>>();
        assert_eq!(
            pids(kill_token_holders(Tokens::Exactly(&token), |_, _| false)),
            [exact.id() as i32]
        );
        exact.wait().unwrap();
        let spared_pid = spared.id() as i32;
        assert_eq!(
            pids(kill_token_holders(
                Tokens::StartingWith(&token),
                |pid, _| pid == spared_pid
            )),
            [other.id() as i32]
        );
        assert!(kill_token_holders(Tokens::StartingWith(""), |_, _| false).is_empty());
        other.wait().unwrap();
        spared.kill().unwrap();
        spared.wait().unwrap();
    }
}
