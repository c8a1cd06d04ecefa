//! Where a workspace's service lives on disk: its id, socket, lock,
//! registry and state files.
//!
//! The id is the first 16 hex digits of the SHA-256 of the canonical
//! workspace path, so every client (the CLI, the Pi bridge) finds the same
//! socket from the same directory without asking anyone. The bridge
//! computes it the same way; change both together.

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
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
    /// Per-user runtime directory (mode 0700) holding socket, lock, registry.
    pub runtime_dir: PathBuf,
    pub socket: PathBuf,
    /// `flock`ed for the life of the service: one service per workspace.
    pub lock: PathBuf,
    /// The live-children registry (see the supervisor).
    pub registry: PathBuf,
    /// Per-workspace state directory holding `state.json`.
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

impl ServicePaths {
    /// Resolves every path for `workspace` (already canonical). `socket`
    /// overrides the default socket path; the lock and registry then live
    /// beside it.
    pub fn resolve(workspace: &Path, socket: Option<&Path>, env: &dyn Env) -> ServicePaths {
        let id = workspace_id(workspace);
        let runtime_dir = match socket.and_then(Path::parent) {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => default_runtime_dir(env),
        };
        let socket = socket
            .map(Path::to_path_buf)
            .unwrap_or_else(|| runtime_dir.join(format!("{id}.sock")));
        let stem = socket
            .file_name()
            .map(|n| n.to_string_lossy().trim_end_matches(".sock").to_string())
            .unwrap_or_else(|| id.clone());
        let state_dir = state_root(env).join(&id);
        ServicePaths {
            workspace: workspace.to_path_buf(),
            lock: runtime_dir.join(format!("{stem}.lock")),
            registry: runtime_dir.join(format!("{stem}.children.json")),
            state_file: state_dir.join("state.json"),
            state_dir,
            runtime_dir,
            socket,
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

/// Creates `dir` (and parents) with mode 0700, or checks an existing one:
/// it must be ours, and group/other bits are removed. A directory owned by
/// another user is refused — someone could be waiting on our socket there.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(meta) => {
            if !meta.is_dir() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a directory", dir.display()),
                ));
            }
            let uid = nix::unistd::geteuid().as_raw();
            if meta.uid() != uid {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "{} is owned by uid {}, not by us (uid {uid}); refusing to use it",
                        dir.display(),
                        meta.uid()
                    ),
                ));
            }
            if meta.mode() & 0o077 != 0 {
                fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
            }
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = dir.parent() {
                fs::create_dir_all(parent)?;
            }
            match fs::create_dir(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
        }
        Err(e) => Err(e),
    }
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
            PathBuf::from("/run/user/1000/cgc-fresh/b011ea26cc731e1a.lock")
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
    fn explicit_socket_puts_lock_and_registry_beside_it() {
        let env = MapEnv(HashMap::from([("XDG_STATE_HOME", "/st")]));
        let p = ServicePaths::resolve(Path::new("/tmp/ws"), Some(Path::new("/x/y/my.sock")), &env);
        assert_eq!(p.socket, PathBuf::from("/x/y/my.sock"));
        assert_eq!(p.lock, PathBuf::from("/x/y/my.lock"));
        assert_eq!(p.registry, PathBuf::from("/x/y/my.children.json"));
        assert_eq!(p.state_dir, PathBuf::from("/st/cgc-fresh/b011ea26cc731e1a"));
    }

    #[test]
    fn private_dir_is_created_0700_and_tightened() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        ensure_private_dir(&dir).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&dir).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    }
}
