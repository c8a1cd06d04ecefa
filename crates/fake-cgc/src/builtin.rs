//! The built-in behaviour of each subcommand: what the fake does without a
//! scenario, fast and with the real texts. Built as ordinary [`Behaviour`]s,
//! so they run through the same machinery as scripts.

use std::path::Path;

use crate::cli::Command;
use crate::db_lock::resolve_path;
use crate::scenario::{Behaviour, KnownText, Lines, SignalReaction, Step, StopScript};

/// Pause between the two stop lines of the built-in watch stop, so that a
/// second SIGINT can land in between (it makes the real one exit 130).
pub const WATCH_STOP_PAUSE_MS: u64 = 100;

/// The built-in behaviour of `command`, run in `cwd`.
pub fn behaviour(command: &Command, cwd: &Path) -> Behaviour {
    match command {
        Command::Version => printing(vec![Step::Stderr(KnownText::Version.into())]),
        Command::Doctor => printing(vec![Step::Stderr(default_database_line().into())]),
        Command::Index { path, .. } | Command::Update { path, .. } => {
            match existing_path(path, cwd) {
                Ok(resolved) => printing(vec![Step::Stdout(
                    KnownText::IndexFinished { path: resolved }.into(),
                )]),
                Err(missing) => path_missing(missing),
            }
        }
        Command::Watch {
            path,
            sync_on_start,
            ..
        } => match existing_path(path, cwd) {
            Ok(_) => watch(*sync_on_start),
            Err(missing) => path_missing(missing),
        },
        Command::List => printing(vec![Step::Stdout("No repositories indexed yet.".into())]),
        Command::Query { .. } => printing(vec![Step::Stdout("[]".into())]),
        Command::Find { term, .. } => printing(vec![Step::Stdout(
            format!("No matches found for '{term}'.").as_str().into(),
        )]),
    }
}

/// The built-in SIGINT reaction of `command`: watch stops gracefully
/// (exit 0), everything else is interrupted (exit 130).
pub fn sigint_reaction(command: &Command) -> SignalReaction {
    match command {
        Command::Watch { .. } => SignalReaction::Stop(StopScript {
            stdout: KnownText::Stopping.into(),
            steps: vec![
                Step::Sleep {
                    ms: WATCH_STOP_PAUSE_MS,
                },
                Step::Stdout(KnownText::Stopped.into()),
            ],
            exit: 0,
            ..StopScript::default()
        }),
        _ => SignalReaction::Stop(StopScript {
            exit: 130,
            ..StopScript::default()
        }),
    }
}

fn printing(steps: Vec<Step>) -> Behaviour {
    Behaviour {
        steps,
        ..Behaviour::default()
    }
}

/// The watch banner, the ready line twice (as the real one), then waiting.
fn watch(sync_on_start: bool) -> Behaviour {
    let banner = if sync_on_start {
        KnownText::AlreadyIndexedSyncing
    } else {
        KnownText::AlreadyIndexedWatching
    };
    printing(vec![
        Step::Stdout(banner.into()),
        Step::Stdout(KnownText::Ready.into()),
        Step::Stdout(KnownText::Ready.into()),
        Step::Hang,
    ])
}

/// The path resolved against `cwd`: `Ok` if it exists, `Err` if not.
fn existing_path(path: &str, cwd: &Path) -> Result<String, String> {
    let resolved = resolve_path(path, cwd);
    let text = resolved.to_string_lossy().into_owned();
    if resolved.exists() {
        Ok(text)
    } else {
        Err(text)
    }
}

/// What the real CLI does with a PATH that does not exist.
fn path_missing(path: String) -> Behaviour {
    Behaviour {
        steps: vec![Step::Stdout(Lines::from(KnownText::PathMissing { path }))],
        exit: 1,
        ..Behaviour::default()
    }
}

/// `cgc doctor`'s backend line from the environment: `DATABASE_TYPE`, then
/// `DEFAULT_DATABASE`, else `kuzudb (source: default)`.
fn default_database_line() -> KnownText {
    for variable in ["DATABASE_TYPE", "DEFAULT_DATABASE"] {
        if let Some(database) = std::env::var(variable)
            .ok()
            .filter(|value| !value.is_empty())
        {
            return KnownText::DefaultDatabase {
                database,
                source: format!("environment ({variable})"),
            };
        }
    }
    KnownText::DefaultDatabase {
        database: "kuzudb".to_owned(),
        source: "default".to_owned(),
    }
}
