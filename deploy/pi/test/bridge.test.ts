/**
 * The bridge against a fake JSON-lines service on a temp socket
 * (`CGC_FRESH_SOCKET` points at it), so the exact frames can be asserted.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";

import { createCgcFreshExtension, type BridgeHandle, type BridgeOptions } from "../src/index.js";
import { FakeApi, FakeCtx, FakeService, makeSandbox, staleCtx, waitUntil, type Frame, type Sandbox } from "./helpers.js";

let sandbox: Sandbox;
let socketPath: string;
let service: FakeService | undefined;
let debugEvents: Array<{ event: string; fields: Record<string, unknown> }>;

beforeEach(() => {
  sandbox = makeSandbox();
  socketPath = join(sandbox.root, "fake.sock");
  debugEvents = [];
  service = undefined;
});

afterEach(async () => {
  await service?.close();
  sandbox.cleanup();
});

/** A factory wired to the fake socket, with fast retries and recorded diagnostics. */
function factory(overrides: BridgeOptions = {}) {
  // Bound now: a bridge of an earlier test must not report into this one.
  const sink = debugEvents;
  return createCgcFreshExtension({
    env: { ...sandbox.env, CGC_FRESH_SOCKET: socketPath, CGC_FRESH_NO_AUTOSTART: "1" },
    retryDelaysMs: [10, 20],
    cooldownMs: 60_000,
    requestTimeoutMs: 2_000,
    onDebug: (event, fields) => sink.push({ event, fields }),
    ...overrides,
  });
}

/**
 * The usual start: a fake service, a bridge for session `sessionId` whose
 * `session_start` has reached the service (hello, subscribe, session_start).
 */
async function startedSession(sessionId: string, overrides: BridgeOptions = {}) {
  service = await FakeService.start(socketPath);
  const api = new FakeApi();
  const ctx = new FakeCtx(sandbox.workspace, sessionId);
  factory(overrides)(api.asApi());
  api.emit("session_start", { type: "session_start", reason: "startup" }, ctx);
  await waitUntil(() => service!.frames().length === 3, "the preamble");
  return { api, ctx, fake: service };
}

function count(event: string): number {
  return debugEvents.filter((e) => e.event === event).length;
}

function toolCall(toolName: string, input: unknown): Frame {
  return { type: "tool_call", toolCallId: `call-${toolName}`, toolName, input };
}

function toolResult(toolName: string, isError: boolean): Frame {
  return {
    type: "tool_result",
    toolCallId: `call-${toolName}`,
    toolName,
    input: { path: "ignored", content: "SECRET CONTENT" },
    content: [{ type: "text", text: "SECRET OUTPUT" }],
    isError,
    details: undefined,
  };
}

describe("event forwarding", () => {
  it("sends hello, subscribe, session_start, tool events and session_shutdown as exact frames", async () => {
    service = await FakeService.start(socketPath);
    const api = new FakeApi();
    const ctx = new FakeCtx(sandbox.workspace, "sess-1");
    let handle: BridgeHandle | undefined;
    factory({ onBridge: (h) => (handle = h) })(api.asApi());

    assert.deepEqual(api.emit("session_start", { type: "session_start", reason: "startup" }, ctx), [undefined]);
    assert.deepEqual(api.emit("tool_call", toolCall("write", { path: "src/a.rs", content: "SECRET CONTENT" }), ctx), [undefined]);
    assert.deepEqual(api.emit("tool_result", toolResult("write", false), ctx), [undefined]);
    api.emit("tool_call", toolCall("edit", { path: "@src/b.rs", edits: [{ oldText: "SECRET OLD", newText: "SECRET NEW" }] }), ctx);
    api.emit("tool_result", toolResult("edit", true), ctx);
    api.emit("tool_call", toolCall("bash", { command: "cat SECRET" }), ctx);
    await api.emitAsync("session_shutdown", { type: "session_shutdown", reason: "quit" }, ctx);
    await waitUntil(() => service!.connections[0]?.ended === true, "the bridge to close its connection");

    assert.ok(handle !== undefined);
    assert.match(handle.instance, /^pi-\d+-[0-9a-f]{12}$/);
    assert.deepEqual(service.frames(), [
      { type: "hello", client: "pi-bridge", instance: handle.instance, protocol: 1 },
      { type: "subscribe" },
      { type: "session_start", session: "sess-1", reason: "startup" },
      { type: "tool_call", session: "sess-1", tool: "write", paths: ["src/a.rs"] },
      { type: "tool_result", session: "sess-1", tool: "write", ok: true },
      { type: "tool_call", session: "sess-1", tool: "edit", paths: ["src/b.rs"] },
      { type: "tool_result", session: "sess-1", tool: "edit", ok: false },
      { type: "tool_call", session: "sess-1", tool: "bash", paths: [] },
      { type: "session_shutdown", session: "sess-1", reason: "quit" },
    ]);
    assert.equal(service.connections.length, 1);
    assert.ok(!service.rawLines.some((l) => l.includes("SECRET")), "no file contents or commands on the wire");
    assert.deepEqual(api.forbidden, []);
  });

  it("registers only the four session hooks and the command, nothing that touches the prompt", () => {
    const api = new FakeApi();
    factory()(api.asApi());
    assert.deepEqual([...api.onCalls].sort(), ["session_shutdown", "session_start", "tool_call", "tool_result"]);
    assert.deepEqual(api.commandRegistrations, ["cgc-fresh"]);
  });
});

describe("degradation without a service", () => {
  it("never throws, never blocks a handler, shows nothing", async () => {
    const api = new FakeApi();
    const ctx = new FakeCtx(sandbox.workspace, "sess-1");
    factory()(api.asApi());

    // Synchronous `undefined` (not a pending promise): the handlers cannot be
    // waiting on the socket.
    assert.deepEqual(api.emit("session_start", { type: "session_start", reason: "startup" }, ctx), [undefined]);
    for (let i = 0; i < 20; i++) {
      assert.deepEqual(api.emit("tool_call", toolCall("edit", { path: `f${i}.rs` }), ctx), [undefined]);
      assert.deepEqual(api.emit("tool_result", toolResult("edit", false), ctx), [undefined]);
    }
    await waitUntil(() => count("service_unreachable") === 1, "the connect cycle to give up");
    await api.emitAsync("session_shutdown", { type: "session_shutdown", reason: "quit" }, ctx);

    assert.deepEqual(ctx.notifications, []);
    assert.deepEqual(ctx.statuses, []);
    assert.ok(count("connect_failed") >= 1);
    assert.equal(count("autostart"), 0, "CGC_FRESH_NO_AUTOSTART forbids spawning");
    assert.deepEqual(api.forbidden, []);
  });

  it("answers /cgc-fresh status with an informational line, not an error", async () => {
    const api = new FakeApi();
    const ctx = new FakeCtx(sandbox.workspace, "sess-1");
    factory({ requestTimeoutMs: 300 })(api.asApi());
    api.emit("session_start", { type: "session_start", reason: "startup" }, ctx);
    await api.command().handler("status", ctx);
    assert.deepEqual(ctx.notifications, [["cgc-fresh: no service is running for this workspace", "info"]]);
    assert.deepEqual(ctx.statuses, []);
  });
});

describe("queueing while disconnected", () => {
  it("keeps the newest frames (bounded), and a person's request reconnects despite the cool-down", async () => {
    const api = new FakeApi();
    const ctx = new FakeCtx(sandbox.workspace, "sess-q");
    factory({ maxQueuedFrames: 3 })(api.asApi());
    api.emit("session_start", { type: "session_start", reason: "startup" }, ctx);
    for (let i = 1; i <= 10; i++) api.emit("tool_call", toolCall("edit", { path: `f${i}` }), ctx);
    await waitUntil(() => count("service_unreachable") === 1, "the first connect cycle to give up");

    service = await FakeService.start(socketPath);
    // Within the cool-down an event only queues...
    api.emit("tool_call", toolCall("edit", { path: "f11" }), ctx);
    assert.equal(service.connections.length, 0);
    // ...but /cgc-fresh status connects at once.
    await api.command().handler("status", ctx);

    const frames = service.frames();
    assert.deepEqual(frames.slice(0, 3).map((f) => f.type), ["hello", "subscribe", "session_start"]);
    assert.deepEqual(
      frames.slice(3, 5).map((f) => f.paths),
      [["f10"], ["f11"]],
    );
    assert.equal(frames[5]?.type, "status");
    assert.equal(frames.length, 6);
    assert.ok(count("frame_dropped") > 0);
    assert.match(ctx.notifications[0]?.[0] ?? "", /^cgc-fresh: graph: unknown/);
  });

  it("replays the session after the service drops the connection, and clears the footer meanwhile", async () => {
    const { api, ctx, fake } = await startedSession("sess-r");
    fake.push({ type: "state", workspace: "/w", status: "fresh", edit_epoch: 0, syncing: false });
    await waitUntil(() => ctx.footer() === "graph: fresh", "the footer");

    fake.dropClients();
    await waitUntil(() => ctx.statuses.at(-1)?.[1] === undefined, "the footer to clear");
    assert.deepEqual(ctx.notifications, [], "a dead service raises no error UI");

    api.emit("tool_call", toolCall("write", { path: "after.rs" }), ctx);
    await waitUntil(() => fake.connections[1]?.frames.length === 4, "the replayed session");
    assert.deepEqual(
      fake.connections[1]!.frames.map((f) => [f.type, f.session ?? null]),
      [
        ["hello", null],
        ["subscribe", null],
        ["session_start", "sess-r"],
        ["tool_call", "sess-r"],
      ],
    );
  });
});

describe("what the person sees", () => {
  it("shows notices with ctx.ui.notify and the state in the footer, only for this session", async () => {
    let now = 1_700_000_000_000;
    const { api, ctx, fake } = await startedSession("sess-n", { now: () => now });

    fake.push({ type: "state", workspace: "/w", status: "possibly_stale", stale_since: now - 180_000, edit_epoch: 1, syncing: false });
    await waitUntil(() => ctx.footer() === "graph: possibly stale since 3m", "the stale footer");

    fake.push({ type: "notice", session: "sess-n", condition: "possibly_stale", level: "warning", text: "The code graph may be stale.", audience: "user" });
    fake.push({ type: "notice", session: "someone-else", condition: "possibly_stale", level: "warning", text: "not for this session", audience: "user" });
    fake.push({ type: "notice", condition: "state_write_failed", level: "error", text: "state could not be saved", audience: "user" });
    fake.push({ type: "state", workspace: "/w", status: "syncing", stale_since: now - 180_000, edit_epoch: 1, syncing: true });
    await waitUntil(() => ctx.footer() === "graph: syncing…", "the syncing footer");
    assert.deepEqual(ctx.notifications, [
      ["The code graph may be stale.", "warning"],
      ["state could not be saved", "error"],
    ]);

    // Relative times are refreshed by later events, without a timer.
    fake.push({ type: "state", workspace: "/w", status: "possibly_stale", stale_since: now - 180_000, edit_epoch: 2, syncing: false });
    await waitUntil(() => ctx.footer() === "graph: possibly stale since 3m", "the stale footer again");
    now += 2 * 60_000;
    api.emit("tool_result", toolResult("edit", false), ctx);
    assert.equal(ctx.footer(), "graph: possibly stale since 5m");
    assert.deepEqual(api.forbidden, [], "nothing went to the agent");
  });

  it("shows a long sync's progress in the footer and drops it when the sync ends", async () => {
    let now = 1_765_000_000_000;
    const { api, ctx, fake } = await startedSession("sess-p", { now: () => now });
    const since = now;
    now += 14_000;

    fake.push({ type: "state", workspace: "/w", status: "syncing", edit_epoch: 1, syncing: true, progress: { phase: "parsing", done: 340, total: 2032, since } });
    await waitUntil(() => ctx.footer() === "graph: syncing 340/2 032 files (parsing)", "the counted progress");

    fake.push({ type: "state", workspace: "/w", status: "possibly_stale", stale_since: since - 180_000, edit_epoch: 2, syncing: true, progress: { phase: "reconciling", since } });
    await waitUntil(
      () => ctx.footer() === "graph: possibly stale since 3m, syncing (reconciling, 14s)",
      "the uncounted progress after the status phrase",
    );

    // A malformed progress is dropped; the frame still counts.
    fake.push({ type: "state", workspace: "/w", status: "syncing", edit_epoch: 2, syncing: true, progress: { phase: "writing", done: "340", since: "soon" } });
    await waitUntil(() => ctx.footer() === "graph: syncing…", "the footer without the malformed progress");

    fake.push({ type: "state", workspace: "/w", status: "fresh", last_synced_at: now, edit_epoch: 2, syncing: false });
    await waitUntil(() => ctx.footer() === "graph: fresh", "the footer after the sync");
    assert.deepEqual(api.forbidden, [], "nothing went to the agent");
  });

  it("shows a refused session (error code unavailable) to the person, other errors not", async () => {
    const { api, ctx, fake } = await startedSession("sess-r");
    fake.push({ type: "error", code: "bad_request", field: "paths", message: "field `paths`: invalid type" });
    fake.push({ type: "error", code: "unavailable", message: "1024 sessions are live in this workspace; end one first." });
    await waitUntil(() => ctx.notifications.length === 1, "the refusal");
    assert.deepEqual(ctx.notifications, [["cgc-fresh: 1024 sessions are live in this workspace; end one first.", "warning"]]);
    assert.deepEqual(api.forbidden, [], "nothing went to the agent");
  });

  it("answers /cgc-fresh status and sync with requests that carry an id", async () => {
    service = await FakeService.start(socketPath);
    const api = new FakeApi();
    const ctx = new FakeCtx(sandbox.workspace, "sess-c");
    factory()(api.asApi());
    api.emit("session_start", { type: "session_start", reason: "startup" }, ctx);
    const command = api.command();

    await command.handler("status", ctx);
    await command.handler("sync", ctx);
    service.answer = (f) =>
      f.type === "sync" ? { id: f.id, type: "error", code: "unavailable", message: "syncing is not available in this build" } : undefined;
    await command.handler("  sync  ", ctx);
    await command.handler("frobnicate", ctx);
    service.answer = (f) => (f.type === "status" ? { id: f.id, type: "state", status: "fresh", edit_epoch: 0, syncing: false } : undefined);
    await command.handler("", ctx);

    const requests = service.frames().filter((f) => f.type === "status" || f.type === "sync");
    assert.deepEqual(requests.map((f) => f.type), ["status", "sync", "sync", "status"]);
    const ids = requests.map((f) => f.id);
    assert.ok(ids.every((id) => typeof id === "number"));
    assert.equal(new Set(ids).size, ids.length, "every request has its own id");
    assert.deepEqual(
      ctx.notifications.map(([text, level]) => [text.split("\n")[0], level]),
      [
        ["cgc-fresh: graph: unknown", "info"],
        ["cgc-fresh: sync requested", "info"],
        ["cgc-fresh: sync not started: syncing is not available in this build", "warning"],
        ["usage: /cgc-fresh [status|sync]", "info"],
        ["cgc-fresh: graph: fresh", "info"],
      ],
    );
    assert.deepEqual(command.getArgumentCompletions?.("s"), [
      { value: "status", label: "status" },
      { value: "sync", label: "sync" },
    ]);
  });
});

describe("registration and session replacement", () => {
  it("subscribes each hook once when the factory runs twice with the same API", async () => {
    service = await FakeService.start(socketPath);
    const api = new FakeApi();
    const first = factory();
    first(api.asApi());
    first(api.asApi());
    factory()(api.asApi()); // another copy of the module's factory, same API object
    assert.deepEqual([...api.onCalls].sort(), ["session_shutdown", "session_start", "tool_call", "tool_result"]);
    assert.deepEqual(api.commandRegistrations, ["cgc-fresh"]);

    // session_start arriving twice is harmless: one connection, no error.
    const ctx = new FakeCtx(sandbox.workspace, "sess-twice");
    api.emit("session_start", { type: "session_start", reason: "startup" }, ctx);
    api.emit("session_start", { type: "session_start", reason: "startup" }, ctx);
    api.emit("tool_call", toolCall("edit", { path: "x" }), ctx);
    await waitUntil(() => service!.frames().some((f) => f.type === "tool_call"), "the tool call");
    assert.equal(service.connections.length, 1);
    assert.equal(service.frames().filter((f) => f.type === "hello").length, 1);
    assert.equal(service.frames().filter((f) => f.type === "tool_call").length, 1);
  });

  it("rebinds on a new API: new instance, session_start resume, tool calls for the new session", async () => {
    service = await FakeService.start(socketPath);
    const instances: string[] = [];
    const onBridge = (h: BridgeHandle) => instances.push(h.instance);

    const oldApi = new FakeApi();
    const oldCtx = new FakeCtx(sandbox.workspace, "sess-old");
    factory({ onBridge })(oldApi.asApi());
    oldApi.emit("session_start", { type: "session_start", reason: "startup" }, oldCtx);
    oldApi.emit("tool_call", toolCall("edit", { path: "a.rs" }), oldCtx);
    await oldApi.emitAsync("session_shutdown", { type: "session_shutdown", reason: "resume", targetSessionFile: "/s/new.jsonl" }, oldCtx);

    // Pi re-runs the factory with a new API object for the resumed session.
    const newApi = new FakeApi();
    const newCtx = new FakeCtx(sandbox.workspace, "sess-new");
    factory({ onBridge })(newApi.asApi());
    newApi.emit("session_start", { type: "session_start", reason: "resume", previousSessionFile: "/s/old.jsonl" }, newCtx);
    newApi.emit("tool_call", toolCall("write", { path: "c.rs", content: "x" }), newCtx);
    newApi.emit("tool_result", toolResult("write", false), newCtx);

    await waitUntil(() => service!.connections[1]?.frames.length === 5, "the new connection's frames");
    assert.equal(instances.length, 2);
    assert.notEqual(instances[0], instances[1]);
    assert.equal(service.connections[0]!.ended, true, "the old instance closed its connection");
    assert.deepEqual(service.connections[0]!.frames.at(-1), { type: "session_shutdown", session: "sess-old", reason: "resume" });
    assert.deepEqual(service.connections[1]!.frames, [
      { type: "hello", client: "pi-bridge", instance: instances[1], protocol: 1 },
      { type: "subscribe" },
      { type: "session_start", session: "sess-new", reason: "resume" },
      { type: "tool_call", session: "sess-new", tool: "write", paths: ["c.rs"] },
      { type: "tool_result", session: "sess-new", tool: "write", ok: true },
    ]);

    // The replaced instance stays quiet even if Pi (wrongly) calls it again.
    oldApi.emit("tool_call", toolCall("edit", { path: "late.rs" }), staleCtx());
    assert.equal(service.connections.length, 2);
    assert.deepEqual([...oldApi.forbidden, ...newApi.forbidden], []);
  });
});

describe("robustness", () => {
  const garbageEvents: unknown[] = [
    undefined,
    null,
    42,
    "text",
    [],
    {},
    { toolName: 5, input: null },
    { toolName: "", input: "x" },
    { toolName: "edit", input: { path: 7, paths: [null, {}], edits: "nope" } },
    { reason: { nested: true } },
    { toolName: "edit", isError: "yes" },
  ];
  const throwingUiCtx = {
    cwd: "/definitely/not/here",
    hasUI: true,
    ui: {
      notify: () => {
        throw new Error("ui down");
      },
      setStatus: () => {
        throw new Error("ui down");
      },
    },
    sessionManager: {
      getSessionId: () => {
        throw new Error("no session");
      },
    },
  };

  it("never throws from any handler, the factory or the command, whatever it is given", async () => {
    service = await FakeService.start(socketPath);
    const factoryFn = factory();
    for (const api of [undefined, null, 42, "api", {}, { on: "not a function" }]) {
      assert.doesNotThrow(() => factoryFn(api as never));
    }
    const throwingApi = {
      on: () => {
        throw new Error("stale API");
      },
      registerCommand: () => {
        throw new Error("stale API");
      },
    };
    assert.doesNotThrow(() => factoryFn(throwingApi as never));

    const api = new FakeApi();
    factoryFn(api.asApi());
    const contexts: unknown[] = [undefined, null, 42, {}, { ui: null }, staleCtx(), throwingUiCtx, new FakeCtx(sandbox.workspace, "sess-g")];
    for (const ctx of contexts) {
      for (const event of garbageEvents) {
        for (const hook of ["session_start", "tool_call", "tool_result"]) {
          assert.deepEqual(api.emit(hook, event, ctx), [undefined], `${hook} with ${JSON.stringify(event)}`);
        }
      }
    }
    for (const args of [undefined, 42, {}, "status extra words", "sync"]) {
      await assert.doesNotReject(api.command().handler(args as never, staleCtx()));
    }
    await waitUntil(() => service!.frames().some((f) => f.type === "tool_result"), "some frames");
    await assert.doesNotReject(api.emitAsync("session_shutdown", null, staleCtx()));
    await assert.doesNotReject(api.emitAsync("session_shutdown", 42, undefined));

    // Whatever went out is well-formed.
    for (const frame of service.frames()) {
      if (frame.type === "tool_call") {
        assert.equal(typeof frame.session, "string");
        assert.equal(typeof frame.tool, "string");
        assert.ok(Array.isArray(frame.paths) && (frame.paths as unknown[]).every((p) => typeof p === "string"));
      }
      if (frame.type === "session_start") {
        assert.equal(typeof frame.reason, "string");
      }
    }
    assert.deepEqual(api.forbidden, []);
  });

  it("survives garbage from the service and still shows the next good notice", async () => {
    const { ctx, fake } = await startedSession("sess-x");
    for (const line of ["not json", "[1,2]", "null", '{"type":"notice"}', '{"type":"state"}', '{"type":"notice","text":5}', '{"type":"ack","id":999}', '{"type":"error","code":"bad_json","message":"?"}', '\r']) {
      fake.push(line);
    }
    fake.push({ type: "notice", level: "shout", text: "still here", audience: "user" });
    fake.push({ type: "notice", level: "info", text: "for an agent", audience: "agent" });
    fake.push({ type: "state", status: "fresh", edit_epoch: 0, syncing: false });
    await waitUntil(() => ctx.footer() === "graph: fresh", "the good state");
    assert.deepEqual(ctx.notifications, [["still here", "info"]]);
    assert.ok(count("line_ignored") >= 5);
  });

  it("drops a connection that sends an endless line, without error UI", async () => {
    const { ctx, fake } = await startedSession("sess-big");
    fake.push("x".repeat(100 * 1024));
    await waitUntil(() => count("disconnected") === 1, "the bridge to drop the connection");
    assert.equal(count("line_too_long"), 1);
    assert.deepEqual(ctx.notifications, []);
  });

  it("goes silent when the service refuses the protocol", async () => {
    service = await FakeService.start(socketPath);
    service.answer = (f) =>
      f.type === "hello" ? { type: "error", code: "unsupported_protocol", message: "protocol 1 is not supported" } : undefined;
    const api = new FakeApi();
    const ctx = new FakeCtx(sandbox.workspace, "sess-p");
    factory()(api.asApi());
    api.emit("session_start", { type: "session_start", reason: "startup" }, ctx);
    await waitUntil(() => count("disconnected") === 1, "the bridge to hang up");
    const before = service.frames().length;
    api.emit("tool_call", toolCall("edit", { path: "x" }), ctx);
    await api.command().handler("status", ctx);
    assert.equal(service.frames().length, before, "nothing more is sent");
    assert.equal(service.connections.length, 1, "no reconnect");
    assert.deepEqual(ctx.statuses, []);
  });
});
