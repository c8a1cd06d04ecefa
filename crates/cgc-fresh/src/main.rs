//! `cgc-fresh`: keeps a CodeGraphContext graph trustworthy while a coding
//! agent edits the workspace. `cgc-fresh serve` runs the per-workspace
//! service; the other subcommands are its clients (see `cli`).

// Every dependency is used (dev-dependencies serve only the test targets).
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod atomic_file;
mod cli;
mod client;
mod commands;
mod config_load;
mod harness;
mod instance_lock;
mod logging;
mod manifest;
mod mcp;
mod paths;
mod process;
mod real_path;
mod service;
mod shell_word;
mod supervisor;
mod systemd;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        // A command a harness runs (a hook, the status line) must never
        // exit 2 — Claude Code would block on it and feed standard error
        // to the model — nor fail silently: one line on standard error
        // (shown to the person for any other non-zero exit) and exit 1.
        Err(error)
            if harness_invocation().is_some()
                && !matches!(
                    error.kind(),
                    clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
                ) =>
        {
            let command = harness_invocation().unwrap_or("cgc-fresh");
            eprintln!("{}", usage_error_line(command, &error.to_string()));
            return ExitCode::from(cli::EXIT_ERROR);
        }
        Err(error) => error.exit(),
    };
    // A hook and a status line write nothing to standard error: Claude
    // Code shows it (or, for a hook, may feed it to the model).
    let quiet = matches!(
        cli.command,
        cli::Command::Hook { .. } | cli::Command::Status { line: true, .. }
    );
    if quiet {
        // A panic is caught and logged by the command itself.
        std::panic::set_hook(Box::new(|_| {}));
    } else {
        logging::init();
    }
    match commands::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(_) if quiet => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("cgc-fresh: {error:#}");
            ExitCode::from(cli::EXIT_ERROR)
        }
    }
}

/// The command a harness runs, if this is one: `cgc-fresh … hook …` (the
/// first argument that is not an option is `hook`) or `cgc-fresh status
/// --line`.
fn harness_invocation() -> Option<&'static str> {
    harness_command(
        std::env::args_os()
            .skip(1)
            .map(|a| a.to_string_lossy().into_owned()),
    )
}

fn harness_command(args: impl IntoIterator<Item = String>) -> Option<&'static str> {
    let mut args = args.into_iter();
    let mut line = false;
    let mut subcommand = None;
    while let Some(text) = args.next() {
        if text == "--workspace" || text == "--socket" {
            args.next();
            continue;
        }
        if text == "--line" {
            line = true;
        }
        if text.starts_with('-') || subcommand.is_some() {
            continue;
        }
        if text == "hook" {
            return Some("cgc-fresh hook");
        }
        subcommand = Some(text);
    }
    (line && subcommand.as_deref() == Some("status")).then_some("cgc-fresh status --line")
}

/// One line for a usage error of `command`: clap's own first line (its
/// `error: ` dropped) and where to read more.
fn usage_error_line(command: &str, rendered: &str) -> String {
    let first = rendered
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("the arguments are not understood");
    let reason = first.strip_prefix("error: ").unwrap_or(first);
    format!("{command}: {reason} (see `{command} --help`)")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(args: &[&str]) -> Option<&'static str> {
        harness_command(args.iter().map(|a| a.to_string()))
    }

    #[test]
    fn hooks_and_the_status_line_are_told_apart_from_other_commands() {
        assert_eq!(of(&["hook", "claude-code"]), Some("cgc-fresh hook"));
        assert_eq!(
            of(&["--workspace", "hook", "hook", "claude-code", "x"]),
            Some("cgc-fresh hook")
        );
        assert_eq!(of(&["--socket", "/s", "hook"]), Some("cgc-fresh hook"));
        assert_eq!(
            of(&["status", "--line", "--bogus"]),
            Some("cgc-fresh status --line")
        );
        assert_eq!(of(&["--line", "status"]), Some("cgc-fresh status --line"));
        assert_eq!(of(&["status", "--json"]), None);
        assert_eq!(of(&["sync", "hook"]), None);
        assert_eq!(of(&["serve", "--line"]), None);
        assert_eq!(of(&[]), None);
    }

    #[test]
    fn a_usage_error_is_one_line_naming_the_command() {
        let line = usage_error_line(
            "cgc-fresh hook",
            "error: unexpected argument 'SessionStart' found\n\nUsage: cgc-fresh hook claude-code\n",
        );
        assert_eq!(
            line,
            "cgc-fresh hook: unexpected argument 'SessionStart' found (see `cgc-fresh hook --help`)"
        );
        assert!(!usage_error_line("cgc-fresh hook", "").is_empty());
    }
}
