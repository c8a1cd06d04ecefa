//! "Is the embedded database busy?" without spawning anything: probe every
//! existing candidate database file with `fcntl(F_GETLK)` and name the
//! first holder the way a person recognises it (`pid 4242: cgc watch .`).

use std::path::Path;

use super::proc_info::{describe_process, lock_candidates, probe_write_lock};

/// The first process holding a write lock on one of CGC's candidate
/// database files for this workspace, described; `None` when all are free
/// (or none exists yet). `component`: the actor probing, for the log.
pub fn find_lock_holder(
    workspace: &Path,
    home: &Path,
    global_args: &[String],
    component: &'static str,
) -> Option<String> {
    let env = |name: &str| std::env::var(name).ok();
    for path in lock_candidates(workspace, home, global_args, env) {
        match probe_write_lock(&path) {
            Ok(Some(holder)) => {
                let who = holder
                    .pid
                    .map(describe_process)
                    .unwrap_or_else(|| "a process in another namespace".into());
                tracing::info!(component, event = "lock_probe", path = %path.display(), held = true, holder = %who);
                return Some(who);
            }
            Ok(None) => {
                tracing::debug!(component, event = "lock_probe", path = %path.display(), held = false)
            }
            Err(error) => {
                tracing::warn!(component, event = "lock_probe_failed", path = %path.display(), error = %error)
            }
        }
    }
    None
}
