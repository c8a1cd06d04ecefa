/**
 * Where the cgc-fresh service of a workspace listens.
 *
 * This is the same rule the Rust side uses (crate `cgc-fresh`, `paths.rs`):
 * every client finds the socket from the workspace directory alone.
 *
 * - `CGC_FRESH_SOCKET`, when set, names the socket outright;
 * - else `$XDG_RUNTIME_DIR/cgc-fresh/<id>.sock`;
 * - else `${TMPDIR:-/tmp}/cgc-fresh-<uid>/<id>.sock`;
 *
 * where `<id>` is the first 16 hex digits of the SHA-256 of the canonical
 * (realpath) workspace path. An empty variable counts as unset, as in Rust.
 * Change both sides together.
 */

import { createHash } from "node:crypto";
import { realpathSync } from "node:fs";
import { join } from "node:path";

/** The environment lookups the rule depends on. */
export type Env = Readonly<Record<string, string | undefined>>;

/** The directory name under the runtime root, as in Rust's `APP_DIR`. */
const APP_DIR = "cgc-fresh";

/** Reads `name` from `env`, treating an empty value as unset. */
export function envVar(env: Env, name: string): string | undefined {
  const value = env[name];
  return typeof value === "string" && value !== "" ? value : undefined;
}

/** The short, stable id of a canonical workspace path. */
export function workspaceId(canonicalWorkspace: string): string {
  return createHash("sha256").update(canonicalWorkspace, "utf8").digest("hex").slice(0, 16);
}

/**
 * The canonical form of the directory Pi runs in. Falls back to the path as
 * given when it cannot be resolved (the socket then simply will not match,
 * and the bridge shows nothing).
 */
export function canonicalWorkspace(cwd: string): string {
  try {
    return realpathSync.native(cwd);
  } catch {
    return cwd;
  }
}

/** `$XDG_RUNTIME_DIR/cgc-fresh`, else `<tmp>/cgc-fresh-<uid>`. */
export function defaultRuntimeDir(env: Env, uid: number): string {
  const runtime = envVar(env, "XDG_RUNTIME_DIR");
  if (runtime !== undefined) {
    return join(runtime, APP_DIR);
  }
  const tmp = envVar(env, "TMPDIR") ?? "/tmp";
  return join(tmp, `${APP_DIR}-${uid}`);
}

/** The socket of the service for `canonical` (an already canonical path). */
export function socketPathFor(canonical: string, env: Env, uid: number = currentUid()): string {
  const explicit = envVar(env, "CGC_FRESH_SOCKET");
  if (explicit !== undefined) {
    return explicit;
  }
  return join(defaultRuntimeDir(env, uid), `${workspaceId(canonical)}.sock`);
}

/** The effective user id (Rust uses `geteuid`). */
export function currentUid(): number {
  const geteuid = process.geteuid;
  if (typeof geteuid === "function") {
    return geteuid.call(process);
  }
  return typeof process.getuid === "function" ? process.getuid() : 0;
}
