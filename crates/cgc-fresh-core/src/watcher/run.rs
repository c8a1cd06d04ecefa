//! One run of the managed watcher, from its spawn to its exit: what each
//! thing the shell observes of it means, and what the shell must report
//! or do. The `WatcherSupervisor` actor keeps one [`WatcherRun`] while a
//! watcher process runs, feeds it the spawn reply, the ready line, the
//! probe's end, the session's end and the exit, and carries out the
//! answers (reports to the drift observer, stops, a restart); its timers
//! stay in the shell, their meaning is here.
//!
//! The rules:
//! - the first report of a run is `Started` (or `Restarted` of the process
//!   it replaces), sent once, even when the exit comes before the spawn
//!   reply;
//! - a watcher is verified only once it printed its ready line, is still
//!   this run's process, and stayed alive through the stabilization probe
//!   ([`super::liveness`]) — never when its session ended, it was given up
//!   (no ready line in time, another backend) or its child is unknown;
//! - lines of the process a restart replaced say nothing of this run
//!   (CGC prints its ready line twice);
//! - an exit is a `Stopped` when its session ended, the observer retired
//!   it, or the service shut down; a `Died` once verified; a `Failed`
//!   before; and a restart the observer asked for spawns the next run
//!   instead of a report.

use std::time::Duration;

use super::liveness::stabilization_probe;
use crate::freshness::{Millis, SessionKey};

/// What the watcher supervisor reports to the drift observer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatcherEvent {
    /// The watcher process `pid` exists.
    Started { pid: u32 },
    /// It could not be spawned.
    SpawnFailed { error: String },
    /// It printed its ready line and stayed alive through the probe.
    Verified { pid: u32 },
    /// It ended, or was given up, before it was verified.
    Failed { pid: u32, error: String },
    /// It ended after it was verified.
    Died { pid: u32, error: String },
    /// Another process holds the embedded database: nothing was spawned.
    Busy { holder: String },
    /// The gate declined the backend.
    DeclinedBackend { answer: String },
    /// The gate declined a workspace that is not indexed.
    DeclinedUnindexed,
    /// It ended because it was asked to (session end, retired, shutdown).
    Stopped { pid: u32 },
    /// The watcher `previous` was restarted as asked: `pid` is the new
    /// process, not yet verified.
    Restarted { previous: u32, pid: u32 },
    /// The watcher logged that it applied the file at `path` to the graph
    /// (workspace-relative when under the workspace, else as printed).
    Applied { pid: u32, path: String },
}

/// Why the drift observer had a running watcher stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopPurpose {
    /// Spawn it again once it exited.
    Restart,
    /// For good: lazy mode takes over.
    Retire,
}

/// The spawn reply's consequences.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spawned {
    /// The run's first report.
    pub report: WatcherEvent,
    /// The ready line came before the reply: the probe can start now.
    pub probe_now: bool,
}

/// What follows a watcher's exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterExit {
    /// Report this for the run's session.
    Report(WatcherEvent),
    /// Spawn the session's watcher again, replacing `previous` (the
    /// observer asked for a restart); the new run ignores `replaced_child`.
    Restart {
        previous: u32,
        replaced_child: Option<u64>,
    },
}

/// How a watcher process ended, in the shell's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatcherExit {
    /// The process id.
    pub pid: u32,
    /// `exited with code 1`, `was killed by signal 9`.
    pub status: String,
    /// The end of its output.
    pub output_tail: String,
    /// The service was shutting down.
    pub during_shutdown: bool,
}

/// One watcher process of one session, from spawn to exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatcherRun {
    session: SessionKey,
    child: Option<u64>,
    pid: Option<u32>,
    verified: bool,
    ready_at: Option<Millis>,
    spawned_at: Millis,
    session_ended: bool,
    probe_armed: bool,
    gave_up: Option<String>,
    restart_of: Option<u32>,
    replaced_child: Option<u64>,
    stopping_for: Option<StopPurpose>,
}

impl WatcherRun {
    /// A watcher being spawned at `now` for `session`; `restart_of`: the
    /// process it replaces.
    pub fn spawning(session: SessionKey, restart_of: Option<u32>, now: Millis) -> Self {
        WatcherRun {
            session,
            child: None,
            pid: None,
            verified: false,
            ready_at: None,
            spawned_at: now,
            session_ended: false,
            probe_armed: false,
            gave_up: None,
            restart_of,
            replaced_child: None,
            stopping_for: None,
        }
    }

    /// The session it belongs to.
    pub fn session(&self) -> &SessionKey {
        &self.session
    }

    /// The supervisor's id of its process, once known.
    pub fn child(&self) -> Option<u64> {
        self.child
    }

    /// Its process id, once known.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Whether it was verified.
    pub fn is_verified(&self) -> bool {
        self.verified
    }

    /// Whether its session ended (it is being stopped).
    pub fn session_ended(&self) -> bool {
        self.session_ended
    }

    /// The process a restart replaced: its late lines and exit are not
    /// this run's.
    pub fn replacing(&mut self, child: Option<u64>) {
        self.replaced_child = child;
    }

    /// The spawn reply: child `child` is process `pid`.
    pub fn spawned(&mut self, child: u64, pid: u32) -> Spawned {
        self.child = Some(child);
        self.pid = Some(pid);
        Spawned {
            report: self.first_report(pid),
            probe_now: self.ready_at.is_some(),
        }
    }

    /// The run's first report: at the spawn reply, or at an exit that came
    /// before it (`pid` still unknown then), never both.
    fn first_report(&mut self, pid: u32) -> WatcherEvent {
        match self.restart_of.take() {
            Some(previous) => WatcherEvent::Restarted { previous, pid },
            None => WatcherEvent::Started { pid },
        }
    }

    /// Whether a line of child `id` is this run's.
    pub fn owns_line(&self, id: u64) -> bool {
        self.replaced_child != Some(id) && self.child.is_none_or(|child| child == id)
    }

    /// Whether the exit of child `id` is this run's.
    pub fn owns_exit(&self, id: u64) -> bool {
        self.replaced_child != Some(id)
    }

    /// The ready line at `now`: true for the first (CGC prints it twice).
    pub fn ready(&mut self, now: Millis) -> bool {
        if self.ready_at.is_some() {
            return false;
        }
        self.ready_at = Some(now);
        true
    }

    /// The stabilization probe to start now, at `now` with the liveness
    /// budget `liveness`: the child it is for and how long to wait; `None`
    /// when it cannot start yet (no child, no ready line) or needs not
    /// (verified, already running).
    pub fn start_probe(&mut self, now: Millis, liveness: Duration) -> Option<(u64, Duration)> {
        let (child, ready_at) = (self.child?, self.ready_at?);
        if self.verified || self.probe_armed {
            return None;
        }
        let ready_after_spawn = ms(ready_at.get().saturating_sub(self.spawned_at.get()));
        let probe = stabilization_probe(ready_after_spawn, liveness);
        let since_ready = ms(now.get().saturating_sub(ready_at.get()));
        self.probe_armed = true;
        Some((child, probe.saturating_sub(since_ready)))
    }

    /// The probe for `child` ended with it alive: `Verified`, if nothing
    /// forbids it.
    pub fn probe_ended(&mut self, child: u64) -> Option<WatcherEvent> {
        if self.child != Some(child) {
            return None;
        }
        self.probe_armed = false;
        let refused = self.verified
            || self.session_ended
            || self.gave_up.is_some()
            || self.ready_at.is_none();
        if refused {
            return None;
        }
        let pid = self.pid?;
        self.verified = true;
        Some(WatcherEvent::Verified { pid })
    }

    /// CGC went on with another backend than the graph's, child `child`
    /// said (its line may come before the spawn reply): the child to stop
    /// and why, unless it is given up or its session ended already.
    pub fn fell_back(&mut self, child: u64) -> Option<(u64, String)> {
        if self.gave_up.is_some() || self.session_ended {
            return None;
        }
        let why = "cgc watch went on with another database backend than the graph's (the \
                   configured one did not start in time): what it applies is not the graph"
            .to_string();
        self.gave_up = Some(why.clone());
        Some((child, why))
    }

    /// No ready line within `budget_ms`: the child to stop and why,
    /// unless it is verified or its session ended.
    pub fn give_up(&mut self, budget_ms: u64) -> Option<(u64, String)> {
        if self.verified || self.session_ended {
            return None;
        }
        let child = self.child?;
        let why = format!(
            "no ready line within cgc.maintenanceTimeoutMs ({budget_ms} ms): its start-up \
             reconcile did not finish"
        );
        self.gave_up = Some(why.clone());
        Some((child, why))
    }

    /// It logged a file applied: the report, with `path` as the shell
    /// placed it, unless its process is unknown or its session ended.
    pub fn applied(&self, path: String) -> Option<WatcherEvent> {
        match (self.pid, self.session_ended) {
            (Some(pid), false) => Some(WatcherEvent::Applied { pid, path }),
            _ => None,
        }
    }

    /// Its session ended: it is being stopped, and claims nothing more.
    pub fn session_gone(&mut self) {
        self.session_ended = true;
    }

    /// The observer asks to stop `session`'s watcher `pid` for `purpose`:
    /// the child to stop, or `None` when the ask is stale (another
    /// process, not verified, already being stopped, its session ended).
    pub fn stop_for(
        &mut self,
        session: &SessionKey,
        pid: u32,
        purpose: StopPurpose,
    ) -> Option<u64> {
        let stale = self.session != *session
            || self.pid != Some(pid)
            || !self.verified
            || self.session_ended
            || self.stopping_for.is_some();
        if stale {
            return None;
        }
        let child = self.child?;
        self.stopping_for = Some(purpose);
        Some(child)
    }

    /// It exited: the first report if it was never sent (it ended before
    /// the spawn reply), then what follows.
    pub fn exited(mut self, exit: WatcherExit) -> (Option<WatcherEvent>, AfterExit) {
        let pid = exit.pid;
        let first = self.pid.is_none().then(|| self.first_report(pid));
        let error = match &self.gave_up {
            Some(why) => format!("{why}; cgc watch {} when stopped", exit.status),
            None => format!(
                "cgc watch {}; output ends: {}",
                exit.status,
                exit.output_tail.trim()
            ),
        };
        let asked_to_end = self.session_ended || exit.during_shutdown;
        if self.stopping_for == Some(StopPurpose::Restart) && !asked_to_end {
            return (
                first,
                AfterExit::Restart {
                    previous: pid,
                    replaced_child: self.child,
                },
            );
        }
        let event = if self.stopping_for == Some(StopPurpose::Retire) || asked_to_end {
            WatcherEvent::Stopped { pid }
        } else if self.verified {
            WatcherEvent::Died { pid, error }
        } else {
            WatcherEvent::Failed { pid, error }
        };
        (first, AfterExit::Report(event))
    }
}

/// What an attempt that could not spawn is reported as: its own failure,
/// or, for a restart, the failure of the watcher it was to replace.
pub fn spawn_failed(restart_of: Option<u32>, error: String) -> WatcherEvent {
    match restart_of {
        Some(previous) => WatcherEvent::Failed {
            pid: previous,
            error: format!("it could not be restarted: {error}"),
        },
        None => WatcherEvent::SpawnFailed { error },
    }
}

/// What an attempt that found the database held by `holder` is reported
/// as (nothing was spawned).
pub fn held_by(restart_of: Option<u32>, holder: String) -> WatcherEvent {
    match restart_of {
        Some(previous) => WatcherEvent::Failed {
            pid: previous,
            error: format!("it could not be restarted: the graph database is held by {holder}"),
        },
        None => WatcherEvent::Busy { holder },
    }
}

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::freshness::Lifetime;
    use proptest::prelude::*;

    const LIVENESS: Duration = Duration::from_millis(10_000);

    fn key(name: &str) -> SessionKey {
        SessionKey {
            name: name.into(),
            lifetime: Lifetime::new(1),
        }
    }

    fn session() -> SessionKey {
        key("s1")
    }

    fn at(ms: u64) -> Millis {
        Millis(1_000_000 + ms)
    }

    fn exit(pid: u32) -> WatcherExit {
        WatcherExit {
            pid,
            status: "exited with code 1".into(),
            output_tail: "  boom \n".into(),
            during_shutdown: false,
        }
    }

    /// A run spawned at 0 as child 7, pid 70, ready at `ready`, probed.
    fn verified_run(ready: u64) -> WatcherRun {
        let mut run = WatcherRun::spawning(session(), None, at(0));
        run.spawned(7, 70);
        assert!(run.ready(at(ready)));
        let (child, _) = run.start_probe(at(ready), LIVENESS).expect("probe");
        assert_eq!(
            run.probe_ended(child),
            Some(WatcherEvent::Verified { pid: 70 })
        );
        run
    }

    #[test]
    fn the_first_report_is_started_once() {
        let mut run = WatcherRun::spawning(session(), None, at(0));
        let spawned = run.spawned(7, 70);
        assert_eq!(spawned.report, WatcherEvent::Started { pid: 70 });
        assert!(!spawned.probe_now);
        let (first, _) = run.exited(exit(70));
        assert_eq!(first, None, "reported at the spawn already");
    }

    #[test]
    fn an_exit_before_the_spawn_reply_reports_the_start_first() {
        let run = WatcherRun::spawning(session(), Some(60), at(0));
        let (first, then) = run.exited(exit(70));
        assert_eq!(
            first,
            Some(WatcherEvent::Restarted {
                previous: 60,
                pid: 70
            })
        );
        assert!(matches!(
            then,
            AfterExit::Report(WatcherEvent::Failed { pid: 70, .. })
        ));
    }

    #[test]
    fn verification_needs_the_ready_line_and_the_probe() {
        let mut run = WatcherRun::spawning(session(), None, at(0));
        run.spawned(7, 70);
        assert_eq!(run.start_probe(at(500), LIVENESS), None, "no ready line");
        assert_eq!(run.probe_ended(7), None, "no ready line, no verification");
        assert!(run.ready(at(1_000)));
        assert!(
            !run.ready(at(1_100)),
            "the second ready line does not count"
        );
        let (child, wait) = run.start_probe(at(1_000), LIVENESS).expect("probe");
        assert_eq!(child, 7);
        assert_eq!(wait, crate::watcher::liveness::WATCHER_STABILIZATION);
        assert_eq!(run.start_probe(at(1_200), LIVENESS), None, "armed once");
        assert_eq!(run.probe_ended(8), None, "another child's probe");
        assert_eq!(run.probe_ended(7), Some(WatcherEvent::Verified { pid: 70 }));
        assert!(run.is_verified());
        assert_eq!(run.probe_ended(7), None, "verified once");
    }

    #[test]
    fn a_ready_line_before_the_spawn_reply_starts_the_probe_at_the_reply() {
        let mut run = WatcherRun::spawning(session(), None, at(0));
        assert!(run.ready(at(300)));
        assert_eq!(run.start_probe(at(300), LIVENESS), None, "no child yet");
        assert!(run.spawned(7, 70).probe_now);
        let (_, wait) = run.start_probe(at(800), LIVENESS).expect("probe");
        assert_eq!(
            wait,
            crate::watcher::liveness::WATCHER_STABILIZATION - Duration::from_millis(500),
            "counted from the ready line"
        );
    }

    #[test]
    fn no_verification_after_the_session_ended_or_a_give_up() {
        for stop in [0, 1, 2] {
            let mut run = WatcherRun::spawning(session(), None, at(0));
            run.spawned(7, 70);
            run.ready(at(100));
            let (child, _) = run.start_probe(at(100), LIVENESS).expect("probe");
            match stop {
                0 => run.session_gone(),
                1 => assert!(run.fell_back(7).is_some()),
                _ => assert!(run.give_up(60_000).is_some()),
            }
            assert_eq!(run.probe_ended(child), None, "case {stop}");
        }
    }

    #[test]
    fn a_verified_watcher_is_not_given_up_and_its_death_is_a_death() {
        let mut run = verified_run(100);
        assert_eq!(run.give_up(60_000), None);
        let (_, then) = run.exited(exit(70));
        assert_eq!(
            then,
            AfterExit::Report(WatcherEvent::Died {
                pid: 70,
                error: "cgc watch exited with code 1; output ends: boom".into()
            })
        );
    }

    #[test]
    fn a_given_up_watcher_fails_with_the_reason() {
        let mut run = WatcherRun::spawning(session(), None, at(0));
        run.spawned(7, 70);
        let (child, why) = run.give_up(60_000).expect("stopped");
        assert_eq!(child, 7);
        assert!(why.contains("60000 ms"), "{why}");
        let (_, then) = run.exited(exit(70));
        match then {
            AfterExit::Report(WatcherEvent::Failed { error, .. }) => {
                assert!(error.starts_with(&why), "{error}");
                assert!(error.ends_with("cgc watch exited with code 1 when stopped"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn exits_asked_for_are_stops() {
        let mut ended = verified_run(100);
        ended.session_gone();
        assert_eq!(
            ended.exited(exit(70)).1,
            AfterExit::Report(WatcherEvent::Stopped { pid: 70 })
        );
        let mut retired = verified_run(100);
        assert_eq!(
            retired.stop_for(&session(), 70, StopPurpose::Retire),
            Some(7)
        );
        assert_eq!(
            retired.exited(exit(70)).1,
            AfterExit::Report(WatcherEvent::Stopped { pid: 70 })
        );
        let shutdown = verified_run(100);
        let mut during = exit(70);
        during.during_shutdown = true;
        assert_eq!(
            shutdown.exited(during).1,
            AfterExit::Report(WatcherEvent::Stopped { pid: 70 })
        );
    }

    #[test]
    fn a_restart_spawns_again_unless_the_session_ended() {
        let mut run = verified_run(100);
        assert_eq!(run.stop_for(&session(), 70, StopPurpose::Restart), Some(7));
        assert_eq!(
            run.stop_for(&session(), 70, StopPurpose::Restart),
            None,
            "already being stopped"
        );
        assert_eq!(
            run.clone().exited(exit(70)).1,
            AfterExit::Restart {
                previous: 70,
                replaced_child: Some(7)
            }
        );
        run.session_gone();
        assert_eq!(
            run.exited(exit(70)).1,
            AfterExit::Report(WatcherEvent::Stopped { pid: 70 })
        );
    }

    #[test]
    fn stale_stop_asks_are_refused() {
        let mut unverified = WatcherRun::spawning(session(), None, at(0));
        unverified.spawned(7, 70);
        assert_eq!(
            unverified.stop_for(&session(), 70, StopPurpose::Retire),
            None
        );
        let mut run = verified_run(100);
        assert_eq!(run.stop_for(&session(), 71, StopPurpose::Retire), None);
        let other = key("s2");
        assert_eq!(run.stop_for(&other, 70, StopPurpose::Retire), None);
    }

    #[test]
    fn the_replaced_process_speaks_for_nothing() {
        let mut run = WatcherRun::spawning(session(), Some(60), at(0));
        run.replacing(Some(6));
        assert!(!run.owns_line(6));
        assert!(!run.owns_exit(6));
        assert!(run.owns_line(7), "the new child before its spawn reply");
        run.spawned(7, 70);
        assert!(run.owns_line(7));
        assert!(!run.owns_line(8));
        assert!(
            run.owns_exit(8),
            "an exit is this run's unless the replaced one's"
        );
    }

    #[test]
    fn an_attempt_that_could_not_spawn_names_the_process_it_was_to_replace() {
        assert_eq!(
            spawn_failed(None, "ENOENT".into()),
            WatcherEvent::SpawnFailed {
                error: "ENOENT".into()
            }
        );
        assert_eq!(
            spawn_failed(Some(60), "ENOENT".into()),
            WatcherEvent::Failed {
                pid: 60,
                error: "it could not be restarted: ENOENT".into()
            }
        );
        assert_eq!(
            held_by(None, "pid 9".into()),
            WatcherEvent::Busy {
                holder: "pid 9".into()
            }
        );
        assert!(matches!(
            held_by(Some(60), "pid 9".into()),
            WatcherEvent::Failed { pid: 60, error } if error.ends_with("held by pid 9")
        ));
    }

    #[test]
    fn applied_lines_are_reported_until_the_session_ended() {
        let mut run = WatcherRun::spawning(session(), None, at(0));
        assert_eq!(run.applied("a.py".into()), None, "no pid yet");
        run.spawned(7, 70);
        assert_eq!(
            run.applied("a.py".into()),
            Some(WatcherEvent::Applied {
                pid: 70,
                path: "a.py".into()
            })
        );
        run.session_gone();
        assert_eq!(run.applied("a.py".into()), None);
    }

    #[derive(Debug, Clone)]
    enum Step {
        Spawned,
        Ready,
        Probe,
        ProbeEnded,
        FellBack,
        GiveUp,
        SessionGone,
        Retire,
        Restart,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            Just(Step::Spawned),
            Just(Step::Ready),
            Just(Step::Probe),
            Just(Step::ProbeEnded),
            Just(Step::FellBack),
            Just(Step::GiveUp),
            Just(Step::SessionGone),
            Just(Step::Retire),
            Just(Step::Restart),
        ]
    }

    proptest! {
        /// Whatever happens in whatever order: exactly one first report
        /// (at the spawn reply or at the exit); `Verified` at most once
        /// and only after a ready line and with no give-up or session end
        /// before it; the exit's report agrees with what happened.
        #[test]
        fn every_run_reports_consistently(steps in proptest::collection::vec(step(), 0..20)) {
            let mut run = WatcherRun::spawning(session(), None, at(0));
            let mut now = 0;
            let mut firsts = 0;
            let mut verified = 0;
            let (mut ready, mut spawned, mut forbidden) = (false, false, false);
            for step in steps {
                now += 100;
                match step {
                    Step::Spawned if !spawned => {
                        spawned = true;
                        run.spawned(7, 70);
                        firsts += 1;
                    }
                    Step::Spawned => {}
                    Step::Ready => { ready |= run.ready(at(now)); }
                    Step::Probe => { run.start_probe(at(now), LIVENESS); }
                    Step::ProbeEnded => {
                        if let Some(event) = run.probe_ended(7) {
                            prop_assert_eq!(event, WatcherEvent::Verified { pid: 70 });
                            prop_assert!(ready && spawned && !forbidden);
                            verified += 1;
                        }
                    }
                    Step::FellBack => { forbidden |= run.fell_back(7).is_some(); }
                    Step::GiveUp => { forbidden |= run.give_up(1).is_some(); }
                    Step::SessionGone => { run.session_gone(); forbidden = true; }
                    Step::Retire => { run.stop_for(&session(), 70, StopPurpose::Retire); }
                    Step::Restart => { run.stop_for(&session(), 70, StopPurpose::Restart); }
                }
            }
            prop_assert!(verified <= 1);
            let was_verified = run.is_verified();
            let (first, then) = run.exited(exit(70));
            firsts += usize::from(first.is_some());
            prop_assert_eq!(firsts, 1);
            match then {
                AfterExit::Report(WatcherEvent::Died { .. }) => prop_assert!(was_verified),
                AfterExit::Report(WatcherEvent::Failed { .. }) => prop_assert!(!was_verified),
                AfterExit::Report(WatcherEvent::Stopped { .. }) | AfterExit::Restart { .. } => {
                    prop_assert!(was_verified || forbidden);
                }
                other => prop_assert!(false, "{:?}", other),
            }
        }
    }
}
