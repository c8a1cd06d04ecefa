/**
 * The bridge against the real `cgc-fresh` binary (`CGC_FRESH_BIN`, else the
 * workspace's debug build). Each test has its own workspace, runtime, state
 * and home directories and stops every service it started.
 *
 * These tests assert what the protocol guarantees, not freshness policy:
 * the bridge finds the socket by the shared rule, its frames are accepted
 * (a malformed one would be answered with an `error` frame, and a later
 * request's reply proves the earlier frames were read), state reaches the
 * footer, and the service can be autostarted.
 */

import assert from "node:assert/strict";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";

import { createCgcFreshExtension, socketPathFor, type BridgeHandle, type BridgeOptions } from "../src/index.js";
import {
  cgcFreshBin,
  FakeApi,
  FakeCtx,
  makeSandbox,
  startRealService,
  stopPid,
  waitUntil,
  type RealService,
  type Sandbox,
} from "./helpers.js";

const bin = cgcFreshBin();
const skip = bin === undefined ? "no cgc-fresh binary: set CGC_FRESH_BIN or run `cargo build -p cgc-fresh`" : false;

let sandbox: Sandbox;
let realService: RealService | undefined;
let autostartedPid: number | undefined;
let debugEvents: Array<{ event: string; fields: Record<string, unknown> }>;

beforeEach(() => {
  sandbox = makeSandbox();
  realService = undefined;
  autostartedPid = undefined;
  debugEvents = [];
});

afterEach(async () => {
  await realService?.stop();
  if (autostartedPid !== undefined) await stopPid(autostartedPid);
  sandbox.cleanup();
});

function factory(env: Record<string, string | undefined>, overrides: BridgeOptions = {}) {
  // Bound now: a bridge of an earlier test must not report into this one.
  const sink = debugEvents;
  return createCgcFreshExtension({
    env,
    onDebug: (event, fields) => sink.push({ event, fields }),
    ...overrides,
  });
}

function events(name: string) {
  return debugEvents.filter((e) => e.event === name);
}

function toolCall(toolName: string, path: string) {
  return { type: "tool_call", toolCallId: `c-${path}`, toolName, input: { path, content: "body" } };
}

function toolResult(toolName: string) {
  return { type: "tool_result", toolCallId: "c", toolName, input: {}, content: [], isError: false, details: undefined };
}

describe("against the real service", { skip }, () => {
  it("finds the socket by the shared rule; frames are accepted; state reaches the footer", { timeout: 30_000 }, async () => {
    realService = await startRealService(bin!, sandbox.workspace, sandbox.env);
    const env = { ...sandbox.env, CGC_FRESH_NO_AUTOSTART: "1" };
    const api = new FakeApi();
    const ctx = new FakeCtx(sandbox.workspace, "sess-real");
    let handle: BridgeHandle | undefined;
    factory(env, { onBridge: (h) => (handle = h) })(api.asApi());

    api.emit("session_start", { type: "session_start", reason: "startup" }, ctx);
    await waitUntil(() => events("welcome").length === 1, "the welcome");
    assert.equal(events("welcome")[0]!.fields.workspace, sandbox.workspace);
    await waitUntil(() => ctx.footer()?.startsWith("graph: ") === true, "the footer from the subscription's state");

    api.emit("tool_call", toolCall("write", "src/new.rs"), ctx);
    api.emit("tool_result", toolResult("write"), ctx);
    api.emit("tool_call", toolCall("edit", "src/old.rs"), ctx);
    api.emit("tool_result", toolResult("edit"), ctx);
    await api.command().handler("status", ctx);
    const report = ctx.notifications.at(-1);
    assert.match(report?.[0] ?? "", /^cgc-fresh: graph: /, "the status request was answered with a state");
    assert.equal(report?.[1], "info");
    assert.deepEqual(events("server_error"), [], "the service refused none of the bridge's frames");

    // The check above can fail: a malformed frame is reported.
    handle!.sendRawLine('{"type":"tool_call","tool":"edit"}\n');
    await waitUntil(() => events("server_error").length === 1, "the service's error frame");
    assert.equal(events("server_error")[0]!.fields.field, "session");

    await api.command().handler("sync", ctx);
    const syncAnswer = ctx.notifications.at(-1)!;
    assert.match(syncAnswer[0], /^cgc-fresh: sync /);
    assert.notEqual(syncAnswer[1], "error");

    await api.emitAsync("session_shutdown", { type: "session_shutdown", reason: "quit" }, ctx);
    assert.deepEqual(ctx.statuses.at(-1), ["cgc-fresh", undefined]);
    assert.deepEqual(api.forbidden, []);
    assert.ok(
      realService.logLines.some((l) => l.includes('"hello"') && l.includes(handle!.instance)),
      "the service logged the bridge's hello with its instance id",
    );
  });

  it("rebinds a replaced session on a new connection with a new instance", { timeout: 30_000 }, async () => {
    realService = await startRealService(bin!, sandbox.workspace, sandbox.env);
    const env = { ...sandbox.env, CGC_FRESH_NO_AUTOSTART: "1" };
    const instances: string[] = [];

    const oldApi = new FakeApi();
    const oldCtx = new FakeCtx(sandbox.workspace, "sess-1");
    factory(env, { onBridge: (h) => instances.push(h.instance) })(oldApi.asApi());
    oldApi.emit("session_start", { type: "session_start", reason: "startup" }, oldCtx);
    oldApi.emit("tool_call", toolCall("edit", "a.rs"), oldCtx);
    await oldApi.emitAsync("session_shutdown", { type: "session_shutdown", reason: "resume" }, oldCtx);

    const newApi = new FakeApi();
    const newCtx = new FakeCtx(sandbox.workspace, "sess-2");
    factory(env, { onBridge: (h) => instances.push(h.instance) })(newApi.asApi());
    newApi.emit("session_start", { type: "session_start", reason: "resume" }, newCtx);
    newApi.emit("tool_call", toolCall("edit", "b.rs"), newCtx);
    newApi.emit("tool_result", toolResult("edit"), newCtx);
    await newApi.command().handler("status", newCtx);

    assert.match(newCtx.notifications.at(-1)?.[0] ?? "", /^cgc-fresh: graph: /);
    await waitUntil(() => events("welcome").length === 2, "one welcome per API instance (one connection each)");
    assert.deepEqual(events("server_error"), []);
    assert.notEqual(instances[0], instances[1]);
    for (const instance of instances) {
      await waitUntil(
        () => realService!.logLines.some((l) => l.includes('"hello"') && l.includes(instance)),
        `the service to log hello from ${instance}`,
      );
    }
  });

  it("keeps syncing and notifying after its connection drops mid session", { timeout: 60_000 }, async () => {
    // A real service running the fake cgc (built beside the binary): syncs
    // complete, so notices are raised.
    mkdirSync(join(sandbox.workspace, ".codegraphcontext"));
    const scenario = join(sandbox.root, "scenario.json");
    writeFileSync(scenario, "{}");
    realService = await startRealService(bin!, sandbox.workspace, {
      ...sandbox.env,
      CGC_FRESHNESS_AUTO_SYNC: "true",
      CGC_FRESHNESS_BATCH_MS: "50",
      // Small enough that the bridge will send a longer line (its own bound
      // is 64 KiB), which the service answers with `too_large` and a close.
      CGC_SERVICE_MAX_LINE_BYTES: "2048",
      CGC_EXECUTABLE: join(dirname(bin!), "fake-cgc"),
      FAKE_CGC_SCENARIO: scenario,
      FAKE_CGC_LOG: join(sandbox.root, "fake-cgc.log"),
    });
    const logged = (event: string) => realService!.logLines.filter((l) => l.includes(`"event":"${event}"`)).length;
    const env = { ...sandbox.env, CGC_FRESH_NO_AUTOSTART: "1" };
    const api = new FakeApi();
    const ctx = new FakeCtx(sandbox.workspace, "sess-drop");
    let handle: BridgeHandle | undefined;
    factory(env, { onBridge: (h) => (handle = h) })(api.asApi());
    api.emit("session_start", { type: "session_start", reason: "startup" }, ctx);
    await waitUntil(() => logged("session_start") === 1, "the session to start");

    // The service drops the connection: an over-long line is answered with
    // `too_large` and the connection closed. The session is detached, not
    // ended.
    handle!.sendRawLine(`${"x".repeat(4 * 1024)}\n`);
    await waitUntil(() => logged("session_detached") === 1, "the service to detach the session", 10_000);

    // The next edit reconnects and replays session_start: the same lifetime
    // carries on, so the edit is noticed and synced.
    api.emit("tool_call", toolCall("edit", "a.py"), ctx);
    api.emit("tool_result", toolResult("edit"), ctx);
    await waitUntil(() => logged("session_reattached") === 1, "the replay to re-attach the session", 10_000);
    const shown = (pattern: RegExp) => ctx.notifications.filter(([text]) => pattern.test(text)).length;
    await waitUntil(() => shown(/may be stale/) === 1, "the staleness notice", 10_000);
    await waitUntil(() => shown(/up to date with every observed edit/) === 1, "the completion notice", 20_000);
    await waitUntil(() => ctx.footer() === "graph: fresh", "fresh in the footer", 10_000);
    assert.equal(logged("session_start"), 2, "one start and one replay");
    assert.deepEqual(events("server_error").filter((e) => e.fields.code !== "too_large"), []);
    await api.emitAsync("session_shutdown", { type: "session_shutdown", reason: "quit" }, ctx);
  });

  it("shows a long reconcile's progress in the footer, then fresh", { timeout: 60_000 }, async () => {
    // A real service running the fake cgc with a slow, chatty reconcile:
    // it says it synchronizes, then works for 6 s before its ready line.
    mkdirSync(join(sandbox.workspace, ".codegraphcontext"));
    const scenario = join(sandbox.root, "scenario.json");
    writeFileSync(
      scenario,
      JSON.stringify({
        watch: {
          steps: [
            { stdout: ["✓ Already indexed. Synchronizing current files..."] },
            { sleep_ms: 6000 },
            { stdout: [{ cgc: "ready" }] },
            { hang: true },
          ],
        },
      }),
    );
    realService = await startRealService(bin!, sandbox.workspace, {
      ...sandbox.env,
      CGC_FRESHNESS_AUTO_SYNC: "true",
      CGC_FRESHNESS_BATCH_MS: "50",
      CGC_EXECUTABLE: join(dirname(bin!), "fake-cgc"),
      FAKE_CGC_SCENARIO: scenario,
      FAKE_CGC_LOG: join(sandbox.root, "fake-cgc.log"),
    });
    const env = { ...sandbox.env, CGC_FRESH_NO_AUTOSTART: "1" };
    const api = new FakeApi();
    const ctx = new FakeCtx(sandbox.workspace, "sess-progress");
    factory(env)(api.asApi());
    api.emit("session_start", { type: "session_start", reason: "startup" }, ctx);
    api.emit("tool_call", toolCall("edit", "a.py"), ctx);
    api.emit("tool_result", toolResult("edit"), ctx);
    await waitUntil(
      () => /syncing \(reconciling, \d+s\)$/.test(ctx.footer() ?? ""),
      "the reconcile's phase in the footer",
      20_000,
    );
    await waitUntil(() => ctx.footer() === "graph: fresh", "fresh in the footer, the progress gone", 20_000);
    await api.emitAsync("session_shutdown", { type: "session_shutdown", reason: "quit" }, ctx);
  });

  it("autostarts the service when nothing answers", { timeout: 30_000 }, async () => {
    const env = { ...sandbox.env, CGC_FRESH_BIN: bin! };
    const socketPath = socketPathFor(sandbox.workspace, env);
    assert.equal(existsSync(socketPath), false);
    const api = new FakeApi();
    const ctx = new FakeCtx(sandbox.workspace, "sess-auto");
    factory(env)(api.asApi());

    assert.deepEqual(api.emit("session_start", { type: "session_start", reason: "startup" }, ctx), [undefined]);
    assert.deepEqual(api.emit("tool_call", toolCall("write", "x.rs"), ctx), [undefined]);
    await waitUntil(() => events("welcome").length === 1, "the autostarted service's welcome", 20_000);
    autostartedPid = events("welcome")[0]!.fields.pid as number;
    assert.equal(typeof autostartedPid, "number");
    assert.equal(events("autostart").length, 1);
    assert.equal(events("welcome")[0]!.fields.workspace, sandbox.workspace);
    assert.ok(existsSync(socketPath), "the service listens where the rule says");
    await waitUntil(() => ctx.footer()?.startsWith("graph: ") === true, "the footer");

    await api.command().handler("status", ctx);
    assert.match(ctx.notifications.at(-1)?.[0] ?? "", /^cgc-fresh: graph: /);
    await api.emitAsync("session_shutdown", { type: "session_shutdown", reason: "quit" }, ctx);
    assert.deepEqual(events("server_error"), []);
  });

  it("with autostart off and no service: shows nothing and starts nothing", { timeout: 30_000 }, async () => {
    const env = { ...sandbox.env, CGC_FRESH_BIN: bin!, CGC_FRESH_NO_AUTOSTART: "1" };
    const api = new FakeApi();
    const ctx = new FakeCtx(sandbox.workspace, "sess-none");
    factory(env, { retryDelaysMs: [10, 20] })(api.asApi());
    assert.deepEqual(api.emit("session_start", { type: "session_start", reason: "startup" }, ctx), [undefined]);
    assert.deepEqual(api.emit("tool_call", toolCall("edit", "y.rs"), ctx), [undefined]);
    await waitUntil(() => events("service_unreachable").length === 1, "the bridge to give up");
    await api.emitAsync("session_shutdown", { type: "session_shutdown", reason: "quit" }, ctx);
    assert.equal(events("autostart").length, 0);
    assert.equal(existsSync(socketPathFor(sandbox.workspace, env)), false);
    assert.deepEqual(ctx.notifications, []);
    assert.deepEqual(ctx.statuses, []);
  });
});
