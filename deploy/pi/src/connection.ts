/**
 * One client connection to the workspace's cgc-fresh service.
 *
 * Everything here is fire-and-forget from the caller's point of view:
 * `send` never waits and never throws. While no connection is up, frames
 * wait in a bounded queue (oldest dropped first), and the first `send`
 * starts a background connect cycle: a few attempts with short backoff,
 * spawning the service once when nothing answers (if autostart is allowed).
 * A cycle that fails leaves a cool-down before the next one, so a missing
 * service costs nothing but a queue.
 *
 * No timer runs while idle: a dropped connection is re-established by the
 * next frame, not by polling (the service may have exited on purpose).
 *
 * Every (re)connect writes the preamble first — `hello`, `subscribe`, and
 * the current `session_start` — then the queue, so the service always
 * learns the session before its tool events.
 */

import { spawn } from "node:child_process";
import { createConnection, type Socket } from "node:net";
import { StringDecoder } from "node:string_decoder";

import type { DebugSink } from "./debug-log.js";
import {
  decodeServerFrame,
  encodeFrame,
  MAX_LINE_BYTES,
  type ClientFrame,
  type RequestId,
  type ServerFrame,
} from "./frames.js";

/** How to start the service when nothing answers. */
export interface Autostart {
  command: string;
  args: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
}

export interface ConnectionOptions {
  socketPath: string;
  /** The `hello` frame, written first on every connect. */
  hello: ClientFrame;
  /** Absent: never spawn the service. */
  autostart: Autostart | undefined;
  maxQueuedFrames: number;
  /** Waits between connect attempts of one cycle; its length bounds the attempts. */
  retryDelaysMs: readonly number[];
  /** After a failed cycle, no automatic cycle starts before this has passed. */
  cooldownMs: number;
  connectTimeoutMs: number;
  now: () => number;
  /** Every decoded frame from the service, replies included. */
  onFrame: (frame: ServerFrame) => void;
  /** The service became unreachable (a cycle failed, or the connection dropped). */
  onDown: () => void;
  debug: DebugSink;
}

/** Bytes the socket may hold unsent before further events are dropped. */
const MAX_PENDING_WRITE_BYTES = 1024 * 1024;

/** A closed connection is destroyed if the service never finishes its side. */
const CLOSE_GRACE_MS = 5000;

type ConnectOutcome = { socket: Socket } | { error: NodeJS.ErrnoException };

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => {
    setTimeout(resolve, ms).unref();
  });
}

function errorCode(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === "string" ? code : "unknown";
}

/** Codes that mean "nobody is listening there" (as opposed to "not allowed"). */
const NOTHING_LISTENING = new Set(["ENOENT", "ECONNREFUSED"]);

export class ServiceConnection {
  private socket: Socket | undefined;
  private cycle: Promise<void> | undefined;
  private closed = false;
  /** Set when the service refused our protocol: nothing more is sent. */
  private disabled = false;
  private queue: string[] = [];
  private sessionStartLine: string | undefined;
  private nextCycleAt = 0;
  private nextRequestId = 1;
  private readonly pending = new Map<RequestId, (frame: ServerFrame | undefined) => void>();
  private lastWrite: Promise<void> = Promise.resolve();
  private decoder = new StringDecoder("utf8");
  private buffer = "";

  constructor(private readonly options: ConnectionOptions) {}

  /** Whether a connection to the service is up right now. */
  get connected(): boolean {
    return this.socket !== undefined;
  }

  /** Sends an event; queues it while disconnected. Never throws, never waits. */
  send(frame: ClientFrame): void {
    try {
      this.sendLine(encodeFrame(frame));
    } catch (error) {
      this.options.debug("send_failed", { error: String(error) });
    }
  }

  /** Sends an already encoded line (diagnostics and tests). */
  sendLine(line: string): void {
    if (this.closed || this.disabled) return;
    if (Buffer.byteLength(line, "utf8") > MAX_LINE_BYTES) {
      this.options.debug("frame_dropped", { reason: "too_large" });
      return;
    }
    if (this.socket !== undefined) {
      this.write(this.socket, line);
      return;
    }
    this.enqueue(line);
    this.ensureConnecting(false);
  }

  /**
   * Remembers the session's `session_start`, sends it now if connected, and
   * replays it after every later reconnect (the service forgets a
   * connection's sessions when the connection closes).
   */
  setSessionStart(frame: ClientFrame): void {
    try {
      if (this.closed || this.disabled) return;
      this.sessionStartLine = encodeFrame(frame);
      if (this.socket !== undefined) {
        this.write(this.socket, this.sessionStartLine);
      } else {
        this.ensureConnecting(false);
      }
    } catch (error) {
      this.options.debug("send_failed", { error: String(error) });
    }
  }

  /**
   * Sends a request and resolves with its reply, or `undefined` when there
   * is none within `timeoutMs` (no service, connection lost). Never rejects.
   * A person asked for this, so a cool-down does not hold it back.
   */
  request(type: "status" | "sync", timeoutMs: number): Promise<ServerFrame | undefined> {
    if (this.closed || this.disabled) return Promise.resolve(undefined);
    const id = this.nextRequestId++;
    const reply = new Promise<ServerFrame | undefined>((resolve) => {
      const timer = setTimeout(() => settle(undefined), timeoutMs);
      const settle = (frame: ServerFrame | undefined): void => {
        clearTimeout(timer);
        this.pending.delete(id);
        resolve(frame);
      };
      this.pending.set(id, settle);
    });
    this.ensureConnecting(true);
    this.send({ type, id });
    return reply;
  }

  /**
   * Waits, at most `timeoutMs`, until a running connect cycle has ended and
   * everything written has left for the service. Never rejects.
   */
  async flush(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    const drained = (async () => {
      if (this.cycle !== undefined) await this.cycle;
      await this.lastWrite;
    })().catch(() => undefined);
    try {
      await Promise.race([drained, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Ends the connection after what is written; queued frames still go out
   * if a running connect cycle succeeds. Nothing is sent afterwards.
   */
  close(): void {
    this.closed = true;
    this.failPending();
    const socket = this.socket;
    if (socket !== undefined) this.endSocket(socket);
  }

  private endSocket(socket: Socket): void {
    try {
      socket.end();
      setTimeout(() => socket.destroy(), CLOSE_GRACE_MS).unref();
    } catch {
      socket.destroy();
    }
  }

  private enqueue(line: string): void {
    this.queue.push(line);
    const excess = this.queue.length - this.options.maxQueuedFrames;
    if (excess > 0) {
      this.queue.splice(0, excess);
      this.options.debug("frame_dropped", { reason: "queue_full", dropped: excess });
    }
  }

  private write(socket: Socket, line: string): void {
    if (socket.destroyed || !socket.writable) {
      this.enqueue(line);
      return;
    }
    if (socket.writableLength > MAX_PENDING_WRITE_BYTES) {
      this.options.debug("frame_dropped", { reason: "service_not_reading" });
      return;
    }
    this.lastWrite = new Promise<void>((resolve) => {
      socket.write(line, () => resolve());
    });
  }

  private ensureConnecting(force: boolean): void {
    if (this.closed || this.disabled || this.socket !== undefined || this.cycle !== undefined) return;
    if (!force && this.options.now() < this.nextCycleAt) return;
    this.cycle = this.runCycle()
      .catch((error: unknown) => this.options.debug("connect_cycle_failed", { error: String(error) }))
      .finally(() => {
        this.cycle = undefined;
      });
  }

  private async runCycle(): Promise<void> {
    const { retryDelaysMs, socketPath } = this.options;
    let spawned = false;
    for (let attempt = 0; ; attempt++) {
      if (this.disabled) return;
      const outcome = await this.tryConnect();
      if ("socket" in outcome) {
        this.attach(outcome.socket);
        return;
      }
      const code = errorCode(outcome.error);
      this.options.debug("connect_failed", { socket: socketPath, code, attempt });
      if (!spawned && NOTHING_LISTENING.has(code) && this.options.autostart !== undefined && !this.closed) {
        spawned = true;
        this.spawnService(this.options.autostart);
      }
      const delay = retryDelaysMs[attempt];
      if (delay === undefined) break;
      await sleep(delay);
    }
    this.nextCycleAt = this.options.now() + this.options.cooldownMs;
    this.failPending();
    this.options.debug("service_unreachable", { socket: socketPath, queued: this.queue.length });
    this.options.onDown();
  }

  private tryConnect(): Promise<ConnectOutcome> {
    return new Promise((resolve) => {
      let socket: Socket;
      try {
        socket = createConnection({ path: this.options.socketPath });
      } catch (error) {
        resolve({ error: error as NodeJS.ErrnoException });
        return;
      }
      const timer = setTimeout(() => {
        socket.destroy();
        resolve({ error: Object.assign(new Error("connect timed out"), { code: "ETIMEDOUT" }) });
      }, this.options.connectTimeoutMs);
      timer.unref();
      socket.once("connect", () => {
        clearTimeout(timer);
        socket.removeAllListeners("error");
        resolve({ socket });
      });
      socket.once("error", (error: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        socket.destroy();
        resolve({ error });
      });
    });
  }

  private spawnService(autostart: Autostart): void {
    try {
      const child = spawn(autostart.command, autostart.args, {
        cwd: autostart.cwd,
        env: autostart.env,
        detached: true,
        stdio: "ignore",
      });
      child.on("error", (error) => this.options.debug("autostart_failed", { error: error.message }));
      child.unref();
      this.options.debug("autostart", { command: autostart.command, args: autostart.args, pid: child.pid });
    } catch (error) {
      this.options.debug("autostart_failed", { error: String(error) });
    }
  }

  private attach(socket: Socket): void {
    // The bridge must never keep Pi alive on its own.
    socket.unref();
    this.socket = socket;
    this.decoder = new StringDecoder("utf8");
    this.buffer = "";
    socket.on("data", (chunk: Buffer) => this.onData(socket, chunk));
    socket.on("error", (error: NodeJS.ErrnoException) =>
      this.options.debug("connection_error", { code: errorCode(error) }),
    );
    socket.on("close", () => this.onClose(socket));
    this.options.debug("connected", { socket: this.options.socketPath, queued: this.queue.length });

    this.write(socket, encodeFrame(this.options.hello));
    this.write(socket, encodeFrame({ type: "subscribe" }));
    if (this.sessionStartLine !== undefined) this.write(socket, this.sessionStartLine);
    const queued = this.queue;
    this.queue = [];
    for (const line of queued) this.write(socket, line);
    if (this.closed) this.endSocket(socket);
  }

  private onData(socket: Socket, chunk: Buffer): void {
    try {
      this.buffer += this.decoder.write(chunk);
      let newline = this.buffer.indexOf("\n");
      while (newline >= 0) {
        if (newline > MAX_LINE_BYTES) break;
        const line = this.buffer.slice(0, newline).replace(/\r$/, "");
        this.buffer = this.buffer.slice(newline + 1);
        if (line.trim() !== "") this.onLine(line);
        newline = this.buffer.indexOf("\n");
      }
      if (newline > MAX_LINE_BYTES || (newline < 0 && this.buffer.length > MAX_LINE_BYTES)) {
        // Not a peer speaking the protocol (the service never sends such a
        // line); the stream cannot be re-synchronised, so hang up. The next
        // frame starts over with a new connection.
        this.options.debug("line_too_long", { chars: this.buffer.length });
        this.buffer = "";
        socket.destroy();
      }
    } catch (error) {
      this.options.debug("read_failed", { error: String(error) });
    }
  }

  private onLine(line: string): void {
    const frame = decodeServerFrame(line);
    if (frame === undefined) {
      this.options.debug("line_ignored", { chars: line.length });
      return;
    }
    const waiting = frame.id !== undefined ? this.pending.get(frame.id) : undefined;
    if (waiting !== undefined) {
      waiting(frame);
    } else if (frame.type === "welcome") {
      this.options.debug("welcome", { pid: frame.pid, workspace: frame.workspace, version: frame.service_version });
    } else if (frame.type === "error") {
      this.options.debug("server_error", { code: frame.code, message: frame.message, field: frame.field });
      if (frame.code === "unsupported_protocol") {
        // This service speaks another protocol: stay silent from now on.
        this.disabled = true;
        this.queue = [];
        this.socket?.destroy();
      }
    }
    try {
      this.options.onFrame(frame);
    } catch (error) {
      this.options.debug("frame_handler_failed", { error: String(error) });
    }
  }

  private onClose(socket: Socket): void {
    if (this.socket !== socket) return;
    this.socket = undefined;
    this.failPending();
    this.options.debug("disconnected", { socket: this.options.socketPath });
    if (!this.closed) this.options.onDown();
  }

  private failPending(): void {
    for (const settle of [...this.pending.values()]) settle(undefined);
  }
}
