/**
 * The wire frames the bridge exchanges with the service (protocol 1).
 *
 * The authority is the Rust crate `cgc-fresh-proto` (`client.rs`,
 * `server.rs`): JSON lines over a Unix socket, every frame an object with a
 * string `type`; a request may carry an `id` that its reply echoes; events
 * sent without an `id` are not answered; unknown fields are ignored; optional
 * fields are omitted rather than sent as `null`.
 *
 * The harness sends tool names and paths only, never file contents.
 */

/** The protocol version sent in `hello`. */
export const PROTOCOL_VERSION = 1;

/** What the bridge calls itself in `hello`. */
export const CLIENT_NAME = "pi-bridge";

/** The service's default limit on one line (64 KiB), before its `\n`. */
export const MAX_LINE_BYTES = 64 * 1024;

export type RequestId = number | string;

export type ClientFrame =
  | { type: "hello"; client: string; instance: string; protocol: number }
  | { type: "subscribe" }
  | { type: "session_start"; session: string; reason: string }
  | { type: "tool_call"; session: string; tool: string; paths: string[] }
  | { type: "tool_result"; session: string; tool: string; ok: boolean }
  | { type: "session_shutdown"; session: string; reason?: string }
  | { type: "status"; id: RequestId }
  | { type: "sync"; id: RequestId };

/** Watcher facts inside a `state` frame. */
export interface WatcherFacts {
  mode?: string;
  state?: string;
  pid?: number;
  since?: number;
}

/**
 * `state.progress`: how far a running sync has got. The service sends it only
 * while a sync has run for longer than about 2 s, and omits it otherwise.
 */
export interface SyncProgress {
  /** `starting`, `parsing`, `reading`, …; an unknown phase is shown as sent. */
  phase: string;
  /** Files done and files in all; the decoder keeps both or neither. */
  done?: number;
  total?: number;
  /** When the sync started (unix ms). */
  since: number;
}

/** `state{…}`: the workspace's freshness. Times are unix milliseconds. */
export interface StateFrame {
  type: "state";
  id?: RequestId;
  workspace?: string;
  status: string;
  last_synced_at?: number;
  stale_since?: number;
  last_error?: string;
  edit_epoch?: number;
  syncing?: boolean;
  watcher?: WatcherFacts;
  backend?: { kind?: string; source?: string };
  detail?: string;
  progress?: SyncProgress;
}

/** `notice{…}`: a message for the person at the harness, never the agent. */
export interface NoticeFrame {
  type: "notice";
  id?: RequestId;
  session?: string;
  condition?: string;
  level: "info" | "warning" | "error";
  text: string;
  audience?: string;
}

export interface WelcomeFrame {
  type: "welcome";
  id?: RequestId;
  protocol?: number;
  service_version?: string;
  pid?: number;
  workspace?: string;
}

export interface AckFrame {
  type: "ack";
  id?: RequestId;
}

export interface ErrorFrame {
  type: "error";
  id?: RequestId;
  code: string;
  message: string;
  field?: string;
}

/** A frame the bridge understands; anything else is ignored. */
export type ServerFrame = StateFrame | NoticeFrame | WelcomeFrame | AckFrame | ErrorFrame;

/** Encodes one frame as a line. */
export function encodeFrame(frame: ClientFrame): string {
  return `${JSON.stringify(frame)}\n`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function optionalNumber(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

function optionalString(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

/** A file count: a non-negative integer, anything else counts as absent. */
function fileCount(value: unknown): number | undefined {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

/**
 * `state.progress`, or `undefined` when it is absent or malformed: progress
 * is decoration, so a bad one is dropped rather than the whole frame.
 */
function syncProgress(value: unknown): SyncProgress | undefined {
  if (!isObject(value) || typeof value.phase !== "string" || value.phase === "") return undefined;
  const since = optionalNumber(value.since);
  if (since === undefined) return undefined;
  const done = fileCount(value.done);
  const total = fileCount(value.total);
  // One count without the other says nothing about how far along the sync
  // is, so both go (the Rust CLI's `status --line` does the same).
  return done !== undefined && total !== undefined
    ? { phase: value.phase, done, total, since }
    : { phase: value.phase, since };
}

function requestId(value: unknown): RequestId | undefined {
  return typeof value === "number" || typeof value === "string" ? value : undefined;
}

const NOTICE_LEVELS = new Set(["info", "warning", "error"]);

/**
 * Decodes one line from the service. Returns `undefined` for anything that
 * is not a well-formed frame of a type the bridge uses: a misbehaving peer
 * must never make the bridge throw.
 */
export function decodeServerFrame(line: string): ServerFrame | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (!isObject(value) || typeof value.type !== "string") {
    return undefined;
  }
  const id = requestId(value.id);
  switch (value.type) {
    case "state": {
      if (typeof value.status !== "string") return undefined;
      const watcher = isObject(value.watcher)
        ? {
            mode: optionalString(value.watcher.mode),
            state: optionalString(value.watcher.state),
            pid: optionalNumber(value.watcher.pid),
            since: optionalNumber(value.watcher.since),
          }
        : undefined;
      const backend = isObject(value.backend)
        ? { kind: optionalString(value.backend.kind), source: optionalString(value.backend.source) }
        : undefined;
      return {
        type: "state",
        id,
        workspace: optionalString(value.workspace),
        status: value.status,
        last_synced_at: optionalNumber(value.last_synced_at),
        stale_since: optionalNumber(value.stale_since),
        last_error: optionalString(value.last_error),
        edit_epoch: optionalNumber(value.edit_epoch),
        syncing: typeof value.syncing === "boolean" ? value.syncing : undefined,
        watcher,
        backend,
        detail: optionalString(value.detail),
        progress: syncProgress(value.progress),
      };
    }
    case "notice": {
      if (typeof value.text !== "string") return undefined;
      const level = typeof value.level === "string" && NOTICE_LEVELS.has(value.level) ? value.level : "info";
      return {
        type: "notice",
        id,
        session: optionalString(value.session),
        condition: optionalString(value.condition),
        level: level as NoticeFrame["level"],
        text: value.text,
        audience: optionalString(value.audience),
      };
    }
    case "welcome":
      return {
        type: "welcome",
        id,
        protocol: optionalNumber(value.protocol),
        service_version: optionalString(value.service_version),
        pid: optionalNumber(value.pid),
        workspace: optionalString(value.workspace),
      };
    case "ack":
      return { type: "ack", id };
    case "error":
      return {
        type: "error",
        id,
        code: optionalString(value.code) ?? "unknown",
        message: optionalString(value.message) ?? "",
        field: optionalString(value.field),
      };
    default:
      return undefined;
  }
}
