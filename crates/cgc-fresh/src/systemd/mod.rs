//! systemd integration, without libsystemd.
//!
//! The service runs happily by hand (`cgc-fresh serve --workspace PATH`); under
//! a systemd *user* manager it is one instance of the template units in
//! `deploy/systemd/` per workspace, named by the workspace id
//! (`cgc-fresh@<id>.socket` / `.service`). This module holds the pieces:
//!
//! - [`activation`]: take the listening socket systemd passed us
//!   (`LISTEN_PID`/`LISTEN_FDS`, fd 3) instead of binding our own.
//! - [`notify`]: tell systemd `READY=1`, `STOPPING=1`, `STATUS=...` over
//!   `$NOTIFY_SOCKET` (`Type=notify`), and the opt-in watchdog interval.
//! - [`units`]: the unit templates (compiled in) and how they are rendered
//!   for one binary and one workspace.
//! - [`plan`]: what `cgc-fresh install` / `uninstall` will do, as a list of
//!   steps that can be printed (`--dry-run`) before anything happens.
//! - [`systemctl`]: finding a reachable user manager and running `systemctl --user`.
//! - [`install`]: the two commands themselves: plan, check, execute, report.
//!
//! # Environment is read once, before any thread starts
//!
//! [`activation::listen_fds_listener`] and [`notify::Notifier::from_env`] read
//! their variables and then *remove* them, so the `cgc` children we spawn do
//! not inherit `LISTEN_*` (they would try to use fd 3) or `NOTIFY_SOCKET` (they
//! could report readiness for us). Changing the environment is only sound
//! while the process has a single thread: call both first thing in `serve`,
//! before the actix/tokio runtime (or anything else) starts a thread.

pub mod activation;
pub mod install;
pub mod notify;
pub mod plan;
pub mod systemctl;
pub mod units;
