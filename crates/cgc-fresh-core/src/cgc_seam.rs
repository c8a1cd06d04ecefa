//! Everything the service copied from CodeGraphContext's internals, or
//! depends on for its meaning, in one place: CGC's lists (the suffixes its
//! parsers take, its generic files, its ignore rules) and the lines of its
//! output the service recognises. Each entry names where in CGC it was
//! read; all of it was read from CGC [`READ_FROM`], the version the
//! project pins and proves against. A CGC upgrade starts here (and in the
//! driver's own seam, `driver/cgc_seam.py`, which holds what the Python
//! driver depends on: the proven versions, the API it patches, the query
//! shapes it recognises).
//!
//! The functions that use these entries stay with their users
//! (`manifest.rs`, `cgc_markers.rs` and the watcher's rules in
//! `freshness/watcher_slot.rs`).

/// The CGC version every entry here was read from.
pub const READ_FROM: &str = "0.6.13";

// ---- What CGC indexes ---------------------------------------------------

/// The suffixes CGC's parsers take (`GraphBuilder.parsers`,
/// `codegraphcontext/tools/graph_builder.py`), without the dot. Its
/// watcher updates the graph for these alone (`on_created`/`on_modified`
/// skip every other file).
pub const PARSER_SUFFIXES: [&str; 38] = [
    "py", "ipynb", "js", "jsx", "mjs", "cjs", "go", "ts", "mts", "cts", "tsx", "cpp", "h", "hpp",
    "hh", "rs", "c", "java", "rb", "cs", "php", "kt", "scala", "sc", "swift", "hs", "dart", "pl",
    "pm", "lua", "ex", "exs", "el", "sol", "html", "css", "svelte", "vue",
];

/// The generic file types `cgc index` records as bare File nodes
/// (`_GENERIC_EXTENSIONS`), without the dot.
pub const GENERIC_SUFFIXES: [&str; 11] = [
    "toml", "sh", "yaml", "yml", "json", "ini", "cfg", "md", "txt", "bat", "ps1",
];

/// The generic files `cgc index` records by name (`_GENERIC_FILENAMES`).
pub const GENERIC_FILE_NAMES: [&str; 5] = [
    "Dockerfile",
    "Makefile",
    ".gitignore",
    ".dockerignore",
    ".env",
];

/// CGC's own ignore file, which `cgc index` writes when there is none.
pub const CGCIGNORE_FILE: &str = ".cgcignore";

/// The files whose change alters what CGC indexes (its ignore rules).
pub const IGNORE_FILE_NAMES: [&str; 2] = [CGCIGNORE_FILE, ".gitignore"];

/// CGC's default `IGNORE_DIRS` (matched case-insensitively per
/// component), and its own per-repository state directory
/// (`.codegraphcontext`): what a sync writes there (its database, its
/// `.env`) is not source.
pub const IGNORE_DIRS: [&str; 14] = [
    ".codegraphcontext",
    "node_modules",
    "venv",
    ".venv",
    "env",
    ".env",
    "dist",
    "build",
    "target",
    "out",
    ".git",
    ".idea",
    ".vscode",
    "__pycache__",
];

/// CGC's `DEFAULT_IGNORE_PATTERNS`, always applied first.
pub const DEFAULT_IGNORE_PATTERNS: [&str; 22] = [
    "node_modules/",
    "venv/",
    ".venv/",
    "env/",
    ".env/",
    "dist/",
    "build/",
    "target/",
    "out/",
    "obj/",
    ".git/",
    "__pycache__/",
    "*.png",
    "*.jpg",
    "*.jpeg",
    "*.gif",
    "*.svg",
    "*.mp4",
    "*.mp3",
    "*.zip",
    "*.tar",
    "*.gz",
];

/// What `cgc index` writes into a missing `.cgcignore`.
pub const DEFAULT_CGCIGNORE: [&str; 22] = [
    "node_modules/",
    "venv/",
    ".venv/",
    "env/",
    ".env/",
    "dist/",
    "build/",
    "target/",
    "out/",
    "obj/",
    ".git/",
    ".idea/",
    ".vscode/",
    "__pycache__/",
    "*.pyc",
    "*.pyo",
    "*.egg-info/",
    ".tox/",
    ".mypy_cache/",
    ".pytest_cache/",
    "coverage/",
    ".next/",
];

// ---- What CGC prints --------------------------------------------------------

/// Part of `cgc watch`'s ready line
/// (`👀 Monitoring for file changes... (Press Ctrl+C to stop)`).
pub const WATCH_READY_MARKER: &str = "Monitoring for file changes";

/// Part of the line `cgc watch` prints when it took a SIGINT
/// (`🛑 Stopping watcher...`).
pub const WATCH_STOPPING_MARKER: &str = "Stopping watcher";

/// What CGC's watcher logs (at INFO, which the service's `sitecustomize`
/// lets through) once it has written one file's change to the graph:
/// `[INCREMENTAL] Done. Graph refresh for <path> complete! ✅`, the last
/// line of its per-file handler, after every write.
pub const WATCH_APPLIED_PREFIX: &str = "[INCREMENTAL] Done. Graph refresh for ";
/// Its end.
pub const WATCH_APPLIED_SUFFIX: &str = " complete!";
/// What it logs once it dropped the old path of a moved file:
/// `[WATCH] removed stale node for moved file: <path>`.
pub const WATCH_REMOVED_PREFIX: &str = "[WATCH] removed stale node for moved file: ";

/// What `cgc watch --sync-on-start .` prints as its start-up reconcile
/// begins on an indexed repository (`✓ Already indexed. Synchronizing
/// current files...`).
pub const RECONCILE_SYNCING_MARKER: &str = "Synchronizing current files";

/// What it prints instead on a repository it finds not indexed
/// (`⚠  Not indexed yet. Performing initial scan...`).
pub const RECONCILE_SCANNING_MARKER: &str = "Performing initial scan";

/// What `cgc index` prints when it skips an indexed repository without
/// applying anything (`Repository '.' is already indexed with 50 files.
/// Skipping.`): a line holding all of these.
pub const INDEX_SKIP_MARKERS: [&str; 2] = ["already indexed", "Skipping"];

/// The embedded-database lock errors a second CGC process prints on stdout.
pub const LOCK_ERROR_MARKERS: [&str; 2] = [
    "Could not set lock on file",
    "Another CGC process already has this embedded database open",
];

/// What a `cgc` prints when the graph's backend did not start and it went
/// on with another one: the driver's line for CGC's own fallback between
/// backends (`FELL_BACK_LINE` in the driver's `backend_pin.py`: CGC logs it
/// at WARNING, which its CLI does not print), CGC's WARNING for a `cgc`
/// whose logging prints it (`Database backend fallback: … Now using KùzuDB
/// at …`), and `_initialize_services`' `Falling back to KùzuDB for a
/// reliable experience...`. Such a run wrote another database than the
/// graph's.
pub const BACKEND_FALLBACK_MARKERS: [&str; 3] = [
    "CodeGraphContext fell back to another database backend",
    "Database backend fallback:",
    "Falling back to KùzuDB",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The Rust seam, the driver's seam and the pinned CGC name the same
    /// version: a CGC upgrade cannot leave one of them behind unseen.
    #[test]
    fn the_seams_and_the_pin_name_one_cgc_version() {
        let driver_seam = include_str!("../../cgc-fresh/driver/cgc_seam.py");
        let proven = driver_seam
            .lines()
            .find(|line| line.starts_with("PROVEN_CGC_VERSIONS"))
            .expect("the driver's seam lists the proven versions");
        assert!(proven.contains(&format!("\"{READ_FROM}\"")), "{proven}");
        let pin = include_str!("../../../tests/support/python/requirements-cgc.txt");
        assert!(
            pin.lines()
                .any(|line| line.starts_with(&format!("codegraphcontext=={READ_FROM}"))),
            "the test suite pins another CGC"
        );
    }

    #[test]
    fn the_watched_suffixes_are_the_parsers_and_no_generic_file() {
        for suffix in GENERIC_SUFFIXES {
            assert!(!PARSER_SUFFIXES.contains(&suffix), "{suffix}");
        }
        assert!(IGNORE_FILE_NAMES.contains(&CGCIGNORE_FILE));
    }
}
