//! A branch switch on real code: the bench's `pip` 24.0 tree checked out
//! as an older `pip` release and back, the way `git checkout v22.3.1`
//! rewrites a working tree. Between `pip` 22.3.1 and 24.0, 289 Python files
//! differ, 25 exist only in 24.0 and 16 only in 22.3.1 (330 in all).
//!
//! Both trees come from PyPI wheels with their hashes required
//! (`pinned::fetch`); a checkout makes the workspace hold exactly
//! the target tree's files (the files that differ rewritten, the extra
//! ones deleted, the missing ones written) and counts the Python files it
//! touched.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use super::codebase::{self, PIP};
use super::generated::Language;
use super::pinned::{self, Package, Registry};
use crate::real_cgc::RealCgc;

/// The other branch: an older `pip` release, its wheel's SHA-256 as PyPI
/// publishes it.
pub const OTHER: Package = Package {
    registry: Registry::PypiWheel,
    name: "pip",
    version: "22.3.1",
    sha256: "908c78e6bc29b676ede1c4d57981d490cb892eb45cd8c214ab6298125119e077",
};

/// The two trees a switch moves the workspace between, unpacked outside
/// it.
pub struct ReleaseBranches {
    /// The tree the workspace starts with (`PIP`).
    pub home: PathBuf,
    /// The tree a switch "there" checks out (`OTHER`).
    pub other: PathBuf,
}

impl ReleaseBranches {
    /// Downloads and unpacks both releases under `root` (not in the
    /// workspace: CodeGraphContext would index them).
    pub fn fetch(cgc: &RealCgc, root: &Path) -> Result<Self> {
        let unpack = |package: &Package, name: &str| -> Result<PathBuf> {
            let wheel = pinned::fetch(cgc, package, &root.join(format!("{name}-wheel")))?;
            let tree = root.join(format!("{name}-tree"));
            pinned::unpack(cgc, &wheel, &tree)?;
            Ok(tree)
        };
        Ok(Self {
            home: unpack(&PIP, "branch-home")?,
            other: unpack(&OTHER, "branch-other")?,
        })
    }

    /// The tree a switch checks out: `other` there, `home` back.
    pub fn target(&self, there: bool) -> &Path {
        if there {
            &self.other
        } else {
            &self.home
        }
    }
}

/// Every regular file under `dir`, by its path relative to `dir`.
fn files(dir: &Path) -> Result<BTreeMap<PathBuf, PathBuf>> {
    codebase::regular_files(dir)?
        .into_iter()
        .map(|path| {
            let rel = path
                .strip_prefix(dir)
                .context("a file outside its tree")?
                .to_path_buf();
            Ok((rel, path))
        })
        .collect()
}

fn is_python(rel: &Path) -> bool {
    rel.extension().is_some_and(|e| e == "py")
}

/// Makes `ws` hold exactly `target`'s files: each file that differs is
/// rewritten, each file `target` lacks is deleted, each new one written.
/// Returns how many Python files it changed, deleted or wrote.
pub fn checkout(ws: &Path, target: &Path) -> Result<usize> {
    let have = files(ws)?;
    let want = files(target)?;
    let mut touched = 0;
    for (rel, path) in &have {
        if !want.contains_key(rel) {
            fs::remove_file(path).with_context(|| format!("deleting {}", path.display()))?;
            touched += usize::from(is_python(rel));
        }
    }
    for (rel, source) in &want {
        let text = fs::read(source).with_context(|| format!("reading {}", source.display()))?;
        let dest = ws.join(rel);
        if have.contains_key(rel) && fs::read(&dest)? == text {
            continue;
        }
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(&dest, text).with_context(|| format!("writing {}", dest.display()))?;
        touched += usize::from(is_python(rel));
    }
    Ok(touched)
}

/// How many times each function name is defined in `tree`'s Python files.
fn defined(tree: &Path) -> Result<HashMap<String, usize>> {
    let mut out = HashMap::new();
    for path in codebase::python_files(tree)? {
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        for name in codebase::definitions(&text, Language::Python) {
            *out.entry(name).or_default() += 1;
        }
    }
    Ok(out)
}

/// Two names that tell the branches apart in the graph: one defined once
/// in `to` and nowhere in `from` (present after the checkout), one defined
/// once in `from` and nowhere in `to` (gone after it). The
/// lexicographically first of each, so a run is repeatable.
pub fn telltales(from: &Path, to: &Path) -> Result<(String, String)> {
    let (from, to) = (defined(from)?, defined(to)?);
    let only_once_in = |a: &HashMap<String, usize>, b: &HashMap<String, usize>| {
        let mut names: Vec<&String> = a
            .iter()
            .filter(|(name, n)| **n == 1 && !b.contains_key(*name) && name.is_ascii())
            .map(|(name, _)| name)
            .collect();
        names.sort();
        names.first().map(|name| name.to_string())
    };
    Ok((
        only_once_in(&to, &from).context("no function defined only on the target branch")?,
        only_once_in(&from, &to).context("no function defined only on the source branch")?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(root: &Path, name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = root.join(name);
        for (rel, text) in files {
            let path = dir.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_checkout_leaves_exactly_the_target_files_and_counts_the_python_ones() {
        let root = tempfile::tempdir().unwrap();
        let ws = tree(
            root.path(),
            "ws",
            &[
                ("p/same.py", "x = 1\n"),
                ("p/changed.py", "def a():\n    pass\n"),
                ("p/gone.py", "def g():\n    pass\n"),
                ("META", "old\n"),
            ],
        );
        let target = tree(
            root.path(),
            "target",
            &[
                ("p/same.py", "x = 1\n"),
                ("p/changed.py", "def b():\n    pass\n"),
                ("p/q/new.py", "def n():\n    pass\n"),
                ("META", "new\n"),
            ],
        );
        assert_eq!(checkout(&ws, &target).unwrap(), 3);
        let left: Vec<PathBuf> = files(&ws).unwrap().into_keys().collect();
        let wanted: Vec<PathBuf> = files(&target).unwrap().into_keys().collect();
        assert_eq!(left, wanted);
        assert_eq!(fs::read_to_string(ws.join("META")).unwrap(), "new\n");
        assert_eq!(checkout(&ws, &target).unwrap(), 0, "nothing left to do");
    }

    #[test]
    fn telltales_are_defined_once_on_one_side_and_nowhere_on_the_other() {
        let root = tempfile::tempdir().unwrap();
        let from = tree(
            root.path(),
            "from",
            &[
                (
                    "a.py",
                    "def shared():\n    pass\ndef old_only():\n    pass\n",
                ),
                ("b.py", "def twice():\n    pass\n"),
                ("c.py", "def twice():\n    pass\n"),
            ],
        );
        let to = tree(
            root.path(),
            "to",
            &[(
                "a.py",
                "def shared():\n    pass\nasync def new_only():\n    pass\n",
            )],
        );
        assert_eq!(
            telltales(&from, &to).unwrap(),
            ("new_only".to_string(), "old_only".to_string())
        );
    }
}
