//! `cgc-fresh-bench`: measures a real `cgc-fresh serve` process and prints
//! the figures as markdown (for `docs/BENCHMARKS.md`).
//!
//! Every subcommand starts the service binary as a child process in a
//! throw-away sandbox (its own HOME, runtime and state directories), talks
//! to its Unix socket with plain `std` sockets the way a harness does, runs
//! it with the scriptable fake `cgc` or the real CodeGraphContext CLI, and
//! stops every process it started before it returns. Figures are printed
//! next to their targets with a `met`/`missed` verdict; nothing here
//! asserts a timing.
//!
//! ```text
//! cargo build --release -p cgc-fresh -p fake-cgc -p cgc-fresh-bench
//! target/release/cgc-fresh-bench all            # intake, idle, startup, shutdown, dedup
//! target/release/cgc-fresh-bench busy           # needs the real cgc (scripts/install-cgc.sh)
//! target/release/cgc-fresh-bench strategies     # needs the real cgc; takes minutes
//! target/release/cgc-fresh-bench edit-to-fresh  # reconcile vs incremental, real cgc (--modules N | --real-code)
//! target/release/cgc-fresh-bench branch-switch  # a checkout of hundreds of files and back, real cgc (--modules N | --real-code)
//! target/release/cgc-fresh-bench mcp            # cgc-fresh mcp vs cgc mcp start, read-your-writes; real cgc
//! target/release/cgc-fresh-bench slow-reader    # clients that never read
//! target/release/cgc-fresh-bench hook           # one Claude Code hook process
//! target/release/cgc-fresh-bench connections    # 10 000 held; the descriptor limit
//! ```
//!
//! The service and fake binaries default to the ones next to this
//! executable; the real CLI to `$CGC_FRESH_REAL_CGC`, else
//! `.cache/cgc-venv/bin/cgc` (where `scripts/install-cgc.sh` puts it).

mod benches;
mod conn;
mod fake;
mod machine;
mod mcp_client;
mod procfs;
mod real_cgc;
mod report;
mod service;
mod stats;

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use clap::{Args, Parser, Subcommand};

use benches::branch_switch::BranchSwitchOptions;
use benches::busy::BusyOptions;
use benches::codebase::Codebase;
use benches::connections::ConnectionsOptions;
use benches::edit_to_fresh::EditToFreshOptions;
use benches::generated::Language;
use benches::intake::IntakeOptions;
use benches::mcp::McpOptions;
use benches::slow_reader::SlowReaderOptions;
use benches::Tools;
use machine::Machine;

#[derive(Debug, Parser)]
#[command(
    name = "cgc-fresh-bench",
    about = "Benchmarks of the cgc-fresh service (prints markdown tables)"
)]
struct Cli {
    #[command(flatten)]
    paths: PathArgs,
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Debug, Args)]
struct PathArgs {
    /// The `cgc-fresh` binary (default: next to this executable).
    #[arg(long, global = true)]
    service_bin: Option<PathBuf>,
    /// The fake `cgc` binary (default: next to this executable).
    #[arg(long, global = true)]
    fake_cgc: Option<PathBuf>,
    /// The real CodeGraphContext CLI.
    #[arg(
        long,
        global = true,
        env = "CGC_FRESH_REAL_CGC",
        default_value = ".cache/cgc-venv/bin/cgc"
    )]
    real_cgc: PathBuf,
    /// Where sandboxes are created (default: the system temp directory).
    #[arg(long, global = true)]
    scratch: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Bench {
    /// tool_call → state round trips, then a pipelined flood (fake cgc).
    Intake {
        #[arg(long, default_value_t = 10_000)]
        round_trips: usize,
        /// Untimed round trips before the measured ones.
        #[arg(long, default_value_t = 200)]
        warmup: usize,
        #[arg(long, default_value_t = 1_000_000)]
        flood_frames: u64,
    },
    /// RSS after start-up and context switches while idle (fake cgc).
    Idle {
        /// Length of the idle period.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Idle with a verified managed watcher (`freshness.watch=on`).
        #[arg(long)]
        watcher: bool,
    },
    /// Spawn → socket accepting, over several starts (fake cgc).
    Startup {
        #[arg(long, default_value_t = 20)]
        starts: usize,
    },
    /// SIGTERM during a hanging sync with a daemonized grandchild (fake cgc).
    Shutdown {
        #[arg(long, default_value_t = 10)]
        runs: usize,
    },
    /// Lock probe vs. running the real CLI into the lock (real cgc).
    Busy {
        #[arg(long, default_value_t = 1000)]
        probes: usize,
        #[arg(long, default_value_t = 3)]
        cli_runs: usize,
    },
    /// Concurrent manual syncs → cgc processes spawned (fake cgc).
    Dedup,
    /// Wall time of one `cgc-fresh hook claude-code` process, service up and down (fake cgc).
    Hook {
        /// Invocations per measured hook event.
        #[arg(long, default_value_t = 200)]
        invocations: usize,
    },
    /// Each sync strategy on a generated workspace (real cgc; minutes).
    Strategies {
        /// Generated Python modules.
        #[arg(long, default_value_t = 200)]
        modules: usize,
    },
    /// A one-file edit → fresh, `incremental` and `reconcile` side by side
    /// (real cgc; minutes).
    EditToFresh {
        /// Generated modules.
        #[arg(long, default_value_t = 400)]
        modules: usize,
        /// The workspace's language (generated modules, or the real tree).
        #[arg(long, value_enum, default_value = "python")]
        language: Language,
        /// Measure on a published tree of `--language` instead of
        /// generated modules, pinned by version and SHA-256: `pip` 24.0
        /// (PyPI), `rxjs` 7.8.2 (npm, its `src/`), `eslint` 8.57.1 (npm),
        /// go-jsonnet's Go sources in `gojsonnet` 0.22.0 (PyPI source
        /// distribution), `tokio` 1.54.1 (crates.io).
        #[arg(long)]
        real_code: bool,
        /// Timed one-file edits under `incremental` (the first with no
        /// parse cache); `reconcile` takes one.
        #[arg(long, default_value_t = 5)]
        samples: usize,
        /// Leave CGC's reconcile sample out (it takes 20 min and more at
        /// 2 000 modules); a no-op sync records the manifest instead.
        #[arg(long)]
        without_reconcile: bool,
    },
    /// A shell command that rewrites hundreds of modules (a branch switch)
    /// and the switch back, each → settled sync, against `cgc index .`
    /// (real cgc; minutes).
    BranchSwitch {
        /// Generated Python modules.
        #[arg(long, default_value_t = 400)]
        modules: usize,
        /// Modules whose export the switch renames (each also changes the
        /// next module, which calls it).
        #[arg(long, default_value_t = 300)]
        switched: usize,
        /// Switch the pinned `pip` 24.0 source to `pip` 22.3.1 and back
        /// (330 Python files differ) instead of generated modules.
        #[arg(long)]
        real_code: bool,
    },
    /// MCP tool calls through `cgc-fresh mcp` vs `cgc mcp start`, and the
    /// read-your-writes wait after an edit (real cgc; minutes).
    Mcp {
        /// Generated Python modules.
        #[arg(long, default_value_t = 2000)]
        modules: usize,
        /// Timed tool calls per server (a mix of find_code,
        /// execute_cypher_query and analyze_code_relationships).
        #[arg(long, default_value_t = 200)]
        queries: usize,
        /// Read-your-writes samples (a tool call at an edit's ack), each
        /// paired with a plain edit timed until its sync settles.
        #[arg(long, default_value_t = 20)]
        edits: usize,
        /// `mcp.holdDatabaseMs` for the service (0, the default: every call
        /// opens and closes the database).
        #[arg(long, default_value_t = 0)]
        hold_ms: u64,
    },
    /// Peak memory with a requester and a subscriber that never read (fake cgc).
    SlowReader {
        /// Longest a flood of requests writes.
        #[arg(long, default_value_t = 20)]
        seconds: u64,
        /// Edits made while the subscriber does not read.
        #[arg(long, default_value_t = 100_000)]
        edits: u64,
        /// A flood stops when the service's VmRSS passes this many MiB.
        #[arg(long, default_value_t = 1024)]
        rss_cap_mib: u64,
    },
    /// Memory and descriptors with many connections held; the descriptor limit (fake cgc).
    Connections {
        /// Connections held at once.
        #[arg(long, default_value_t = 10_000)]
        count: usize,
        /// The service's `RLIMIT_NOFILE` in the at-the-limit case.
        #[arg(long, default_value_t = 1024)]
        limit: u64,
        /// How long connections are held at the limit.
        #[arg(long, default_value_t = 12)]
        hold_seconds: u64,
    },
    /// The fast ones with their defaults: intake, idle, startup, shutdown, dedup.
    All {
        /// Length of the idle period.
        #[arg(long, default_value_t = 60)]
        idle_seconds: u64,
    },
}

fn main() {
    if let Err(error) = run() {
        eprintln!("cgc-fresh-bench: {error:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let cli = Cli::parse();
    let tools = tools(&cli.paths)?;
    print_header(&tools);
    match cli.bench {
        Bench::Intake {
            round_trips,
            warmup,
            flood_frames,
        } => benches::intake::run(
            &tools,
            &IntakeOptions {
                round_trips,
                warmup,
                flood_frames,
            },
        ),
        Bench::Idle { seconds, watcher } => benches::idle::run(&tools, seconds, watcher),
        Bench::Startup { starts } => benches::startup::run(&tools, starts),
        Bench::Shutdown { runs } => benches::shutdown::run(&tools, runs),
        Bench::Busy { probes, cli_runs } => {
            benches::busy::run(&tools, &BusyOptions { probes, cli_runs })
        }
        Bench::Dedup => benches::dedup::run(&tools),
        Bench::Hook { invocations } => benches::hook::run(&tools, invocations),
        Bench::SlowReader {
            seconds,
            edits,
            rss_cap_mib,
        } => benches::slow_reader::run(
            &tools,
            &SlowReaderOptions {
                seconds,
                edits,
                rss_cap_mib,
            },
        ),
        Bench::Connections {
            count,
            limit,
            hold_seconds,
        } => benches::connections::run(
            &tools,
            &ConnectionsOptions {
                count,
                limit,
                hold_seconds,
            },
        ),
        Bench::Strategies { modules } => benches::strategies::run(&tools, modules),
        Bench::EditToFresh {
            modules,
            language,
            real_code,
            samples,
            without_reconcile,
        } => benches::edit_to_fresh::run(
            &tools,
            &EditToFreshOptions {
                codebase: if real_code {
                    Codebase::Real(language)
                } else {
                    Codebase::Generated { modules, language }
                },
                samples,
                without_reconcile,
            },
        ),
        Bench::BranchSwitch {
            modules,
            switched,
            real_code,
        } => benches::branch_switch::run(
            &tools,
            &BranchSwitchOptions {
                modules,
                switched,
                real_code,
            },
        ),
        Bench::Mcp {
            modules,
            queries,
            edits,
            hold_ms,
        } => benches::mcp::run(
            &tools,
            &McpOptions {
                modules,
                queries,
                edits,
                hold_ms,
            },
        ),
        Bench::All { idle_seconds } => {
            benches::intake::run(
                &tools,
                &IntakeOptions {
                    round_trips: 10_000,
                    warmup: 200,
                    flood_frames: 1_000_000,
                },
            )?;
            benches::idle::run(&tools, idle_seconds, false)?;
            benches::idle::run(&tools, idle_seconds, true)?;
            benches::startup::run(&tools, 20)?;
            benches::shutdown::run(&tools, 10)?;
            benches::dedup::run(&tools)
        }
    }
}

fn tools(paths: &PathArgs) -> Result<Tools> {
    let exe = std::env::current_exe().context("locating this executable")?;
    let beside = |name: &str| exe.with_file_name(name);
    let service_bin = paths
        .service_bin
        .clone()
        .unwrap_or_else(|| beside("cgc-fresh"));
    let fake_cgc = paths.fake_cgc.clone().unwrap_or_else(|| beside("fake-cgc"));
    for (what, path) in [("cgc-fresh", &service_bin), ("fake-cgc", &fake_cgc)] {
        if !path.is_file() {
            anyhow::bail!(
                "{what} not found at {} (build it with `cargo build --release -p {what}` or pass its path)",
                path.display()
            );
        }
    }
    Ok(Tools {
        service_bin: absolute(&service_bin)?,
        fake_cgc: absolute(&fake_cgc)?,
        real_cgc: absolute(&paths.real_cgc).unwrap_or_else(|_| paths.real_cgc.clone()),
        scratch: paths.scratch.clone().unwrap_or_else(std::env::temp_dir),
        command_line: command_line(),
    })
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(path).with_context(|| format!("resolving {}", path.display()))
}

/// This invocation as a shell would show it (program name without its
/// directory, arguments quoted where needed).
fn command_line() -> String {
    let mut args = std::env::args();
    let program = args
        .next()
        .map(|p| {
            Path::new(&p)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or(p)
        })
        .unwrap_or_else(|| "cgc-fresh-bench".into());
    std::iter::once(program)
        .chain(args.map(|a| shell_quote(&a)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

fn print_header(tools: &Tools) {
    println!("# cgc-fresh benchmark report\n");
    println!("{}", Machine::detect().table().render());
    println!(
        "Service binary `{}`; fake `{}`.",
        tools
            .service_bin
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        tools
            .fake_cgc
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_quoted_only_when_a_shell_needs_it() {
        assert_eq!(shell_quote("--seconds"), "--seconds");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn the_command_line_is_parsed_with_global_options_after_the_subcommand() {
        let cli = Cli::try_parse_from([
            "cgc-fresh-bench",
            "idle",
            "--seconds",
            "5",
            "--scratch",
            "/x",
        ])
        .unwrap();
        assert!(matches!(
            cli.bench,
            Bench::Idle {
                seconds: 5,
                watcher: false
            }
        ));
        assert_eq!(cli.paths.scratch.as_deref(), Some(Path::new("/x")));
    }
}
