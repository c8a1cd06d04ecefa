//! Talking to the systemd user manager through the `systemctl` command.
//!
//! A user manager is "reachable" when `systemctl` is on `PATH` and
//! `systemctl --user is-system-running` names a state in which units can be
//! started. Its exit status alone is not enough: it is non-zero for
//! `degraded` (some unrelated unit failed), which is a perfectly usable
//! manager; and with no user bus it prints `offline`.

use std::ffi::OsStr;
use std::io;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Whether units can be installed here, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    Available,
    Unavailable(String),
}

/// What one `systemctl` run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    pub success: bool,
    /// e.g. `exit status: 1`
    pub status: String,
    pub stdout: String,
    pub stderr: String,
}

/// The operations install and uninstall need; a fake stands in for tests.
pub trait Systemctl {
    fn availability(&self) -> Availability;
    /// Runs `systemctl` with `args` (which include `--user`).
    fn run(&self, args: &[String]) -> io::Result<CommandOutput>;
}

/// The real `systemctl`, found on `PATH`.
#[derive(Debug, Clone)]
pub struct SystemctlCommand {
    program: Option<PathBuf>,
}

impl SystemctlCommand {
    /// Looks `systemctl` up on `$PATH` (absent is reported by
    /// [`Systemctl::availability`], not here).
    pub fn from_path_env() -> SystemctlCommand {
        SystemctlCommand {
            program: std::env::var_os("PATH").and_then(|path| find_executable("systemctl", &path)),
        }
    }
}

impl Systemctl for SystemctlCommand {
    fn availability(&self) -> Availability {
        if self.program.is_none() {
            return Availability::Unavailable("`systemctl` is not on PATH".to_string());
        }
        match self.run(&["--user".to_string(), "is-system-running".to_string()]) {
            Ok(output) => classify_manager_state(&output),
            Err(error) => Availability::Unavailable(format!("cannot run systemctl: {error}")),
        }
    }

    fn run(&self, args: &[String]) -> io::Result<CommandOutput> {
        let program = self
            .program
            .as_deref()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "`systemctl` is not on PATH"))?;
        let output = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .output()?;
        Ok(CommandOutput {
            success: output.status.success(),
            status: output.status.to_string(),
            stdout: String::from_utf8_lossy(&output.stdout).trim().to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        })
    }
}

/// Reads `systemctl --user is-system-running`: a manager that is up (even
/// with failed units) or still starting can take our units; `offline`
/// (no user bus), `stopping` and errors cannot.
pub fn classify_manager_state(output: &CommandOutput) -> Availability {
    let state = output.stdout.lines().next().unwrap_or("").trim();
    match state {
        "running" | "degraded" | "starting" | "initializing" => Availability::Available,
        _ => {
            let detail = [state, output.stderr.as_str()]
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(": ");
            let detail = if detail.is_empty() {
                output.status.clone()
            } else {
                detail
            };
            Availability::Unavailable(format!(
                "no systemd user manager is reachable (`systemctl --user is-system-running` says {detail})"
            ))
        }
    }
}

fn find_executable(name: &str, path: &OsStr) -> Option<PathBuf> {
    which::which_in(name, Some(path), "/").ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    fn output(success: bool, stdout: &str, stderr: &str) -> CommandOutput {
        CommandOutput {
            success,
            status: if success {
                "exit status: 0"
            } else {
                "exit status: 1"
            }
            .to_string(),
            stdout: stdout.to_string(),
            stderr: stderr.to_string(),
        }
    }

    #[test]
    fn running_and_degraded_managers_are_usable() {
        for (success, state) in [(true, "running"), (false, "degraded"), (false, "starting")] {
            assert_eq!(
                classify_manager_state(&output(success, state, "")),
                Availability::Available,
                "{state}"
            );
        }
    }

    #[test]
    fn offline_or_unreachable_managers_are_not() {
        let Availability::Unavailable(reason) = classify_manager_state(&output(
            false,
            "offline",
            "Failed to connect to bus: No medium found",
        )) else {
            panic!("offline must be unavailable");
        };
        assert!(
            reason.contains("offline: Failed to connect to bus"),
            "{reason}"
        );
        assert!(matches!(
            classify_manager_state(&output(false, "", "")),
            Availability::Unavailable(reason) if reason.contains("exit status: 1")
        ));
        assert!(matches!(
            classify_manager_state(&output(false, "stopping", "")),
            Availability::Unavailable(_)
        ));
    }

    #[test]
    fn without_systemctl_on_path_systemd_is_unavailable() {
        let empty = tempfile::tempdir().unwrap();
        let command = SystemctlCommand {
            program: find_executable("systemctl", empty.path().as_os_str()),
        };
        assert!(matches!(
            command.availability(),
            Availability::Unavailable(reason) if reason.contains("not on PATH")
        ));
        assert!(command.run(&["--user".to_string()]).is_err());
    }

    #[test]
    fn executables_are_found_on_a_path_list_and_plain_files_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        let path = std::env::join_paths([Path::new("/nonexistent"), dir.path()]).unwrap();
        assert_eq!(find_executable("tool", &path), None, "not executable yet");
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(find_executable("tool", &path), Some(tool));
    }
}
