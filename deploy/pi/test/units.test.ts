/** Pure pieces: socket path rule, path extraction, footer text, frame decoding. */

import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";

import { decodeServerFrame } from "../src/frames.js";
import { canonicalWorkspace, socketPathFor, workspaceId } from "../src/socket-path.js";
import { footerText, groupThousands, progressText, shortDuration, statusReport } from "../src/status-text.js";
import { MAX_PATHS, pathsFromToolInput } from "../src/tool-paths.js";

describe("socket path rule (same as the Rust side)", () => {
  it("hashes the canonical workspace path like the service (test vector /tmp/ws)", () => {
    assert.equal(workspaceId("/tmp/ws"), "b011ea26cc731e1a");
    assert.equal(workspaceId("/home/dev/project").length, 16);
    assert.notEqual(workspaceId("/home/dev/project"), workspaceId("/home/dev/project2"));
  });

  it("uses $XDG_RUNTIME_DIR/cgc-fresh/<id>.sock", () => {
    assert.equal(
      socketPathFor("/tmp/ws", { XDG_RUNTIME_DIR: "/run/user/1000" }, 1000),
      "/run/user/1000/cgc-fresh/b011ea26cc731e1a.sock",
    );
  });

  it("falls back to ${TMPDIR:-/tmp}/cgc-fresh-<uid>/<id>.sock, empty variables counting as unset", () => {
    assert.equal(socketPathFor("/tmp/ws", {}, 1234), "/tmp/cgc-fresh-1234/b011ea26cc731e1a.sock");
    assert.equal(
      socketPathFor("/tmp/ws", { TMPDIR: "/var/tmp", XDG_RUNTIME_DIR: "" }, 7),
      "/var/tmp/cgc-fresh-7/b011ea26cc731e1a.sock",
    );
  });

  it("lets CGC_FRESH_SOCKET name the socket outright", () => {
    assert.equal(
      socketPathFor("/tmp/ws", { CGC_FRESH_SOCKET: "/x/my.sock", XDG_RUNTIME_DIR: "/run/user/1" }, 1),
      "/x/my.sock",
    );
  });

  it("canonicalises through symlinks and keeps an unresolvable path as given", () => {
    const root = realpathSync(mkdtempSync(join(tmpdir(), "cgcpi-link-")));
    try {
      mkdirSync(join(root, "real"));
      symlinkSync(join(root, "real"), join(root, "link"));
      assert.equal(canonicalWorkspace(join(root, "link")), join(root, "real"));
      assert.equal(
        socketPathFor(canonicalWorkspace(join(root, "link")), { XDG_RUNTIME_DIR: "/r" }, 1),
        socketPathFor(join(root, "real"), { XDG_RUNTIME_DIR: "/r" }, 1),
      );
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
    assert.equal(canonicalWorkspace("/no/such/dir/at/all"), "/no/such/dir/at/all");
  });
});

describe("paths from tool input", () => {
  it("takes Pi's built-in `path` and never file contents", () => {
    const write = { path: "src/main.rs", content: "SECRET CONTENT" };
    const edit = { path: "src/lib.rs", edits: [{ oldText: "SECRET OLD", newText: "SECRET NEW" }] };
    assert.deepEqual(pathsFromToolInput(write), ["src/main.rs"]);
    assert.deepEqual(pathsFromToolInput(edit), ["src/lib.rs"]);
    assert.ok(!JSON.stringify(pathsFromToolInput(edit)).includes("SECRET"));
  });

  it("reads the other common spellings, nested multi-file lists, and dedupes", () => {
    assert.deepEqual(pathsFromToolInput({ file_path: "a.py" }), ["a.py"]);
    assert.deepEqual(pathsFromToolInput({ paths: ["a", "b", 3, "a"] }), ["a", "b"]);
    assert.deepEqual(pathsFromToolInput({ from: "old.ts", to: "new.ts" }), ["old.ts", "new.ts"]);
    assert.deepEqual(
      pathsFromToolInput({ edits: [{ path: "x.rs", newText: "t" }, { file_path: "y.rs" }, "junk"] }),
      ["x.rs", "y.rs"],
    );
  });

  it("normalises like Pi (leading @, ~) and drops what cannot be a path", () => {
    assert.deepEqual(pathsFromToolInput({ path: "@src/a.ts" }, "/home/ann"), ["src/a.ts"]);
    assert.deepEqual(pathsFromToolInput({ path: "~/notes.md" }, "/home/ann"), ["/home/ann/notes.md"]);
    assert.deepEqual(pathsFromToolInput({ path: "" }), []);
    assert.deepEqual(pathsFromToolInput({ path: "a\nb" }), []);
    assert.deepEqual(pathsFromToolInput({ path: "x".repeat(5000) }), []);
  });

  it("yields nothing for a shell command or for garbage", () => {
    assert.deepEqual(pathsFromToolInput({ command: "rm -rf src" }), []);
    for (const garbage of [null, undefined, 42, "path", [], [{ path: "a" }], true]) {
      assert.deepEqual(pathsFromToolInput(garbage), []);
    }
  });

  it("bounds the number of paths", () => {
    const many = Array.from({ length: 500 }, (_, i) => `f${i}`);
    assert.equal(pathsFromToolInput({ paths: many }).length, MAX_PATHS);
  });
});

describe("footer text", () => {
  const now = 1_700_000_000_000;
  it("reads fresh, possibly stale since a duration, syncing", () => {
    assert.equal(footerText({ type: "state", status: "fresh" }, now), "graph: fresh");
    assert.equal(
      footerText({ type: "state", status: "possibly_stale", stale_since: now - 3 * 60_000 - 5_000 }, now),
      "graph: possibly stale since 3m",
    );
    assert.equal(footerText({ type: "state", status: "possibly_stale" }, now), "graph: possibly stale");
    assert.equal(footerText({ type: "state", status: "syncing", syncing: true }, now), "graph: syncing…");
    assert.equal(
      footerText({ type: "state", status: "possibly_stale", syncing: true }, now),
      "graph: possibly stale, syncing…",
    );
    assert.equal(footerText({ type: "state", status: "some_new_status" }, now), "graph: some new status");
  });

  it("writes durations in one short unit", () => {
    assert.equal(shortDuration(-5), "0s");
    assert.equal(shortDuration(59_999), "59s");
    assert.equal(shortDuration(60_000), "1m");
    assert.equal(shortDuration(3 * 3_600_000), "3h");
    assert.equal(shortDuration(3 * 86_400_000), "3d");
  });

  it("reports the last error and the watcher in /cgc-fresh status", () => {
    const report = statusReport(
      { type: "state", status: "not_verified", last_error: "cgc exited 1", watcher: { mode: "on", state: "failed" } },
      now,
    );
    assert.match(report, /not verified/);
    assert.match(report, /last error: cgc exited 1/);
    assert.match(report, /watcher: on, failed/);
    assert.match(report, /last sync: none/);
  });
});

describe("sync progress (same rules as `cgc-fresh status --line`)", () => {
  const now = 1_765_000_014_000;
  const since = now - 14_000;

  it("groups thousands with a plain space, below 1000 as is", () => {
    assert.equal(groupThousands(0), "0");
    assert.equal(groupThousands(7), "7");
    assert.equal(groupThousands(999), "999");
    assert.equal(groupThousands(1000), "1 000");
    assert.equal(groupThousands(2032), "2 032");
    assert.equal(groupThousands(12345), "12 345");
    assert.equal(groupThousands(123456), "123 456");
    assert.equal(groupThousands(1000000), "1 000 000");
    assert.ok(!groupThousands(1000000).includes("\u00a0"), "no no-break space");
  });

  it("writes counts with the phase, or the phase with the time since the sync started", () => {
    assert.equal(progressText({ phase: "parsing", done: 340, total: 2032, since }, now), "syncing 340/2 032 files (parsing)");
    assert.equal(progressText({ phase: "reconciling", since }, now), "syncing (reconciling, 14s)");
    assert.equal(progressText({ phase: "writing", done: 0, total: 999, since }, now), "syncing 0/999 files (writing)");
    assert.equal(progressText({ phase: "stopping", since: now - 125_000 }, now), "syncing (stopping, 2m)");
  });

  it("shows any other phase with `_` replaced by space", () => {
    assert.equal(progressText({ phase: "fetching_more_things", since }, now), "syncing (fetching more things, 14s)");
    assert.equal(
      progressText({ phase: "new_phase", done: 1, total: 12345, since }, now),
      "syncing 1/12 345 files (new phase)",
    );
  });

  it("replaces the footer's `syncing…` while the status is syncing", () => {
    assert.equal(
      footerText({ type: "state", status: "syncing", syncing: true, progress: { phase: "parsing", done: 340, total: 2032, since } }, now),
      "graph: syncing 340/2 032 files (parsing)",
    );
    assert.equal(
      footerText({ type: "state", status: "syncing", syncing: true, progress: { phase: "reconciling", since } }, now),
      "graph: syncing (reconciling, 14s)",
    );
  });

  it("follows the status phrase when the status is not syncing", () => {
    assert.equal(
      footerText(
        {
          type: "state",
          status: "possibly_stale",
          stale_since: now - 3 * 60_000,
          syncing: true,
          progress: { phase: "writing", done: 340, total: 2032, since },
        },
        now,
      ),
      "graph: possibly stale since 3m, syncing 340/2 032 files (writing)",
    );
    assert.equal(
      footerText({ type: "state", status: "not_verified", syncing: true, progress: { phase: "indexing", since } }, now),
      "graph: not verified (watcher failed), syncing (indexing, 14s)",
    );
  });

  it("keeps today's footer when no sync runs, even with progress present", () => {
    const progress = { phase: "parsing", done: 340, total: 2032, since };
    assert.equal(footerText({ type: "state", status: "fresh", syncing: false, progress }, now), "graph: fresh");
    assert.equal(footerText({ type: "state", status: "fresh", progress }, now), "graph: fresh");
    assert.equal(footerText({ type: "state", status: "syncing", syncing: false, progress }, now), "graph: syncing…");
    assert.doesNotMatch(statusReport({ type: "state", status: "fresh", syncing: false, progress }, now), /progress/);
  });

  it("keeps today's footer without progress", () => {
    assert.equal(footerText({ type: "state", status: "syncing", syncing: true }, now), "graph: syncing…");
    assert.equal(
      footerText({ type: "state", status: "possibly_stale", syncing: true }, now),
      "graph: possibly stale, syncing…",
    );
  });

  it("adds a progress line after the first line of /cgc-fresh status", () => {
    const counted = statusReport(
      { type: "state", status: "syncing", syncing: true, progress: { phase: "parsing", done: 340, total: 2032, since } },
      now,
    ).split("\n");
    assert.equal(counted[0], "cgc-fresh: graph: syncing 340/2 032 files (parsing)");
    assert.equal(counted[1], "progress: parsing 340/2 032 files, for 14s");
    assert.match(counted[2] ?? "", /^last sync: /);

    const uncounted = statusReport(
      { type: "state", status: "possibly_stale", stale_since: now - 60_000, syncing: true, progress: { phase: "reconciling", since } },
      now,
    ).split("\n");
    assert.equal(uncounted[0], "cgc-fresh: graph: possibly stale since 1m, syncing (reconciling, 14s)");
    assert.equal(uncounted[1], "progress: reconciling, for 14s");
    assert.match(uncounted[2] ?? "", /^first unsynced edit: /);
  });

  it("decodes progress from a state frame", () => {
    const frame = decodeServerFrame(
      '{"type":"state","status":"syncing","syncing":true,"progress":{"phase":"parsing","done":340,"total":2032,"since":1765000000000,"extra":1}}',
    );
    assert.deepEqual(frame?.type === "state" && frame.progress, { phase: "parsing", done: 340, total: 2032, since: 1765000000000 });
    const uncounted = decodeServerFrame('{"type":"state","status":"syncing","syncing":true,"progress":{"phase":"reconciling","since":5}}');
    assert.deepEqual(uncounted?.type === "state" && uncounted.progress, { phase: "reconciling", since: 5 });
    const absent = decodeServerFrame('{"type":"state","status":"fresh","syncing":false}');
    assert.equal(absent?.type === "state" && absent.progress, undefined);
  });

  it("drops counts that are not a pair of non-negative integers", () => {
    const decoded = (progress: string) => {
      const frame = decodeServerFrame(`{"type":"state","status":"syncing","syncing":true,"progress":${progress}}`);
      assert.equal(frame?.type, "state", progress);
      return frame?.type === "state" ? frame.progress : undefined;
    };
    for (const progress of [
      '{"phase":"parsing","done":"340","total":2032,"since":5}',
      '{"phase":"parsing","done":340,"since":5}',
      '{"phase":"parsing","total":2032,"since":5}',
      '{"phase":"parsing","done":-1,"total":2032,"since":5}',
      '{"phase":"parsing","done":1.5,"total":2032,"since":5}',
      '{"phase":"parsing","done":340,"total":null,"since":5}',
    ]) {
      assert.deepEqual(decoded(progress), { phase: "parsing", since: 5 }, progress);
    }
    const frame = decodeServerFrame('{"type":"state","status":"syncing","syncing":true,"progress":{"phase":"parsing","done":"340","total":2032,"since":1765000000000}}');
    assert.equal(frame?.type === "state" && footerText(frame, now), "graph: syncing (parsing, 14s)");
  });

  it("ignores a malformed progress and keeps the rest of the frame", () => {
    for (const progress of [
      "null",
      "7",
      '"parsing"',
      "[]",
      "{}",
      '{"phase":"parsing"}',
      '{"phase":"parsing","since":"5"}',
      '{"phase":3,"since":5}',
      '{"phase":"","since":5}',
      '{"done":1,"total":2,"since":5}',
    ]) {
      const frame = decodeServerFrame(`{"type":"state","status":"syncing","syncing":true,"edit_epoch":4,"progress":${progress}}`);
      assert.equal(frame?.type, "state", progress);
      assert.equal(frame?.type === "state" && frame.progress, undefined, progress);
      assert.equal(frame?.type === "state" && frame.edit_epoch, 4, progress);
      assert.equal(frame?.type === "state" && footerText(frame, now), "graph: syncing…", progress);
    }
  });
});

describe("server frame decoding", () => {
  it("decodes the frames the bridge uses", () => {
    assert.deepEqual(decodeServerFrame('{"id":3,"type":"ack"}'), { type: "ack", id: 3 });
    const notice = decodeServerFrame(
      '{"type":"notice","session":"s","condition":"possibly_stale","level":"warning","text":"t","audience":"user"}',
    );
    assert.equal(notice?.type, "notice");
    const state = decodeServerFrame('{"type":"state","status":"fresh","last_synced_at":5,"edit_epoch":1,"syncing":false,"extra":1}');
    assert.equal(state?.type === "state" && state.last_synced_at, 5);
  });

  it("ignores what is not a usable frame", () => {
    for (const line of ["", "nope", "[]", "3", "null", '{"type":7}', '{"type":"state"}', '{"type":"notice","level":"info"}', '{"type":"mystery"}']) {
      assert.equal(decodeServerFrame(line), undefined, line);
    }
  });
});
