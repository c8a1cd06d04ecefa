//! Structured logs: one JSON object per line on stderr.
//!
//! The level filter comes from `CGC_FRESH_LOG`, else `RUST_LOG`, else
//! `info`. Every event carries its own fields flat at the top level so
//! `jq` works without unwrapping; the service's root span adds
//! `span.workspace` to every event it emits.

use tracing_subscriber::EnvFilter;

/// Installs the JSON subscriber for the whole process. Safe to call once;
/// a second call is ignored.
pub fn init() {
    let filter = std::env::var("CGC_FRESH_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "info".to_string());
    let filter = EnvFilter::try_new(&filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
