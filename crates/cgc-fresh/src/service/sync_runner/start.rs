//! Starting a sync: the strategy's plan, the budget, the spawn of the
//! command, the driver's probe and the request to its worker.

use super::*;
use cgc_fresh_core::sync_run::{command_note, driver_note, start_step, unavailable, ChildStart};

impl SyncRunner {
    pub(super) fn spawn(&mut self, argv: Vec<String>, kind: ChildKind, ctx: &mut Context<Self>) {
        let program = PathBuf::from(&self.settings.cgc.executable);
        self.spawn_program(program, argv, kind, ctx);
    }

    pub(super) fn spawn_program(
        &mut self,
        program: PathBuf,
        argv: Vec<String>,
        kind: ChildKind,
        ctx: &mut Context<Self>,
    ) {
        let Some(run) = self.run.as_ref() else { return };
        let flight = run.flight();
        let mut env_set = vec![];
        if matches!(kind, ChildKind::Sync | ChildKind::Worker) {
            // A user's ENABLE_AUTO_WATCH would make `cgc index` fork a watcher.
            env_set.push(("ENABLE_AUTO_WATCH".to_string(), "false".to_string()));
        }
        let request = self.supervisor.send(SpawnChild {
            program,
            args: argv,
            env_set,
            kind,
            // A worker serves every session's syncs: it is the
            // workspace's, stopped with a sync it is applying.
            session: if kind == ChildKind::Worker {
                None
            } else {
                run.state.session().cloned()
            },
            requester: ctx.address().recipient(),
            piped_stdin: kind == ChildKind::Worker,
        });
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            if let (ChildKind::Worker, Ok(Ok(started))) = (kind, &result) {
                act.worker_started(started, "sync");
            }
            let Some(run) = act.run.as_mut().filter(|r| r.flight() == flight) else {
                return;
            };
            match result {
                Ok(Ok(started)) => {
                    let start = run
                        .state
                        .child_started(started.id, kind == ChildKind::Worker);
                    act.child_start(start, started.id, started.pid as u32, ctx);
                }
                Ok(Err(error)) => {
                    act.run = None;
                    act.report(
                        flight,
                        SyncEvent::Finished(SyncOutcome::Failed {
                            error: error.to_string(),
                        }),
                    );
                }
                Err(mailbox) => {
                    act.run = None;
                    act.report(
                        flight,
                        SyncEvent::Finished(SyncOutcome::Failed {
                            error: mailbox.to_string(),
                        }),
                    );
                }
            }
        }));
    }

    /// Carries out what the run's child being known asks
    /// (`SyncRunState::child_started`): the worker's request, an end asked
    /// meanwhile, the time budget, the `Spawned` report.
    pub(super) fn child_start(
        &mut self,
        start: ChildStart,
        id: u64,
        pid: u32,
        ctx: &mut Context<Self>,
    ) {
        let Some(flight) = self.run.as_ref().map(Run::flight) else {
            return;
        };
        if let Some(request) = start.request {
            self.send_request(id, &request, ctx);
        }
        if let Some(end) = start.end {
            // Asked to end (ready line seen, cancelled, out of time)
            // before the child's id was known.
            send_end(&self.supervisor, id, end);
        }
        let budget_ms = match start.budget {
            ChildBudget::Maintenance => self.settings.cgc.maintenance_timeout_ms,
            ChildBudget::Cli => self.settings.cgc.timeout_ms,
        };
        let Some(run) = self.run.as_mut().filter(|r| r.flight() == flight) else {
            return;
        };
        if let Some(timer) = run.timer.take() {
            ctx.cancel_future(timer);
        }
        run.timer = Some(
            ctx.run_later(Duration::from_millis(budget_ms), move |act, _| {
                act.timed_out(flight)
            }),
        );
        if let Some(cost) = start.spawned {
            self.report(flight, SyncEvent::Spawned { pid, cost });
        }
        if start.budget == ChildBudget::Maintenance {
            self.progress_spawned(ctx);
        }
    }

    pub(super) fn start_sync(&mut self, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_ref() else { return };
        let plan = plan_sync(
            &self.settings.cgc.sync_strategy,
            run.state.paths(),
            self.must_reconcile.as_deref(),
        );
        let step = start_step(plan, self.probe.as_ref());
        self.start(step, ctx);
    }

    /// Starts what the run's rules chose.
    pub(super) fn start(&mut self, step: StartStep, ctx: &mut Context<Self>) {
        match step {
            StartStep::Command { strategy, fallback } => {
                self.start_command(strategy, fallback, ctx)
            }
            StartStep::Driver { paths, baseline } => self.start_driver(paths, baseline, ctx),
            StartStep::Probe => self.start_probe(ctx),
        }
    }

    /// Ends the run with `OverBudget` when its allowance has no slot for
    /// work of `cost` (the machine tells the payer; nothing is spawned).
    /// An incremental sync is never swapped for a reconcile to stay within
    /// a budget, nor the other way round: each class pays for itself.
    pub(super) fn over_budget(&mut self, cost: SyncCost) -> bool {
        let Some(run) = self.run.as_ref() else {
            return false;
        };
        if run.state.admits(cost) {
            return false;
        }
        let flight = run.flight();
        self.run = None;
        tracing::info!(component = COMPONENT, event = "sync_over_budget", flight = flight.0, cost = ?cost);
        self.report(flight, SyncEvent::OverBudget { cost });
        true
    }

    /// Runs the strategy's `cgc` command; `fallback` says why it replaces
    /// the configured `incremental`.
    pub(super) fn start_command(
        &mut self,
        strategy: SyncStrategy,
        fallback: Option<String>,
        ctx: &mut Context<Self>,
    ) {
        if self.over_budget(SyncCost::WholeRepository) {
            return;
        }
        let Some(run) = self.run.as_mut() else { return };
        let flight = run.flight();
        run.state.begin_command(strategy.clone());
        if fallback.is_some() {
            tracing::warn!(component = COMPONENT, event = "sync_strategy_fallback", flight = flight.0, strategy = %strategy, reason = fallback.as_deref());
        } else {
            tracing::info!(component = COMPONENT, event = "sync_strategy", flight = flight.0, strategy = %strategy);
        }
        let note = command_note(&strategy, fallback.as_deref());
        self.report(
            flight,
            SyncEvent::Strategy {
                note: note.note,
                fallback: note.fallback,
                driver_unavailable: note.driver_unavailable,
            },
        );
        let argv = sync_argv(&strategy, &self.settings.cgc.global_args);
        match self.readied_command(&argv) {
            Some((program, wrapped)) => self.spawn_program(program, wrapped, ChildKind::Sync, ctx),
            None => self.spawn(argv, ChildKind::Sync, ctx),
        }
    }

    /// A command sync run through the driver (`reconcile -- CGC ARGS...`):
    /// it readies the backend for CGC's own writes — FalkorDB's range index
    /// repaired (`driver/falkordb_index.py`) — and then becomes `cgc` with
    /// `argv` (the same process, output and signals). Only with `cgc`'s
    /// own Python (its `#!` line) and an executable `cgc`, and not once
    /// the driver's probe failed: an interpreter named by
    /// `CGC_FRESH_DRIVER_PYTHON`, a `cgc` that is a shell script or no
    /// script at all, or one that cannot be executed runs the command as
    /// it is (and fails, if it does, as it always did).
    pub(super) fn readied_command(&self, argv: &[String]) -> Option<(PathBuf, Vec<String>)> {
        if std::env::var_os(DRIVER_PYTHON_ENV).is_some_and(|python| !python.is_empty())
            || matches!(self.probe, Some(Err(_)))
        {
            return None;
        }
        let cgc = resolve_program(&self.settings.cgc.executable)?;
        if !is_executable_file(&cgc) {
            return None;
        }
        let (program, mut args) = match self.driver_command() {
            Ok(command) => command,
            Err(reason) => {
                tracing::info!(component = COMPONENT, event = "sync_not_readied", reason = %reason);
                return None;
            }
        };
        let python = args
            .first()
            .map(PathBuf::from)
            .unwrap_or_else(|| program.clone());
        let named_python = [&program, &python].iter().any(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("python"))
        });
        if !named_python {
            return None;
        }
        let script = args.pop()?;
        args.extend(reconcile_argv(
            &script,
            &self.settings.cgc.global_args,
            &cgc.display().to_string(),
            argv,
        ));
        Some((program, args))
    }

    pub(super) fn start_probe(&mut self, ctx: &mut Context<Self>) {
        let (program, mut argv) = match self.driver_command() {
            Ok(command) => command,
            Err(reason) => {
                self.probe = Some(Err(reason.clone()));
                self.start(unavailable(&reason), ctx);
                return;
            }
        };
        let Some(script) = argv.pop() else { return };
        argv.extend(driver_argv(&script, &self.driver_options(), None, None));
        if let Some(run) = self.run.as_mut() {
            run.state.begin_probe();
        }
        tracing::info!(component = COMPONENT, event = "driver_probe", program = %program.display());
        self.spawn_program(program, argv, ChildKind::Probe, ctx);
    }

    /// Applies `paths` with the driver; with `baseline` (why nothing
    /// proves what the graph holds), also every file the graph does not
    /// hold as a from-scratch index would.
    pub(super) fn start_driver(
        &mut self,
        paths: Vec<String>,
        baseline: Option<String>,
        ctx: &mut Context<Self>,
    ) {
        let cost = if baseline.is_some() {
            SyncCost::WholeRepository
        } else {
            SyncCost::ChangedFiles
        };
        if self.over_budget(cost) {
            return;
        }
        // A worker already running needs nothing written or spawned.
        let command = match self.workers.current() {
            Some(_) => None,
            None => match self.driver_command() {
                Ok(command) => Some(command),
                Err(reason) => {
                    self.start(unavailable(&reason), ctx);
                    return;
                }
            },
        };
        self.next_serial += 1;
        let request = DriverRequest {
            serial: self.next_serial,
            paths,
            baseline: baseline.is_some(),
        };
        let count = request.paths.len();
        let Some(run) = self.run.as_mut() else { return };
        let flight = run.flight();
        run.state.begin_driver(request, false);
        tracing::info!(
            component = COMPONENT,
            event = "sync_strategy",
            flight = flight.0,
            // A baseline is named apart: its cost and its proof differ.
            strategy = if baseline.is_some() {
                "baseline"
            } else {
                "incremental"
            },
            files = count,
            reason = baseline.as_deref(),
            worker = self.workers.current().map(|w| w.pid)
        );
        let note = driver_note(count, baseline.as_deref(), self.probe.as_ref());
        self.report(
            flight,
            SyncEvent::Strategy {
                note: note.note,
                fallback: note.fallback,
                driver_unavailable: note.driver_unavailable,
            },
        );
        match (self.workers.current(), command) {
            (Some(worker), _) => {
                let Some(run) = self.run.as_mut() else { return };
                let start = run.state.child_started(worker.id, true);
                self.child_start(start, worker.id, worker.pid, ctx);
            }
            (None, Some((program, argv))) => self.spawn_worker(program, argv, ctx),
            (None, None) => {}
        }
    }
}
