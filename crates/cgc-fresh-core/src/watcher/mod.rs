//! The managed watcher's policy: which backend CGC will use, and whether a
//! session's watcher may be spawned.
//!
//! - [`backend`](mod@backend): backend detection from the runtime environment,
//!   `cgc doctor`'s output and `~/.codegraphcontext/.env`, failing open to
//!   "unknown", which counts as embedded.
//! - [`gate`](mod@gate): the `off`/`on`/`auto` decision for one session.
//! - [`liveness`](mod@liveness): how long a watcher must stay alive after
//!   its ready line before it is verified (the stabilization probe).
//! - [`run`](mod@run): one watcher process from spawn to exit — what each
//!   observation means and what the supervisor reports.
//!
//! What happens after verification — the `fresh` claim,
//! death, stop — is part of the freshness machine
//! ([`crate::freshness::Input::WatcherStarted`] and the variants after it),
//! because it decides the workspace's freshness. The shell runs the
//! processes and reports; nothing here does I/O.

pub mod backend;
pub mod gate;
pub mod liveness;
pub mod run;

pub use backend::{
    classify, decide, from_runtime_env, parse_doctor_output, parse_dotenv, Backend, BackendAnswer,
    BackendSource, DetectionPlan, DetectionStep, DOTENV_KEYS, DOTENV_PATH_IN_HOME,
    RUNTIME_ENV_VARS,
};
pub use gate::{gate, GateDecision};
pub use run::{
    held_by, spawn_failed, AfterExit, Spawned, StopPurpose, WatcherEvent, WatcherExit, WatcherRun,
};
