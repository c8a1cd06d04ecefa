//! Structured logs: one JSON object per line on stderr.
//!
//! The level filter comes from `CGC_FRESH_LOG`, else `RUST_LOG`, else
//! `info`. Every event carries its own fields flat at the top level so
//! `jq` works without unwrapping; the service's root span adds
//! `span.workspace` to every event it emits.
//!
//! Every line names the component that wrote it: the service's own events
//! carry a `component` field (the actor's name); a record of another crate
//! (its `tracing` events, or `log` records such as `globset`'s, which
//! arrive through `tracing-log`) gets `component` = that crate's name, the
//! first segment of its target (`ComponentNamed`). `tracing-subscriber`
//! has no option that adds a field to some events only, so the JSON
//! formatter's line is written into a buffer and the field put in front.

use std::fmt;

use tracing::{Event, Subscriber};
use tracing_log::NormalizeEvent;
use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// The field every line carries.
pub const COMPONENT_FIELD: &str = "component";

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
        .map_event_format(ComponentNamed)
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// The component a record of another crate is named by: its target's
/// first segment (`globset::glob` → `globset`).
pub fn component_of_target(target: &str) -> &str {
    target.split("::").next().unwrap_or(target)
}

/// Puts `"component": <crate>` in front of a line whose event has no
/// `component` field of its own (see the module doc).
pub struct ComponentNamed<F>(pub F);

impl<S, N, F> FormatEvent<S, N> for ComponentNamed<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        let named = event.metadata().fields().field(COMPONENT_FIELD).is_some();
        match line.strip_prefix('{') {
            Some(rest) if !named => {
                let normalized = event.normalized_metadata();
                let target = normalized
                    .as_ref()
                    .map_or(event.metadata().target(), |meta| meta.target());
                let component =
                    serde_json::to_string(component_of_target(target)).map_err(|_| fmt::Error)?;
                write!(writer, "{{\"{COMPONENT_FIELD}\":{component},{rest}")
            }
            _ => writer.write_str(&line),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A writer that keeps what the subscriber wrote.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| io::ErrorKind::Other)?
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn lines_of(emit: impl FnOnce()) -> Vec<serde_json::Value> {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_target(false)
            .map_event_format(ComponentNamed)
            .with_env_filter(EnvFilter::new("debug"))
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        let bytes = captured.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(|line| serde_json::from_str(line).expect("one JSON object a line"))
            .collect()
    }

    #[test]
    fn every_line_names_its_component_other_crates_included() {
        let lines = lines_of(|| {
            tracing::info!(
                component = "sync_runner",
                event = "sync_starting",
                flight = 3
            );
            tracing::debug!(target: "globset::glob", "built glob set; 3 literals");
            tracing::warn!(target: "actix_rt::system", event = "stopping");
        });
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0]["component"], "sync_runner");
        assert_eq!(lines[0]["event"], "sync_starting");
        assert_eq!(lines[0]["flight"], 3);
        assert_eq!(lines[1]["component"], "globset");
        assert_eq!(lines[1]["message"], "built glob set; 3 literals");
        assert_eq!(lines[2]["component"], "actix_rt");
        for line in &lines {
            let object = line.as_object().expect("an object");
            assert_eq!(
                object.keys().filter(|k| *k == "component").count(),
                1,
                "one component field: {line}"
            );
        }
    }

    #[test]
    fn a_target_names_its_crate() {
        assert_eq!(component_of_target("globset::glob"), "globset");
        assert_eq!(component_of_target("log"), "log");
        assert_eq!(component_of_target(""), "");
    }
}
