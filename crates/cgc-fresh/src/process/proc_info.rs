//! Facts about other processes: `/proc` reads and the database lock probe.
//!
//! The `/proc` reads (stat, command line, environment, the process listing)
//! are `cgc-fresh-procinfo`'s, which reads them through the `procfs` crate
//! and is shared with the benchmarks; this module keeps the service's
//! questions (whose owner token is this, which processes carry ours) and the
//! `fcntl(F_GETLK)` probe, which is a system call, not a `/proc` read.
//!
//! Everything here is a snapshot: a process can exit (and its pid be reused)
//! between two reads, so callers treat every answer as "true a moment ago".
//! Errors for processes that vanished or belong to another user are normal
//! and are reported as `io::Error`s (or skipped while scanning), never panics.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

pub use cgc_fresh_procinfo::ProcStat;
// The stat-line parser for text already in hand; the service itself reads
// stat through `procfs` (`read_proc_stat`). Kept here for its callers.
#[allow(unused_imports)]
pub use cgc_fresh_procinfo::{parse_proc_stat, StatParseError};

/// The environment variable every child (and all its descendants) carries so
/// leftovers can be found again by scanning `/proc/*/environ`.
pub const OWNER_TOKEN_VAR: &str = "CGC_FRESH_OWNER";

/// Reads and parses `/proc/<pid>/stat`.
pub fn read_proc_stat(pid: i32) -> io::Result<ProcStat> {
    cgc_fresh_procinfo::read_proc_stat(pid)
}

/// The argument vector of a process (`/proc/<pid>/cmdline`). Empty for
/// zombies and kernel threads; an error when it is not UTF-8.
pub fn read_cmdline(pid: i32) -> io::Result<Vec<String>> {
    cgc_fresh_procinfo::read_cmdline(pid)
}

/// A one-line human description of a process for messages such as
/// "the database is locked by pid 4242: cgc watch .".
///
/// Falls back to `[comm]` when the command line is empty and to the bare pid
/// when the process is already gone.
pub fn describe_process(pid: i32) -> String {
    match read_cmdline(pid) {
        Ok(arguments) if !arguments.is_empty() => {
            format!("pid {pid}: {}", arguments.join(" "))
        }
        _ => match read_proc_stat(pid) {
            Ok(stat) => format!("pid {pid}: [{}]", stat.comm),
            Err(_) => format!("pid {pid}"),
        },
    }
}

/// The value of `key` in the initial environment of `pid`
/// (`/proc/<pid>/environ`). `Ok(None)` when the variable is not set.
///
/// Reading another user's process fails with `PermissionDenied`.
pub fn environ_value(pid: i32, key: &str) -> io::Result<Option<String>> {
    cgc_fresh_procinfo::environ_value(pid, key)
}

/// The owner token a process carries, if any (and if we may read it).
pub fn owner_token_of(pid: i32) -> Option<String> {
    environ_value(pid, OWNER_TOKEN_VAR).ok().flatten()
}

/// Every live process (other than this one) whose owner token starts with
/// `prefix`. Zombies are skipped: they hold no resources and cannot be killed.
///
/// Pass `"<service-token>."` to find the descendants of every child of one
/// service instance (the trailing dot keeps `svc1` from matching `svc10`).
pub fn processes_with_owner_prefix(prefix: &str) -> Vec<i32> {
    cgc_fresh_procinfo::live_processes_with_env(OWNER_TOKEN_VAR, |token| token.starts_with(prefix))
}

/// Every live process (other than this one) whose owner token is exactly
/// `token`: one child and whatever it started, even in another session.
pub fn processes_with_owner_token(token: &str) -> Vec<i32> {
    cgc_fresh_procinfo::live_processes_with_env(OWNER_TOKEN_VAR, |candidate| candidate == token)
}

/// A process holding a POSIX (fcntl) lock that conflicts with a write lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHolder {
    /// The holder's pid, or `None` when the kernel cannot say (an
    /// open-file-description lock reports pid -1).
    pub pid: Option<i32>,
    /// True when the conflicting lock is a write (exclusive) lock.
    pub exclusive: bool,
}

/// Asks the kernel who holds a lock on `path` that would block a whole-file
/// write lock, without taking any lock (`fcntl(F_GETLK)`).
///
/// - Returns `Ok(None)` for a missing file; never creates one.
/// - Opens read-only: Linux answers `F_GETLK` for `F_WRLCK` on a read-only
///   descriptor, so no write permission is needed.
/// - Locks held by *this* process never conflict with itself and are not
///   reported. This service holds no locks on CGC databases, so closing the
///   probe descriptor (which would drop this process's own POSIX locks on the
///   file) is harmless.
pub fn probe_write_lock(path: &Path) -> io::Result<Option<LockHolder>> {
    let file = match fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let mut query = libc::flock {
        l_type: libc::F_WRLCK as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0, // 0 = to the end of the file, however it grows.
        l_pid: 0,
    };
    nix::fcntl::fcntl(
        std::os::fd::AsRawFd::as_raw_fd(&file),
        nix::fcntl::FcntlArg::F_GETLK(&mut query),
    )
    .map_err(io::Error::from)?;
    if query.l_type == libc::F_UNLCK as libc::c_short {
        return Ok(None);
    }
    Ok(Some(LockHolder {
        pid: (query.l_pid > 0).then_some(query.l_pid),
        exclusive: query.l_type == libc::F_WRLCK as libc::c_short,
    }))
}

/// Every existing file an embedded CGC backend (Kùzu, LadybugDB) could lock
/// for a child started in `workspace`.
///
/// - `--db-path X` among `global_args` (or `--db-path=X`), else
///   `CGC_RUNTIME_DB_PATH=X` from `env`: exactly X (relative to the
///   workspace, since children run there; `~/` expands to `home`).
/// - Otherwise every candidate, because which one CGC picks depends on
///   per-repo context and name quirks (the default `falkordb` may fall back
///   to Kùzu at `db/kuzudb` or `db/falkordb`):
///   `<home>/.codegraphcontext/global/db/{kuzudb,ladybugdb}` and every
///   regular file in `<workspace>/.codegraphcontext/db/`.
///
/// `env` looks a variable up in the environment the child will get.
pub fn lock_candidates(
    workspace: &Path,
    home: &Path,
    global_args: &[String],
    env: impl Fn(&str) -> Option<String>,
) -> Vec<PathBuf> {
    let explicit = db_path_argument(global_args)
        .or_else(|| env("CGC_RUNTIME_DB_PATH").filter(|value| !value.is_empty()));
    if let Some(explicit) = explicit {
        let path = resolve_user_path(&explicit, workspace, home);
        return if path.is_file() {
            vec![path]
        } else {
            Vec::new()
        };
    }

    let global_db = home.join(".codegraphcontext").join("global").join("db");
    let mut candidates: Vec<PathBuf> = ["kuzudb", "ladybugdb"]
        .iter()
        .map(|name| global_db.join(name))
        .filter(|path| path.is_file())
        .collect();

    let repo_db = workspace.join(".codegraphcontext").join("db");
    if let Ok(entries) = fs::read_dir(&repo_db) {
        let mut repo_files: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.is_file())
            .collect();
        repo_files.sort();
        candidates.extend(repo_files);
    }
    candidates
}

/// The value of the last `--db-path` root option (CGC's parser lets the last
/// one win).
fn db_path_argument(arguments: &[String]) -> Option<String> {
    let mut found = None;
    let mut iter = arguments.iter();
    while let Some(argument) = iter.next() {
        if argument == "--db-path" {
            found = iter.next().cloned();
        } else if let Some(value) = argument.strip_prefix("--db-path=") {
            found = Some(value.to_string());
        }
    }
    found
}

fn resolve_user_path(value: &str, workspace: &Path, home: &Path) -> PathBuf {
    if let Some(rest) = value.strip_prefix("~/") {
        home.join(rest)
    } else {
        workspace.join(value) // `join` keeps an absolute `value` as is.
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::spawn::spawn_child;
    use crate::process::test_support::{kill_and_reap, python3, sleeper_spec};
    use std::io::BufRead;

    #[test]
    fn stat_parses_comm_with_spaces_and_parentheses() {
        let line =
            "4242 (cgc (watch) x) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 0 0";
        let stat = parse_proc_stat(line).unwrap();
        assert_eq!(stat.pid, 4242);
        assert_eq!(stat.comm, "cgc (watch) x");
        assert_eq!(stat.state, 'S');
        assert_eq!((stat.ppid, stat.pgrp, stat.session), (1, 4242, 4242));
        assert_eq!(stat.start_time, 987654);
        assert!(!stat.is_zombie());
    }

    #[test]
    fn stat_reports_zombie_and_rejects_truncated_lines() {
        let zombie = "7 (sh) Z 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0";
        assert!(parse_proc_stat(zombie).unwrap().is_zombie());
        assert_eq!(
            parse_proc_stat("7 (sh) S 1 7"),
            Err(StatParseError::MissingField(6))
        );
        assert_eq!(parse_proc_stat("7 sh S"), Err(StatParseError::MissingComm));
    }

    #[test]
    fn own_stat_matches_own_process() {
        let stat = read_proc_stat(std::process::id() as i32).unwrap();
        assert_eq!(stat.pid, std::process::id() as i32);
        assert_eq!(stat.ppid, nix::unistd::getppid().as_raw());
        assert!(stat.start_time > 0);
    }

    #[test]
    fn environ_lookup_and_owner_scan_find_a_tagged_child() {
        let dir = tempfile::tempdir().unwrap();
        let token = format!("proc-info-test-{}.1", std::process::id());
        let child = spawn_child(&sleeper_spec(dir.path(), &token)).unwrap();
        assert_eq!(owner_token_of(child.pid).as_deref(), Some(token.as_str()));
        assert_eq!(
            environ_value(child.pid, "COLUMNS").unwrap().as_deref(),
            Some("1000")
        );
        assert_eq!(
            environ_value(child.pid, "NO_SUCH_VARIABLE_HERE").unwrap(),
            None
        );
        assert_eq!(processes_with_owner_token(&token), vec![child.pid]);
        let prefix = format!("proc-info-test-{}.", std::process::id());
        assert_eq!(processes_with_owner_prefix(&prefix), vec![child.pid]);
        assert!(processes_with_owner_token(&format!("{token}0")).is_empty());
        assert!(describe_process(child.pid).starts_with(&format!("pid {}: sleep", child.pid)));
        kill_and_reap(child.pid);
        assert!(processes_with_owner_token(&token).is_empty());
    }

    #[test]
    fn lock_probe_reports_holder_pid_then_none_after_exit() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("kuzudb");
        let script = "import fcntl,sys,time\n\
                      f=open(sys.argv[1],'w')\n\
                      fcntl.lockf(f, fcntl.LOCK_EX)\n\
                      print('locked', flush=True)\n\
                      time.sleep(30)\n";
        let mut spec = sleeper_spec(dir.path(), "lock-probe-test");
        spec.program = python3();
        spec.args = vec!["-c".into(), script.into(), db.display().to_string()];
        let child = spawn_child(&spec).unwrap();
        let mut reader = io::BufReader::new(fs::File::from(child.stdout));
        let mut first_line = String::new();
        reader.read_line(&mut first_line).unwrap();
        assert_eq!(first_line.trim(), "locked");

        let holder = probe_write_lock(&db).unwrap();
        assert_eq!(
            holder,
            Some(LockHolder {
                pid: Some(child.pid),
                exclusive: true
            })
        );

        kill_and_reap(child.pid);
        assert_eq!(probe_write_lock(&db).unwrap(), None);
    }

    #[test]
    fn lock_probe_needs_no_write_permission_and_never_creates_files() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        assert_eq!(probe_write_lock(&missing).unwrap(), None);
        assert!(!missing.exists());

        let read_only = dir.path().join("read-only");
        fs::write(&read_only, b"x").unwrap();
        let mut permissions = fs::metadata(&read_only).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o444);
        fs::set_permissions(&read_only, permissions).unwrap();
        assert_eq!(probe_write_lock(&read_only).unwrap(), None);
    }

    #[test]
    fn lock_candidates_list_existing_global_and_repo_files() {
        let home = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        let global_db = home.path().join(".codegraphcontext/global/db");
        let repo_db = workspace.path().join(".codegraphcontext/db");
        fs::create_dir_all(&global_db).unwrap();
        fs::create_dir_all(repo_db.join("not-a-file")).unwrap();
        fs::write(global_db.join("ladybugdb"), b"").unwrap();
        fs::write(repo_db.join("kuzudb"), b"").unwrap();
        fs::write(repo_db.join("falkordb"), b"").unwrap();

        let candidates = lock_candidates(workspace.path(), home.path(), &[], |_| None);
        assert_eq!(
            candidates,
            vec![
                global_db.join("ladybugdb"),
                repo_db.join("falkordb"),
                repo_db.join("kuzudb"),
            ]
        );
    }

    #[test]
    fn lock_candidates_honour_db_path_argument_then_environment() {
        let home = tempfile::tempdir().unwrap();
        let workspace = tempfile::tempdir().unwrap();
        fs::write(workspace.path().join("custom.db"), b"").unwrap();
        fs::write(home.path().join("home.db"), b"").unwrap();
        let global_db = home.path().join(".codegraphcontext/global/db");
        fs::create_dir_all(&global_db).unwrap();
        fs::write(global_db.join("kuzudb"), b"").unwrap();

        let args = vec![
            "--db".to_string(),
            "kuzudb".into(),
            "--db-path".into(),
            "custom.db".into(),
        ];
        assert_eq!(
            lock_candidates(workspace.path(), home.path(), &args, |_| None),
            vec![workspace.path().join("custom.db")]
        );
        let args = vec!["--db-path=~/home.db".to_string()];
        assert_eq!(
            lock_candidates(workspace.path(), home.path(), &args, |_| None),
            vec![home.path().join("home.db")]
        );
        let from_env = |key: &str| (key == "CGC_RUNTIME_DB_PATH").then(|| "custom.db".to_string());
        assert_eq!(
            lock_candidates(workspace.path(), home.path(), &[], from_env),
            vec![workspace.path().join("custom.db")]
        );
        let missing = |key: &str| (key == "CGC_RUNTIME_DB_PATH").then(|| "nope.db".to_string());
        assert!(lock_candidates(workspace.path(), home.path(), &[], missing).is_empty());
    }
}
