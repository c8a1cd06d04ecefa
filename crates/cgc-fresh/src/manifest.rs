//! The manifest: what every source file's `stat` said when the last
//! successful sync began, so that a shell command's changes can be found
//! without reading a byte of content.
//!
//! - **The walk** finds the files CodeGraphContext indexes, by its own
//!   rules (its discovery in `tools/indexing/discovery.py`): files whose
//!   suffix one of its parsers or its generic file types handles, or one of
//!   its generic file names; not under a directory named in its default
//!   `IGNORE_DIRS`; not matched by its default ignore patterns, the nearest
//!   `.gitignore` or the nearest `.cgcignore` (searched upwards within the
//!   git worktree; without a `.cgcignore`, the defaults `cgc index` writes
//!   into one). The patterns are matched with the `ignore` crate's
//!   gitignore semantics. CGC's own state directory (`.codegraphcontext/`,
//!   where a sync writes its database) is skipped too. Symlinked directories are not entered; a symlink
//!   to a file is recorded with its target's `stat`. The ignore files
//!   themselves are recorded, so a change to them counts. Differences from
//!   CGC's own matcher only make a file count where CGC would not look at
//!   it, or the other way round; a `IGNORE_DIRS` customised in CGC's
//!   configuration is not read.
//! - **Bounded:** past [`MAX_MANIFEST_FILES`] files the walk stops and the
//!   manifest says "too large": every shell command then counts as an edit
//!   of the whole workspace.
//! - **Snapshot rule:** the walk recorded for a sync is taken when the sync
//!   is decided, before its `cgc` is spawned, and committed only when that
//!   sync succeeds. It starts its clock ([`Recorded::taken_at_ns`], less
//!   [`RACY_MARGIN_NS`] for the kernel's coarse file clock) before it stats
//!   anything and runs beside the `cgc`: a file written after it was
//!   statted differs later; one written before but in the same tick is
//!   racy (its times are not older than the walk's start) and counts as
//!   changed until a newer manifest. Either way an edit made during the
//!   sync, which the sync may have missed, is not hidden by the manifest.
//! - **The file** is `manifest.json` in the workspace's state directory,
//!   written with `atomic_file.rs`.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use cgc_fresh_core::manifest_diff::{changed_paths, FileStat, Recorded};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use serde::{Deserialize, Serialize};

use crate::atomic_file::write_atomically;

/// The actor whose work this is, named in every log line.
const COMPONENT: &str = "drift_observer";

/// The manifest's file name in the state directory.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The most files a manifest records; a larger tree is "too large".
pub const MAX_MANIFEST_FILES: usize = 200_000;
/// How much earlier than the wall clock a walk's start is taken: file times
/// come from the kernel's coarse clock, which may lag by a tick.
pub const RACY_MARGIN_NS: i64 = 20_000_000;

const FORMAT_VERSION: u32 = 1;

use cgc_fresh_core::cgc_seam::{
    CGCIGNORE_FILE, DEFAULT_CGCIGNORE, DEFAULT_IGNORE_PATTERNS as DEFAULT_PATTERNS,
    GENERIC_FILE_NAMES, GENERIC_SUFFIXES, IGNORE_DIRS, PARSER_SUFFIXES,
};

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("cannot walk {path}: {source}")]
    Root { path: PathBuf, source: io::Error },
    #[error("cannot read the ignore rules: {0}")]
    Rules(#[from] ignore::Error),
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("cannot encode the manifest: {0}")]
    Encode(#[from] serde_json::Error),
}

/// A recorded tree, or the fact that it was too large to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Manifest {
    Recorded(Recorded),
    TooLarge { taken_at_ns: i64 },
}

/// One walk's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Walked {
    Files(BTreeMap<String, FileStat>),
    TooLarge,
}

/// The wall clock in nanoseconds since the epoch, less the racy margin:
/// what a walk starting now records as its start.
pub fn walk_start_ns() -> i64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    now.saturating_sub(RACY_MARGIN_NS)
}

/// Takes the snapshot a sync decided at `taken_at_ns` records.
pub fn snapshot(root: &Path, taken_at_ns: i64, limit: usize) -> Result<Manifest, ManifestError> {
    Ok(match walk(root, limit)? {
        Walked::Files(files) => Manifest::Recorded(Recorded { taken_at_ns, files }),
        Walked::TooLarge => Manifest::TooLarge { taken_at_ns },
    })
}

/// Walks `root` and compares it with `reference`: `None` when the
/// comparison cannot tell (a too-large manifest or tree, or a failed walk —
/// the caller counts the whole workspace), else the changed paths.
pub fn compare(root: &Path, reference: &Manifest, limit: usize) -> Option<Vec<String>> {
    let Manifest::Recorded(recorded) = reference else {
        return None;
    };
    match walk(root, limit) {
        Ok(Walked::Files(now)) => Some(changed_paths(recorded, &now)),
        Ok(Walked::TooLarge) => None,
        Err(error) => {
            tracing::warn!(component = COMPONENT, event = "manifest_walk_failed", error = %error);
            None
        }
    }
}

/// Stats every source file of `root` that CGC would index, up to `limit`.
pub fn walk(root: &Path, limit: usize) -> Result<Walked, ManifestError> {
    let meta = fs::metadata(root).map_err(|source| ManifestError::Root {
        path: root.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(ManifestError::Root {
            path: root.to_path_buf(),
            source: io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
        });
    }
    let rules = ignore_rules(root)?;
    let filter_rules = rules.clone();
    let walker = ignore::WalkBuilder::new(root)
        .standard_filters(false)
        .follow_links(false)
        .filter_entry(move |entry| {
            let is_dir = entry.file_type().is_some_and(|kind| kind.is_dir());
            if entry.depth() == 0 {
                return true;
            }
            if is_dir && ignored_dir_name(entry.file_name()) {
                return false;
            }
            !filter_rules.matched(entry.path(), is_dir).is_ignore()
        })
        .build();
    let mut files = BTreeMap::new();
    for entry in walker {
        // An unreadable entry is skipped, as CGC's walk skips it.
        let Ok(entry) = entry else { continue };
        let Some(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() || !wanted_name(entry.file_name()) {
            continue;
        }
        let meta = if kind.is_symlink() {
            // CGC lists a symlink to a file and reads its target.
            match fs::metadata(entry.path()) {
                Ok(meta) if meta.is_file() => meta,
                _ => continue,
            }
        } else if kind.is_file() {
            match entry.metadata() {
                Ok(meta) => meta,
                Err(_) => continue,
            }
        } else {
            continue;
        };
        let Ok(relative) = entry.path().strip_prefix(root) else {
            continue;
        };
        if files.len() >= limit {
            return Ok(Walked::TooLarge);
        }
        files.insert(relative.to_string_lossy().into_owned(), stat_of(&meta));
    }
    Ok(Walked::Files(files))
}

/// CGC's indexing rules for one workspace, as the walk applies them, to
/// decide single paths: whether CGC indexes the file at a path (whether or
/// not it exists). Built from the ignore files as they are when loaded;
/// whoever keeps one decides when to load them again.
pub struct IndexRules {
    rules: Gitignore,
    /// Paths decided already: an agent edits the same files again and
    /// again, and matching every pattern against every parent costs more
    /// than the rest of a tool call's intake. Bounded by
    /// [`MAX_DECIDED_PATHS`] (emptied when full). Keyed by the path's
    /// bytes: hashing a `Path` splits it into components on every lookup,
    /// which cost more than the rest of the lookup; two spellings of one
    /// path (`a//b`, `a/b`) are merely two entries with the same answer.
    decided: HashMap<Vec<u8>, bool>,
}

/// The most path decisions an [`IndexRules`] keeps.
pub const MAX_DECIDED_PATHS: usize = 4_096;

impl IndexRules {
    /// Reads the rules of `root` (canonical).
    pub fn load(root: &Path) -> Result<IndexRules, ManifestError> {
        Ok(IndexRules {
            rules: ignore_rules(root)?,
            decided: HashMap::new(),
        })
    }

    /// [`IndexRules::decide`], remembered.
    pub fn indexes(&mut self, relative: &Path) -> bool {
        let key = relative.as_os_str().as_bytes();
        if let Some(indexed) = self.decided.get(key) {
            return *indexed;
        }
        let indexed = self.decide(relative);
        if self.decided.len() >= MAX_DECIDED_PATHS {
            self.decided.clear();
        }
        self.decided.insert(key.to_vec(), indexed);
        indexed
    }

    /// Whether CGC indexes the file at `relative` (to the workspace root):
    /// a name or suffix it reads, under no directory it skips, matched by
    /// no ignore pattern — the walk's own tests. A path that is not plainly
    /// relative (`.`, `..`, a root) counts as indexed: the conservative
    /// side.
    fn decide(&self, relative: &Path) -> bool {
        let mut parts = Vec::new();
        for component in relative.components() {
            match component {
                std::path::Component::Normal(part) => parts.push(part),
                _ => return true,
            }
        }
        let Some((name, dirs)) = parts.split_last() else {
            return true;
        };
        if !wanted_name(name) || dirs.iter().any(|dir| ignored_dir_name(dir)) {
            return false;
        }
        !self
            .rules
            .matched_path_or_any_parents(relative, false)
            .is_ignore()
    }
}

/// Whether `path` names one of the files CGC's ignore rules come from.
pub fn is_ignore_file(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|name| name == ".gitignore" || name == ".cgcignore")
}

fn stat_of(meta: &fs::Metadata) -> FileStat {
    FileStat {
        size: meta.size(),
        mtime_ns: meta
            .mtime()
            .saturating_mul(1_000_000_000)
            .saturating_add(meta.mtime_nsec()),
        ctime_ns: meta
            .ctime()
            .saturating_mul(1_000_000_000)
            .saturating_add(meta.ctime_nsec()),
        inode: meta.ino(),
    }
}

fn wanted_name(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        // CGC works on text paths; a name that is not UTF-8 is recorded
        // all the same when its suffix is one CGC reads.
        return Path::new(name)
            .extension()
            .and_then(OsStr::to_str)
            .is_some_and(|ext| PARSER_SUFFIXES.contains(&ext) || GENERIC_SUFFIXES.contains(&ext));
    };
    (GENERIC_FILE_NAMES.contains(&name) || name == CGCIGNORE_FILE)
        || Path::new(name)
            .extension()
            .and_then(OsStr::to_str)
            .is_some_and(|ext| PARSER_SUFFIXES.contains(&ext) || GENERIC_SUFFIXES.contains(&ext))
}

fn ignored_dir_name(name: &OsStr) -> bool {
    let name = name.to_string_lossy().to_lowercase();
    IGNORE_DIRS.contains(&name.as_str())
}

/// CGC's patterns, in its order (later wins): the defaults, the nearest
/// `.gitignore`, the nearest `.cgcignore` (or what `cgc index` writes into
/// a missing one).
fn ignore_rules(root: &Path) -> Result<Gitignore, ManifestError> {
    let mut builder = GitignoreBuilder::new(root);
    for pattern in DEFAULT_PATTERNS {
        builder.add_line(None, pattern)?;
    }
    if let Some(gitignore) = find_upwards(root, ".gitignore") {
        add_file_lines(&mut builder, &gitignore)?;
    }
    match find_upwards(root, ".cgcignore") {
        Some(cgcignore) => add_file_lines(&mut builder, &cgcignore)?,
        None => {
            for pattern in DEFAULT_CGCIGNORE {
                builder.add_line(None, pattern)?;
            }
        }
    }
    Ok(builder.build()?)
}

fn add_file_lines(builder: &mut GitignoreBuilder, file: &Path) -> Result<(), ManifestError> {
    let Ok(text) = fs::read_to_string(file) else {
        return Ok(());
    };
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        builder.add_line(Some(file.to_path_buf()), line)?;
    }
    Ok(())
}

/// `name` in `root`, or in a parent up to the git worktree's root (CGC's
/// search; outside a worktree only `root` itself).
fn find_upwards(root: &Path, name: &str) -> Option<PathBuf> {
    let git_root = root
        .ancestors()
        .find(|dir| dir.join(".git").exists())
        .map(Path::to_path_buf);
    for dir in root.ancestors() {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return Some(candidate);
        }
        if git_root.as_deref().is_none_or(|git| git == dir) {
            return None;
        }
    }
    None
}

/// The manifest file as written: one array per file.
#[derive(Serialize, Deserialize)]
struct OnDisk {
    version: u32,
    taken_at_ns: i64,
    too_large: bool,
    /// `[path, size, mtime_ns, ctime_ns, inode]`, sorted by path.
    files: Vec<(String, u64, i64, i64, u64)>,
}

/// Reads the manifest at `path`; `None` when there is none or it cannot be
/// read (logged): the next shell command then counts as a whole-workspace
/// edit, and the next successful sync writes a new one.
pub fn load(path: &Path) -> Option<Manifest> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return None,
        Err(error) => {
            tracing::warn!(component = COMPONENT, event = "manifest_unreadable", path = %path.display(), error = %error);
            return None;
        }
    };
    match serde_json::from_slice::<OnDisk>(&bytes) {
        Ok(disk) if disk.version == FORMAT_VERSION => Some(if disk.too_large {
            Manifest::TooLarge {
                taken_at_ns: disk.taken_at_ns,
            }
        } else {
            Manifest::Recorded(Recorded {
                taken_at_ns: disk.taken_at_ns,
                files: disk
                    .files
                    .into_iter()
                    .map(|(path, size, mtime_ns, ctime_ns, inode)| {
                        (
                            path,
                            FileStat {
                                size,
                                mtime_ns,
                                ctime_ns,
                                inode,
                            },
                        )
                    })
                    .collect(),
            })
        }),
        Ok(disk) => {
            tracing::warn!(component = COMPONENT, event = "manifest_unreadable", path = %path.display(), error = "unknown version", version = disk.version);
            None
        }
        Err(error) => {
            tracing::warn!(component = COMPONENT, event = "manifest_unreadable", path = %path.display(), error = %error);
            None
        }
    }
}

/// Writes `manifest` to `path` atomically.
pub fn save(path: &Path, manifest: &Manifest) -> Result<(), ManifestError> {
    let disk = match manifest {
        Manifest::TooLarge { taken_at_ns } => OnDisk {
            version: FORMAT_VERSION,
            taken_at_ns: *taken_at_ns,
            too_large: true,
            files: Vec::new(),
        },
        Manifest::Recorded(recorded) => OnDisk {
            version: FORMAT_VERSION,
            taken_at_ns: recorded.taken_at_ns,
            too_large: false,
            files: recorded
                .files
                .iter()
                .map(|(path, stat)| {
                    (
                        path.clone(),
                        stat.size,
                        stat.mtime_ns,
                        stat.ctime_ns,
                        stat.inode,
                    )
                })
                .collect(),
        },
    };
    let bytes = serde_json::to_vec(&disk)?;
    write_atomically(path, &bytes).map_err(|source| ManifestError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// How long `work` took, in milliseconds, with its result.
pub fn timed<T>(work: impl FnOnce() -> T) -> (T, u128) {
    let start = Instant::now();
    let result = work();
    (result, start.elapsed().as_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(path, text).unwrap();
    }

    fn paths(walked: &Walked) -> Vec<&str> {
        match walked {
            Walked::Files(files) => files.keys().map(String::as_str).collect(),
            Walked::TooLarge => panic!("too large"),
        }
    }

    #[test]
    fn the_walk_takes_what_cgc_indexes_and_skips_what_it_ignores() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "src/a.py", "x = 1\n");
        write(root, "src/b.rs", "fn b() {}\n");
        write(root, "README.md", "# r\n");
        write(root, "Makefile", "all:\n");
        write(root, "notes.bin", "?");
        write(root, "logo.png", "?");
        write(root, "node_modules/dep/index.js", "x\n");
        write(root, "Build/out.py", "x\n");
        write(root, "gen/skip.py", "x\n");
        write(root, "gen/keep.py", "x\n");
        write(root, ".cgcignore", "gen/skip.py\n");
        write(root, ".gitignore", "*.tmp.py\n");
        write(root, "scratch.tmp.py", "x\n");
        let walked = walk(root, 100).unwrap();
        assert_eq!(
            paths(&walked),
            [
                ".cgcignore",
                ".gitignore",
                "Makefile",
                "README.md",
                "gen/keep.py",
                "src/a.py",
                "src/b.rs"
            ]
        );
    }

    #[test]
    fn a_single_path_is_decided_as_the_walk_decides_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let files = [
            "src/a.py",
            "src/b.rs",
            "README.md",
            "Makefile",
            "notes.bin",
            "logo.png",
            "node_modules/dep/index.js",
            "Build/out.py",
            "gen/skip.py",
            "gen/keep.py",
            "scratch.tmp.py",
            "deep/__pycache__/c.py",
            "vendor/lib.py",
        ];
        for file in files {
            write(root, file, "x\n");
        }
        write(root, ".cgcignore", "gen/skip.py\nvendor/\n");
        write(root, ".gitignore", "*.tmp.py\n");
        let walked = walk(root, 100).unwrap();
        let mut rules = IndexRules::load(root).unwrap();
        for file in files.iter().chain(&[".cgcignore", ".gitignore"]) {
            assert_eq!(
                rules.indexes(Path::new(file)),
                paths(&walked).contains(file),
                "{file}"
            );
        }
        // A path that does not exist (deleted, or about to be written) is
        // decided by its name alone; a path that is not plainly relative
        // counts as indexed.
        assert!(rules.indexes(Path::new("src/new.py")));
        assert!(!rules.indexes(Path::new("vendor/gone.py")));
        assert!(rules.indexes(Path::new("./vendor/x.py")));
        assert!(rules.indexes(Path::new("")));
    }

    /// The cost of deciding one edited path:
    /// `cargo test --release --bin cgc-fresh -- --ignored index_rules_cost --nocapture`.
    #[test]
    #[ignore]
    fn index_rules_cost() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), ".gitignore", "*.log\nbuild-out/\n/scratch/\n");
        write(dir.path(), ".cgcignore", "vendor/\n*.gen.py\n");
        let started = Instant::now();
        let mut rules = IndexRules::load(dir.path()).unwrap();
        let load = started.elapsed();
        let started = Instant::now();
        let decided = paths_decided(&rules, 10_000);
        let undecided = started.elapsed() / 10_000;
        assert_eq!(decided, 5_000);
        let paths = [
            "src/lib.rs",
            "pkg/sub/mod.py",
            "vendor/x/y.py",
            "node_modules/a/b.js",
        ];
        let rounds = 100_000;
        let started = Instant::now();
        let mut indexed = 0;
        for n in 0..rounds {
            indexed += usize::from(rules.indexes(Path::new(paths[n % paths.len()])));
        }
        let per_path = started.elapsed() / rounds as u32;
        assert_eq!(indexed, rounds / 2);
        println!(
            "load {load:?}; {undecided:?} per path matched, {per_path:?} per path remembered ({rounds} paths)"
        );
    }

    /// How many of `rounds` paths (4 kinds in turn) `rules` indexes,
    /// matched every time.
    fn paths_decided(rules: &IndexRules, rounds: usize) -> usize {
        let paths = [
            "src/lib.rs",
            "pkg/sub/mod.py",
            "vendor/x/y.py",
            "node_modules/a/b.js",
        ];
        (0..rounds)
            .filter(|n| rules.decide(Path::new(paths[n % paths.len()])))
            .count()
    }

    /// The walk's cost: `cargo test --release --bin cgc-fresh -- --ignored
    /// walk_cost --nocapture`.
    #[test]
    #[ignore]
    fn walk_cost() {
        let dir = tempfile::tempdir().unwrap();
        for n in 0..2_000 {
            write(
                dir.path(),
                &format!("pkg{}/m{n}.py", n % 40),
                "def f():\n    pass\n",
            );
        }
        let taken = snapshot(dir.path(), walk_start_ns(), MAX_MANIFEST_FILES).unwrap();
        let mut times = Vec::new();
        for _ in 0..20 {
            let (changed, ms) = timed(|| compare(dir.path(), &taken, MAX_MANIFEST_FILES));
            assert!(changed.is_some());
            times.push(ms);
        }
        let start = Instant::now();
        for _ in 0..20 {
            compare(dir.path(), &taken, MAX_MANIFEST_FILES);
        }
        let file = dir.path().join("m.json");
        let (saved, save_ms) = timed(|| save(&file, &taken));
        saved.unwrap();
        println!(
            "2000 files: walk+diff {:.2} ms each (min {} ms), save {save_ms} ms, {} bytes",
            start.elapsed().as_secs_f64() * 1000.0 / 20.0,
            times.iter().min().unwrap(),
            fs::metadata(&file).unwrap().len()
        );
    }

    #[test]
    fn a_tree_past_the_limit_is_too_large() {
        let dir = tempfile::tempdir().unwrap();
        for n in 0..5 {
            write(dir.path(), &format!("m{n}.py"), "x\n");
        }
        assert_eq!(walk(dir.path(), 4).unwrap(), Walked::TooLarge);
        assert!(matches!(walk(dir.path(), 5).unwrap(), Walked::Files(_)));
    }

    #[test]
    fn a_snapshot_round_trips_and_finds_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        fs::create_dir(&root).unwrap();
        write(&root, "a.py", "x = 1\n");
        write(&root, "b.py", "y = 1\n");
        // Recorded as if the walk began a second later than the writes.
        let manifest = snapshot(&root, walk_start_ns() + 1_000_000_000, 100).unwrap();
        let manifest = match manifest {
            Manifest::Recorded(mut recorded) => {
                recorded.taken_at_ns = i64::MAX;
                for stat in recorded.files.values_mut() {
                    stat.mtime_ns -= 1;
                }
                Manifest::Recorded(recorded)
            }
            other => other,
        };
        let file = dir.path().join(MANIFEST_FILE);
        save(&file, &manifest).unwrap();
        let loaded = load(&file).unwrap();
        assert_eq!(loaded, manifest);
        // Every stat differs by a nanosecond: both count as changed.
        assert_eq!(compare(&root, &loaded, 100).unwrap(), ["a.py", "b.py"]);
        assert_eq!(
            compare(&root, &Manifest::TooLarge { taken_at_ns: 0 }, 100),
            None
        );
        assert_eq!(load(&dir.path().join("missing.json")), None);
    }

    #[test]
    fn an_unchanged_tree_compares_equal_and_an_edit_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "a.py", "x = 1\n");
        write(root, "b.py", "y = 1\n");
        std::thread::sleep(std::time::Duration::from_millis(50));
        let manifest = snapshot(root, walk_start_ns(), 100).unwrap();
        assert_eq!(compare(root, &manifest, 100).unwrap(), Vec::<String>::new());
        // sed -i: a new file renamed over the old one.
        write(root, ".a.py.new", "x = 2\n");
        fs::rename(root.join(".a.py.new"), root.join("a.py")).unwrap();
        fs::rename(root.join("b.py"), root.join("c.py")).unwrap();
        assert_eq!(
            compare(root, &manifest, 100).unwrap(),
            ["a.py", "b.py", "c.py"]
        );
    }
}
