//! Recognising CGC's meaningful output lines (measured on CGC 0.6.13).
//!
//! Children run with `COLUMNS=1000`, but matching must still survive Rich's
//! 80-column wrapping (a console that ignores `COLUMNS`, or text joined from
//! several captured lines), so multi-word markers are compared with all
//! whitespace removed.

/// Part of `cgc watch`'s ready line
/// (`👀 Monitoring for file changes... (Press Ctrl+C to stop)`).
pub const WATCH_READY_MARKER: &str = "Monitoring for file changes";

/// The embedded-database lock errors a second CGC process prints on stdout.
pub const LOCK_ERROR_MARKERS: [&str; 2] = [
    "Could not set lock on file",
    "Another CGC process already has this embedded database open",
];

/// True for `cgc watch`'s ready line.
pub fn is_watch_ready_line(line: &str) -> bool {
    contains_ignoring_whitespace(line, WATCH_READY_MARKER)
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
    fn watch_ready_line_is_recognised() {
        assert!(is_watch_ready_line(
            "👀 Monitoring for file changes... (Press Ctrl+C to stop)"
        ));
        assert!(!is_watch_ready_line(
            "✓ Already indexed. Watching for future changes only."
        ));
    }
}
