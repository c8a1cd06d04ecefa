//! Starting a sync: the strategy's plan, the budget, the spawn of the
//! command, the driver's probe and the request to its worker.

use super::*;

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
        let flight = run.flight;
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
                run.session.clone()
            },
            requester: ctx.address().recipient(),
            piped_stdin: kind == ChildKind::Worker,
        });
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            if let (ChildKind::Worker, Ok(Ok(started))) = (kind, &result) {
                act.worker_started(started, "sync");
            }
            let Some(run) = act.run.as_mut().filter(|r| r.flight == flight) else {
                return;
            };
            match result {
                Ok(Ok(started)) => {
                    run.phase.set_child(started.id);
                    if kind == ChildKind::Worker && run.end_requested.is_none() {
                        if let Some(Active::Driver {
                            paths,
                            serial,
                            baseline,
                            ..
                        }) = &run.active
                        {
                            let (paths, serial, baseline) = (paths.clone(), *serial, *baseline);
                            act.send_request(started.id, serial, &paths, baseline, ctx);
                        }
                    }
                    let Some(run) = act.run.as_mut().filter(|r| r.flight == flight) else {
                        return;
                    };
                    if let Some(request) = run.end_requested {
                        // Asked to end (ready line seen, cancelled, out
                        // of time) before we knew the child's id.
                        send_end(&act.supervisor, started.id, request);
                    }
                    if matches!(run.phase, Phase::Syncing { .. }) {
                        let timeout =
                            Duration::from_millis(act.settings.cgc.maintenance_timeout_ms);
                        run.timer =
                            Some(ctx.run_later(timeout, move |act, _| act.timed_out(flight)));
                        if let Some(event) = run.spawned_report(started.pid as u32) {
                            act.report(flight, event);
                        }
                        act.progress_spawned(ctx);
                    } else {
                        let timeout = Duration::from_millis(act.settings.cgc.timeout_ms);
                        run.timer =
                            Some(ctx.run_later(timeout, move |act, _| act.timed_out(flight)));
                    }
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

    pub(super) fn start_sync(&mut self, ctx: &mut Context<Self>) {
        let Some(run) = self.run.as_ref() else { return };
        let plan = plan_sync(
            &self.settings.cgc.sync_strategy,
            run.paths.as_deref(),
            self.must_reconcile.as_deref(),
        );
        match plan {
            SyncRun::Command {
                strategy,
                fallback_reason,
            } => self.start_command(strategy, fallback_reason, ctx),
            SyncRun::Incremental { paths } => match self.probe.clone() {
                Some(Ok(_)) => self.start_driver(paths, None, ctx),
                Some(Err(reason)) => self.start_command(
                    SyncStrategy::Reconcile,
                    Some(format!("{DRIVER_UNAVAILABLE}: {reason}")),
                    ctx,
                ),
                None => self.start_probe(ctx),
            },
            SyncRun::Baseline { reason } => match self.probe.clone() {
                Some(Ok(_)) => self.start_driver(Vec::new(), Some(reason), ctx),
                Some(Err(reason)) => self.start_command(
                    SyncStrategy::Reconcile,
                    Some(format!("{DRIVER_UNAVAILABLE}: {reason}")),
                    ctx,
                ),
                None => self.start_probe(ctx),
            },
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
        if run.allowance.allows(cost) {
            return false;
        }
        let flight = run.flight;
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
        let flight = run.flight;
        run.phase = Phase::Syncing { child: None };
        run.active = Some(Active::Command {
            strategy: strategy.clone(),
        });
        run.facts = SyncRunFacts::default();
        run.end_requested = None;
        let note = match &fallback {
            Some(reason) => format!("sync strategy {strategy} (instead of incremental: {reason})"),
            None => format!("sync strategy {strategy}"),
        };
        if fallback.is_some() {
            tracing::warn!(component = COMPONENT, event = "sync_strategy_fallback", flight = flight.0, strategy = %strategy, reason = fallback.as_deref());
        } else {
            tracing::info!(component = COMPONENT, event = "sync_strategy", flight = flight.0, strategy = %strategy);
        }
        self.report(
            flight,
            SyncEvent::Strategy {
                driver_unavailable: fallback
                    .as_deref()
                    .is_some_and(|reason| reason.starts_with(DRIVER_UNAVAILABLE)),
                note,
                fallback: fallback.is_some(),
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
                self.start_command(
                    SyncStrategy::Reconcile,
                    Some(format!("{DRIVER_UNAVAILABLE}: {reason}")),
                    ctx,
                );
                return;
            }
        };
        let Some(script) = argv.pop() else { return };
        argv.extend(driver_argv(&script, &self.driver_options(), None, None));
        if let Some(run) = self.run.as_mut() {
            run.phase = Phase::Probing {
                child: None,
                result: None,
            };
            run.facts = SyncRunFacts::default();
            run.end_requested = None;
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
                    self.start_command(
                        SyncStrategy::Reconcile,
                        Some(format!("{DRIVER_UNAVAILABLE}: {reason}")),
                        ctx,
                    );
                    return;
                }
            },
        };
        let Some((flight, serial)) =
            self.new_driver_request(paths.clone(), baseline.is_some(), false)
        else {
            return;
        };
        if let Some(run) = self.run.as_mut() {
            run.facts = SyncRunFacts::default();
            run.end_requested = None;
        }
        let count = paths.len();
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
        // On a CGC the driver was not proven against (the person allowed
        // it), every sync says so.
        let unproven = match &self.probe {
            Some(Ok(Some(note))) => format!("; {note}"),
            _ => String::new(),
        };
        let note = match &baseline {
            Some(reason) => format!(
                "sync strategy incremental from a baseline: the changed files are found by \
                 comparing the graph with the tree ({reason}{unproven})"
            ),
            None => format!("sync strategy incremental ({count} changed file(s){unproven})"),
        };
        self.report(
            flight,
            SyncEvent::Strategy {
                note,
                fallback: false,
                driver_unavailable: false,
            },
        );
        match (self.workers.current(), command) {
            (Some(worker), _) => {
                let timeout = Duration::from_millis(self.settings.cgc.maintenance_timeout_ms);
                let Some(run) = self.run.as_mut() else { return };
                run.phase.set_child(worker.id);
                run.timer = Some(ctx.run_later(timeout, move |act, _| act.timed_out(flight)));
                if let Some(event) = run.spawned_report(worker.pid) {
                    self.report(flight, event);
                }
                self.send_request(worker.id, serial, &paths, baseline.is_some(), ctx);
            }
            (None, Some((program, argv))) => self.spawn_worker(program, argv, ctx),
            (None, None) => {}
        }
    }
}
