/**
 * cgc-fresh bridge for Pi (`@mariozechner/pi-coding-agent` ≥ 0.73).
 *
 * Pi loads this module and calls its default export with an `ExtensionAPI`
 * (`ExtensionFactory = (pi: ExtensionAPI) => void | Promise<void>` in
 * `dist/core/extensions/types.d.ts`). The bridge reports the session's
 * tool activity (tool names and paths, never contents) to the workspace's
 * cgc-fresh service over its Unix socket, and shows the service's answer to
 * the person: a footer status (`graph: fresh`, `graph: possibly stale since
 * 3m`…), one-time notices, and a `/cgc-fresh status|sync` command. Nothing
 * ever reaches the agent's prompt or context.
 *
 * Instances and connections: Pi re-runs the factory with a new API object
 * on `/new`, `/resume`, `/fork` and `/reload` (after `session_shutdown` on
 * the old one). Every API object gets its own bridge, with a new `instance`
 * id and its own connection; the old bridge closes its connection in
 * `session_shutdown`. No module-level connection is shared, because Pi
 * loads extensions through jiti without a module cache, so module state
 * does not reliably survive a reload anyway. Calling the factory twice with
 * the SAME API object registers nothing the second time: a process-wide
 * WeakSet (kept on `globalThis`, so it also spans re-evaluated copies of
 * this module) remembers the API objects already served.
 *
 * Fail-open: the factory and every handler swallow their errors; handlers
 * never wait on the socket (only `session_shutdown` waits, bounded, for its
 * last frame to leave); a missing or dead service shows nothing.
 */

import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

import { Bridge, type BridgeHandle, type BridgeSettings } from "./bridge.js";
import { createDebugSink, type DebugFields } from "./debug-log.js";
import type { Env } from "./socket-path.js";

export { STATUS_KEY, COMMAND_NAME, type BridgeHandle } from "./bridge.js";
export { workspaceId, socketPathFor, canonicalWorkspace } from "./socket-path.js";
export { pathsFromToolInput } from "./tool-paths.js";
export { footerText, statusReport, shortDuration } from "./status-text.js";

/** Tuning and test seams; every field has a production default. */
export interface BridgeOptions {
  /** The environment to read (`CGC_FRESH_*`, `XDG_RUNTIME_DIR`…); default `process.env` at factory time. */
  env?: Env;
  /** Unix milliseconds now; default `Date.now`. */
  now?: () => number;
  /** Waits between connect attempts of one cycle (default ≈3 s in total). */
  retryDelaysMs?: readonly number[];
  /** After a failed connect cycle, events only queue for this long (default 15 s). */
  cooldownMs?: number;
  connectTimeoutMs?: number;
  /** How long `/cgc-fresh status|sync` waits for the service (default 3 s). */
  requestTimeoutMs?: number;
  /** How long `session_shutdown` waits for its last frame to leave (default 500 ms). */
  shutdownFlushMs?: number;
  /** Frames kept while disconnected, oldest dropped first (default 1000). */
  maxQueuedFrames?: number;
  /** Sees every diagnostic event (also written to `$CGC_FRESH_BRIDGE_LOG`). */
  onDebug?: (event: string, fields: DebugFields) => void;
  /** Sees each bridge as it is created (diagnostics and tests). */
  onBridge?: (bridge: BridgeHandle) => void;
}

const DEFAULT_RETRY_DELAYS_MS = [50, 100, 200, 300, 500, 800, 1000] as const;

const SERVED_APIS_KEY = Symbol.for("cgc-fresh.pi-bridge.served-apis");

/** The process-wide set of API objects a bridge is registered on. */
function servedApis(): WeakSet<object> {
  const holder = globalThis as unknown as Record<symbol, unknown>;
  const existing = holder[SERVED_APIS_KEY];
  if (existing instanceof WeakSet) return existing as WeakSet<object>;
  const created = new WeakSet<object>();
  holder[SERVED_APIS_KEY] = created;
  return created;
}

function settingsFrom(options: BridgeOptions): BridgeSettings {
  const env = options.env ?? process.env;
  return {
    env,
    now: options.now ?? Date.now,
    retryDelaysMs: options.retryDelaysMs ?? DEFAULT_RETRY_DELAYS_MS,
    cooldownMs: options.cooldownMs ?? 15_000,
    connectTimeoutMs: options.connectTimeoutMs ?? 1_000,
    requestTimeoutMs: options.requestTimeoutMs ?? 3_000,
    shutdownFlushMs: options.shutdownFlushMs ?? 500,
    maxQueuedFrames: options.maxQueuedFrames ?? 1_000,
    debug: createDebugSink(env, options.onDebug),
  };
}

/** Builds the extension factory Pi calls; `options` are for tests and tuning. */
export function createCgcFreshExtension(options: BridgeOptions = {}): (pi: ExtensionAPI) => void {
  return function cgcFreshBridge(pi: ExtensionAPI): void {
    try {
      if ((typeof pi !== "object" && typeof pi !== "function") || pi === null) return;
      const served = servedApis();
      if (served.has(pi)) return;
      served.add(pi);
      const bridge = new Bridge(settingsFrom(options));
      bridge.register(pi);
      options.onBridge?.(bridge.handle());
    } catch {
      // The bridge is optional: a failure here must not stop Pi loading.
    }
  };
}

/** The factory Pi loads. */
export default createCgcFreshExtension();
