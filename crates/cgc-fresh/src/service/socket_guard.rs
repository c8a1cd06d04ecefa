//! Keeping the service reachable when its socket file disappears.
//!
//! Clients find the service by the socket's path. If that file is deleted
//! (a cleanup script, `rm -rf` of the runtime directory, a mistaken `mv`),
//! the listening socket still exists but nobody can reach it, and a second
//! `serve` refuses to start because this one still holds the instance lock:
//! the workspace would be without a service until this one is killed.
//!
//! The guard watches the socket's directory with inotify (`IN_DELETE`,
//! `IN_MOVED_FROM`, `IN_MOVED_TO` for the socket's name, and the directory's
//! own deletion or move). It is event-driven: no timer and no polling, so an
//! idle service still never wakes up. When an event names our socket, the
//! guard looks at the path:
//!
//! - gone: a new listener is bound at the same path (the directory is
//!   re-created user-only if it went too; the socket is made 0600), a new
//!   accept loop starts on it and the old one is stopped (`socket_rebound`).
//!   Connections already accepted are actors of their own and keep working.
//! - the same file as before: nothing happened to it.
//! - another file: someone put something there on purpose; it is not ours
//!   to remove (`socket_path_taken`, a warning, nothing else).
//!
//! When systemd passed the socket in (socket activation), the path belongs
//! to the socket unit: binding our own would hide the unit's socket, so the
//! guard only warns (`socket_lost`) and says how to recover.
//!
//! The instance lock lives in the workspace's state directory (see
//! `paths.rs`), not beside the socket, so removing the runtime directory
//! costs the socket only. Its file can still be deleted or replaced (a
//! clean-up of `~/.local/state`, a mistaken `rm`); a second `serve` could
//! then take the workspace. The guard watches the state directory too — a
//! second watch on the same inotify instance, for the lock's name and the
//! directory's own deletion or move — and takes the lock again on a new
//! file at once (`instance_relocked`, the directory re-created 0700 if it
//! went). If another service holds it by then, this one has lost the
//! workspace: it says so (`instance_lost`, naming the holder), stops
//! writing the registry that is now the other's, and shuts down gracefully.
//!
//! The guard also keeps the identity (device and inode) of the socket file
//! it bound last, shared with the service ([`BoundSocket`]): at exit the
//! socket's path is removed only if it still names that file
//! ([`remove_if_same_file`]), never a file someone else put there.
//!
//! An accept loop is stopped by aborting its task, which closes the old
//! listener. A client that connected to the old socket just before it was
//! unlinked and was not yet accepted at that instant loses that connection
//! attempt; the accept loop drains its queue as soon as a client arrives, so
//! the window is one scheduler turn.

// Registering the inotify descriptor with tokio's reactor
// (`AsyncFd::register_with_interest`) is unsafe by signature: the
// descriptor must outlive the registration.
#![allow(unsafe_code)]

use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use actix::prelude::*;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent, WatchDescriptor};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::net::UnixListener;
use tokio::task::JoinHandle;

use super::drift_observer::DriftObserverActor;
use super::listener::accept_loop;
use super::messages::{Shutdown, ShutdownReason};
use crate::instance_lock::{InstanceLock, LockError};
use crate::paths::ensure_private_dir;

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "socket_guard";

/// The instance lock, kept at its path by the guard.
pub struct LockKeeper {
    pub path: PathBuf,
    /// The socket recorded in the lock file when it is taken again.
    pub socket: PathBuf,
    /// Shared with `serve`, which holds it until the service has stopped.
    pub held: Arc<Mutex<InstanceLock>>,
    /// Told when another service holds the workspace's lock now.
    pub lost: Recipient<Shutdown>,
}

/// The identity of the socket file the service bound last (None when it
/// could not be read), shared by the guard (which re-binds) and the
/// service (which removes the file at exit only if it is still this one).
#[derive(Debug, Clone, Default)]
pub struct BoundSocket(Arc<Mutex<Option<FileId>>>);

impl BoundSocket {
    pub fn get(&self) -> Option<FileId> {
        self.0.lock().map(|id| *id).unwrap_or(None)
    }
    pub fn set(&self, id: Option<FileId>) {
        if let Ok(mut bound) = self.0.lock() {
            *bound = id;
        }
    }
}

/// Who owns the socket's path, which decides what happens when it goes.
#[derive(Debug, Clone)]
pub enum SocketOwner {
    /// The service bound it at this path: re-bind there.
    Service(PathBuf, BoundSocket),
    /// systemd passed it in: its unit owns the path; warn only.
    Systemd,
}

/// Starts the accept loop on `listener` and the guard that keeps its path
/// reachable. Without inotify (e.g. the per-user watch limit is reached) the
/// service still serves; it just is not guarded, and says so.
pub fn start(
    listener: UnixListener,
    owner: SocketOwner,
    max_line_bytes: usize,
    workspace: Addr<DriftObserverActor>,
    lock: LockKeeper,
) {
    let path = match &owner {
        SocketOwner::Service(path, _) => Some(path.clone()),
        SocketOwner::Systemd => listener
            .local_addr()
            .ok()
            .and_then(|addr| addr.as_pathname().map(Path::to_path_buf)),
    };
    let spawn_accept = move |listener: UnixListener| {
        actix_rt::spawn(accept_loop(listener, max_line_bytes, workspace.clone()))
    };
    let Some(path) = path else {
        // An unnamed (abstract or anonymous) socket has no file to lose.
        spawn_accept(listener);
        return;
    };
    let (rebind, bound) = match owner {
        SocketOwner::Service(_, bound) => (true, bound),
        SocketOwner::Systemd => (false, BoundSocket::default()),
    };
    match SocketGuard::new(path.clone(), rebind, Some(lock), bound) {
        Ok(guard) => {
            actix_rt::spawn(guard.run(listener, spawn_accept));
        }
        Err(error) => {
            tracing::warn!(component = COMPONENT, event = "socket_guard_unavailable", socket = %path.display(), error = %error);
            spawn_accept(listener);
        }
    }
}

/// The directory events that can take the socket's name away (or tell us
/// the directory itself went).
fn watch_mask() -> AddWatchFlags {
    AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
        | AddWatchFlags::IN_ONLYDIR
}

/// An inotify instance as a pollable descriptor for tokio's reactor.
struct InotifyFd(Inotify);

impl AsRawFd for InotifyFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

/// Identity of a file: device and inode.
pub type FileId = (u64, u64);

/// The identity of what `path` names (not following a symlink).
pub fn file_id(path: &Path) -> io::Result<FileId> {
    fs::symlink_metadata(path).map(|meta| (meta.dev(), meta.ino()))
}

/// Removes `path` only if it still names the file `bound` (device and
/// inode). Returns whether it was removed.
pub fn remove_if_same_file(path: &Path, bound: Option<FileId>) -> bool {
    match (bound, file_id(path)) {
        (Some(bound), Ok(there)) if bound == there => fs::remove_file(path).is_ok(),
        _ => false,
    }
}

/// What the socket's path holds now, compared with what we bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PathNow {
    Ours,
    Gone,
    Taken,
}

/// Watches one socket path and replaces the listener when the path is lost.
pub struct SocketGuard {
    path: PathBuf,
    name: std::ffi::OsString,
    dir: PathBuf,
    rebind: bool,
    inotify: AsyncFd<InotifyFd>,
    watch: WatchDescriptor,
    /// The file we bound at `path`.
    bound: BoundSocket,
    rebinds: u64,
    /// A taken path is reported once, not at every event.
    reported_taken: bool,
    /// The instance lock, kept while this service holds the workspace.
    lock: Option<KeptLock>,
}

/// The instance lock and the watch on its directory.
struct KeptLock {
    keeper: LockKeeper,
    name: std::ffi::OsString,
    dir: PathBuf,
    watch: WatchDescriptor,
}

impl SocketGuard {
    /// Sets up the watch on `path`'s directory (and on the lock's, when a
    /// lock is to be kept). `rebind`: whether a lost path is bound again
    /// (false when systemd owns it). Must run inside a tokio runtime.
    pub fn new(
        path: PathBuf,
        rebind: bool,
        lock: Option<LockKeeper>,
        bound: BoundSocket,
    ) -> io::Result<SocketGuard> {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the socket path has no directory or no file name",
            ));
        };
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir.to_path_buf()
        };
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
        let watch = inotify.add_watch(&dir, watch_mask())?;
        let lock = lock.and_then(|keeper| {
            let (Some(lock_dir), Some(lock_name)) = (keeper.path.parent(), keeper.path.file_name())
            else {
                tracing::warn!(component = COMPONENT, event = "instance_lock_unguarded", lock = %keeper.path.display(), error = "no directory or file name");
                return None;
            };
            match inotify.add_watch(lock_dir, watch_mask()) {
                Ok(lock_watch) => Some(KeptLock {
                    name: lock_name.to_os_string(),
                    dir: lock_dir.to_path_buf(),
                    watch: lock_watch,
                    keeper,
                }),
                Err(error) => {
                    tracing::warn!(component = COMPONENT, event = "instance_lock_unguarded", lock = %keeper.path.display(), error = %error);
                    None
                }
            }
        });
        // SAFETY: `InotifyFd` owns the descriptor (an `OwnedFd` inside
        // `Inotify`), never replaces it, and closes it only when dropped,
        // which is after the registration that `AsyncFd` drops first.
        let inotify =
            unsafe { AsyncFd::register_with_interest(InotifyFd(inotify), Interest::READABLE) }?;
        if bound.get().is_none() {
            bound.set(file_id(&path).ok());
        }
        Ok(SocketGuard {
            name: name.to_os_string(),
            bound,
            path,
            dir,
            rebind,
            inotify,
            watch,
            rebinds: 0,
            reported_taken: false,
            lock,
        })
    }

    /// Accepts on `listener` (through `spawn_accept`, which starts an accept
    /// loop and returns its task) and, whenever the path is lost, on a new
    /// listener bound in its place. Runs until the watch fails.
    pub async fn run<F>(mut self, listener: UnixListener, mut spawn_accept: F)
    where
        F: FnMut(UnixListener) -> JoinHandle<()>,
    {
        let mut accepting = spawn_accept(listener);
        tracing::debug!(component = COMPONENT, event = "socket_guarded", socket = %self.path.display(), rebind = self.rebind);
        loop {
            let events = match self.next_events().await {
                Ok(events) => events,
                Err(error) => {
                    tracing::warn!(component = COMPONENT, event = "socket_guard_stopped", socket = %self.path.display(), error = %error);
                    return;
                }
            };
            let Some(cause) = self.relevant(&events) else {
                continue;
            };
            if let Some(listener) = self.on_event(cause) {
                let previous = std::mem::replace(&mut accepting, spawn_accept(listener));
                previous.abort();
            }
            self.keep_lock(cause);
        }
    }

    /// The next batch of events (waits without a timer until there is one).
    async fn next_events(&self) -> io::Result<Vec<InotifyEvent>> {
        loop {
            let mut ready = self.inotify.readable().await?;
            match ready.try_io(|inner| inner.get_ref().0.read_events().map_err(io::Error::from)) {
                Ok(result) => return result,
                // Spurious readiness: the reactor was told, wait again.
                Err(_would_block) => continue,
            }
        }
    }

    /// Why this batch may concern our socket or lock, if it does.
    fn relevant(&self, events: &[InotifyEvent]) -> Option<&'static str> {
        let gone_self = AddWatchFlags::IN_DELETE_SELF | AddWatchFlags::IN_MOVE_SELF;
        events.iter().find_map(|event| {
            if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                // Events were lost: ours may have been among them.
                return Some("events_overflowed");
            }
            // The two watches are one when both files share a directory.
            if let Some(lock) = self.lock.as_ref().filter(|lock| lock.watch == event.wd) {
                if event.mask.intersects(gone_self) {
                    return Some("lock_directory_removed");
                }
                if event.name.as_deref() == Some(lock.name.as_os_str()) {
                    return Some("lock_file_changed");
                }
            }
            if event.wd != self.watch {
                return None;
            }
            if event.mask.intersects(gone_self) {
                return Some("directory_removed");
            }
            if event.name.as_deref() != Some(self.name.as_os_str()) {
                return None;
            }
            if event.mask.contains(AddWatchFlags::IN_DELETE) {
                Some("deleted")
            } else if event.mask.contains(AddWatchFlags::IN_MOVED_FROM) {
                Some("moved_away")
            } else {
                Some("replaced")
            }
        })
    }

    fn path_now(&self) -> PathNow {
        match file_id(&self.path) {
            Err(error) if error.kind() == io::ErrorKind::NotFound => PathNow::Gone,
            Ok(id) if Some(id) == self.bound.get() => PathNow::Ours,
            // Another file, or one we cannot inspect: not ours to touch.
            _ => PathNow::Taken,
        }
    }

    /// Handles an event about our socket; returns a new listener to accept
    /// on when one was bound.
    fn on_event(&mut self, cause: &'static str) -> Option<UnixListener> {
        match self.path_now() {
            PathNow::Ours => None,
            PathNow::Taken => {
                if !self.reported_taken {
                    self.reported_taken = true;
                    tracing::warn!(
                        component = COMPONENT,
                        event = "socket_path_taken",
                        socket = %self.path.display(),
                        cause,
                        hint = "another file now has the socket's name; it is left alone, and clients reaching it do not reach this service",
                    );
                }
                None
            }
            PathNow::Gone if !self.rebind => {
                tracing::warn!(
                    component = COMPONENT,
                    event = "socket_lost",
                    socket = %self.path.display(),
                    cause,
                    hint = "systemd owns this socket: restart its socket unit to make the service reachable again",
                );
                None
            }
            PathNow::Gone => match bind_private(&self.path) {
                Ok(listener) => {
                    self.rebinds += 1;
                    self.bound.set(file_id(&self.path).ok());
                    self.reported_taken = false;
                    self.rewatch_socket_dir();
                    tracing::info!(
                        component = COMPONENT,
                        event = "socket_rebound",
                        socket = %self.path.display(),
                        cause,
                        rebinds = self.rebinds,
                        mode = "0600",
                    );
                    Some(listener)
                }
                Err(error) => {
                    tracing::error!(
                        component = COMPONENT,
                        event = "socket_rebind_failed",
                        socket = %self.path.display(),
                        cause,
                        error = %error,
                    );
                    None
                }
            },
        }
    }

    /// Takes the instance lock again when its file is no longer the one
    /// held (deleted, moved, replaced, its directory gone); shuts the
    /// service down when another service holds the new one.
    fn keep_lock(&mut self, cause: &'static str) {
        let Some(lock) = &self.lock else {
            return;
        };
        let keeper = &lock.keeper;
        let outcome = {
            let Ok(mut held) = keeper.held.lock() else {
                tracing::warn!(
                    component = COMPONENT,
                    event = "instance_relock_failed",
                    cause,
                    error = "the lock's mutex is poisoned"
                );
                return;
            };
            if held.is_at(&keeper.path) {
                return;
            }
            match ensure_private_dir(&lock.dir)
                .map_err(|error| LockError::Io {
                    path: lock.dir.display().to_string(),
                    source: error.into(),
                })
                .and_then(|()| InstanceLock::acquire(&keeper.path, &keeper.socket))
            {
                Ok(new_lock) => {
                    *held = new_lock;
                    Ok(())
                }
                Err(error) => Err(error),
            }
        };
        let path = keeper.path.display().to_string();
        match outcome {
            Ok(()) => {
                tracing::info!(component = COMPONENT, event = "instance_relocked", lock = %path, cause);
                self.rewatch_lock_dir();
            }
            Err(LockError::Held { holder }) => {
                tracing::error!(
                    component = COMPONENT,
                    event = "instance_lost",
                    lock = %path,
                    cause,
                    holder_pid = holder.pid,
                    holder_socket = holder.socket.as_ref().map(|s| s.display().to_string()),
                    "another service holds this workspace's lock now; this one stops",
                );
                keeper.lost.do_send(Shutdown {
                    reason: ShutdownReason::InstanceLost,
                });
                self.lock = None;
            }
            Err(error) => {
                tracing::warn!(component = COMPONENT, event = "instance_relock_failed", lock = %path, cause, error = %error);
            }
        }
    }

    /// Watches the socket's directory again: after it was re-created the
    /// old watch is gone (or follows the moved directory).
    fn rewatch_socket_dir(&mut self) {
        let keep = self.lock.as_ref().map(|lock| lock.watch);
        if let Some(watch) = self.rewatch(&self.dir, self.watch, keep) {
            self.watch = watch;
        }
    }

    /// The same for the lock's directory.
    fn rewatch_lock_dir(&mut self) {
        let Some(lock) = &self.lock else { return };
        if let Some(watch) = self.rewatch(&lock.dir, lock.watch, Some(self.watch)) {
            if let Some(lock) = self.lock.as_mut() {
                lock.watch = watch;
            }
        }
    }

    /// Adds a watch on `dir`; when it differs from `old`, stops following
    /// the old one (a moved or deleted directory) unless the other watch
    /// (`keep`) is the same descriptor. Returns the watch to use now.
    fn rewatch(
        &self,
        dir: &Path,
        old: WatchDescriptor,
        keep: Option<WatchDescriptor>,
    ) -> Option<WatchDescriptor> {
        let inotify = &self.inotify.get_ref().0;
        match inotify.add_watch(dir, watch_mask()) {
            Ok(watch) if watch != old => {
                // An already removed watch answers EINVAL, which is fine.
                if keep != Some(old) {
                    let _ = inotify.rm_watch(old);
                }
                Some(watch)
            }
            Ok(_) => None,
            Err(error) => {
                tracing::warn!(component = COMPONENT, event = "socket_guard_stopped", dir = %dir.display(), error = %error);
                None
            }
        }
    }
}

/// Binds a listener at `path` (its directory created user-only if missing)
/// and makes it 0600. Never removes anything: a file that appeared at the
/// path in the meantime makes this fail with `AddrInUse`.
fn bind_private(path: &Path) -> io::Result<UnixListener> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        ensure_private_dir(dir)?;
    }
    let listener = UnixListener::bind(path)?;
    if let Err(error) = fs::set_permissions(path, fs::Permissions::from_mode(0o600)) {
        drop(listener);
        let _ = fs::remove_file(path);
        return Err(error);
    }
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An accept loop that greets every client with `hello`.
    fn greeter(listener: UnixListener) -> JoinHandle<()> {
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let _ = stream.write_all(b"hello").await;
            }
        })
    }

    async fn greeting(path: &Path) -> io::Result<String> {
        let mut stream = tokio::net::UnixStream::connect(path).await?;
        let mut text = String::new();
        stream.read_to_string(&mut text).await?;
        Ok(text)
    }

    /// Connects until a greeting comes back (bounded).
    async fn greeting_within(path: &Path, within: Duration) -> String {
        tokio::time::timeout(within, async {
            loop {
                if let Ok(text) = greeting(path).await {
                    return text;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("no greeting in time")
    }

    fn guarded(dir: &Path, rebind: bool) -> (PathBuf, JoinHandle<()>) {
        let path = dir.join("svc.sock");
        let listener = bind_private(&path).unwrap();
        let guard = SocketGuard::new(path.clone(), rebind, None, BoundSocket::default()).unwrap();
        let task = tokio::spawn(guard.run(listener, greeter));
        (path, task)
    }

    #[tokio::test]
    async fn a_deleted_socket_is_bound_again_user_only() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _task) = guarded(dir.path(), true);
        assert_eq!(greeting(&path).await.unwrap(), "hello");
        fs::remove_file(&path).unwrap();
        assert_eq!(
            greeting_within(&path, Duration::from_secs(5)).await,
            "hello"
        );
        let mode = fs::metadata(&path).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[tokio::test]
    async fn a_socket_moved_away_and_a_removed_directory_are_both_recovered() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("run");
        fs::create_dir(&dir).unwrap();
        let (path, _task) = guarded(&dir, true);
        fs::rename(&path, root.path().join("elsewhere.sock")).unwrap();
        greeting_within(&path, Duration::from_secs(5)).await;
        // The whole directory goes; it comes back 0700 with the socket.
        fs::remove_dir_all(&dir).unwrap();
        greeting_within(&path, Duration::from_secs(5)).await;
        let dir_mode = fs::metadata(&dir).unwrap().mode() & 0o777;
        assert_eq!(dir_mode, 0o700);
        // And the new directory is watched: a third loss is recovered too.
        fs::remove_file(&path).unwrap();
        greeting_within(&path, Duration::from_secs(5)).await;
    }

    #[tokio::test]
    async fn without_rebind_a_lost_socket_stays_lost() {
        let dir = tempfile::tempdir().unwrap();
        let (path, task) = guarded(dir.path(), false);
        fs::remove_file(&path).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!path.exists(), "systemd's path must not be re-bound by us");
        assert!(!task.is_finished(), "the guard keeps watching");
    }

    #[tokio::test]
    async fn a_file_put_in_place_of_the_socket_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("svc.sock");
        let listener = bind_private(&path).unwrap();
        let mut guard = SocketGuard::new(path.clone(), true, None, BoundSocket::default()).unwrap();
        let _accepting = greeter(listener);
        let other = dir.path().join("other");
        fs::write(&other, "not a socket").unwrap();
        fs::rename(&other, &path).unwrap();
        assert!(guard.on_event("replaced").is_none());
        assert_eq!(fs::read_to_string(&path).unwrap(), "not a socket");
    }
}
