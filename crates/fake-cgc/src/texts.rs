//! The texts the real `cgc` 0.6.13 prints, as measured, so that the built-in
//! behaviours and scenarios (through [`crate::scenario::KnownText`]) print
//! exactly what a parser in the service will meet in production.
//!
//! Which stream each text goes to matters: the real CLI has two consoles,
//! config/banner/doctor/`--version` on stderr, results, errors and watch
//! banners on stdout.

/// The version the fake claims to be.
pub const CGC_VERSION: &str = "0.6.13";

/// `cgc --version` (stderr): `CodeGraphContext <version>`.
pub fn version_line() -> String {
    format!("CodeGraphContext {CGC_VERSION}")
}

/// The watch ready line (stdout). The real CLI prints it twice.
pub const WATCH_READY: &str = "👀 Monitoring for file changes... (Press Ctrl+C to stop)";

/// Watch on an indexed repository without `--sync-on-start` (stdout).
pub const WATCH_ALREADY_INDEXED: &str = "✓ Already indexed. Watching for future changes only.";

/// Watch on an indexed repository with `--sync-on-start` (stdout).
pub const WATCH_ALREADY_INDEXED_SYNCING: &str = "✓ Already indexed. Synchronizing current files...";

/// Watch on a repository that is not indexed yet (stdout), before the scan.
pub const WATCH_NOT_INDEXED: &str = "⚠  Not indexed yet. Performing initial scan...";

/// Watch after the initial scan of a repository that was not indexed (stdout).
pub const WATCH_INITIAL_SCAN_COMPLETE: &str = "✓ Initial scan complete";

/// First line of the graceful SIGINT stop of `cgc watch` (stdout).
pub const WATCH_STOPPING: &str = "🛑 Stopping watcher...";

/// Last line of the graceful SIGINT stop of `cgc watch` (stdout).
pub const WATCH_STOPPED: &str = "✓ Watcher stopped.";

/// Second line of the embedded-database lock error (stdout).
pub const LOCK_ERROR_HINT: &str = "Another CGC process already has this embedded database open.";

/// First line of the embedded-database lock error (stdout), for `path`.
pub fn lock_error_line(path: &str) -> String {
    format!("Database Connection Error: IO exception: Could not set lock on file : {path}")
}

/// `cgc index` on a repository that is fully indexed (stdout).
pub fn already_indexed_line(repo: &str, files: u64) -> String {
    format!("Repository '{repo}' is already indexed with {files} files. Skipping.")
}

/// `cgc index` on a repository that gained files (stdout); a full
/// re-index follows.
pub fn partially_indexed_line(repo: &str, indexed: u64, total: u64) -> String {
    format!("Repository '{repo}' has only {indexed} of {total} files indexed. Continuing.")
}

/// The backend line of `cgc doctor` (stderr), three leading spaces included.
pub fn default_database_line(database: &str, source: &str) -> String {
    format!("   Default database: {database} (source: {source})")
}

/// Index, watch or update on a path that does not exist (stdout, exit 1).
pub fn path_missing_line(path: &str) -> String {
    format!("Error: Path does not exist: {path}")
}

/// Watch with `neo4j` selected but not configured (stdout, exit 1).
pub const NEO4J_NOT_CONFIGURED: &str =
    "Database Configuration Error: Database set to 'neo4j' but it is not configured.";

/// Success summary of `cgc index` / `cgc update` (stdout).
pub fn index_finished_line(path: &str) -> String {
    format!("Successfully finished indexing: {path}")
}

/// The usage banner a usage error starts with (stderr).
pub const USAGE_ROOT: &str = "Usage: cgc [OPTIONS] COMMAND [ARGS]...";

/// The hint after the usage banner (stderr).
pub const USAGE_HINT: &str = "Try 'cgc --help' for help.";
