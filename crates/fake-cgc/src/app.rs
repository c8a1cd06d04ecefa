//! One invocation from start to exit: inspect the inherited signal state,
//! parse the arguments, log `start`, pick the behaviour, run it, log `end`,
//! exit (or die by a signal).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::builtin;
use crate::cli::{self, Command, Request};
use crate::daemon::DaemonContext;
use crate::invocation_counter;
use crate::invocation_log::{self, Ending, Event, InvocationLog, InvocationRecord};
use crate::process_info::ProcessInfo;
use crate::runner::{Outcome, RunSettings, Runner};
use crate::scenario::{Scenario, SignalReaction};
use crate::signal_name::SignalName;
use crate::signals::{self, InheritedSignals, SignalWaiter};

/// Exit code when the fake itself fails (bad scenario, unwritable lock
/// path): distinct from anything the real CLI returns.
pub const FAKE_ERROR_EXIT: i32 = 98;

/// Environment variable naming the scenario file.
pub const SCENARIO_ENV: &str = "FAKE_CGC_SCENARIO";

/// Environment variable naming the invocation log.
pub const LOG_ENV: &str = "FAKE_CGC_LOG";

/// Runs the invocation described by the process's arguments and
/// environment, and ends the process.
pub fn main_entry() -> ! {
    // Before anything changes them: the state the parent handed down.
    let inherited = InheritedSignals::inspect();
    let waiter = match SignalWaiter::new() {
        Ok(waiter) => waiter,
        Err(error) => {
            eprintln!("fake-cgc: cannot create the signal pipe: {error}");
            std::process::exit(FAKE_ERROR_EXIT);
        }
    };
    // Catch early so that a signal during start-up is logged, not fatal,
    // except where the real CLI would keep an inherited SIG_IGN.
    for signal in [SignalName::INT, SignalName::TERM, SignalName::HUP] {
        if !inherited.is_ignored(signal) {
            let _ = signals::catch(signal);
        }
    }

    let mut args = std::env::args_os().map(|arg| arg.to_string_lossy().into_owned());
    let program = args.next().unwrap_or_else(|| "cgc".to_owned());
    let argv: Vec<String> = args.collect();
    let info = ProcessInfo::current();
    let cwd = PathBuf::from(&info.cwd);
    let log = InvocationLog::from_env();
    let parsed = cli::parse(&argv);
    let command = match &parsed {
        Ok(Request::Run { command, .. }) => Some(command.clone()),
        _ => None,
    };

    let mut record = InvocationRecord {
        event: Event::Start,
        argv: argv.clone(),
        program: program.clone(),
        command: command.as_ref().map(|command| command.key().to_owned()),
        cwd: info.cwd.clone(),
        env: invocation_log::logged_env(),
        pid: info.pid,
        ppid: info.ppid,
        pgid: info.pgid,
        sid: info.sid,
        start_ms: invocation_log::unix_ms(),
        sigint_ignored: inherited.is_ignored(SignalName::INT),
        ignored_signals: inherited.ignored.clone(),
        blocked_signals: inherited.blocked.clone(),
        invocation: None,
        behaviour: None,
        end_ms: None,
        how: None,
        handled_signal: None,
        signals_received: BTreeMap::new(),
        error: None,
        spawned_by: None,
    };
    if let Some(log) = &log {
        log.append_or_warn(&record);
    }

    let outcome = match parsed {
        Err(usage) => {
            eprintln!("{usage}");
            Outcome::Exit {
                code: 2,
                handled_signal: None,
            }
        }
        Ok(Request::Help) => {
            print_help();
            Outcome::Exit {
                code: 0,
                handled_signal: None,
            }
        }
        Ok(Request::Run { command, .. }) => {
            let context = DaemonContext {
                log: log.as_ref(),
                program: &program,
                argv: &argv,
                command: Some(command.key()),
            };
            run_command(&command, &cwd, &inherited, &waiter, context, &mut record)
        }
    };
    finish(outcome, record, log.as_ref())
}

/// Chooses the behaviour (scenario or built-in), sets the signal
/// dispositions it asks for, and runs it.
fn run_command(
    command: &Command,
    cwd: &Path,
    inherited: &InheritedSignals,
    waiter: &SignalWaiter,
    daemon: DaemonContext<'_>,
    record: &mut InvocationRecord,
) -> Outcome {
    let script = match std::env::var_os(SCENARIO_ENV).filter(|path| !path.is_empty()) {
        None => {
            record.behaviour = Some("builtin".to_owned());
            None
        }
        Some(scenario_path) => {
            let scenario_path = PathBuf::from(scenario_path);
            match choose_script(&scenario_path, command.key()) {
                Ok((invocation, selection)) => {
                    record.invocation = Some(invocation);
                    record.behaviour = Some(selection.source);
                    selection.script
                }
                Err(message) => return Outcome::FakeError(message),
            }
        }
    };
    let behaviour = script.unwrap_or_else(|| builtin::behaviour(command, cwd));

    let on_sigint = if behaviour.ignore_sigint {
        SignalReaction::Ignore
    } else {
        behaviour
            .on_sigint
            .clone()
            .unwrap_or_else(|| builtin::sigint_reaction(command))
    };
    let on_sigterm = behaviour.on_sigterm.clone().unwrap_or(SignalReaction::Die);
    for (signal, reaction) in [
        (SignalName::INT, &on_sigint),
        (SignalName::TERM, &on_sigterm),
    ] {
        if *reaction == SignalReaction::Ignore && !inherited.is_ignored(signal) {
            if let Err(error) = signals::ignore(signal) {
                return Outcome::FakeError(format!("cannot ignore SIG{signal}: {error}"));
            }
        }
    }

    Runner::new(RunSettings {
        waiter,
        cwd,
        daemon,
        on_sigint,
        on_sigterm,
    })
    .run(&behaviour.steps, behaviour.exit)
}

/// Loads the scenario, counts this invocation, and selects its behaviour.
fn choose_script(
    scenario_path: &Path,
    key: &str,
) -> Result<(u64, crate::scenario::Selection), String> {
    let scenario = Scenario::load(scenario_path).map_err(|error| error.to_string())?;
    let counter = invocation_counter::counter_path(scenario_path);
    let invocation = invocation_counter::count_invocation(&counter, key)
        .map_err(|error| format!("invocation counter {}: {error}", counter.display()))?;
    let selection = scenario
        .select(key, invocation)
        .map_err(|error| error.to_string())?;
    Ok((invocation, selection))
}

/// Logs the end and ends the process as `outcome` says.
fn finish(outcome: Outcome, mut record: InvocationRecord, log: Option<&InvocationLog>) -> ! {
    record.event = Event::End;
    record.end_ms = Some(invocation_log::unix_ms());
    record.signals_received = signals::received_counts()
        .into_iter()
        .map(|(signal, count)| (signal.short_name().to_owned(), count))
        .collect();
    let (how, error) = match &outcome {
        Outcome::Exit {
            code,
            handled_signal,
        } => {
            record.handled_signal = *handled_signal;
            (
                Ending {
                    exit: Some(*code),
                    signal: None,
                },
                None,
            )
        }
        Outcome::DieBySignal(signal) => (
            Ending {
                signal: Some(*signal),
                ..Ending::default()
            },
            None,
        ),
        Outcome::FakeError(message) => {
            eprintln!("fake-cgc: {message}");
            (
                Ending {
                    exit: Some(FAKE_ERROR_EXIT),
                    ..Ending::default()
                },
                Some(message.clone()),
            )
        }
    };
    record.how = Some(how);
    record.error = error;
    if let Some(log) = log {
        log.append_or_warn(&record);
    }
    let _ = std::io::stdout().flush();
    match outcome {
        Outcome::Exit { code, .. } => std::process::exit(code),
        Outcome::DieBySignal(signal) => signals::die_by(signal),
        Outcome::FakeError(_) => std::process::exit(FAKE_ERROR_EXIT),
    }
}

fn print_help() {
    let help = format!(
        "{}\n\n  CodeGraphContext (scriptable stand-in, fake-cgc)\n\n\
         Commands: index, update, watch, doctor, list, query, find, version\n",
        crate::texts::USAGE_ROOT
    );
    // A closed stdout is not worth a panic.
    let _ = std::io::stdout().lock().write_all(help.as_bytes());
}
