/**
 * How freshness reads to a person: the short footer text and the longer
 * answer to `/cgc-fresh status`. Pure functions of a `state` frame and the
 * current time.
 */

import type { StateFrame, SyncProgress } from "./frames.js";

/** A duration as one short unit: `42s`, `3m`, `5h`, `2d`. */
export function shortDuration(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `${hours}h`;
  return `${Math.floor(hours / 24)}d`;
}

/**
 * A count with its thousands grouped by a plain space (`2 032`, `1 000 000`),
 * below 1000 as is. Plain, not a no-break space: the Rust CLI's
 * `status --line` writes the same bytes.
 */
export function groupThousands(n: number): string {
  const digits = String(n);
  if (!/^\d{4,}$/.test(digits)) return digits;
  const head = digits.length % 3;
  const groups = head > 0 ? [digits.slice(0, head)] : [];
  for (let i = head; i < digits.length; i += 3) groups.push(digits.slice(i, i + 3));
  return groups.join(" ");
}

/** A phase as a person reads it; an unknown one is shown as sent. */
function phaseName(progress: SyncProgress): string {
  return progress.phase.replace(/_/g, " ");
}

/** `340/2 032 files`, or `undefined` when the phase counts no files. */
function fileCounts(progress: SyncProgress): string | undefined {
  if (progress.done === undefined || progress.total === undefined) return undefined;
  return `${groupThousands(progress.done)}/${groupThousands(progress.total)} files`;
}

/**
 * A running sync's progress for the footer: `syncing 340/2 032 files
 * (parsing)`, or `syncing (reconciling, 14s)` for a phase without counts,
 * where the elapsed time is the only sign that the sync still moves.
 */
export function progressText(progress: SyncProgress, nowMs: number): string {
  const counts = fileCounts(progress);
  return counts !== undefined
    ? `syncing ${counts} (${phaseName(progress)})`
    : `syncing (${phaseName(progress)}, ${shortDuration(nowMs - progress.since)})`;
}

/**
 * The progress worth showing: only while the frame says a sync runs, so a
 * stray `progress` beside `syncing: false` cannot outlive its sync.
 */
function runningProgress(state: StateFrame): SyncProgress | undefined {
  return state.syncing === true ? state.progress : undefined;
}

/** The one-line footer text, e.g. `graph: possibly stale since 3m`. */
export function footerText(state: StateFrame, nowMs: number): string {
  const progress = runningProgress(state);
  if (progress !== undefined) {
    // `syncing…` would only repeat what the progress text says.
    return state.status === "syncing"
      ? `graph: ${progressText(progress, nowMs)}`
      : `graph: ${statusPhrase(state, nowMs)}, ${progressText(progress, nowMs)}`;
  }
  const base = statusPhrase(state, nowMs);
  const alsoSyncing = state.syncing === true && state.status !== "syncing";
  return alsoSyncing ? `graph: ${base}, syncing…` : `graph: ${base}`;
}

function statusPhrase(state: StateFrame, nowMs: number): string {
  switch (state.status) {
    case "fresh":
      return "fresh";
    case "possibly_stale":
      return state.stale_since !== undefined
        ? `possibly stale since ${shortDuration(nowMs - state.stale_since)}`
        : "possibly stale";
    case "syncing":
      return "syncing…";
    case "skipped_busy":
      return "possibly stale (sync skipped: database busy)";
    case "not_verified":
      return "not verified (watcher failed)";
    case "unknown":
      return "unknown";
    default:
      return state.status.replace(/_/g, " ");
  }
}

function clock(ms: number): string {
  return new Date(ms).toLocaleTimeString();
}

/** The multi-line answer to `/cgc-fresh status`. */
export function statusReport(state: StateFrame, nowMs: number): string {
  const lines = [`cgc-fresh: ${footerText(state, nowMs)}`];
  const progress = runningProgress(state);
  if (progress !== undefined) {
    const counts = fileCounts(progress);
    const elapsed = shortDuration(nowMs - progress.since);
    lines.push(
      counts !== undefined
        ? `progress: ${phaseName(progress)} ${counts}, for ${elapsed}`
        : `progress: ${phaseName(progress)}, for ${elapsed}`,
    );
  }
  if (state.stale_since !== undefined) {
    lines.push(`first unsynced edit: ${clock(state.stale_since)} (${shortDuration(nowMs - state.stale_since)} ago)`);
  }
  lines.push(
    state.last_synced_at !== undefined
      ? `last sync: ${clock(state.last_synced_at)} (${shortDuration(nowMs - state.last_synced_at)} ago)`
      : "last sync: none since the service started",
  );
  if (state.last_error !== undefined) {
    lines.push(`last error: ${state.last_error}`);
  }
  if (state.watcher !== undefined) {
    const pid = state.watcher.pid !== undefined ? ` (pid ${state.watcher.pid})` : "";
    lines.push(`watcher: ${state.watcher.mode ?? "?"}, ${state.watcher.state ?? "?"}${pid}`);
  }
  if (state.backend?.kind !== undefined) {
    lines.push(`backend: ${state.backend.kind}${state.backend.source ? ` (${state.backend.source})` : ""}`);
  }
  if (state.detail !== undefined) {
    lines.push(state.detail);
  }
  return lines.join("\n");
}
