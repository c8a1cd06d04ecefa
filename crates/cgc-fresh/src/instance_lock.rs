//! One service per workspace.
//!
//! The service holds an exclusive `flock` on `instance.lock` in the
//! workspace's **state directory** for its whole life (why there and not
//! beside the socket: see `paths.rs`). A second `serve` for the same
//! workspace — whatever socket, `XDG_RUNTIME_DIR` or `TMPDIR` it was given
//! — fails to take the lock and reports the holder, touching nothing of it:
//! no sweep, no socket removal, no state write. `flock` is released by the
//! kernel when the holder dies, however it dies.
//!
//! The file records the holder's pid and the absolute path of its socket,
//! one per line (`<pid>\n<socket>\n`; a file holding a bare pid, as older
//! versions wrote, still reads). A refused `serve` names both, and a client
//! given no `--socket` whose default socket does not answer can find a
//! service listening elsewhere ([`recorded_service`]; the caller must check
//! that the service answering there reports the recorded pid).
//!
//! Taking the lock never writes through anything it did not create:
//!
//! - the file is opened `O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK` without
//!   truncation: a symlink at the path is refused (never followed), a FIFO
//!   does not block, anything but a regular file is refused;
//! - `flock(LOCK_EX | LOCK_NB)` (nix's owning `Flock`), and only then the
//!   content is replaced;
//! - after locking, the path must still name the locked inode (`fstat` vs
//!   `lstat`: device and inode); if it was removed or replaced in between,
//!   the lock is dropped and taken again (a few times). This is what makes
//!   removing the file at exit safe: the service unlinks it while still
//!   holding it, and whoever opened the old inode meanwhile notices that it
//!   is no longer at the path and starts over on a new file.
//!
//! If the file goes while the service runs, the socket guard takes the lock
//! again on a new file at once (see `service/socket_guard.rs`).

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::paths::ServicePaths;

/// How often a lock whose file was replaced under us is taken again.
const ACQUIRE_ATTEMPTS: u32 = 5;

/// The held lock; dropping it releases the workspace.
#[derive(Debug)]
pub struct InstanceLock {
    /// Held open (and locked) for the life of the lock.
    file: Flock<File>,
}

/// What the lock file says about its holder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holder {
    pub pid: Option<u32>,
    pub socket: Option<PathBuf>,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.pid {
            Some(pid) => write!(f, "pid {pid}")?,
            None => write!(f, "pid unknown")?,
        }
        match &self.socket {
            Some(socket) => write!(f, ", socket {}", socket.display()),
            None => write!(f, ", socket unknown"),
        }
    }
}

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("already running ({holder})")]
    Held { holder: Holder },
    #[error("lock file {path} is a symlink; refusing to follow it (remove it if it is not yours)")]
    Symlink { path: String },
    #[error("lock file {path} is not a regular file; refusing to use it")]
    NotAFile { path: String },
    #[error("lock file {path} kept being replaced while it was being locked")]
    Unstable { path: String },
    #[error("cannot use lock file {path}: {source}")]
    Io { path: String, source: io::Error },
}

impl InstanceLock {
    /// Takes the lock without waiting and records our pid and `socket`.
    pub fn acquire(path: &Path, socket: &Path) -> Result<InstanceLock, LockError> {
        let shown = || path.display().to_string();
        let io_err = |source| LockError::Io {
            path: shown(),
            source,
        };
        for _ in 0..ACQUIRE_ATTEMPTS {
            let file = match OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
                .open(path)
            {
                Ok(file) => file,
                Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                    return Err(LockError::Symlink { path: shown() })
                }
                Err(e) => return Err(io_err(e)),
            };
            let held = file.metadata().map_err(io_err)?;
            if !held.is_file() {
                return Err(LockError::NotAFile { path: shown() });
            }
            let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(file) => file,
                Err((mut file, Errno::EWOULDBLOCK)) => {
                    return Err(LockError::Held {
                        holder: read_holder_settled(&mut file),
                    })
                }
                Err((_, errno)) => return Err(io_err(io::Error::from(errno))),
            };
            // Still the file at the path? Otherwise it was removed (by a
            // holder that was exiting) or replaced: start over.
            let same = std::fs::symlink_metadata(path)
                .is_ok_and(|there| there.dev() == held.dev() && there.ino() == held.ino());
            if !same {
                continue;
            }
            file.set_len(0).map_err(io_err)?;
            file.seek(SeekFrom::Start(0)).map_err(io_err)?;
            file.write_all(&holder_record(std::process::id(), socket))
                .map_err(io_err)?;
            file.flush().map_err(io_err)?;
            return Ok(InstanceLock { file });
        }
        Err(LockError::Unstable { path: shown() })
    }

    /// Whether `path` still names the file this lock holds (not deleted,
    /// not replaced by another file).
    pub fn is_at(&self, path: &Path) -> bool {
        match (self.file.metadata(), std::fs::symlink_metadata(path)) {
            (Ok(held), Ok(there)) => held.dev() == there.dev() && held.ino() == there.ino(),
            _ => false,
        }
    }

    /// Removes the lock file if `path` still names it, while it is still
    /// held (so nobody can have locked it in between); the lock itself is
    /// released when this value is dropped. Returns whether it was removed.
    pub fn remove_file(&self, path: &Path) -> bool {
        self.is_at(path) && std::fs::remove_file(path).is_ok()
    }
}

/// The lock file's content for `pid` listening on `socket`.
fn holder_record(pid: u32, socket: &Path) -> Vec<u8> {
    let mut record = format!("{pid}\n").into_bytes();
    record.extend_from_slice(socket.as_os_str().as_bytes());
    record.push(b'\n');
    record
}

/// Parses a lock file's content: a pid line, then the socket path (which
/// may itself contain newlines; only the final one is dropped).
fn parse_holder(bytes: &[u8]) -> Holder {
    let (first, rest) = match bytes.iter().position(|&b| b == b'\n') {
        Some(at) => (&bytes[..at], &bytes[at + 1..]),
        None => (bytes, &[][..]),
    };
    let pid = std::str::from_utf8(first)
        .ok()
        .and_then(|text| text.trim().parse().ok());
    let rest = rest.strip_suffix(b"\n").unwrap_or(rest);
    let socket = (!rest.is_empty()).then(|| PathBuf::from(OsStr::from_bytes(rest)));
    Holder { pid, socket }
}

fn read_holder_from(file: &mut File) -> Option<Holder> {
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_end(&mut bytes).ok()?;
    (!bytes.is_empty()).then(|| parse_holder(&bytes))
}

/// The holder's record, waiting a moment for a holder that has just taken
/// the lock and not yet written it.
fn read_holder_settled(file: &mut File) -> Holder {
    for _ in 0..20 {
        if let Some(holder) = read_holder_from(file) {
            return holder;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Holder::default()
}

/// What the lock file at `path` records, if it exists and is held now
/// (an unheld file is a leftover and names nobody). Never follows a
/// symlink, never creates or locks anything.
pub fn read_holder(path: &Path) -> Option<Holder> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    // A shared probe conflicts with the holder's exclusive lock.
    match Flock::lock(file, FlockArg::LockSharedNonblock) {
        Ok(probe) => {
            drop(probe);
            None
        }
        Err((mut file, Errno::EWOULDBLOCK)) => read_holder_from(&mut file),
        Err(_) => None,
    }
}

/// The live service for these paths as its lock file records it: its pid
/// and socket. For clients given no `--socket` whose default socket does
/// not answer: connect to the recorded socket and use it only if the
/// service answering there reports (welcome `pid`) the recorded pid.
pub fn recorded_service(paths: &ServicePaths) -> Option<(u32, PathBuf)> {
    let holder = read_holder(&paths.lock)?;
    Some((holder.pid?, holder.socket?))
}

/// The socket a client (`status`, `send`, …) should connect to: the given
/// or default one, unless no `--socket` was given, the default does not
/// answer, and the lock file records a live service elsewhere whose
/// welcome names the recorded pid (`commands.rs`, `with_client`).
pub fn client_socket(paths: &ServicePaths) -> PathBuf {
    discover_socket(
        paths,
        |socket| std::os::unix::net::UnixStream::connect(socket).is_ok(),
        |socket| {
            crate::client::Client::connect_hello(socket, "cgc-fresh-discovery")
                .ok()?
                .welcome
                .map(|welcome| welcome.pid)
        },
    )
}

/// [`client_socket`] with the two probes injected.
fn discover_socket(
    paths: &ServicePaths,
    answers: impl Fn(&Path) -> bool,
    welcome_pid: impl Fn(&Path) -> Option<u32>,
) -> PathBuf {
    if paths.socket_given || answers(&paths.socket) {
        return paths.socket.clone();
    }
    match recorded_service(paths) {
        Some((pid, socket)) if socket != paths.socket && welcome_pid(&socket) == Some(pid) => {
            socket
        }
        _ => paths.socket.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_acquire_reports_the_holder_pid_and_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("instance.lock");
        let socket = Path::new("/run/x/a b.sock");
        let first = InstanceLock::acquire(&path, socket).unwrap();
        // flock locks belong to the open file description, so a second
        // open in the same process conflicts just like another process.
        match InstanceLock::acquire(&path, Path::new("/elsewhere.sock")) {
            Err(error @ LockError::Held { .. }) => {
                let LockError::Held { holder } = &error else {
                    unreachable!()
                };
                assert_eq!(holder.pid, Some(std::process::id()));
                assert_eq!(holder.socket.as_deref(), Some(socket));
                assert_eq!(
                    error.to_string(),
                    format!(
                        "already running (pid {}, socket /run/x/a b.sock)",
                        std::process::id()
                    )
                );
            }
            other => panic!("expected Held, got {other:?}"),
        }
        assert_eq!(
            read_holder(&path),
            Some(Holder {
                pid: Some(std::process::id()),
                socket: Some(socket.to_path_buf())
            })
        );
        drop(first);
        // Not held: the file names nobody.
        assert_eq!(read_holder(&path), None);
        assert!(InstanceLock::acquire(&path, socket).is_ok());
    }

    #[test]
    fn the_lock_file_is_user_only_and_knows_when_it_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("instance.lock");
        let lock = InstanceLock::acquire(&path, Path::new("/s")).unwrap();
        let mode = std::fs::metadata(&path).unwrap().mode() & 0o7777;
        assert_eq!(mode & 0o077, 0);
        assert!(lock.is_at(&path));
        std::fs::remove_file(&path).unwrap();
        assert!(!lock.is_at(&path));
        // A new file at the path is not the one held, and can be locked.
        let again = InstanceLock::acquire(&path, Path::new("/s")).unwrap();
        assert!(!lock.is_at(&path));
        assert!(again.is_at(&path));
        // The stale one leaves the new file alone.
        assert!(!lock.remove_file(&path));
        assert!(path.exists());
        assert!(again.remove_file(&path));
        assert!(!path.exists());
        drop(again);
    }

    #[test]
    fn a_symlink_at_the_lock_path_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("Cargo.lock");
        std::fs::write(&victim, b"precious").unwrap();
        let path = dir.path().join("instance.lock");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        let error = InstanceLock::acquire(&path, Path::new("/s")).unwrap_err();
        assert!(matches!(error, LockError::Symlink { .. }), "{error}");
        assert!(error.to_string().contains("symlink"));
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(read_holder(&path), None);
    }

    #[test]
    fn a_fifo_or_a_directory_at_the_lock_path_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.lock");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let error = InstanceLock::acquire(&fifo, Path::new("/s")).unwrap_err();
        assert!(matches!(error, LockError::NotAFile { .. }), "{error}");
        let sub = dir.path().join("dir.lock");
        std::fs::create_dir(&sub).unwrap();
        assert!(InstanceLock::acquire(&sub, Path::new("/s")).is_err());
    }

    #[test]
    fn a_client_without_socket_finds_the_recorded_one_only_if_its_pid_answers() {
        struct NoEnv;
        impl crate::paths::Env for NoEnv {
            fn var(&self, _: &str) -> Option<String> {
                None
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let mut paths = ServicePaths::resolve(Path::new("/w"), None, &NoEnv);
        paths.lock = dir.path().join("instance.lock");
        let elsewhere = dir.path().join("b.sock");
        let me = std::process::id();
        // Nothing recorded: the default.
        let no = |_: &Path| false;
        assert_eq!(discover_socket(&paths, no, |_| Some(me)), paths.socket);
        let _held = InstanceLock::acquire(&paths.lock, &elsewhere).unwrap();
        // Recorded, and the service there is the recorded pid.
        let at = |want: &Path| {
            let want = want.to_path_buf();
            move |s: &Path| (s == want).then_some(me)
        };
        assert_eq!(discover_socket(&paths, no, at(&elsewhere)), elsewhere);
        // Someone else answers there: not trusted.
        assert_eq!(discover_socket(&paths, no, |_| Some(me + 1)), paths.socket);
        // The default answers, or a socket was given: no discovery.
        assert_eq!(
            discover_socket(&paths, |_| true, at(&elsewhere)),
            paths.socket
        );
        paths.socket_given = true;
        assert_eq!(discover_socket(&paths, no, at(&elsewhere)), paths.socket);
    }

    #[test]
    fn records_parse_with_a_bare_pid_and_odd_socket_names() {
        assert_eq!(
            parse_holder(b"42\n"),
            Holder {
                pid: Some(42),
                socket: None
            }
        );
        assert_eq!(
            parse_holder(b"42"),
            Holder {
                pid: Some(42),
                socket: None
            }
        );
        let record = holder_record(7, Path::new("/a\nb.sock"));
        assert_eq!(
            parse_holder(&record),
            Holder {
                pid: Some(7),
                socket: Some(PathBuf::from("/a\nb.sock"))
            }
        );
        assert_eq!(parse_holder(b"garbage\n/s\n").pid, None);
    }
}
