//! Tool paths as the file system names them.
//!
//! The core places a path inside or outside the workspace by its text
//! (`freshness/workspace_path.rs`). A harness may name a file through a
//! symlink (`~/proj` where a component is a link), with `..` after a
//! symlinked component, or with `~` for the home directory; compared as
//! text, such an edit would be silently dropped. So before a modifying
//! tool's paths reach the core, each is resolved to its real path: `~` at
//! the start is the home directory, a relative path is relative to the
//! workspace, an existing path is canonicalised, and a path that does not
//! exist (deleted, or about to be written) has its nearest existing
//! ancestor canonicalised and the rest appended. The cost is bounded: at
//! most [`MAX_RESOLVED_PATHS`] paths per call are resolved (the rest pass
//! as given), each with a few `stat`/`readlink` calls.
//!
//! A path that is plainly inside the workspace as text — relative, or
//! absolute under the canonical workspace root, with no `..` and no `~` —
//! is an edit in the workspace whatever its components link to, and is
//! passed as given without touching the file system: the resolution is
//! for the paths the text alone would wrongly place outside. (Resolving
//! every path cost a tool call several `stat`s per directory level: the
//! intake's figures are in docs/BENCHMARKS.md, "Figures behind
//! design choices".)

use std::path::{Component, Path, PathBuf};

/// The most paths of one tool call resolved through the file system.
pub const MAX_RESOLVED_PATHS: usize = 64;

/// `paths` resolved against `workspace` (itself canonical) and `home`. A
/// path whose real path differs is kept as given too (unless it starts
/// with `~`, which only the resolution understands): a symlink inside the
/// workspace to a file elsewhere is still an edit of a file CGC reads
/// through the link — the conservative side.
pub fn resolve_all(paths: Vec<String>, workspace: &Path, home: &Path) -> Vec<String> {
    let mut out = Vec::with_capacity(paths.len());
    for (n, path) in paths.into_iter().enumerate() {
        if n >= MAX_RESOLVED_PATHS || plainly_inside(&path, workspace) {
            out.push(path);
            continue;
        }
        let real = resolve(&path, workspace, home);
        let keep_given = real != path && !path.starts_with('~');
        out.push(real);
        if keep_given {
            out.push(path);
        }
    }
    out
}

/// Whether `path`'s text already places it inside `workspace` (canonical):
/// relative or under the root, without `..` or a leading `~`.
fn plainly_inside(path: &str, workspace: &Path) -> bool {
    if path.is_empty() || path.starts_with('~') {
        return false;
    }
    let path = Path::new(path);
    if path
        .components()
        .any(|component| matches!(component, Component::ParentDir))
    {
        return false;
    }
    !path.is_absolute() || path.starts_with(workspace)
}

/// One path resolved; the text as given when it cannot be (empty).
pub fn resolve(path: &str, workspace: &Path, home: &Path) -> String {
    if path.is_empty() {
        return path.to_string();
    }
    let full = if path == "~" {
        home.to_path_buf()
    } else if let Some(rest) = path.strip_prefix("~/") {
        home.join(rest)
    } else {
        workspace.join(path)
    };
    real(&full).to_string_lossy().into_owned()
}

/// `full` canonicalised, or its nearest existing ancestor canonicalised
/// with the rest (resolved lexically) appended.
fn real(full: &Path) -> PathBuf {
    if let Ok(real) = full.canonicalize() {
        return real;
    }
    for ancestor in full.ancestors().skip(1) {
        let Ok(base) = ancestor.canonicalize() else {
            continue;
        };
        let Ok(rest) = full.strip_prefix(ancestor) else {
            break;
        };
        let mut out = base;
        for component in rest.components() {
            match component {
                Component::Normal(name) => out.push(name),
                Component::ParentDir => {
                    out.pop();
                }
                Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            }
        }
        return out;
    }
    full.to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn symlinks_dot_dot_and_tilde_resolve_to_real_paths() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let ws = base.join("ws");
        fs::create_dir_all(ws.join("src")).unwrap();
        fs::write(ws.join("src/a.py"), "x\n").unwrap();
        std::os::unix::fs::symlink(&ws, base.join("link")).unwrap();
        let home = base.clone();
        let show = |path: &str| resolve(path, &ws, &home);
        let real_a = ws.join("src/a.py").display().to_string();
        assert_eq!(
            show(&base.join("link/src/a.py").display().to_string()),
            real_a
        );
        assert_eq!(show("~/link/src/a.py"), real_a);
        assert_eq!(show("src/../src/a.py"), real_a);
        // Not there (deleted, or to be written): the parent is resolved.
        assert_eq!(
            show("~/link/src/new/../gone.py"),
            ws.join("src/gone.py").display().to_string()
        );
        assert_eq!(
            show("/nonexistent-root-dir/x.py"),
            "/nonexistent-root-dir/x.py"
        );
        assert_eq!(show(""), "");
        let many: Vec<String> = (0..MAX_RESOLVED_PATHS + 1)
            .map(|_| "~/link/src/a.py".to_string())
            .collect();
        let resolved = resolve_all(many, &ws, &home);
        assert_eq!(resolved[0], real_a);
        assert_eq!(resolved.len(), MAX_RESOLVED_PATHS + 1);
        assert_eq!(resolved[MAX_RESOLVED_PATHS], "~/link/src/a.py");
        // The text as given is kept beside a real path that differs.
        let through_link = base.join("link/src/a.py").display().to_string();
        assert_eq!(
            resolve_all(vec![through_link.clone()], &ws, &home),
            [real_a.clone(), through_link]
        );
        assert_eq!(resolve_all(vec![real_a.clone()], &ws, &home), [real_a]);
    }

    #[test]
    fn paths_plainly_inside_are_taken_as_given_without_the_file_system() {
        let ws = Path::new("/no/such/ws");
        let home = Path::new("/no/such/home");
        // Nothing exists here: a resolution would have changed nothing
        // anyway, but these are not even looked up.
        assert_eq!(resolve_all(vec!["src/a.py".into()], ws, home), ["src/a.py"]);
        assert_eq!(
            resolve_all(vec!["/no/such/ws/src/a.py".into()], ws, home),
            ["/no/such/ws/src/a.py"]
        );
        assert!(plainly_inside("src/a.py", ws));
        assert!(plainly_inside("/no/such/ws/b.py", ws));
        assert!(!plainly_inside("../ws/b.py", ws));
        assert!(!plainly_inside("src/../../x.py", ws));
        assert!(!plainly_inside("~/ws/b.py", ws));
        assert!(!plainly_inside("/elsewhere/b.py", ws));
        assert!(!plainly_inside("", ws));
    }
}
