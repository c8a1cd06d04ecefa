//! Runs the built `fake-cgc` binary the way a supervisor would and checks
//! what it does: output, exit status, signals, locks, daemons and the log.

mod cli;
mod daemon;
mod invocation_log;
mod locks;
mod scenarios;
mod signals;
mod support;
