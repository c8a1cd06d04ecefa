//! The manifest rule: which source files changed since the tree a
//! successful sync saw.
//!
//! A manifest records, per source file, what `stat` said (size, mtime,
//! ctime, inode) and when the walk that recorded it began
//! ([`Recorded::taken_at_ns`]). A later walk of the same tree is compared
//! with it: a path only in one of the two was added or deleted; a path in
//! both changed when any recorded field differs. No content is read, so
//! one rule more is needed (git's "racy" entries): a file whose recorded
//! mtime or ctime is not older than the walk's start may have been written
//! again within the same clock tick after it was recorded, with nothing in
//! its `stat` to show it — it counts as changed every time until a newer
//! manifest records it. The ctime matters too: `touch -d`, `cp -p`, `tar`
//! and `rsync -t` set an old mtime on new content, but the kernel sets the
//! ctime.
//!
//! Pure: the walk and the file live in the shell (`manifest.rs`).

use std::collections::BTreeMap;

/// What `stat` says about one file; times in nanoseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub inode: u64,
}

/// A recorded tree: workspace-relative paths (`/` separators) and their
/// `stat`, and when the walk that recorded them began.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recorded {
    pub taken_at_ns: i64,
    pub files: BTreeMap<String, FileStat>,
}

impl Recorded {
    /// Whether `stat`, recorded by this walk, is racy: written at or after
    /// the walk began, so a later write in the same tick could hide.
    pub fn is_racy(&self, stat: &FileStat) -> bool {
        stat.mtime_ns >= self.taken_at_ns || stat.ctime_ns >= self.taken_at_ns
    }
}

/// The paths that differ between `recorded` and the tree `now`, sorted:
/// added, deleted, modified, and every racy entry still present.
pub fn changed_paths(recorded: &Recorded, now: &BTreeMap<String, FileStat>) -> Vec<String> {
    let mut changed = Vec::new();
    let mut old = recorded.files.iter().peekable();
    let mut new = now.iter().peekable();
    loop {
        match (old.peek(), new.peek()) {
            (None, None) => break,
            (Some((path, _)), None) => {
                changed.push((*path).clone());
                old.next();
            }
            (None, Some((path, _))) => {
                changed.push((*path).clone());
                new.next();
            }
            (Some((old_path, old_stat)), Some((new_path, new_stat))) => {
                match old_path.cmp(new_path) {
                    std::cmp::Ordering::Less => {
                        changed.push((*old_path).clone());
                        old.next();
                    }
                    std::cmp::Ordering::Greater => {
                        changed.push((*new_path).clone());
                        new.next();
                    }
                    std::cmp::Ordering::Equal => {
                        if old_stat != new_stat || recorded.is_racy(old_stat) {
                            changed.push((*old_path).clone());
                        }
                        old.next();
                        new.next();
                    }
                }
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(size: u64, mtime: i64, inode: u64) -> FileStat {
        FileStat {
            size,
            mtime_ns: mtime,
            ctime_ns: mtime,
            inode,
        }
    }

    fn tree(entries: &[(&str, FileStat)]) -> BTreeMap<String, FileStat> {
        entries
            .iter()
            .map(|(path, stat)| (path.to_string(), *stat))
            .collect()
    }

    fn recorded(entries: &[(&str, FileStat)]) -> Recorded {
        Recorded {
            taken_at_ns: 1_000,
            files: tree(entries),
        }
    }

    #[test]
    fn an_unchanged_tree_has_no_changes() {
        let old = recorded(&[("a.py", stat(1, 10, 1)), ("b/c.py", stat(2, 20, 2))]);
        assert!(changed_paths(&old, &old.files.clone()).is_empty());
    }

    #[test]
    fn additions_deletions_and_modifications_are_found() {
        let old = recorded(&[
            ("a.py", stat(1, 10, 1)),
            ("b.py", stat(2, 20, 2)),
            ("c.py", stat(3, 30, 3)),
            ("d.py", stat(4, 40, 4)),
        ]);
        let now = tree(&[
            ("a.py", stat(1, 10, 1)),
            ("b.py", stat(2, 20, 9)), // replaced (sed -i: a new inode)
            ("c.py", stat(5, 30, 3)), // resized
            ("e.py", stat(6, 60, 6)), // added; d.py deleted
        ]);
        assert_eq!(changed_paths(&old, &now), ["b.py", "c.py", "d.py", "e.py"]);
    }

    #[test]
    fn a_rename_is_a_deletion_and_an_addition() {
        let old = recorded(&[("old.py", stat(1, 10, 1))]);
        let now = tree(&[("new.py", stat(1, 10, 1))]);
        assert_eq!(changed_paths(&old, &now), ["new.py", "old.py"]);
    }

    #[test]
    fn an_old_mtime_on_new_content_is_caught_by_the_ctime() {
        let old = recorded(&[("a.py", stat(1, 10, 1))]);
        let mut copied = stat(1, 10, 1);
        copied.ctime_ns = 500;
        assert_eq!(changed_paths(&old, &tree(&[("a.py", copied)])), ["a.py"]);
    }

    #[test]
    fn racy_entries_count_as_changed_until_a_newer_manifest() {
        // Recorded in the tick the walk began: identical stat, still changed.
        let old = recorded(&[("a.py", stat(1, 1_000, 1)), ("b.py", stat(1, 999, 2))]);
        let now = old.files.clone();
        assert_eq!(changed_paths(&old, &now), ["a.py"]);
        let mut ctime_racy = stat(1, 10, 3);
        ctime_racy.ctime_ns = 1_000;
        let old = recorded(&[("c.py", ctime_racy)]);
        assert_eq!(changed_paths(&old, &old.files.clone()), ["c.py"]);
    }
}
