//! End-to-end tests: each runs the real `cgc-fresh` binary (and, where
//! named, the fake or the real `cgc`) and talks to it over its socket.

mod support;

mod backpressure;
mod claude_code;
mod config;
mod deploy;
mod dice;
mod faults;
mod graph_backend;
mod hardening;
mod ignore_memo;
#[macro_use]
mod incremental;
mod instance;
// After `incremental`, whose backend macros it uses.
mod backends;
mod baseline;
mod big_batch;
mod budget;
mod language_trial;
mod languages;
mod lifetimes;
mod mcp;
mod parse_cache;
mod prepared_tree;
mod progress;
mod protocol;
mod real_cgc;
mod resolution_memo;
mod serve;
mod session_patches;
mod sessions;
mod shell_edits;
mod soak;
mod spec_clauses;
mod stored_edges;
mod supervision;
mod sync;
mod version_gate;
mod warm_worker;
mod watcher;
mod wedged;
