//! A reference model of the watcher rules, for the property tests of this
//! crate and the fuzz target of the project: it builds the watcher
//! supervisor's reports and says what the machine must make of each, from
//! the plain reading of the spec, without looking at the machine.
//!
//! The rules modelled: a session lifetime makes one watcher attempt, only
//! while no watcher runs; a report about the running watcher names its
//! owner's live session and its pid (any other report is ignored); the
//! first verification raises `watcher_started`, and a running sync then no
//! longer has a say; a failure or death raises `watcher_not_verified`
//! before verification and `watcher_died` after; a stop raises nothing; the
//! watcher is gone when its lifetime ends or the service restarts. Every
//! observed edit of a file CGC parses made while a watcher runs (verifying
//! or verified) waits until that watcher reports the path applied (or a
//! restart covers it); an edit that names no path waits until a restart
//! covers it or the watcher is gone. A verified watcher with
//! nothing waiting is `fresh`; with anything waiting, `possibly_stale`.
//! An edit its observer cannot report (made while it started up, naming no
//! path, or of an ignore file) may be answered by the machine with a
//! restart of a verified watcher — everything waiting is then covered by
//! the new start-up, whose ready line makes it `fresh` unless something
//! was edited meanwhile — or, after `MAX_WATCHER_RESTARTS` restarts in a
//! row, by stopping it (`watcher_died` notice; it owns nothing any more,
//! and its exit raises nothing). When exactly a restart comes (once edits
//! settle) is the machine's; the model checks that it comes only then. An
//! edit still unsettled when a watcher is started waits like one naming no
//! path (the caller says so: `started_with_unsettled_edits`).
//!
//! Compiled for this crate's tests and with the `model` feature.

use std::collections::BTreeSet;

use cgc_fresh_proto::NoticeCondition;

use super::events::{Effect, Input, WatcherDecline};
use super::record::WatcherRecord;
use super::session::{Lifetime, SessionKey};
use crate::config::WatchMode;

/// A report of the watcher supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatcherReport {
    Started,
    SpawnFailed,
    Busy,
    DeclinedBackend,
    DeclinedUnindexed,
    Verified,
    Failed,
    Died,
    Stopped,
    /// The watcher applied a path to the graph (one that waits, if any).
    Applied,
    /// A restart the machine asked for spawned the next process.
    Restarted,
}

impl WatcherReport {
    /// Every report, for generators.
    pub const ALL: [WatcherReport; 11] = [
        WatcherReport::Started,
        WatcherReport::SpawnFailed,
        WatcherReport::Busy,
        WatcherReport::DeclinedBackend,
        WatcherReport::DeclinedUnindexed,
        WatcherReport::Verified,
        WatcherReport::Failed,
        WatcherReport::Died,
        WatcherReport::Stopped,
        WatcherReport::Applied,
        WatcherReport::Restarted,
    ];
}

/// Whether only a watcher report may raise `condition`.
pub fn raised_by_watcher(condition: NoticeCondition) -> bool {
    use NoticeCondition::*;
    matches!(
        condition,
        WatcherStarted
            | WatcherDeclinedBackend
            | WatcherDeclinedUnindexed
            | WatcherNotVerified
            | WatcherDied
            | WatcherSkippedBusy
    )
}

/// The managed watcher, from an accepted `WatcherStarted` until a failure,
/// death, stop, or the end of its lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunningWatcher {
    pub lifetime: u64,
    pub name: &'static str,
    pub pid: u32,
    pub verified: bool,
    /// Restarting as the machine asked (its ready line not yet seen).
    pub restarting: bool,
    /// Being stopped as the machine asked: it owns nothing any more.
    pub retiring: bool,
    /// Restarts in a row that have not yet caught up.
    pub restarts: u32,
    /// While restarting: the next process was reported spawned.
    pub respawned: bool,
}

/// What the machine must make of a report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WatcherVerdict {
    /// The report changes nothing at all.
    pub ignored: bool,
    /// The one notice it raises (to the lifetime's session), if any.
    pub notice: Option<NoticeCondition>,
    /// It verified the running watcher: a running sync no longer has a say.
    pub verified_now: bool,
}

/// The model's watcher state.
#[derive(Debug, Clone, Default)]
pub struct WatcherModel {
    running: Option<RunningWatcher>,
    /// Lifetimes that made their one attempt.
    attempted: BTreeSet<u64>,
    /// The last pid handed out (pids only grow).
    last_pid: u32,
    /// Workspace-relative paths edited while the running watcher runs that
    /// it has not reported applied.
    awaiting: BTreeSet<String>,
    /// Those of them its observer cannot report (only a restart covers).
    unobserved: BTreeSet<String>,
    /// An edit naming no path was observed while it runs.
    awaiting_unknown: bool,
}

impl WatcherModel {
    /// A model whose first watcher gets pid `first_pid`.
    pub fn new(first_pid: u32) -> Self {
        WatcherModel {
            last_pid: first_pid.saturating_sub(1),
            ..WatcherModel::default()
        }
    }

    /// The running watcher, if one runs.
    pub fn running(&self) -> Option<RunningWatcher> {
        self.running
    }

    /// Whether a verified watcher runs (it then owns freshness, also
    /// while it restarts; not once it is being stopped).
    pub fn verified(&self) -> bool {
        self.running
            .is_some_and(|watcher| watcher.verified && !watcher.retiring)
    }

    /// Whether a verified watcher runs with no edit waiting for it: the
    /// record must then be `fresh`.
    pub fn owes_fresh(&self) -> bool {
        self.verified()
            && self.running.is_some_and(|watcher| !watcher.restarting)
            && !self.awaiting_unknown
            && self.awaiting.is_empty()
    }

    fn needs_restart(&self) -> bool {
        self.awaiting_unknown || !self.unobserved.is_empty()
    }

    /// Checks and applies a watcher effect of the machine: a restart or a
    /// stop is asked for only of a verified watcher (not restarting) that
    /// waits for something its observer cannot report; a stop only after
    /// `MAX_WATCHER_RESTARTS` restarts in a row. `Ok(true)` for a stop (its
    /// step raises `watcher_died`).
    pub fn apply_effect(&mut self, effect: &Effect) -> Result<bool, String> {
        let (pid, stop) = match effect {
            Effect::RestartWatcher { pid, .. } => (*pid, false),
            Effect::StopWatcher { pid, .. } => (*pid, true),
            _ => return Ok(false),
        };
        let needs_restart = self.needs_restart();
        let Some(watcher) = self.running.as_mut() else {
            return Err(format!("{effect:?} with no watcher running"));
        };
        if watcher.pid != pid || !watcher.verified || watcher.restarting || watcher.retiring {
            return Err(format!("{effect:?} for {watcher:?}"));
        }
        if !needs_restart {
            return Err(format!("{effect:?} with nothing only a restart covers"));
        }
        if stop != (watcher.restarts >= super::watcher_slot::MAX_WATCHER_RESTARTS) {
            return Err(format!("{effect:?} after {} restarts", watcher.restarts));
        }
        if stop {
            watcher.retiring = true;
        } else {
            watcher.restarting = true;
            watcher.restarts += 1;
        }
        self.forget_awaiting();
        Ok(stop)
    }

    /// An edit was observed: `paths` are its workspace-relative paths
    /// inside the workspace, `None` when it named none.
    pub fn observe_edit(&mut self, paths: Option<&[&str]>) {
        let Some(watcher) = self.running.filter(|watcher| !watcher.retiring) else {
            return;
        };
        let observable = watcher.verified && !watcher.restarting;
        match paths {
            None => self.awaiting_unknown = true,
            Some(paths) => {
                for path in paths {
                    let name = path.rsplit('/').next().unwrap_or(path);
                    let ignore_file = super::watcher_slot::IGNORE_FILE_NAMES.contains(&name);
                    if !ignore_file && !super::watcher_applies_to(path) {
                        continue;
                    }
                    self.awaiting.insert(path.to_string());
                    if ignore_file || !observable {
                        self.unobserved.insert(path.to_string());
                    }
                }
            }
        }
    }

    /// The running watcher was started while an observed edit was still
    /// unsettled: that edit may land after its start-up reconcile read the
    /// file, so something waits that only a restart covers.
    pub fn started_with_unsettled_edits(&mut self) {
        if self.running.is_some() {
            self.awaiting_unknown = true;
        }
    }

    fn forget_awaiting(&mut self) {
        self.awaiting.clear();
        self.unobserved.clear();
        self.awaiting_unknown = false;
    }

    /// Whether the session live as `lifetime` may make its attempt now.
    pub fn may_attempt(&self, lifetime: Option<u64>) -> bool {
        lifetime
            .is_some_and(|lifetime| self.running.is_none() && !self.attempted.contains(&lifetime))
    }

    /// The session a report names: the running watcher's owner when
    /// `owner` is set and a watcher runs, else `name`.
    pub fn subject(&self, owner: bool, name: &'static str) -> &'static str {
        match self.running {
            Some(watcher) if owner => watcher.name,
            _ => name,
        }
    }

    /// Builds report `kind` from session `name` (live as `lifetime`, or not
    /// live), naming the running watcher's pid when `right_pid` (another pid
    /// otherwise), and applies it to the model.
    pub fn report(
        &mut self,
        kind: WatcherReport,
        name: &'static str,
        lifetime: Option<u64>,
        right_pid: bool,
        mode: WatchMode,
    ) -> (Input, WatcherVerdict) {
        // Lifetimes are numbered from 1, so 0 names none that is current.
        let session = SessionKey {
            name: name.to_owned(),
            lifetime: Lifetime::new(lifetime.unwrap_or(0)),
        };
        let opener = lifetime.filter(|_| self.may_attempt(lifetime));
        let pid = match self.running {
            Some(watcher) if right_pid => watcher.pid,
            Some(watcher) => watcher.pid.wrapping_add(1),
            None => 1,
        };
        let about_running = lifetime.is_some_and(|lifetime| {
            self.running
                .is_some_and(|watcher| watcher.lifetime == lifetime && watcher.pid == pid)
        });
        let mut verdict = WatcherVerdict::default();
        let input = match kind {
            WatcherReport::Started
            | WatcherReport::SpawnFailed
            | WatcherReport::Busy
            | WatcherReport::DeclinedBackend
            | WatcherReport::DeclinedUnindexed => {
                match opener {
                    None => verdict.ignored = true,
                    Some(lifetime) => {
                        self.attempted.insert(lifetime);
                        verdict.notice = attempt_notice(kind);
                    }
                }
                self.attempt_input(kind, name, session, opener, mode)
            }
            WatcherReport::Verified => {
                let caught_up = !self.needs_restart();
                match &mut self.running {
                    Some(watcher) if about_running && !watcher.verified => {
                        watcher.verified = true;
                        verdict.notice = Some(NoticeCondition::WatcherStarted);
                        verdict.verified_now = true;
                    }
                    Some(watcher) if about_running && watcher.restarting && watcher.respawned => {
                        watcher.restarting = false;
                        watcher.respawned = false;
                        if caught_up {
                            watcher.restarts = 0;
                        }
                    }
                    _ => verdict.ignored = true,
                }
                Input::WatcherVerified { session, pid }
            }
            WatcherReport::Restarted => {
                self.last_pid = self.last_pid.wrapping_add(1);
                let next = self.last_pid;
                match &mut self.running {
                    Some(watcher) if about_running && watcher.restarting && !watcher.respawned => {
                        watcher.pid = next;
                        watcher.respawned = true;
                    }
                    _ => verdict.ignored = true,
                }
                Input::WatcherRestarted {
                    session,
                    previous: pid,
                    pid: next,
                }
            }
            WatcherReport::Failed | WatcherReport::Died => {
                if about_running {
                    let retiring = self.running.is_some_and(|watcher| watcher.retiring);
                    verdict.notice = if retiring {
                        None
                    } else if self.verified() {
                        Some(NoticeCondition::WatcherDied)
                    } else {
                        Some(NoticeCondition::WatcherNotVerified)
                    };
                    self.running = None;
                    self.forget_awaiting();
                } else {
                    verdict.ignored = true;
                }
                let error = "exit status 1".to_owned();
                if kind == WatcherReport::Failed {
                    Input::WatcherFailed {
                        session,
                        pid,
                        error,
                    }
                } else {
                    Input::WatcherDied {
                        session,
                        pid,
                        error,
                    }
                }
            }
            WatcherReport::Stopped => {
                if about_running {
                    self.running = None;
                    self.forget_awaiting();
                } else {
                    verdict.ignored = true;
                }
                Input::WatcherStopped { session, pid }
            }
            WatcherReport::Applied => {
                let path = self
                    .awaiting
                    .iter()
                    .next()
                    .cloned()
                    .unwrap_or_else(|| "src/a.rs".to_owned());
                // A report about another watcher changes nothing; the
                // running one reporting a path applied covers it, also one
                // its observer could not have seen (its reconcile did).
                if about_running && self.awaiting.remove(&path) {
                    self.unobserved.remove(&path);
                } else {
                    verdict.ignored = true;
                }
                Input::WatcherApplied {
                    session,
                    pid,
                    path: format!("/ws/{path}"),
                }
            }
        };
        (input, verdict)
    }

    /// The input of an attempt's outcome; a `Started` that opens the
    /// session's attempt makes its watcher the running one.
    fn attempt_input(
        &mut self,
        kind: WatcherReport,
        name: &'static str,
        session: SessionKey,
        opener: Option<u64>,
        mode: WatchMode,
    ) -> Input {
        match kind {
            WatcherReport::Started => {
                self.last_pid = self.last_pid.wrapping_add(1);
                if let Some(lifetime) = opener {
                    self.forget_awaiting();
                    self.running = Some(RunningWatcher {
                        lifetime,
                        name,
                        pid: self.last_pid,
                        verified: false,
                        restarting: false,
                        retiring: false,
                        restarts: 0,
                        respawned: false,
                    });
                }
                Input::WatcherStarted {
                    session,
                    mode,
                    pid: self.last_pid,
                }
            }
            WatcherReport::SpawnFailed => Input::WatcherSpawnFailed {
                session,
                mode,
                error: "cgc: not found".into(),
            },
            WatcherReport::Busy => Input::WatcherBusy {
                session,
                mode,
                holder: "pid 7: cgc mcp start".into(),
            },
            WatcherReport::DeclinedBackend => Input::WatcherDeclined {
                session,
                reason: WatcherDecline::Backend("kuzudb (cgc doctor)".into()),
            },
            _ => Input::WatcherDeclined {
                session,
                reason: WatcherDecline::Unindexed,
            },
        }
    }

    /// The lifetime ended: its watcher, if it runs one, is gone.
    pub fn end_lifetime(&mut self, lifetime: u64) {
        if self
            .running
            .is_some_and(|watcher| watcher.lifetime == lifetime)
        {
            self.running = None;
            self.forget_awaiting();
        }
    }

    /// The service restarted: no watcher runs and no lifetime is live.
    pub fn restart(&mut self) {
        self.running = None;
        self.forget_awaiting();
        self.attempted.clear();
    }

    /// Checks the record's watcher facts against the model: the running
    /// watcher's state and pid, and no live-sounding state for a watcher
    /// that is gone.
    pub fn check_facts(&self, facts: Option<&WatcherRecord>) -> Result<(), String> {
        let state = facts.map(|facts| facts.state.as_str());
        match self.running {
            Some(watcher) => {
                let expected = if watcher.retiring {
                    "stopping"
                } else if watcher.restarting {
                    "restarting"
                } else if watcher.verified {
                    "verified"
                } else {
                    "verifying"
                };
                if state != Some(expected) {
                    return Err(format!("watcher state {state:?}, expected {expected}"));
                }
                let pid = facts.and_then(|facts| facts.pid);
                if pid != Some(watcher.pid) {
                    return Err(format!("watcher pid {pid:?}, expected {}", watcher.pid));
                }
            }
            None => {
                if matches!(
                    state,
                    Some("verifying" | "verified" | "restarting" | "stopping")
                ) {
                    return Err(format!("facts of a watcher that is gone: {facts:?}"));
                }
            }
        }
        Ok(())
    }
}

/// The notice an attempt's outcome raises, if it opens the attempt.
fn attempt_notice(kind: WatcherReport) -> Option<NoticeCondition> {
    match kind {
        WatcherReport::SpawnFailed => Some(NoticeCondition::WatcherNotVerified),
        WatcherReport::Busy => Some(NoticeCondition::WatcherSkippedBusy),
        WatcherReport::DeclinedBackend => Some(NoticeCondition::WatcherDeclinedBackend),
        WatcherReport::DeclinedUnindexed => Some(NoticeCondition::WatcherDeclinedUnindexed),
        _ => None,
    }
}
