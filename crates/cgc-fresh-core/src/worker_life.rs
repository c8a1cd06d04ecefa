//! The incremental driver's worker between syncs, as the sync runner sees
//! it: which worker is the current one, which were let go and are still to
//! exit, and what each of the worker's news means.
//!
//! One worker at a time serves syncs and MCP requests; it is kept between
//! them (CGC imported, the parse cache warm). It is let go when its state
//! is in doubt (it answered a request with a failure), when the `cgc`
//! settings it was started for changed (at once when idle; after the
//! answer it owes when it is applying a request), and when the runner
//! stops it (a cancelled or timed-out sync, an MCP request that failed).
//! A worker let go while idle is *retired*: its exit, when it comes, is
//! nobody's news. A worker let go while applying a request is not: its
//! exit ends that run.
//!
//! Pure: the runner reports what happened (a spawn reply, an answer, an
//! exit, a settings change) with whether a run is applying a request with
//! the worker, and carries out the returned decision (stop the child, end
//! the run, spawn another).

use std::collections::BTreeSet;

/// A worker's answer when it cannot apply a change incrementally and wrote
/// nothing: its state is sound.
use crate::sync_plan::DRIVER_EXIT_UNSUPPORTED as ANSWER_UNSUPPORTED;

/// The worker the runner talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveWorker {
    /// The supervisor's child id.
    pub id: u64,
    pub pid: u32,
    /// Started for `cgc` settings that have changed since: let go once it
    /// answered the request it is applying.
    pub stale: bool,
}

/// What an answer to a request means for the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterAnswer {
    /// It stays the current worker.
    Kept,
    /// It ends by itself after such an answer (its state is in doubt): it
    /// is retired, and its exit is not news.
    Retired,
    /// It answered for settings that changed while it applied: the runner
    /// stops it now (`WorkerLife::let_go` was applied).
    LetGo,
}

/// What a settings change means for the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterSettingsChange {
    /// No worker runs.
    Nothing,
    /// It is applying a request: marked stale, let go after its answer.
    MarkedStale,
    /// Idle: the runner stops it now (it was let go).
    LetGo(LiveWorker),
}

/// What a child's exit is, as far as the worker is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerExit {
    /// A worker let go earlier: nobody's news.
    Retired,
    /// The current worker ended while idle (its idle exit, or it died):
    /// the next sync starts another.
    IdleCurrent,
    /// The current worker ended while a run was applying a request with
    /// it: the run's news (it may be retried with a new worker).
    ApplyingCurrent,
    /// Not a worker of ours (another kind of child).
    NotAWorker,
}

/// The runner's record of its workers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerLife {
    current: Option<LiveWorker>,
    /// Workers let go whose exit is still to come.
    retired: BTreeSet<u64>,
}

impl WorkerLife {
    /// The current worker, stale or not.
    pub fn current(&self) -> Option<LiveWorker> {
        self.current
    }

    /// The current worker when it may take new work: not started for
    /// settings that changed since.
    pub fn usable(&self) -> Option<LiveWorker> {
        self.current.filter(|w| !w.stale)
    }

    /// Whether `id` is the current worker.
    pub fn is_current(&self, id: u64) -> bool {
        self.current.is_some_and(|w| w.id == id)
    }

    /// A spawned worker (child `id`, process `pid`) is the current one.
    pub fn started(&mut self, id: u64, pid: u32) {
        self.current = Some(LiveWorker {
            id,
            pid,
            stale: false,
        });
    }

    /// Worker `id` answered a request with `code` (the exit a one-shot
    /// driver would have ended with).
    pub fn answered(&mut self, id: u64, code: i32) -> AfterAnswer {
        let Some(worker) = self.current.filter(|w| w.id == id) else {
            return AfterAnswer::Kept;
        };
        if code != 0 && code != ANSWER_UNSUPPORTED {
            self.current = None;
            self.retired.insert(id);
            return AfterAnswer::Retired;
        }
        if worker.stale {
            // The answer is out: it is idle now.
            self.let_go(false);
            return AfterAnswer::LetGo;
        }
        AfterAnswer::Kept
    }

    /// The `cgc` settings changed; `applying`: a run is applying a request
    /// with the current worker.
    pub fn settings_changed(&mut self, applying: bool) -> AfterSettingsChange {
        match self.current.as_mut() {
            None => AfterSettingsChange::Nothing,
            Some(worker) if applying => {
                worker.stale = true;
                AfterSettingsChange::MarkedStale
            }
            Some(_) => match self.let_go(false) {
                Some(worker) => AfterSettingsChange::LetGo(worker),
                None => AfterSettingsChange::Nothing,
            },
        }
    }

    /// Lets the current worker go (the runner stops it); `applying`: a run
    /// is applying a request with it, whose end its exit is — so it is not
    /// retired. Returns the worker let go.
    pub fn let_go(&mut self, applying: bool) -> Option<LiveWorker> {
        let worker = self.current.take()?;
        if !applying {
            self.retired.insert(worker.id);
        }
        Some(worker)
    }

    /// Child `id` exited; `applying`: the current run was applying a
    /// request with child `id`.
    pub fn exited(&mut self, id: u64, applying: bool) -> WorkerExit {
        if self.retired.remove(&id) {
            return WorkerExit::Retired;
        }
        if self.is_current(id) {
            self.current = None;
            return if applying {
                WorkerExit::ApplyingCurrent
            } else {
                WorkerExit::IdleCurrent
            };
        }
        WorkerExit::NotAWorker
    }

    /// How many workers were let go and have not exited yet.
    pub fn retired_count(&self) -> usize {
        self.retired.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn running(id: u64) -> WorkerLife {
        let mut life = WorkerLife::default();
        life.started(id, 100 + id as u32);
        life
    }

    #[test]
    fn a_good_or_unsupported_answer_keeps_the_worker() {
        for code in [0, ANSWER_UNSUPPORTED] {
            let mut life = running(1);
            assert_eq!(life.answered(1, code), AfterAnswer::Kept);
            assert_eq!(life.usable().map(|w| w.id), Some(1));
        }
    }

    #[test]
    fn a_failed_answer_retires_the_worker_and_its_exit_is_nobodys_news() {
        let mut life = running(1);
        assert_eq!(life.answered(1, 1), AfterAnswer::Retired);
        assert_eq!(life.current(), None);
        assert_eq!(life.exited(1, false), WorkerExit::Retired);
        // Its exit is told once.
        assert_eq!(life.exited(1, false), WorkerExit::NotAWorker);
    }

    #[test]
    fn an_answer_from_another_worker_changes_nothing() {
        let mut life = running(2);
        assert_eq!(life.answered(1, 1), AfterAnswer::Kept);
        assert_eq!(life.current().map(|w| w.id), Some(2));
    }

    #[test]
    fn new_settings_let_an_idle_worker_go_at_once() {
        let mut life = running(1);
        match life.settings_changed(false) {
            AfterSettingsChange::LetGo(worker) => assert_eq!(worker.id, 1),
            other => panic!("{other:?}"),
        }
        assert_eq!(life.current(), None);
        assert_eq!(life.exited(1, false), WorkerExit::Retired);
    }

    #[test]
    fn new_settings_let_an_applying_worker_go_after_its_answer() {
        let mut life = running(1);
        assert_eq!(
            life.settings_changed(true),
            AfterSettingsChange::MarkedStale
        );
        assert_eq!(life.usable(), None, "no new work for a stale worker");
        assert_eq!(life.current().map(|w| w.id), Some(1));
        assert_eq!(life.answered(1, 0), AfterAnswer::LetGo);
        assert_eq!(life.current(), None);
        assert_eq!(life.exited(1, false), WorkerExit::Retired);
    }

    #[test]
    fn a_worker_let_go_while_applying_ends_that_run_with_its_exit() {
        let mut life = running(1);
        assert_eq!(life.let_go(true).map(|w| w.id), Some(1));
        // Not retired: the exit is the run's news, which the runner
        // matches by the run's child, not as the current worker.
        assert_eq!(life.exited(1, true), WorkerExit::NotAWorker);
    }

    #[test]
    fn an_exit_of_the_current_worker_says_whether_a_request_was_under_way() {
        let mut life = running(1);
        assert_eq!(life.exited(1, false), WorkerExit::IdleCurrent);
        let mut life = running(1);
        assert_eq!(life.exited(1, true), WorkerExit::ApplyingCurrent);
        assert_eq!(life.current(), None);
    }

    #[test]
    fn with_no_worker_nothing_changes() {
        let mut life = WorkerLife::default();
        assert_eq!(life.settings_changed(true), AfterSettingsChange::Nothing);
        assert_eq!(life.let_go(false), None);
        assert_eq!(life.exited(7, false), WorkerExit::NotAWorker);
    }

    #[derive(Debug, Clone)]
    enum Step {
        Start(u64),
        Answer(u64, i32),
        Settings(bool),
        LetGo(bool),
        Exit(u64, bool),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0u64..6).prop_map(Step::Start),
            (0u64..6, prop_oneof![Just(0), Just(1), Just(3), Just(130)])
                .prop_map(|(id, code)| Step::Answer(id, code)),
            any::<bool>().prop_map(Step::Settings),
            any::<bool>().prop_map(Step::LetGo),
            (0u64..6, any::<bool>()).prop_map(|(id, applying)| Step::Exit(id, applying)),
        ]
    }

    proptest! {
        /// Whatever happens: the current worker is never also retired; an
        /// exit is reported as retired at most once per letting go; a
        /// worker that may take work is never stale; a failed answer
        /// always leaves no current worker.
        #[test]
        fn the_record_stays_consistent(steps in proptest::collection::vec(step(), 0..60)) {
            let mut life = WorkerLife::default();
            for step in steps {
                match step {
                    Step::Start(id) => {
                        // The supervisor never reuses a child id.
                        if life.retired.contains(&id) || life.is_current(id) {
                            continue;
                        }
                        life.started(id, id as u32);
                    }
                    Step::Answer(id, code) => {
                        let was_current = life.is_current(id);
                        let verdict = life.answered(id, code);
                        if was_current && code != 0 && code != ANSWER_UNSUPPORTED {
                            prop_assert_eq!(verdict, AfterAnswer::Retired);
                            prop_assert_eq!(life.current(), None);
                        }
                    }
                    Step::Settings(applying) => {
                        life.settings_changed(applying);
                    }
                    Step::LetGo(applying) => {
                        life.let_go(applying);
                    }
                    Step::Exit(id, applying) => {
                        if life.exited(id, applying) == WorkerExit::Retired {
                            prop_assert!(!life.retired.contains(&id));
                        }
                    }
                }
                if let Some(current) = life.current() {
                    prop_assert!(!life.retired.contains(&current.id));
                }
                if let Some(usable) = life.usable() {
                    prop_assert!(!usable.stale);
                }
            }
        }
    }
}
