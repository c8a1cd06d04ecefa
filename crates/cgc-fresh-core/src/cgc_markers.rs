//! Recognising CGC's meaningful output lines. The lines themselves are
//! CGC's, in the one seam (`cgc_fresh_core::cgc_seam`, read from CGC
//! 0.6.13); here is how they are matched.
//!
//! Children run with `COLUMNS=1000`, but matching must still survive Rich's
//! 80-column wrapping (a console that ignores `COLUMNS`, or text joined from
//! several captured lines), so multi-word markers are compared with all
//! whitespace removed.

pub use crate::cgc_seam::{
    BACKEND_FALLBACK_MARKERS, LOCK_ERROR_MARKERS, RECONCILE_SCANNING_MARKER,
    RECONCILE_SYNCING_MARKER, WATCH_APPLIED_PREFIX, WATCH_APPLIED_SUFFIX, WATCH_READY_MARKER,
    WATCH_REMOVED_PREFIX, WATCH_STOPPING_MARKER,
};
use cgc_fresh_proto::SyncPhase;

/// The path CGC's watcher reports applied to the graph on this line, if
/// it is such a line (a Python log line: `<time> - INFO - <logger> - <msg>`,
/// never wrapped).
pub fn watch_applied_path(line: &str) -> Option<&str> {
    if let Some(at) = line.find(WATCH_APPLIED_PREFIX) {
        let rest = &line[at + WATCH_APPLIED_PREFIX.len()..];
        let end = rest.rfind(WATCH_APPLIED_SUFFIX)?;
        let path = &rest[..end];
        return (!path.is_empty()).then_some(path);
    }
    let at = line.find(WATCH_REMOVED_PREFIX)?;
    let path = line[at + WATCH_REMOVED_PREFIX.len()..].trim_end();
    (!path.is_empty()).then_some(path)
}

/// True when `text` says CGC went on with another backend than the
/// graph's, even if a line wrap split the message.
pub fn output_has_backend_fallback(text: &str) -> bool {
    BACKEND_FALLBACK_MARKERS
        .iter()
        .any(|marker| contains_ignoring_whitespace(text, marker))
}

/// True for the line `cgc watch` prints as it starts to stop.
pub fn is_watch_stopping_line(line: &str) -> bool {
    contains_ignoring_whitespace(line, WATCH_STOPPING_MARKER)
}

/// True for `cgc watch`'s ready line.
pub fn is_watch_ready_line(line: &str) -> bool {
    contains_ignoring_whitespace(line, WATCH_READY_MARKER)
}

/// The phase of CGC's reconcile a line of its output starts: the only
/// progress it gives when its output is not a terminal (no file counts).
pub fn reconcile_phase(line: &str) -> Option<SyncPhase> {
    if contains_ignoring_whitespace(line, RECONCILE_SYNCING_MARKER) {
        Some(SyncPhase::Reconciling)
    } else if contains_ignoring_whitespace(line, RECONCILE_SCANNING_MARKER) {
        Some(SyncPhase::Indexing)
    } else if is_watch_ready_line(line) || is_watch_stopping_line(line) {
        Some(SyncPhase::Stopping)
    } else {
        None
    }
}

/// True when `text` (one line or many joined by newlines) contains CGC's
/// embedded-database lock error, even if a line wrap split the message.
pub fn output_has_lock_error(text: &str) -> bool {
    LOCK_ERROR_MARKERS
        .iter()
        .any(|marker| contains_ignoring_whitespace(text, marker))
}

fn contains_ignoring_whitespace(haystack: &str, needle: &str) -> bool {
    let squeeze = |text: &str| -> String { text.chars().filter(|c| !c.is_whitespace()).collect() };
    squeeze(haystack).contains(&squeeze(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reconcile_phases_are_read_from_cgc_watch_output() {
        let cases = [
            (
                "✓ Already indexed. Synchronizing current files...",
                Some(SyncPhase::Reconciling),
            ),
            (
                "⚠  Not indexed yet. Performing initial scan...",
                Some(SyncPhase::Indexing),
            ),
            // Rich's 80-column wrap may split a marker.
            (
                "✓ Already indexed. Synchronizing current\nfiles...",
                Some(SyncPhase::Reconciling),
            ),
            (
                "👀 Monitoring for file changes... (Press Ctrl+C to stop)",
                Some(SyncPhase::Stopping),
            ),
            ("🛑 Stopping watcher...", Some(SyncPhase::Stopping)),
            ("✓ Initial scan complete", None),
            ("Using database: kuzudb", None),
        ];
        for (line, phase) in cases {
            assert_eq!(reconcile_phase(line), phase, "{line}");
        }
    }

    #[test]
    fn lock_error_found_on_one_line() {
        assert!(output_has_lock_error(
            "Database Connection Error: IO exception: Could not set lock on file : /w/.codegraphcontext/db/kuzudb"
        ));
    }

    #[test]
    fn lock_error_found_across_an_80_column_wrap() {
        let wrapped = "Database Connection Error: IO exception: Could not set lock on\n\
                       file : /home/u/.codegraphcontext/global/db/kuzudb\n";
        assert!(output_has_lock_error(wrapped));
        let wrapped_second = "Another CGC process already has this\r\n  embedded database open.";
        assert!(output_has_lock_error(wrapped_second));
        // A wrap that splits inside a word (very narrow console).
        assert!(output_has_lock_error("Could not set lo\nck on file : x"));
    }

    #[test]
    fn unrelated_errors_are_not_lock_errors() {
        assert!(!output_has_lock_error(
            "Database Configuration Error: Database set to 'neo4j' but it is not configured."
        ));
        assert!(!output_has_lock_error("Could not set\n\nthe lock"));
    }

    #[test]
    fn a_backend_fallback_is_recognised_as_cgc_prints_it() {
        // As CGC 0.6.13 printed them (the factory's warning, the CLI's line).
        assert!(output_has_backend_fallback(
            "Database backend fallback: FalkorDB Lite was requested but is not functional \
             (Timed out waiting for FalkorDB Lite to start. Last error: None). Now using \
             KùzuDB at /h/.codegraphcontext/global/db/kuzudb."
        ));
        assert!(output_has_backend_fallback(
            "Falling back to KùzuDB for a\n reliable experience..."
        ));
        // The driver's own line (`backend_pin.py`).
        assert!(output_has_backend_fallback(
            "cgc-fresh: CodeGraphContext fell back to another database backend: FalkorDB Lite \
             was requested but is not functional (FalkorDB Lite worker failed to start (Exit Code 1))."
        ));
        assert!(!output_has_backend_fallback(
            "Using FalkorDB Lite (default) at /h/.codegraphcontext/global/db/falkordb"
        ));
    }

    #[test]
    fn watch_applied_lines_name_their_path() {
        // As CGC 0.6.13 printed them, with ENABLE_APP_LOGS=INFO.
        assert_eq!(
            watch_applied_path("2026-12-01 20:26:55,734 - INFO - codegraphcontext.utils.debug_log - [INCREMENTAL] Done. Graph refresh for /w/pkg/alpha.py complete! ✅"),
            Some("/w/pkg/alpha.py")
        );
        assert_eq!(
            watch_applied_path("2026-12-01 20:26:55,425 - INFO - codegraphcontext.utils.debug_log - [WATCH] removed stale node for moved file: /w/pkg/old name.py"),
            Some("/w/pkg/old name.py")
        );
        assert_eq!(
            watch_applied_path("2026-12-01 20:26:55,427 - INFO - codegraphcontext.utils.debug_log - File change detected (incremental update): /w/pkg/alpha.py"),
            None
        );
        assert_eq!(
            watch_applied_path("Deleted file and its elements from graph: /w/a.py"),
            None
        );
    }

    #[test]
    fn watch_ready_line_is_recognised() {
        assert!(is_watch_ready_line(
            "👀 Monitoring for file changes... (Press Ctrl+C to stop)"
        ));
        assert!(!is_watch_ready_line(
            "✓ Already indexed. Watching for future changes only."
        ));
    }
}
