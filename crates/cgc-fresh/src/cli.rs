//! The command line: one binary, a `serve` subcommand for the service and
//! client subcommands for people and scripts.
//!
//! Exit codes (also in `--help`):
//! 0 success · 1 error · 2 usage error · 3 no service running for the
//! workspace · 4 the service answered with an error frame. A command a
//! harness runs (`hook`, `status --line`) reports a usage error with exit 1
//! and one line on standard error instead: Claude Code blocks on exit 2.

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

/// A harness `install --harness` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Harness {
    /// Claude Code: command hooks and the status line in `settings.json`.
    ClaudeCode,
}

/// The harnesses `hook` speaks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Subcommand)]
pub enum HookHarness {
    /// A Claude Code command hook (SessionStart, PreToolUse, PostToolUse,
    /// PostToolUseFailure, Stop, SessionEnd); no service running means a
    /// silent exit 0, after starting one unless CGC_FRESH_NO_AUTOSTART=1.
    /// CGC_FRESH_HOOK_LOG names a file for the hook's JSON log lines.
    ClaudeCode,
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
        #[arg(long, conflicts_with = "line")]
        json: bool,
        /// Print one short line for a status bar (Claude Code's
        /// `statusLine`), e.g. `graph: fresh`; prints nothing and exits 0
        /// when no service answers. Reads the workspace from a JSON object
        /// on standard input (`workspace.project_dir`, `cwd`) when one is
        /// there, else `CLAUDE_PROJECT_DIR`, else `--workspace`.
        #[arg(long)]
        line: bool,
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
    /// (without systemd: says how to run `serve` by hand); with
    /// `--harness claude-code`, merge the hooks and the status line into
    /// Claude Code's settings instead, and (project scope) the `cgc-fresh
    /// mcp` server into the project's `.mcp.json`.
    Install {
        /// Print what would be done, and do nothing.
        #[arg(long)]
        dry_run: bool,
        /// Install for a harness instead of systemd.
        #[arg(long, value_enum)]
        harness: Option<Harness>,
        /// With `--harness`: the project's `.claude/settings.json` (default)
        /// or the user's `~/.claude/settings.json`.
        #[arg(long, value_enum)]
        scope: Option<crate::harness::claude_settings::Scope>,
    },
    /// Stop and remove the workspace's systemd user instance; with
    /// `--harness claude-code`, take exactly the entries `install` added
    /// out of Claude Code's settings and `.mcp.json`.
    Uninstall {
        /// Print what would be done, and do nothing.
        #[arg(long)]
        dry_run: bool,
        /// Uninstall from a harness instead of systemd.
        #[arg(long, value_enum)]
        harness: Option<Harness>,
        /// With `--harness`: which settings file (as for `install`).
        #[arg(long, value_enum)]
        scope: Option<crate::harness::claude_settings::Scope>,
    },
    /// Run as a harness's hook: read one hook payload on standard input and
    /// report it to the service. Exits 0 and prints nothing but the
    /// person's notices (as the harness expects them); arguments it cannot
    /// read exit 1 with one line on standard error (never 2, which Claude
    /// Code would feed to the model).
    Hook {
        #[command(subcommand)]
        harness: HookHarness,
    },
    /// Serve CodeGraphContext's MCP tools on stdio, in place of `cgc mcp
    /// start`: CGC's own tools, answered through this workspace's service
    /// (started when none runs), so that no process holds the graph's
    /// database between requests and every sync still runs. Mutating tools
    /// are refused (see the README). Exits 0 when stdin closes.
    Mcp,
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
