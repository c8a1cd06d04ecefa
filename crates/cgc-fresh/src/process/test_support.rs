//! Helpers shared by the process tests.
//!
//! Some tests change process-wide state (signal dispositions, the
//! environment, the child-subreaper flag) or run the `waitpid(-1)` reaper,
//! which would steal exit statuses from every other test's children. Those
//! run in a fresh copy of the test binary that executes just that one test.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::spawn::{ChildKind, SpawnSpec};

const ISOLATED_TEST_VAR: &str = "CGC_FRESH_ISOLATED_TEST";

/// Runs `body` in a separate test process (the current test binary, filtered
/// to exactly this test). `module` is `module_path!()`, `name` the test fn.
pub fn isolated_test(module: &str, name: &str, body: impl FnOnce()) {
    // Test names omit the crate name that `module_path!()` starts with.
    let module = module.split_once("::").map_or(module, |(_, rest)| rest);
    let full_name = format!("{module}::{name}");
    if std::env::var(ISOLATED_TEST_VAR).as_deref() == Ok(full_name.as_str()) {
        body();
        return;
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            full_name.as_str(),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(ISOLATED_TEST_VAR, &full_name)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("test result: ok. 1 passed"),
        "isolated test {full_name} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}

/// [`isolated_test`] for async bodies: runs on a current-thread tokio
/// runtime like the service's actix-rt one.
pub fn isolated_async_test<F: Future<Output = ()>>(
    module: &str,
    name: &str,
    body: impl FnOnce() -> F,
) {
    isolated_test(module, name, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(body());
    });
}

/// A harmless long-running child: `sleep 30`.
pub fn sleeper_spec(cwd: &Path, owner_token: &str) -> SpawnSpec {
    command_spec(cwd, owner_token, "sleep", &["30"])
}

/// `/bin/sh -c <script>` with the given owner token.
pub fn shell_spec(cwd: &Path, owner_token: &str, script: &str) -> SpawnSpec {
    command_spec(cwd, owner_token, "/bin/sh", &["-c", script])
}

fn command_spec(cwd: &Path, owner_token: &str, program: &str, args: &[&str]) -> SpawnSpec {
    SpawnSpec {
        program: PathBuf::from(program),
        args: args.iter().map(|argument| argument.to_string()).collect(),
        cwd: cwd.to_path_buf(),
        env_set: Vec::new(),
        env_remove: Vec::new(),
        kind: ChildKind::Probe,
        owner_token: owner_token.to_string(),
        piped_stdin: false,
    }
}

/// SIGKILLs and reaps one of our own children (only for tests that run no
/// `waitpid(-1)` reaper).
pub fn kill_and_reap(pid: i32) {
    let pid = nix::unistd::Pid::from_raw(pid);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    let _ = nix::sys::wait::waitpid(pid, None);
}

/// The system Python, avoiding version-manager shims that may exec through
/// extra processes.
pub fn python3() -> PathBuf {
    let system = PathBuf::from("/usr/bin/python3");
    if system.exists() {
        system
    } else {
        PathBuf::from("python3")
    }
}
