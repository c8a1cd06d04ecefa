//! Lexical placement of tool paths inside or outside the workspace.
//!
//! Spec, "Conservative drift observation without probing": drift is detected
//! with no filesystem access. So a path reported by a `tool_call` is placed
//! purely by its text: a relative path is relative to the workspace root,
//! `.` and `..` components are resolved lexically (`..` never climbs above
//! `/`), and the result is inside the workspace when it starts with the
//! root's components. Symlinks are not followed here: the shell resolves
//! every reported path to its real path first (`real_path.rs` in the
//! binary), so a path that reaches the workspace through a symlink arrives
//! as the real path inside it; a path given to the machine directly is
//! placed by its text alone.

/// A workspace root, normalised into components.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceRoot {
    components: Vec<String>,
}

/// Where a tool path lies relative to the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathPlacement {
    /// Inside the workspace; the normalised path relative to the root, with
    /// `/` separators (`.` for the root itself).
    Inside(String),
    /// Outside the workspace: it cannot make the graph stale.
    Outside,
}

impl WorkspaceRoot {
    /// The root `root`, read as an absolute path (a missing leading `/` is
    /// treated as present: the root is canonical by contract).
    pub fn new(root: &str) -> Self {
        WorkspaceRoot {
            components: resolve(&[], root),
        }
    }

    /// Places `path`: absolute, or relative to the root.
    pub fn place(&self, path: &str) -> PathPlacement {
        let base: &[String] = if path.starts_with('/') {
            &[]
        } else {
            &self.components
        };
        let components = resolve(base, path);
        match components.strip_prefix(self.components.as_slice()) {
            Some([]) => PathPlacement::Inside(".".to_string()),
            Some(relative) => PathPlacement::Inside(relative.join("/")),
            None => PathPlacement::Outside,
        }
    }
}

/// `path`'s components appended to `base`, with `.` dropped and `..`
/// removing the previous component (never above the filesystem root).
fn resolve(base: &[String], path: &str) -> Vec<String> {
    let mut components = base.to_vec();
    for component in path.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                components.pop();
            }
            name => components.push(name.to_string()),
        }
    }
    components
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inside(path: &str) -> PathPlacement {
        PathPlacement::Inside(path.to_string())
    }

    #[test]
    fn relative_paths_are_relative_to_the_root() {
        let root = WorkspaceRoot::new("/home/ann/proj");
        assert_eq!(root.place("src/main.rs"), inside("src/main.rs"));
        assert_eq!(root.place("./src//lib.rs"), inside("src/lib.rs"));
        assert_eq!(root.place("."), inside("."));
        assert_eq!(root.place(""), inside("."));
    }

    #[test]
    fn dot_dot_is_resolved_lexically() {
        let root = WorkspaceRoot::new("/home/ann/proj");
        assert_eq!(root.place("src/../README.md"), inside("README.md"));
        assert_eq!(root.place("../proj/a.rs"), inside("a.rs"));
        assert_eq!(root.place("../other/a.rs"), PathPlacement::Outside);
        assert_eq!(root.place("../../../../../../etc"), PathPlacement::Outside);
        assert_eq!(
            root.place("/home/ann/proj/x/../../proj/y.rs"),
            inside("y.rs")
        );
    }

    #[test]
    fn absolute_paths_outside_the_root_are_outside() {
        let root = WorkspaceRoot::new("/home/ann/proj/");
        assert_eq!(root.place("/home/ann/proj/src/a.rs"), inside("src/a.rs"));
        assert_eq!(root.place("/home/ann/proj"), inside("."));
        assert_eq!(root.place("/home/ann/project/a.rs"), PathPlacement::Outside);
        assert_eq!(root.place("/home/ann"), PathPlacement::Outside);
        assert_eq!(root.place("/tmp/scratch.rs"), PathPlacement::Outside);
    }

    #[test]
    fn a_filesystem_root_workspace_contains_every_path() {
        let root = WorkspaceRoot::new("/");
        assert_eq!(root.place("/etc/hosts"), inside("etc/hosts"));
        assert_eq!(root.place("/.."), inside("."));
    }
}
