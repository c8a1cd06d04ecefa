//! `cgc-fresh`: keeps a CodeGraphContext graph trustworthy while a coding
//! agent edits the workspace. `cgc-fresh serve` runs the per-workspace
//! service; the other subcommands are its clients (see `cli`).

mod atomic_file;
mod cli;
mod client;
mod commands;
mod config_load;
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
    let cli = cli::Cli::parse();
    logging::init();
    match commands::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("cgc-fresh: {error:#}");
            ExitCode::from(cli::EXIT_ERROR)
        }
    }
}
