//! Pure policy of cgc-fresh: the rules of the specification as plain
//! functions and state machines. Nothing here reads a clock, spawns a
//! process or touches a file: time and observations come in as inputs,
//! decisions go out as values. The actors in the `cgc-fresh` binary route
//! messages to these machines and carry out what they decide.

// Every dependency is used (dev-dependencies serve only the test targets).
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

pub mod cgc_markers;
pub mod cgc_seam;
pub mod config;
pub mod freshness;
pub mod manifest_diff;
pub mod read_your_writes;
pub mod sync_exit;
pub mod sync_plan;
pub mod sync_progress;
pub mod sync_run;
pub mod warm_worker;
pub mod watcher;
pub mod worker_life;
