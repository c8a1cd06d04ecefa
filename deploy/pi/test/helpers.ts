/**
 * Test fixtures: a stand-in Pi API and context that record what the bridge
 * does, a fake JSON-lines service on a temp socket, per-test directories
 * and environments, and a runner for the real `cgc-fresh` binary.
 */

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from "node:fs";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

export type Frame = Record<string, unknown>;
type Handler = (event: unknown, ctx: unknown) => unknown;

/** Waits until `condition` holds, polling; fails with `what` after `timeoutMs`. */
export async function waitUntil(condition: () => boolean, what: string, timeoutMs = 8000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

// ---- stand-in Pi API -----------------------------------------------------

/** Records registrations; any call that would reach the agent fails the test. */
export class FakeApi {
  readonly onCalls: string[] = [];
  readonly handlers = new Map<string, Handler[]>();
  readonly commands = new Map<string, { handler: (args: string, ctx: unknown) => Promise<void>; getArgumentCompletions?: (p: string) => unknown }>();
  readonly commandRegistrations: string[] = [];
  readonly forbidden: string[] = [];

  on(event: string, handler: Handler): void {
    this.onCalls.push(event);
    const list = this.handlers.get(event) ?? [];
    list.push(handler);
    this.handlers.set(event, list);
  }

  registerCommand(name: string, options: { handler: (args: string, ctx: unknown) => Promise<void> }): void {
    this.commandRegistrations.push(name);
    this.commands.set(name, options);
  }

  sendMessage(): void {
    this.forbidden.push("sendMessage");
    throw new Error("freshness must never reach the agent: sendMessage was called");
  }

  sendUserMessage(): void {
    this.forbidden.push("sendUserMessage");
    throw new Error("freshness must never reach the agent: sendUserMessage was called");
  }

  appendEntry(): void {
    this.forbidden.push("appendEntry");
    throw new Error("freshness must never reach the session: appendEntry was called");
  }

  asApi(): ExtensionAPI {
    return this as unknown as ExtensionAPI;
  }

  /** Calls every handler of `event` as Pi would, returning their results. */
  emit(event: string, payload: unknown, ctx: unknown): unknown[] {
    return (this.handlers.get(event) ?? []).map((h) => h(payload, ctx));
  }

  async emitAsync(event: string, payload: unknown, ctx: unknown): Promise<unknown[]> {
    return Promise.all(this.emit(event, payload, ctx));
  }

  command(name = "cgc-fresh") {
    const command = this.commands.get(name);
    if (command === undefined) throw new Error(`command ${name} not registered`);
    return command;
  }
}

/** A context whose UI records calls. */
export class FakeCtx {
  readonly notifications: Array<[string, string | undefined]> = [];
  readonly statuses: Array<[string, string | undefined]> = [];
  hasUI = true;
  readonly ui = {
    notify: (text: string, level?: string) => {
      this.notifications.push([text, level]);
    },
    setStatus: (key: string, text: string | undefined) => {
      this.statuses.push([key, text]);
    },
  };
  readonly sessionManager: { getSessionId: () => string; getCwd: () => string };

  constructor(
    readonly cwd: string,
    public sessionId: string,
  ) {
    this.sessionManager = { getSessionId: () => this.sessionId, getCwd: () => this.cwd };
  }

  /** The footer text last set for `key`. */
  footer(key = "cgc-fresh"): string | undefined {
    const mine = this.statuses.filter(([k]) => k === key);
    return mine.length > 0 ? mine[mine.length - 1]![1] : undefined;
  }
}

/** A context whose every getter throws, like Pi's after a session replacement. */
export function staleCtx(): unknown {
  const stale = (): never => {
    throw new Error("This extension ctx is stale after session replacement or reload.");
  };
  return Object.defineProperties(
    {},
    {
      ui: { get: stale },
      hasUI: { get: stale },
      cwd: { get: stale },
      sessionManager: { get: stale },
    },
  );
}

// ---- per-test directories ------------------------------------------------

export interface Sandbox {
  root: string;
  /** The canonical workspace directory. */
  workspace: string;
  runtimeDir: string;
  env: Record<string, string | undefined>;
  cleanup(): void;
}

/** A temp workspace with its own XDG_RUNTIME_DIR, XDG_STATE_HOME and HOME. */
export function makeSandbox(): Sandbox {
  const root = realpathSync(mkdtempSync(join(tmpdir(), "cgcpi-")));
  const workspace = join(root, "ws");
  const runtimeDir = join(root, "run");
  mkdirSync(workspace);
  mkdirSync(runtimeDir, { mode: 0o700 });
  mkdirSync(join(root, "state"));
  mkdirSync(join(root, "home"));
  const env: Record<string, string | undefined> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith("CGC_")) env[key] = value;
  }
  Object.assign(env, {
    XDG_RUNTIME_DIR: runtimeDir,
    XDG_STATE_HOME: join(root, "state"),
    HOME: join(root, "home"),
    CGC_FRESHNESS_AUTO_SYNC: "false",
    CGC_EXECUTABLE: join(root, "no-such-cgc"),
  });
  return {
    root,
    workspace,
    runtimeDir,
    env,
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
}

// ---- fake service --------------------------------------------------------

export interface FakeConnection {
  socket: Socket;
  frames: Frame[];
  ended: boolean;
}

/**
 * A JSON-lines server that records every frame, answers `status` with a
 * `state` and `sync` with an `ack` (both echoing the id), and can push frames.
 */
export class FakeService {
  readonly connections: FakeConnection[] = [];
  readonly rawLines: string[] = [];
  /** Replaces the default answer to a request; return undefined for none. */
  answer: (frame: Frame) => Frame | undefined = (frame) => {
    if (frame.type === "status") return { id: frame.id, type: "state", workspace: "/w", status: "unknown", edit_epoch: 0, syncing: false };
    if (frame.type === "sync") return { id: frame.id, type: "ack" };
    return undefined;
  };

  private constructor(
    private readonly server: Server,
    readonly socketPath: string,
  ) {}

  static start(socketPath: string): Promise<FakeService> {
    return new Promise((resolvePromise, reject) => {
      const server = createServer();
      const service = new FakeService(server, socketPath);
      server.on("connection", (socket) => service.accept(socket));
      server.once("error", reject);
      server.listen(socketPath, () => resolvePromise(service));
    });
  }

  private accept(socket: Socket): void {
    const connection: FakeConnection = { socket, frames: [], ended: false };
    this.connections.push(connection);
    let buffer = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      buffer += chunk;
      let newline = buffer.indexOf("\n");
      while (newline >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 1);
        this.rawLines.push(line);
        const frame = JSON.parse(line) as Frame;
        connection.frames.push(frame);
        const reply = this.answer(frame);
        if (reply !== undefined) socket.write(`${JSON.stringify(reply)}\n`);
        newline = buffer.indexOf("\n");
      }
    });
    socket.on("end", () => {
      connection.ended = true;
    });
    socket.on("error", () => undefined);
  }

  /** Every frame from every connection, in arrival order per connection. */
  frames(): Frame[] {
    return this.connections.flatMap((c) => c.frames);
  }

  /** Writes a frame (or a raw line) to every connection. */
  push(frame: Frame | string): void {
    const line = typeof frame === "string" ? frame : JSON.stringify(frame);
    for (const c of this.connections) if (!c.socket.destroyed) c.socket.write(`${line}\n`);
  }

  /** Drops every client connection (a service crash, as seen by clients). */
  dropClients(): void {
    for (const c of this.connections) c.socket.destroy();
  }

  close(): Promise<void> {
    for (const c of this.connections) c.socket.destroy();
    return new Promise((r) => this.server.close(() => r()));
  }
}

// ---- the real service ----------------------------------------------------

const here = dirname(fileURLToPath(import.meta.url));

/** The package root (`deploy/pi`), from `dist/test`. */
export const packageRoot = resolve(here, "..", "..");

/** The real binary: `CGC_FRESH_BIN`, else the workspace's debug build, if present. */
export function cgcFreshBin(): string | undefined {
  const fromEnv = process.env.CGC_FRESH_BIN;
  if (fromEnv !== undefined && fromEnv !== "") return fromEnv;
  const debugBuild = resolve(packageRoot, "..", "..", "target", "debug", "cgc-fresh");
  return existsSync(debugBuild) ? debugBuild : undefined;
}

export interface RealService {
  child: ChildProcess;
  logLines: string[];
  stop(): Promise<void>;
}

/** Runs `cgc-fresh serve --workspace <ws>` with `env` until it serves. */
export async function startRealService(bin: string, workspace: string, env: Record<string, string | undefined>): Promise<RealService> {
  const child = spawn(bin, ["serve", "--workspace", workspace], { env, stdio: ["ignore", "ignore", "pipe"] });
  const logLines: string[] = [];
  let exited = false;
  child.on("exit", () => {
    exited = true;
  });
  let pending = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk: string) => {
    pending += chunk;
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    logLines.push(...lines);
  });
  await waitUntil(() => exited || logLines.some((l) => l.includes('"serving"')), "the service to serve", 15000);
  if (exited) throw new Error(`cgc-fresh serve exited early:\n${logLines.join("\n")}`);
  return {
    child,
    logLines,
    stop: () => stopProcess(child),
  };
}

export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  child.kill("SIGTERM");
  const killer = setTimeout(() => child.kill("SIGKILL"), 5000);
  await exited;
  clearTimeout(killer);
}

/** Stops a process we did not spawn (an autostarted service) by pid. */
export async function stopPid(pid: number): Promise<void> {
  const alive = (): boolean => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  if (!alive()) return;
  process.kill(pid, "SIGTERM");
  try {
    await waitUntil(() => !alive(), `pid ${pid} to exit`, 5000);
  } catch {
    if (alive()) process.kill(pid, "SIGKILL");
  }
}

/** A raw protocol client: sends frames, collects replies. */
export class RawClient {
  readonly frames: Frame[] = [];
  private constructor(private readonly socket: Socket) {
    let buffer = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      buffer += chunk;
      let newline = buffer.indexOf("\n");
      while (newline >= 0) {
        this.frames.push(JSON.parse(buffer.slice(0, newline)) as Frame);
        buffer = buffer.slice(newline + 1);
        newline = buffer.indexOf("\n");
      }
    });
    socket.on("error", () => undefined);
  }

  static connect(path: string): Promise<RawClient> {
    return new Promise((r, reject) => {
      const socket = createConnection({ path });
      socket.once("connect", () => r(new RawClient(socket)));
      socket.once("error", reject);
    });
  }

  send(frame: Frame): void {
    this.socket.write(`${JSON.stringify(frame)}\n`);
  }

  async reply(id: number | string, timeoutMs = 5000): Promise<Frame> {
    await waitUntil(() => this.frames.some((f) => f.id === id), `a reply with id ${String(id)}`, timeoutMs);
    return this.frames.find((f) => f.id === id)!;
  }

  close(): void {
    this.socket.destroy();
  }
}
