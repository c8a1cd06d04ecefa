//! The command line: one binary, a `serve` subcommand for the service and
//! client subcommands for people and scripts.
//!
//! Exit codes (also in `--help`):
//! 0 success · 1 error · 2 usage error · 3 no service running for the
//! workspace · 4 the service answered with an error frame.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub const EXIT_OK: u8 = 0;
pub const EXIT_ERROR: u8 = 1;
pub const EXIT_NOT_RUNNING: u8 = 3;
pub const EXIT_SERVICE_ERROR: u8 = 4;

#[derive(Debug, Parser)]
#[command(
    name = "cgc-fresh",
    version,
    about = "Keeps a CodeGraphContext graph fresh while a coding agent edits the workspace",
    after_help = "Exit codes: 0 ok, 1 error, 2 usage error, 3 no service running for the workspace, \
                  4 the service answered with an error.\n\
                  Logs: JSON lines on stderr; level from CGC_FRESH_LOG or RUST_LOG (default info)."
)]
pub struct Cli {
    #[command(flatten)]
    pub target: Target,
    #[command(subcommand)]
    pub command: Command,
}

/// How every subcommand finds its workspace's service.
#[derive(Debug, Args, Clone)]
pub struct Target {
    /// The workspace (repository root) the service keeps fresh.
    #[arg(long, global = true, default_value = ".")]
    pub workspace: PathBuf,
    /// The service's Unix socket (default: $XDG_RUNTIME_DIR/cgc-fresh/<id>.sock).
    #[arg(long, global = true, env = "CGC_FRESH_SOCKET")]
    pub socket: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the service for the workspace (foreground; logs on stderr).
    Serve {
        /// An extra configuration file (JSON or TOML), applied after the
        /// workspace file and before the environment.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Show whether the graph can be trusted right now.
    Status {
        /// Print the state frame as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Ask the service to sync the graph now (not budgeted; single-flight).
    Sync,
    /// Subscribe and print every state and notice frame as it comes.
    Events,
    /// Send raw frames (JSON) in order on one connection and print every
    /// reply; with no FRAME, one frame per line is read from standard input.
    /// A frame without an `id` is given one (`"send-N"`) so that it gets a
    /// reply; frames pushed meanwhile are printed too.
    Send {
        /// The frames, e.g. '{"type":"status"}'.
        frames: Vec<String>,
    },
    /// Install and start a systemd user socket unit for the workspace
    /// (without systemd: says how to run `serve` by hand).
    Install {
        /// Print what would be done, and do nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Stop and remove the workspace's systemd user instance.
    Uninstall {
        /// Print what would be done, and do nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Print the effective configuration, where each value came from, and warnings.
    Config {
        /// Print as JSON.
        #[arg(long)]
        json: bool,
        /// An extra configuration file, as for `serve`.
        #[arg(long)]
        config: Option<PathBuf>,
    },
}
