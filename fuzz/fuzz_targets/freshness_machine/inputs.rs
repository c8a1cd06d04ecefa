//! What each op feeds the machine, and what the shadow expects of it.

use cgc_fresh_core::config::WatchMode;
use cgc_fresh_core::freshness::watcher_model::WatcherReport;
use cgc_fresh_core::freshness::{FlightId, Input, SyncCost, SyncOutcome};
use cgc_fresh_fuzz::workspace_model::{self, OpenFlight};
use cgc_fresh_proto::{NoticeCondition, SessionStartReason};

use crate::scenario::{name, Op, Outcome, PathSpec, WatcherOp, MODIFYING, TOOLS};
use crate::World;

/// What the shadow expects of one step.
#[derive(Debug, Default)]
pub(crate) struct Expect {
    /// The docs say this input changes nothing and has no effects.
    pub(crate) silent: bool,
    /// The sync the machine must cancel.
    pub(crate) cancel: Option<FlightId>,
    /// The flight whose success this step reports (if it still counts).
    pub(crate) succeeded: Option<OpenFlight>,
    /// The step reports the end of a draining sync.
    pub(crate) drained: bool,
    /// The step is a wake.
    pub(crate) wake: bool,
    /// The watcher notice this step may raise.
    pub(crate) watcher_notice: Option<NoticeCondition>,
}

impl World {
    /// The input for `op`, with what the shadow expects of it; `None` when
    /// the op has nothing to report about now.
    pub(crate) fn prepare(&mut self, op: &Op, expect: &mut Expect) -> Option<Input> {
        let shadow = &mut self.shadow;
        Some(match op {
            Op::Start {
                name: index,
                instance,
                reason,
            } => {
                let (name, instance) = (name(*index), instance % 3);
                match shadow.live.get(name).copied() {
                    Some(live) if live.instance == Some(instance) => expect.silent = true,
                    Some(live) if live.instance.is_none() => {
                        shadow.live.insert(
                            name,
                            workspace_model::Live {
                                instance: Some(instance),
                                ..live
                            },
                        );
                        expect.silent = true;
                    }
                    Some(live) => {
                        expect.cancel = shadow.end_lifetime(live.lifetime);
                        shadow.start_lifetime(name, Some(instance));
                    }
                    None if shadow.ended.get(name) == Some(&Some(instance)) => {
                        expect.silent = true;
                    }
                    None => {
                        shadow.start_lifetime(name, Some(instance));
                    }
                }
                Input::SessionStarted {
                    session: name.into(),
                    instance: format!("pi-{instance}"),
                    reason: SessionStartReason::ALL
                        [usize::from(*reason) % SessionStartReason::ALL.len()],
                    connection: None,
                    owner: None,
                }
            }
            Op::End { name: index } => {
                let name = name(*index);
                match shadow.live.remove(name) {
                    Some(live) => {
                        shadow.ended.insert(name, live.instance);
                        expect.cancel = shadow.end_lifetime(live.lifetime);
                    }
                    None => expect.silent = true,
                }
                Input::SessionEnded {
                    session: name.into(),
                }
            }
            Op::Call {
                name: index,
                tool,
                paths,
            } => {
                let (name, tool) = (name(*index), TOOLS[usize::from(*tool) % TOOLS.len()]);
                let paths: Vec<String> = paths.iter().take(4).map(PathSpec::text).collect();
                // A call naming no path may have touched anything.
                let observed = paths.is_empty()
                    || paths
                        .iter()
                        .any(|path| workspace_model::inside_workspace(path));
                let lifetime = if !MODIFYING.contains(&tool) {
                    None
                } else if shadow.ended.contains_key(name) {
                    // An edit under an ended session's name still counts,
                    // but revives nothing, and no result settles it.
                    observed.then_some(workspace_model::ORPHAN)
                } else {
                    Some(match shadow.lifetime(name) {
                        Some(lifetime) => lifetime,
                        None => shadow.start_lifetime(name, None),
                    })
                };
                match lifetime {
                    None => expect.silent = true,
                    Some(lifetime) if observed => {
                        let inside: Vec<String> = paths
                            .iter()
                            .filter_map(|path| workspace_model::workspace_relative(path))
                            .collect();
                        let inside: Vec<&str> = inside.iter().map(String::as_str).collect();
                        shadow
                            .watcher
                            .observe_edit((!paths.is_empty()).then_some(&inside[..]));
                        shadow.edits.push(workspace_model::Edit {
                            lifetime,
                            tool,
                            at: shadow.now,
                            settled: false,
                        })
                    }
                    Some(_) => {}
                }
                Input::ToolCall {
                    session: name.into(),
                    tool: tool.into(),
                    paths,
                    not_indexed: 0,
                }
            }
            Op::Result {
                name: index,
                tool,
                ok,
            } => {
                let (name, tool) = (name(*index), TOOLS[usize::from(*tool) % TOOLS.len()]);
                match shadow.lifetime(name) {
                    Some(lifetime) => {
                        for edit in &mut shadow.edits {
                            if edit.lifetime == lifetime && edit.tool == tool {
                                edit.settled = true;
                            }
                        }
                    }
                    None => expect.silent = true,
                }
                Input::ToolResult {
                    session: name.into(),
                    tool: tool.into(),
                    ok: *ok,
                }
            }
            Op::Wake => {
                expect.wake = true;
                Input::Wake
            }
            Op::WakeAtDeadline => {
                if let Some(deadline) = self.machine.next_deadline() {
                    shadow.now = shadow.now.max(deadline.get());
                }
                expect.wake = true;
                Input::Wake
            }
            Op::Request { name: index } => {
                let name = index.map(name);
                if name.is_some_and(|name| shadow.ended.contains_key(name)) {
                    expect.silent = true;
                }
                Input::SyncRequested {
                    session: name.map(str::to_owned),
                }
            }
            Op::Spawn { pid } => {
                expect.silent = true;
                let flight = match &mut shadow.flight {
                    Some(flight) => {
                        if !flight.draining && !flight.spawned {
                            flight.spawned = true;
                            if let Some(payer) = flight.payer {
                                *shadow.spawns.entry(payer).or_default() += 1;
                            }
                        }
                        flight.id
                    }
                    // A report about a sync that does not exist.
                    None => FlightId(shadow.last_started.map_or(0, FlightId::get) + 7),
                };
                // The shadow's shell runs reconciles only (the policy has no
                // incremental allowance): the class the spec's budget counts.
                Input::SyncSpawned {
                    flight,
                    pid: *pid,
                    cost: SyncCost::WholeRepository,
                }
            }
            Op::ProbeBusy => {
                let flight = shadow.close_flight(true)?;
                expect.drained = flight.draining;
                Input::SyncBusy {
                    flight: flight.id,
                    holder: "pid 7: cgc mcp start".into(),
                }
            }
            Op::Declined => {
                let flight = shadow.close_flight(false)?;
                expect.drained = flight.draining;
                Input::SyncDeclined {
                    flight: flight.id,
                    reason: "the workspace has no index".into(),
                }
            }
            Op::Finish(outcome) => {
                let flight = shadow.close_flight(*outcome == Outcome::Busy)?;
                expect.drained = flight.draining;
                let id = flight.id;
                if *outcome == Outcome::Succeeded && !flight.draining {
                    expect.succeeded = Some(flight);
                }
                Input::SyncFinished {
                    flight: id,
                    outcome: outcome.report(),
                }
            }
            Op::StaleReport(pick) => {
                let flight = *shadow
                    .closed
                    .get(usize::from(*pick) % shadow.closed.len().max(1))?;
                expect.silent = true;
                Input::SyncFinished {
                    flight,
                    outcome: SyncOutcome::Succeeded,
                }
            }
            Op::Restart => return None,
            Op::Watcher(op) => self.prepare_watcher(op, expect),
        })
    }

    fn prepare_watcher(&mut self, op: &WatcherOp, expect: &mut Expect) -> Input {
        let shadow = &mut self.shadow;
        let kind = WatcherReport::ALL[usize::from(op.kind) % WatcherReport::ALL.len()];
        let name = shadow.watcher.subject(op.owner, name(op.name));
        let mode = if op.auto {
            WatchMode::Auto
        } else {
            WatchMode::On
        };
        let lifetime = shadow.lifetime(name);
        let (input, verdict) = shadow
            .watcher
            .report(kind, name, lifetime, op.right_pid, mode);
        expect.silent |= verdict.ignored;
        expect.watcher_notice = verdict.notice;
        if kind == WatcherReport::Started && !verdict.ignored && shadow.any_unsettled() {
            shadow.watcher.started_with_unsettled_edits();
        }
        if verdict.verified_now {
            // A running sync drains: its outcome no longer counts.
            if let Some(flight) = &mut shadow.flight {
                flight.draining = true;
            }
        }
        input
    }
}
