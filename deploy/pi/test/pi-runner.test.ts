/**
 * The package as Pi itself loads and drives it: Pi's own extension loader
 * (`discoverAndLoadExtensions`, reading the `pi.extensions` manifest in
 * package.json) and Pi's own `ExtensionRunner`, against a fake service.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import {
  AuthStorage,
  discoverAndLoadExtensions,
  ExtensionRunner,
  ModelRegistry,
  SessionManager,
  type ExtensionUIContext,
} from "@mariozechner/pi-coding-agent";

import { FakeService, makeSandbox, packageRoot, waitUntil, type Sandbox } from "./helpers.js";

let sandbox: Sandbox;
let service: FakeService;

before(async () => {
  sandbox = makeSandbox();
  const socketPath = join(sandbox.root, "fake.sock");
  service = await FakeService.start(socketPath);
  // The default export reads process.env when Pi calls it.
  process.env.CGC_FRESH_SOCKET = socketPath;
  process.env.CGC_FRESH_NO_AUTOSTART = "1";
});

after(async () => {
  await service.close();
  sandbox.cleanup();
});

describe("inside Pi's extension runner", () => {
  it("loads from the package manifest, forwards the real session id, notifies, and stays out of the prompt", async () => {
    const loaded = await discoverAndLoadExtensions([packageRoot], sandbox.workspace, join(sandbox.root, "agent"));
    assert.deepEqual(loaded.errors, []);
    assert.equal(loaded.extensions.length, 1);
    const extension = loaded.extensions[0]!;
    assert.deepEqual([...extension.handlers.keys()].sort(), ["session_shutdown", "session_start", "tool_call", "tool_result"]);
    assert.deepEqual([...extension.commands.keys()], ["cgc-fresh"]);

    const sessions = SessionManager.inMemory(sandbox.workspace);
    const runner = new ExtensionRunner(
      loaded.extensions,
      loaded.runtime,
      sandbox.workspace,
      sessions,
      ModelRegistry.inMemory(AuthStorage.inMemory()),
    );
    const notices: Array<[string, string | undefined]> = [];
    const statuses: Array<[string, string | undefined]> = [];
    runner.setUIContext({
      notify: (text: string, level?: string) => notices.push([text, level]),
      setStatus: (key: string, text: string | undefined) => statuses.push([key, text]),
    } as unknown as ExtensionUIContext);
    const errors: unknown[] = [];
    runner.onError((e) => errors.push(e));
    assert.equal(runner.hasHandlers("before_agent_start"), false);
    assert.equal(runner.hasHandlers("context"), false);

    await runner.emit({ type: "session_start", reason: "startup" });
    const blocked = await runner.emitToolCall({ type: "tool_call", toolCallId: "c1", toolName: "edit", input: { path: "src/x.rs", edits: [] } });
    assert.equal(blocked, undefined, "the bridge never blocks a tool");
    const patched = await runner.emitToolResult({
      type: "tool_result",
      toolCallId: "c1",
      toolName: "edit",
      input: { path: "src/x.rs", edits: [] },
      content: [{ type: "text", text: "ok" }],
      isError: false,
      details: undefined,
    });
    assert.equal(patched, undefined, "the bridge never changes a tool result");

    const session = sessions.getSessionId();
    await waitUntil(() => service.frames().length === 5, "the forwarded frames");
    assert.deepEqual(service.frames().slice(2), [
      { type: "session_start", session, reason: "startup" },
      { type: "tool_call", session, tool: "edit", paths: ["src/x.rs"] },
      { type: "tool_result", session, tool: "edit", ok: true },
    ]);

    service.push({ type: "notice", session, condition: "possibly_stale", level: "warning", text: "graph may be stale", audience: "user" });
    service.push({ type: "state", status: "possibly_stale", stale_since: Date.now(), edit_epoch: 1, syncing: false });
    await waitUntil(() => statuses.some(([, t]) => t?.startsWith("graph: possibly stale since") === true), "the footer");
    assert.deepEqual(notices, [["graph may be stale", "warning"]]);

    // Pi emits session_shutdown, then invalidates the instance: every ctx
    // getter throws from then on. Late frames must not surface or throw.
    await runner.emit({ type: "session_shutdown", reason: "quit" });
    runner.invalidate();
    await waitUntil(() => service.connections[0]?.ended === true, "the connection to close");
    assert.deepEqual(service.frames().at(-1), { type: "session_shutdown", session, reason: "quit" });
    assert.deepEqual(statuses.at(-1), ["cgc-fresh", undefined], "the footer is cleared on shutdown");
    assert.deepEqual(errors, [], "no handler reported an error to Pi");
  });
});
