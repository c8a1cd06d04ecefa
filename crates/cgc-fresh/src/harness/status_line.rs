//! `cgc-fresh status --line`: one short line for a harness's status bar
//! (Claude Code's `statusLine`), in the Pi bridge's words
//! (`deploy/pi/src/status-text.ts`): `graph: fresh`, `graph: possibly stale
//! since 2m`, `graph: syncing…`, `graph: unknown`.
//!
//! Fast and silent: when no service answers within a small budget, or
//! anything else goes wrong, nothing is printed and the exit code is 0 (a
//! status bar shows nothing rather than an old claim).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cgc_fresh_proto::{
    decode_server_frame, encode_client_frame, ClientFrame, Envelope, FreshnessStatus, Hello,
    RequestId, ServerFrame, StateFrame, SyncProgress, PROTOCOL_VERSION,
};
use serde_json::Value;

/// The budget for connecting, asking and reading the answer.
pub const BUDGET: Duration = Duration::from_millis(300);

/// A duration as one short unit: `42s`, `3m`, `5h`, `2d`.
pub fn short_duration(ms: u64) -> String {
    let seconds = ms / 1000;
    if seconds < 60 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 60 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 48 {
        return format!("{hours}h");
    }
    format!("{}d", hours / 24)
}

/// `n` with its digits grouped by three with a plain space from 1 000 on:
/// `999`, `2 032`, `1 000 000`.
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(' ');
        }
        grouped.push(digit);
    }
    grouped
}

/// A long sync's progress in words: `syncing 340/2 032 files (parsing)`,
/// or, for a phase that counts nothing, `syncing (reconciling, 14s)` (the
/// time since the sync started).
pub fn progress_text(progress: &SyncProgress, now_ms: u64) -> String {
    let phase = progress.phase.as_str();
    match (progress.done, progress.total) {
        (Some(done), Some(total)) => format!(
            "syncing {}/{} files ({phase})",
            group_thousands(done),
            group_thousands(total)
        ),
        _ => format!(
            "syncing ({phase}, {})",
            short_duration(now_ms.saturating_sub(progress.since))
        ),
    }
}

/// The one-line text, e.g. `graph: possibly stale since 3m`, or, while a
/// long sync reports its progress, `graph: syncing 340/2 032 files
/// (parsing)`.
pub fn line_text(state: &StateFrame, now_ms: u64) -> String {
    let base = status_phrase(state, now_ms);
    let progress = state
        .progress
        .as_ref()
        .filter(|_| state.syncing)
        .map(|progress| progress_text(progress, now_ms));
    match progress {
        Some(progress) if state.status == FreshnessStatus::Syncing => {
            format!("graph: {progress}")
        }
        Some(progress) => format!("graph: {base}, {progress}"),
        None if state.syncing && state.status != FreshnessStatus::Syncing => {
            format!("graph: {base}, syncing…")
        }
        None => format!("graph: {base}"),
    }
}

fn status_phrase(state: &StateFrame, now_ms: u64) -> String {
    match state.status {
        FreshnessStatus::Fresh => "fresh".into(),
        FreshnessStatus::PossiblyStale => match state.stale_since {
            Some(since) => format!(
                "possibly stale since {}",
                short_duration(now_ms.saturating_sub(since))
            ),
            None => "possibly stale".into(),
        },
        FreshnessStatus::Syncing => "syncing…".into(),
        FreshnessStatus::SkippedBusy => "possibly stale (sync skipped: database busy)".into(),
        FreshnessStatus::NotVerified => "not verified (watcher failed)".into(),
        FreshnessStatus::Unknown => "unknown".into(),
    }
}

/// The workspace a status line is for: Claude Code passes a JSON object on
/// standard input (`workspace.project_dir`, `workspace.current_dir`,
/// `cwd`); else `CLAUDE_PROJECT_DIR`; else `fallback` (`--workspace`).
pub fn workspace_from(stdin: Option<&[u8]>, project_dir: Option<&str>, fallback: &Path) -> PathBuf {
    let from_payload = stdin
        .and_then(|bytes| serde_json::from_slice::<Value>(bytes).ok())
        .and_then(|payload| {
            [
                payload.pointer("/workspace/project_dir"),
                payload.pointer("/workspace/current_dir"),
                payload.get("cwd"),
            ]
            .into_iter()
            .flatten()
            .find_map(|v| v.as_str().filter(|s| !s.is_empty()).map(PathBuf::from))
        });
    from_payload
        .or_else(|| project_dir.filter(|s| !s.is_empty()).map(PathBuf::from))
        .unwrap_or_else(|| fallback.to_path_buf())
}

/// Asks the service at `socket` for its state; `None` on any failure.
pub fn fetch_state(socket: &Path, budget: Duration) -> Option<StateFrame> {
    let deadline = Instant::now() + budget;
    let mut stream = UnixStream::connect(socket).ok()?;
    let mut bytes = encode_client_frame(&Envelope::with_id(
        Some(RequestId::Number(1)),
        ClientFrame::Hello(Hello {
            client: "cgc-fresh-cli".into(),
            instance: format!("status-line-{}", std::process::id()),
            protocol: PROTOCOL_VERSION,
        }),
    ));
    bytes.extend(encode_client_frame(&Envelope::with_id(
        Some(RequestId::Number(2)),
        ClientFrame::Status,
    )));
    stream.set_write_timeout(Some(budget)).ok()?;
    stream.write_all(&bytes).ok()?;
    let mut reader = BufReader::new(stream);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        reader.get_ref().set_read_timeout(Some(left)).ok()?;
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let Ok(envelope) = decode_server_frame(line.trim_end().as_bytes()) else {
            continue;
        };
        if envelope.id == Some(RequestId::Number(2)) {
            return match envelope.frame {
                ServerFrame::State(state) => Some(state),
                _ => None,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(status: FreshnessStatus) -> StateFrame {
        StateFrame {
            workspace: "/w".into(),
            status,
            last_synced_at: None,
            stale_since: None,
            last_error: None,
            edit_epoch: 0,
            syncing: false,
            watcher: None,
            backend: None,
            detail: None,
            warnings: Vec::new(),
            progress: None,
        }
    }

    #[test]
    fn short_durations_use_one_unit() {
        assert_eq!(short_duration(0), "0s");
        assert_eq!(short_duration(59_999), "59s");
        assert_eq!(short_duration(60_000), "1m");
        assert_eq!(short_duration(3_599_999), "59m");
        assert_eq!(short_duration(3_600_000), "1h");
        assert_eq!(short_duration(47 * 3_600_000), "47h");
        assert_eq!(short_duration(48 * 3_600_000), "2d");
    }

    #[test]
    fn each_status_reads_as_the_bridge_footer_does() {
        let now = 1_000_000;
        assert_eq!(
            line_text(&state(FreshnessStatus::Fresh), now),
            "graph: fresh"
        );
        assert_eq!(
            line_text(&state(FreshnessStatus::Syncing), now),
            "graph: syncing…"
        );
        assert_eq!(
            line_text(&state(FreshnessStatus::Unknown), now),
            "graph: unknown"
        );
        assert_eq!(
            line_text(&state(FreshnessStatus::SkippedBusy), now),
            "graph: possibly stale (sync skipped: database busy)"
        );
        assert_eq!(
            line_text(&state(FreshnessStatus::NotVerified), now),
            "graph: not verified (watcher failed)"
        );
        assert_eq!(
            line_text(&state(FreshnessStatus::PossiblyStale), now),
            "graph: possibly stale"
        );
        let mut stale = state(FreshnessStatus::PossiblyStale);
        stale.stale_since = Some(now - 125_000);
        assert_eq!(line_text(&stale, now), "graph: possibly stale since 2m");
    }

    #[test]
    fn a_running_sync_is_added_unless_the_status_says_it() {
        let mut stale = state(FreshnessStatus::PossiblyStale);
        stale.stale_since = Some(0);
        stale.syncing = true;
        assert_eq!(
            line_text(&stale, 42_000),
            "graph: possibly stale since 42s, syncing…"
        );
        let mut syncing = state(FreshnessStatus::Syncing);
        syncing.syncing = true;
        assert_eq!(line_text(&syncing, 0), "graph: syncing…");
    }

    fn progress(done_total: Option<(u64, u64)>, since: u64) -> SyncProgress {
        SyncProgress {
            phase: cgc_fresh_proto::SyncPhase::Parsing,
            done: done_total.map(|(d, _)| d),
            total: done_total.map(|(_, t)| t),
            since,
        }
    }

    #[test]
    fn thousands_are_grouped_with_a_plain_space() {
        for (n, text) in [
            (0, "0"),
            (7, "7"),
            (999, "999"),
            (1_000, "1 000"),
            (2_032, "2 032"),
            (12_345, "12 345"),
            (123_456, "123 456"),
            (1_000_000, "1 000 000"),
        ] {
            assert_eq!(group_thousands(n), text);
        }
    }

    #[test]
    fn a_long_sync_shows_its_counts_or_its_phase_and_time() {
        let mut syncing = state(FreshnessStatus::Syncing);
        syncing.syncing = true;
        syncing.progress = Some(progress(Some((340, 2_032)), 0));
        assert_eq!(
            line_text(&syncing, 9_000),
            "graph: syncing 340/2 032 files (parsing)"
        );
        let mut reconciling = progress(None, 1_000);
        reconciling.phase = cgc_fresh_proto::SyncPhase::Reconciling;
        syncing.progress = Some(reconciling);
        assert_eq!(
            line_text(&syncing, 15_500),
            "graph: syncing (reconciling, 14s)"
        );
        let mut stale = state(FreshnessStatus::PossiblyStale);
        stale.stale_since = Some(0);
        stale.syncing = true;
        stale.progress = Some(progress(Some((3, 4)), 0));
        assert_eq!(
            line_text(&stale, 180_000),
            "graph: possibly stale since 3m, syncing 3/4 files (parsing)"
        );
    }

    #[test]
    fn progress_is_not_shown_when_no_sync_runs() {
        let mut fresh = state(FreshnessStatus::Fresh);
        fresh.progress = Some(progress(Some((3, 4)), 0));
        assert_eq!(line_text(&fresh, 1_000), "graph: fresh");
    }

    #[test]
    fn a_stale_since_in_the_future_reads_as_zero() {
        let mut stale = state(FreshnessStatus::PossiblyStale);
        stale.stale_since = Some(5_000);
        assert_eq!(line_text(&stale, 1_000), "graph: possibly stale since 0s");
    }

    #[test]
    fn the_workspace_comes_from_the_payload_then_the_environment_then_the_flag() {
        let fallback = Path::new(".");
        let payload = br#"{"cwd":"/c","workspace":{"current_dir":"/cur","project_dir":"/proj"}}"#;
        assert_eq!(
            workspace_from(Some(payload), Some("/env"), fallback),
            PathBuf::from("/proj")
        );
        assert_eq!(
            workspace_from(Some(br#"{"cwd":"/c"}"#), Some("/env"), fallback),
            PathBuf::from("/c")
        );
        assert_eq!(
            workspace_from(Some(b"not json"), Some("/env"), fallback),
            PathBuf::from("/env")
        );
        assert_eq!(workspace_from(None, None, fallback), PathBuf::from("."));
    }

    #[test]
    fn no_service_means_no_state() {
        let dir = tempfile::tempdir().unwrap();
        assert!(fetch_state(&dir.path().join("none.sock"), BUDGET).is_none());
    }
}
