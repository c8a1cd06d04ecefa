/**
 * The paths a tool call touches, read from its input — and nothing else.
 *
 * Pi's built-in tools name their file in `path` (read, edit, write, grep,
 * find, ls: see `dist/core/tools/*.d.ts` of `@mariozechner/pi-coding-agent`,
 * e.g. `editSchema = { path, edits }`, `writeSchema = { path, content }`);
 * custom tools use other spellings (`file_path`, `paths`, `from`/`to`…).
 * Only string values under the keys below are taken. File contents
 * (`content`, `edits[].oldText`/`newText`) and shell commands are never
 * read, so they can never reach the wire.
 *
 * Paths are sent as Pi resolves them (`path-utils.js`: a leading `@` is
 * dropped, `~` is the home directory); relative paths stay relative, which
 * the service reads as relative to the workspace root — the directory Pi
 * runs in.
 */

import { homedir } from "node:os";

/** Keys whose string value (or array of strings) is a path. */
const PATH_KEYS = [
  "path",
  "paths",
  "file_path",
  "filePath",
  "file_paths",
  "filePaths",
  "file",
  "files",
  "filename",
  "from",
  "to",
  "source",
  "destination",
  "target",
  "old_path",
  "new_path",
  "oldPath",
  "newPath",
  "src",
  "dest",
  "dir",
  "directory",
] as const;

/** Keys holding a list of objects that each name a path (multi-file edits). */
const NESTED_LIST_KEYS = ["edits", "files", "changes", "operations"] as const;

/** At most this many paths per tool call. */
export const MAX_PATHS = 64;

/** Longer strings are not paths anyone means; they are dropped. */
export const MAX_PATH_CHARS = 4096;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Pi's own normalisation of a path argument (without resolving it). */
export function normalizeToolPath(raw: string, home: string = safeHomedir()): string | undefined {
  let path = raw.startsWith("@") ? raw.slice(1) : raw;
  path = path.trim();
  if (path === "" || path.length > MAX_PATH_CHARS || path.includes("\0") || path.includes("\n")) {
    return undefined;
  }
  if (path === "~") {
    return home;
  }
  if (path.startsWith("~/")) {
    return home + path.slice(1);
  }
  return path;
}

function safeHomedir(): string {
  try {
    return homedir();
  } catch {
    return "~";
  }
}

function collectFrom(record: Record<string, unknown>, into: string[], home: string): void {
  for (const key of PATH_KEYS) {
    const value = record[key];
    const candidates = typeof value === "string" ? [value] : Array.isArray(value) ? value : [];
    for (const candidate of candidates) {
      if (typeof candidate !== "string") continue;
      const path = normalizeToolPath(candidate, home);
      if (path !== undefined) into.push(path);
    }
  }
}

/**
 * The paths named by a tool's input: top-level path keys, plus path keys of
 * objects in a multi-file list. Deduplicated, in first-seen order, bounded.
 * Anything that is not an object yields no paths.
 */
export function pathsFromToolInput(input: unknown, home: string = safeHomedir()): string[] {
  if (!isRecord(input)) {
    return [];
  }
  const found: string[] = [];
  collectFrom(input, found, home);
  for (const key of NESTED_LIST_KEYS) {
    const list = input[key];
    if (!Array.isArray(list)) continue;
    for (const item of list) {
      if (isRecord(item)) collectFrom(item, found, home);
      if (found.length >= MAX_PATHS * 2) break;
    }
  }
  return [...new Set(found)].slice(0, MAX_PATHS);
}
