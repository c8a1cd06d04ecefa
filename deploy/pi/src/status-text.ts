/**
 * How freshness reads to a person: the short footer text and the longer
 * answer to `/cgc-fresh status`. Pure functions of a `state` frame and the
 * current time.
 */

import type { StateFrame } from "./frames.js";

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

/** The one-line footer text, e.g. `graph: possibly stale since 3m`. */
export function footerText(state: StateFrame, nowMs: number): string {
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
