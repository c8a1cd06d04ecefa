//! The benchmarks, one module each. Every one starts what it measures from
//! scratch in its own sandbox and prints its own section of the report.

pub mod branch_switch;
pub mod busy;
pub mod codebase;
pub mod connections;
pub mod dedup;
pub mod edit_to_fresh;
pub mod generated;
pub mod hook;
pub mod idle;
pub mod intake;
pub mod mcp;
pub mod pinned;
pub mod release_branch;
pub mod shutdown;
pub mod slow_reader;
pub mod startup;
pub mod strategies;

use std::path::PathBuf;

/// What every benchmark needs: the programs and where to put sandboxes.
pub struct Tools {
    /// The `cgc-fresh` binary under test.
    pub service_bin: PathBuf,
    /// The scriptable fake `cgc`.
    pub fake_cgc: PathBuf,
    /// The real CodeGraphContext CLI.
    pub real_cgc: PathBuf,
    /// Directory in which sandboxes are created.
    pub scratch: PathBuf,
    /// The command line that produced this report, printed with each table.
    pub command_line: String,
}

/// One environment variable for the service.
pub fn var(name: &str, value: impl ToString) -> (String, String) {
    (name.to_string(), value.to_string())
}
