//! Process supervision primitives: plain functions and small types the
//! supervising actor calls. Nothing here is an actor.
//!
//! - [`spawn`]: start a child as its own process-group leader with a parent
//!   death signal, reset signal state and a clean, tagged environment.
//! - [`capture`]: read its stdout/stderr line by line, bounded.
//! - [`cgc_markers`]: recognise CGC's ready line and lock error (pure,
//!   in the core since the sync run's rules read them there).
//! - [`executable`]: find the configured `cgc` the way a spawn will.
//! - [`reap`]: collect every exit (children and re-parented orphans) on
//!   SIGCHLD; be a child subreaper.
//! - [`stop`]: SIGINT → SIGTERM → SIGKILL escalation per process group, plus
//!   killing escaped descendants found by owner token.
//! - [`proc_info`]: `/proc` readers and the database lock probe.
//! - [`signal`]: the one signal type, named by `signal-hook`.
//!
//! Invariants the caller must keep:
//! - spawn only from the main (arbiter) thread (`PR_SET_PDEATHSIG` follows
//!   the forking thread);
//! - create the [`reap::Reaper`] before the first spawn and let nothing else
//!   wait for children;
//! - register each child with [`reap::ExitWatchers::watch`] right after
//!   spawning it, before yielding to the runtime.

pub mod busy;
pub mod capture;
pub use cgc_fresh_core::cgc_markers;
pub mod executable;
pub mod kill;
pub mod proc_info;
pub mod reap;
pub mod signal;
pub mod spawn;
pub mod stop;

#[cfg(test)]
mod test_support;
