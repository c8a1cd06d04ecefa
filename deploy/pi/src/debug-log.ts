/**
 * The bridge's own diagnostics. Pi owns the terminal, so the bridge never
 * prints; when `CGC_FRESH_BRIDGE_LOG` names a file, every decision
 * (connect, autostart, drop, ignored frame…) is appended there as one JSON
 * object per line. Writing is asynchronous and its failures are ignored.
 */

import { appendFile } from "node:fs";

import { envVar, type Env } from "./socket-path.js";

export type DebugFields = Record<string, unknown>;

/** Records one diagnostic event; never throws. */
export type DebugSink = (event: string, fields?: DebugFields) => void;

export function createDebugSink(env: Env, observer?: (event: string, fields: DebugFields) => void): DebugSink {
  const file = envVar(env, "CGC_FRESH_BRIDGE_LOG");
  return (event, fields = {}) => {
    try {
      observer?.(event, fields);
    } catch {
      // An observer's failure is its own business.
    }
    if (file === undefined) return;
    try {
      appendFile(file, `${JSON.stringify({ ts: Date.now(), event, ...fields })}\n`, () => undefined);
    } catch {
      // Diagnostics must never disturb the session.
    }
  };
}
