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
mod paths;
mod process;
mod real_path;
mod service;
mod supervisor;
mod systemd;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        // A hook must never exit 2 (Claude Code would feed standard error
        // to the model), not even for arguments it cannot read.
        Err(error)
            if is_hook_invocation()
                && !matches!(
                    error.kind(),
                    clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
                ) =>
        {
            return ExitCode::SUCCESS
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

/// `cgc-fresh … hook …`: the first argument that is not an option is `hook`.
fn is_hook_invocation() -> bool {
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy();
        if text == "--workspace" || text == "--socket" {
            args.next();
            continue;
        }
        if text.starts_with('-') {
            continue;
        }
        return text == "hook";
    }
    false
}
