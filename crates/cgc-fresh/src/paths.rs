//! Where a workspace's service lives on disk: its id, socket, lock,
//! registry and state files.
//!
//! The id is the first 16 hex digits of the SHA-256 of the canonical
//! workspace path, so every client (the CLI, the Pi bridge) finds the same
//! socket from the same directory without asking anyone. The bridge
//! computes it the same way; change both together.
//!
//! **The instance lock and the child registry live in the workspace's
//! state directory**, `$XDG_STATE_HOME/cgc-fresh/<id>/` (else
//! `~/.local/state/cgc-fresh/<id>/`), as `instance.lock` and
//! `children.json`, beside `state.json`, which the lock guards. Never beside
//! the socket: the runtime directory depends on `XDG_RUNTIME_DIR` and
//! `TMPDIR`, and `--socket` (or `CGC_FRESH_SOCKET`) can put the socket
//! anywhere, so neither can name one place per workspace — a second service
//! given another socket took another lock, swept the first one's children
//! and wrote the same `state.json`. The state directory derives from the
//! workspace id alone (for one user), is private, is not cleaned by
//! tmpfiles, and is where the shared file two services would corrupt lives.
//! Nothing but the socket is ever created in the socket's directory.
//!
//! **Directories are checked, never chmod-ed.** The runtime directory (the
//! default socket's) and the state directory are created 0700 when missing.
//! One that exists — including whatever directory `--socket` names, which
//! may be the repository root or a shared `/tmp` — is used only if it is a
//! real directory (not a symlink), owned by us, and writable by nobody else
//! (`mode & 0o022 == 0`); otherwise the service refuses to start and says
//! which directory and why. Changing the mode of a directory the service
//! did not create is not its business (`--socket ./x.sock` used to make the
//! repository root 0700, and a sticky `/tmp`-like directory 0700).

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Directory name used under the runtime and state roots.
pub const APP_DIR: &str = "cgc-fresh";

/// The short, stable id of a workspace.
pub fn workspace_id(canonical_workspace: &Path) -> String {
    let digest = Sha256::digest(canonical_workspace.as_os_str().as_encoded_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Canonicalises a workspace path and checks it is a directory.
pub fn canonical_workspace(path: &Path) -> io::Result<PathBuf> {
    let canonical = fs::canonicalize(path)
        .map_err(|e| io::Error::new(e.kind(), format!("workspace {}: {e}", path.display())))?;
    if !canonical.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("workspace {} is not a directory", canonical.display()),
        ));
    }
    Ok(canonical)
}

/// Everything a service for one workspace keeps on disk.
#[derive(Debug, Clone)]
pub struct ServicePaths {
    pub workspace: PathBuf,
    pub id: String,
    /// The socket's directory: the per-user runtime directory by default,
    /// or wherever `--socket` points.
    pub runtime_dir: PathBuf,
    pub socket: PathBuf,
    /// Whether the socket was given (`--socket`, `CGC_FRESH_SOCKET`) rather
    /// than derived: only a derived one may be replaced by the socket the
    /// lock file records (see `instance_lock::client_socket`).
    pub socket_given: bool,
    /// `flock`ed for the life of the service: one service per workspace.
    /// In the state directory, whatever the socket.
    pub lock: PathBuf,
    /// The live-children registry (see the supervisor), beside the lock.
    pub registry: PathBuf,
    /// Per-workspace state directory holding `state.json`, the lock and
    /// the registry.
    pub state_dir: PathBuf,
    pub state_file: PathBuf,
}

/// Environment lookups the path rules depend on, injectable for tests.
pub trait Env {
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

/// File names in the state directory.
pub const STATE_FILE: &str = "state.json";
pub const LOCK_FILE: &str = "instance.lock";
pub const REGISTRY_FILE: &str = "children.json";

impl ServicePaths {
    /// Resolves every path for `workspace` (already canonical). `socket`
    /// overrides the default socket path (made absolute, so that the path
    /// recorded in the lock file means the same to every client); it moves
    /// nothing else.
    pub fn resolve(workspace: &Path, socket: Option<&Path>, env: &dyn Env) -> ServicePaths {
        let id = workspace_id(workspace);
        let socket_given = socket.is_some();
        let socket = match socket {
            Some(socket) => std::path::absolute(socket).unwrap_or_else(|_| socket.to_path_buf()),
            None => default_runtime_dir(env).join(format!("{id}.sock")),
        };
        let runtime_dir = match socket.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let state_dir = state_root(env).join(&id);
        ServicePaths {
            workspace: workspace.to_path_buf(),
            lock: state_dir.join(LOCK_FILE),
            registry: state_dir.join(REGISTRY_FILE),
            state_file: state_dir.join(STATE_FILE),
            state_dir,
            runtime_dir,
            socket,
            socket_given,
            id,
        }
    }
}

/// `$XDG_RUNTIME_DIR/cgc-fresh`, else `<tmp>/cgc-fresh-<uid>`.
pub fn default_runtime_dir(env: &dyn Env) -> PathBuf {
    match env.var("XDG_RUNTIME_DIR") {
        Some(dir) => PathBuf::from(dir).join(APP_DIR),
        None => {
            let tmp = env.var("TMPDIR").unwrap_or_else(|| "/tmp".to_string());
            PathBuf::from(tmp).join(format!("{APP_DIR}-{}", nix::unistd::geteuid()))
        }
    }
}

/// The user's home directory (where CGC keeps `~/.codegraphcontext`), `/`
/// when `HOME` is unset.
pub fn home_dir() -> PathBuf {
    std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// `$XDG_STATE_HOME/cgc-fresh`, else `~/.local/state/cgc-fresh`.
pub fn state_root(env: &dyn Env) -> PathBuf {
    if let Some(dir) = env.var("XDG_STATE_HOME") {
        return PathBuf::from(dir).join(APP_DIR);
    }
    let home = env.var("HOME").unwrap_or_else(|| "/".to_string());
    PathBuf::from(home).join(".local/state").join(APP_DIR)
}

/// Why a directory is not used.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("{dir}: is a symlink; refusing to use it (name the real directory)")]
    Symlink { dir: PathBuf },
    #[error("{dir}: exists and is not a directory")]
    NotADirectory { dir: PathBuf },
    #[error("{dir}: owned by uid {owner}, not by us (uid {uid}); refusing to use it")]
    NotOwned { dir: PathBuf, owner: u32, uid: u32 },
    #[error(
        "{dir}: writable by {by} (mode {mode:04o}); refusing to use it, and leaving its mode \
         alone — use a directory only you can write to"
    )]
    Writable {
        dir: PathBuf,
        by: &'static str,
        mode: u32,
    },
    #[error("{dir}: {source}")]
    Io { dir: PathBuf, source: io::Error },
}

impl DirError {
    /// A short machine-readable reason, for log events.
    pub fn reason(&self) -> &'static str {
        match self {
            DirError::Symlink { .. } => "symlink",
            DirError::NotADirectory { .. } => "not_a_directory",
            DirError::NotOwned { .. } => "not_owned",
            DirError::Writable { .. } => "writable_by_others",
            DirError::Io { .. } => "io",
        }
    }
}

impl From<DirError> for io::Error {
    fn from(error: DirError) -> io::Error {
        let kind = match &error {
            DirError::Io { source, .. } => source.kind(),
            DirError::NotOwned { .. } | DirError::Writable { .. } => {
                io::ErrorKind::PermissionDenied
            }
            DirError::Symlink { .. } | DirError::NotADirectory { .. } => {
                io::ErrorKind::InvalidInput
            }
        };
        io::Error::new(kind, error)
    }
}

/// Creates `dir` (and missing parents) with mode 0700, or checks an
/// existing one without changing it (see the module docs): a real
/// directory, owned by the effective uid, not writable by group or others.
pub fn ensure_private_dir(dir: &Path) -> Result<(), DirError> {
    let io_error = |source| DirError::Io {
        dir: dir.to_path_buf(),
        source,
    };
    match fs::symlink_metadata(dir) {
        Ok(meta) => check_private_dir(dir, &meta, nix::unistd::geteuid().as_raw()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(parent)
                    .map_err(io_error)?;
            }
            match fs::DirBuilder::new().mode(0o700).create(dir) {
                // Ours: the mode is exactly 0700 whatever the umask.
                Ok(()) => {
                    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(io_error)?
                }
                // Someone else was quicker: check theirs like any other.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_error(e)),
            }
            let meta = fs::symlink_metadata(dir).map_err(io_error)?;
            check_private_dir(dir, &meta, nix::unistd::geteuid().as_raw())
        }
        Err(e) => Err(io_error(e)),
    }
}

/// The rule for an existing directory, given its `lstat` and our uid.
pub fn check_private_dir(dir: &Path, meta: &fs::Metadata, uid: u32) -> Result<(), DirError> {
    let dir = dir.to_path_buf();
    if meta.file_type().is_symlink() {
        return Err(DirError::Symlink { dir });
    }
    if !meta.is_dir() {
        return Err(DirError::NotADirectory { dir });
    }
    check_owner_and_mode(dir, meta.uid(), meta.mode(), uid)
}

fn check_owner_and_mode(dir: PathBuf, owner: u32, mode: u32, uid: u32) -> Result<(), DirError> {
    if owner != uid {
        return Err(DirError::NotOwned { dir, owner, uid });
    }
    let by = match (mode & 0o020 != 0, mode & 0o002 != 0) {
        (_, true) => "others",
        (true, false) => "its group",
        (false, false) => return Ok(()),
    };
    Err(DirError::Writable {
        dir,
        by,
        mode: mode & 0o7777,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct MapEnv(HashMap<&'static str, &'static str>);
    impl Env for MapEnv {
        fn var(&self, name: &str) -> Option<String> {
            self.0.get(name).map(|v| v.to_string())
        }
    }

    #[test]
    fn id_is_short_stable_and_path_dependent() {
        let a = workspace_id(Path::new("/home/dev/project"));
        assert_eq!(a.len(), 16);
        assert_eq!(a, workspace_id(Path::new("/home/dev/project")));
        assert_ne!(a, workspace_id(Path::new("/home/dev/project2")));
        // Known value: the Pi bridge computes the same digest.
        assert_eq!(workspace_id(Path::new("/tmp/ws")), "b011ea26cc731e1a");
    }

    #[test]
    fn socket_defaults_to_xdg_runtime_dir() {
        let env = MapEnv(HashMap::from([
            ("XDG_RUNTIME_DIR", "/run/user/1000"),
            ("HOME", "/h"),
        ]));
        let p = ServicePaths::resolve(Path::new("/tmp/ws"), None, &env);
        assert_eq!(
            p.socket,
            PathBuf::from("/run/user/1000/cgc-fresh/b011ea26cc731e1a.sock")
        );
        assert_eq!(
            p.lock,
            PathBuf::from("/h/.local/state/cgc-fresh/b011ea26cc731e1a/instance.lock")
        );
        assert_eq!(
            p.state_file,
            PathBuf::from("/h/.local/state/cgc-fresh/b011ea26cc731e1a/state.json")
        );
    }

    #[test]
    fn socket_falls_back_to_a_per_user_temp_dir() {
        let env = MapEnv(HashMap::from([("TMPDIR", "/var/tmp")]));
        let p = ServicePaths::resolve(Path::new("/tmp/ws"), None, &env);
        let uid = nix::unistd::geteuid();
        assert_eq!(
            p.runtime_dir,
            PathBuf::from(format!("/var/tmp/cgc-fresh-{uid}"))
        );
    }

    #[test]
    fn lock_and_registry_live_in_the_state_dir_wherever_the_socket_is() {
        let env = MapEnv(HashMap::from([("XDG_STATE_HOME", "/st")]));
        let p = ServicePaths::resolve(Path::new("/tmp/ws"), Some(Path::new("/x/y/my.sock")), &env);
        assert_eq!(p.socket, PathBuf::from("/x/y/my.sock"));
        assert_eq!(p.runtime_dir, PathBuf::from("/x/y"));
        let state = PathBuf::from("/st/cgc-fresh/b011ea26cc731e1a");
        assert_eq!(p.lock, state.join("instance.lock"));
        assert_eq!(p.registry, state.join("children.json"));
        assert_eq!(p.state_file, state.join("state.json"));
        assert_eq!(p.state_dir, state);
        // Whatever the runtime directory: the same lock for the workspace.
        let other = MapEnv(HashMap::from([
            ("XDG_STATE_HOME", "/st"),
            ("XDG_RUNTIME_DIR", "/run/user/7"),
        ]));
        let q = ServicePaths::resolve(Path::new("/tmp/ws"), None, &other);
        assert_eq!((q.lock, q.registry), (p.lock, p.registry));
    }

    #[test]
    fn a_relative_socket_is_made_absolute() {
        let env = MapEnv(HashMap::from([("HOME", "/h")]));
        let p = ServicePaths::resolve(Path::new("/tmp/ws"), Some(Path::new("x.sock")), &env);
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(p.socket, cwd.join("x.sock"));
        assert_eq!(p.runtime_dir, cwd);
    }

    #[test]
    fn a_private_dir_is_created_0700_with_its_parents() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        ensure_private_dir(&dir).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        assert_eq!(
            fs::metadata(tmp.path().join("a")).unwrap().mode() & 0o077,
            0,
            "a created parent is user-only"
        );
        // Again: fine, unchanged.
        ensure_private_dir(&dir).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    }

    #[test]
    fn an_existing_dir_is_checked_and_never_chmod_ed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        fs::create_dir(&dir).unwrap();
        // Readable by all but writable only by us: accepted as it is.
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&dir).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o7777, 0o755);
        for (mode, by) in [(0o1777, "others"), (0o775, "its group"), (0o757, "others")] {
            fs::set_permissions(&dir, fs::Permissions::from_mode(mode)).unwrap();
            let error = ensure_private_dir(&dir).unwrap_err();
            assert!(matches!(error, DirError::Writable { .. }), "{error}");
            let text = error.to_string();
            assert!(text.contains(&format!("writable by {by}")), "{text}");
            assert!(text.contains(&dir.display().to_string()), "{text}");
            assert_eq!(error.reason(), "writable_by_others");
            assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o7777, mode);
        }
    }

    #[test]
    fn a_symlink_or_a_file_is_not_a_private_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        fs::create_dir(&real).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let error = ensure_private_dir(&link).unwrap_err();
        assert!(error.to_string().contains("is a symlink"), "{error}");
        let file = tmp.path().join("file");
        fs::write(&file, b"").unwrap();
        let error = ensure_private_dir(&file).unwrap_err();
        assert!(matches!(error, DirError::NotADirectory { .. }), "{error}");
    }

    #[test]
    fn a_dir_owned_by_another_uid_is_refused() {
        let error = check_owner_and_mode(PathBuf::from("/d"), 1234, 0o700, 1000).unwrap_err();
        assert!(error.to_string().contains("owned by uid 1234"), "{error}");
        assert_eq!(error.reason(), "not_owned");
        assert!(check_owner_and_mode(PathBuf::from("/d"), 1000, 0o700, 1000).is_ok());
        assert!(check_owner_and_mode(PathBuf::from("/d"), 1000, 0o1755, 1000).is_ok());
    }
}
