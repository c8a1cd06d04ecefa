#![doc = include_str!("../README.md")]

mod app;
mod builtin;
pub mod cli;
mod daemon;
mod db_lock;
pub mod invocation_counter;
pub mod invocation_log;
mod process_info;
mod runner;
pub mod scenario;
pub mod signal_name;
mod signals;
pub mod texts;

pub use app::{main_entry, FAKE_ERROR_EXIT, LOG_ENV, SCENARIO_ENV};
pub use builtin::WATCH_STOP_PAUSE_MS;
pub use invocation_log::{read_records, Ending, Event, InvocationRecord};
pub use scenario::{Behaviour, Scenario};
pub use signal_name::SignalName;
