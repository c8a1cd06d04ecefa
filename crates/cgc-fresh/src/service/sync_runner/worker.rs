//! The driver's worker between syncs: its spawn, the requests written to
//! its stdin, its answers, and its replacement when it ended without
//! answering.

use super::*;
use cgc_fresh_core::worker_life::LiveWorker;

// The incremental driver as a long-lived child: CGC stays imported and
// the parse cache warm between syncs; it opens the database only while it
// applies a request, so it holds no lock between syncs. Started, stopped
// and reaped by the root supervisor like every child; a sync that is
// cancelled or out of time stops it (the next sync starts another). One
// that died while idle is known dead once its exit is reported (the
// supervisor reaps it, then gives its pipes up to 500 ms to drain); a sync
// that starts in that window asks the dead worker, fails when the exit
// arrives, and the next sync reconciles — slower, never a false `fresh`.
// Which worker is current, and what its answers and exit mean:
// `cgc_fresh_core::worker_life`.

impl SyncRunner {
    /// Starts a worker from the driver's command; the current run's
    /// request goes once the spawn reply names it.
    pub(super) fn spawn_worker(
        &mut self,
        program: PathBuf,
        argv: Vec<String>,
        ctx: &mut Context<Self>,
    ) {
        let Some(argv) = self.worker_spawn_argv(argv) else {
            return;
        };
        self.spawn_program(program, argv, ChildKind::Worker, ctx);
    }

    /// The supervisor's order to start a worker from the driver command
    /// (outside a sync run: for an MCP request or a warm-up).
    pub(super) fn worker_spawn(
        &self,
        program: PathBuf,
        argv: Vec<String>,
        ctx: &Context<Self>,
    ) -> Option<SpawnChild> {
        let argv = self.worker_spawn_argv(argv)?;
        Some(SpawnChild {
            program,
            args: argv,
            env_set: vec![("ENABLE_AUTO_WATCH".to_string(), "false".to_string())],
            kind: ChildKind::Worker,
            session: None,
            requester: ctx.address().recipient(),
            piped_stdin: true,
        })
    }

    /// The driver command's argument vector (its last word the script)
    /// turned into the worker's: the same for a sync and an MCP request.
    pub(super) fn worker_spawn_argv(&self, mut argv: Vec<String>) -> Option<Vec<String>> {
        let script = argv.pop()?;
        let cache = self.driver_path.with_file_name(PARSE_CACHE_FILE);
        argv.extend(worker_argv(
            &script,
            &self.driver_options(),
            &cache.display().to_string(),
            WORKER_IDLE_EXIT,
        ));
        Some(argv)
    }

    /// The worker the current run asked exited (`code`) without answering:
    /// whether a new worker took the request (`SyncRunState::retry_unanswered`).
    /// When it did not, the run ends with that exit.
    pub(super) fn replace_unanswering_worker(
        &mut self,
        id: u64,
        code: Option<i32>,
        during_shutdown: bool,
        ctx: &mut Context<Self>,
    ) -> bool {
        let Some(run) = self.run.as_ref() else {
            return false;
        };
        let Some((paths, baseline)) = run.state.retry_unanswered(code, during_shutdown) else {
            return false;
        };
        let Ok((program, argv)) = self.driver_command() else {
            return false;
        };
        self.next_serial += 1;
        let serial = self.next_serial;
        let Some(run) = self.run.as_mut() else {
            return false;
        };
        // The new worker gets the whole time budget: the old one read
        // nothing, so no time went into this request.
        if let Some(timer) = run.timer.take() {
            ctx.cancel_future(timer);
        }
        run.state.begin_driver(
            DriverRequest {
                serial,
                paths,
                baseline,
            },
            true,
        );
        tracing::info!(
            component = COMPONENT,
            event = "driver_worker_replaced",
            flight = run.flight().0,
            id,
            serial,
            reason = "it ended before it read the request"
        );
        self.spawn_worker(program, argv, ctx);
        true
    }

    /// `started` is the worker now (for a sync or an MCP request).
    pub(super) fn worker_started(
        &mut self,
        started: &crate::supervisor::ChildStarted,
        for_request: &str,
    ) {
        self.workers.started(started.id, started.pid as u32);
        tracing::info!(
            component = COMPONENT,
            event = "driver_worker_started",
            id = started.id,
            pid = started.pid,
            for_request
        );
    }

    /// Asks the worker to apply `request`; its answer is a result line with
    /// this `serial`. A request that cannot be written stops the worker,
    /// and the run ends with its exit.
    pub(super) fn send_request(
        &mut self,
        id: u64,
        request: &DriverRequest,
        ctx: &mut Context<Self>,
    ) {
        tracing::info!(
            component = COMPONENT,
            event = "driver_worker_request",
            id,
            serial = request.serial,
            files = request.paths.len(),
            baseline = request.baseline
        );
        // The worker closes a database it held before it applies.
        self.database_held_by = None;
        let line = worker_request(request.serial, &request.paths, request.baseline);
        self.write_to_worker(id, line, ctx);
    }

    /// Writes one line to worker `id`; a line that cannot be written stops
    /// it (a run applying with it ends with its exit).
    pub(super) fn write_to_worker(&mut self, id: u64, line: String, ctx: &mut Context<Self>) {
        let request = self.supervisor.send(SendInput { id, line });
        ctx.spawn(request.into_actor(self).map(move |result, act, _| {
            let error = match result {
                Ok(Ok(())) => return,
                Ok(Err(error)) => error,
                Err(mailbox) => mailbox.to_string(),
            };
            tracing::warn!(component = COMPONENT, event = "driver_worker_input_failed", id, error = %error);
            act.supervisor.do_send(StopChild {
                id,
                reason: "a line could not be written to it",
            });
        }));
    }

    /// The worker answered the current run's request with the exit code a
    /// one-shot driver would have ended with: the run ends as if it had.
    pub(super) fn worker_answered(&mut self, id: u64, code: i32, ctx: &mut Context<Self>) {
        let Some(worker) = self.workers.current().filter(|w| w.id == id) else {
            return;
        };
        // After a failed answer it ends by itself (its state is in doubt);
        // after an answer for settings that changed meanwhile it is let go.
        let after = self.workers.answered(id, code);
        self.child_exited(worker.pid as i32, Some(code), None, String::new(), ctx);
        if after == AfterAnswer::LetGo {
            self.stop_worker(worker, "the cgc settings changed");
        }
    }

    /// Whether the current run is waiting on child `id` (a worker applying
    /// its request).
    pub(super) fn applying_with(&self, id: u64) -> bool {
        self.run.as_ref().and_then(|run| run.state.child()) == Some(id)
    }

    /// Lets the worker go (stopped through the supervisor). If a run is
    /// applying a request with it, that run ends with its exit.
    pub(super) fn drop_worker(&mut self, reason: &'static str) {
        let applying = self
            .workers
            .current()
            .is_some_and(|w| self.applying_with(w.id));
        if let Some(worker) = self.workers.let_go(applying) {
            self.stop_worker(worker, reason);
        }
    }

    /// Stops a worker `WorkerLife` let go, through the supervisor.
    pub(super) fn stop_worker(&mut self, worker: LiveWorker, reason: &'static str) {
        tracing::info!(
            component = COMPONENT,
            event = "driver_worker_dropped",
            id = worker.id,
            pid = worker.pid,
            reason
        );
        self.supervisor.do_send(StopChild {
            id: worker.id,
            reason,
        });
    }
}
