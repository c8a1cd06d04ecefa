/**
 * One bridge per Pi extension API instance: it forwards the session's
 * events to the service and shows what the service says to the person.
 *
 * Pi API facts used here, read from `@mariozechner/pi-coding-agent` 0.73:
 * - `dist/core/extensions/types.d.ts`: `ExtensionAPI.on(event, handler)`,
 *   `registerCommand(name, { description, getArgumentCompletions, handler })`;
 *   `SessionStartEvent.reason` ("startup" | "reload" | "new" | "resume" |
 *   "fork"); `SessionShutdownEvent.reason` ("quit" | "reload" | "new" |
 *   "resume" | "fork"); `ToolCallEvent { toolName, toolCallId, input }`;
 *   `ToolResultEvent { toolName, input, isError, … }`;
 *   `ExtensionContext { ui, hasUI, cwd, sessionManager }`;
 *   `ExtensionUIContext.notify(message, "info" | "warning" | "error")` and
 *   `setStatus(key, text | undefined)` (footer; `undefined` clears).
 * - `dist/core/session-manager.d.ts`: `ReadonlySessionManager.getSessionId()`.
 * - `dist/core/extensions/runner.js`: `emitToolCall` does NOT catch handler
 *   errors (a throw there would break the agent's tool call), and every
 *   `ctx` getter throws once the instance is stale after a session
 *   replacement — so every handler here is guarded and every `ctx` access
 *   is wrapped.
 * - `docs/extensions.md`: on `/new`, `/resume`, `/fork` and `/reload`, Pi
 *   emits `session_shutdown` to the old instance, re-runs the factory with a
 *   new API, then emits `session_start` to it.
 *
 * Freshness is for the person only: the bridge never calls `sendMessage`,
 * `sendUserMessage` or `appendEntry`, and hooks no prompt or context event.
 */

import { randomBytes } from "node:crypto";

import type {
  ExtensionAPI,
  ExtensionCommandContext,
  ExtensionContext,
  SessionShutdownEvent,
  SessionStartEvent,
  ToolCallEvent,
  ToolResultEvent,
} from "@mariozechner/pi-coding-agent";

import { ServiceConnection, type Autostart } from "./connection.js";
import type { DebugSink } from "./debug-log.js";
import { CLIENT_NAME, PROTOCOL_VERSION, type NoticeFrame, type ServerFrame, type StateFrame } from "./frames.js";
import { canonicalWorkspace, envVar, socketPathFor, type Env } from "./socket-path.js";
import { footerText, statusReport } from "./status-text.js";
import { pathsFromToolInput } from "./tool-paths.js";

/** The footer slot the bridge owns. */
export const STATUS_KEY = "cgc-fresh";

/** The slash command: `/cgc-fresh [status|sync]`. */
export const COMMAND_NAME = "cgc-fresh";

/** Notices kept while no UI is known yet (before the first handler runs). */
const MAX_HELD_NOTICES = 20;

/** A notice longer than this is cut; the footer and notices are glanceable. */
const MAX_NOTICE_CHARS = 2000;

export interface BridgeSettings {
  env: Env;
  now: () => number;
  retryDelaysMs: readonly number[];
  cooldownMs: number;
  connectTimeoutMs: number;
  requestTimeoutMs: number;
  shutdownFlushMs: number;
  maxQueuedFrames: number;
  debug: DebugSink;
}

/** What diagnostics and tests may see of a bridge. */
export interface BridgeHandle {
  /** The `instance` sent in `hello`. */
  readonly instance: string;
  /** Sends one raw line as is (diagnostics only). */
  sendRawLine(line: string): void;
}

type UiLike = {
  notify?: (message: string, type?: "info" | "warning" | "error") => void;
  setStatus?: (key: string, text: string | undefined) => void;
};

function asRecord(value: unknown): Record<string, unknown> {
  return typeof value === "object" && value !== null ? (value as Record<string, unknown>) : {};
}

function nonEmptyString(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

/** A fresh id for one extension instance, sent in `hello`. */
export function newInstanceId(): string {
  return `pi-${process.pid}-${randomBytes(6).toString("hex")}`;
}

export class Bridge {
  readonly instance = newInstanceId();
  private ctx: ExtensionContext | undefined;
  private session: string | undefined;
  private connection: ServiceConnection | undefined;
  private state: StateFrame | undefined;
  /** The footer text last set, so unchanged text is not set again. */
  private shownFooter: string | undefined;
  private heldNotices: NoticeFrame[] = [];
  /** After `session_shutdown`: nothing more is sent or shown. */
  private ended = false;

  constructor(private readonly settings: BridgeSettings) {}

  handle(): BridgeHandle {
    return {
      instance: this.instance,
      sendRawLine: (line: string) => this.connection?.sendLine(line),
    };
  }

  /** Subscribes the hooks and the command on `pi`. Each step is guarded. */
  register(pi: ExtensionAPI): void {
    this.guard("register_session_start", () =>
      pi.on("session_start", (event: SessionStartEvent, ctx: ExtensionContext) =>
        this.guard("session_start", () => this.onSessionStart(event, ctx)),
      ),
    );
    this.guard("register_tool_call", () =>
      pi.on("tool_call", (event: ToolCallEvent, ctx: ExtensionContext) =>
        this.guard("tool_call", () => this.onToolCall(event, ctx)),
      ),
    );
    this.guard("register_tool_result", () =>
      pi.on("tool_result", (event: ToolResultEvent, ctx: ExtensionContext) =>
        this.guard("tool_result", () => this.onToolResult(event, ctx)),
      ),
    );
    this.guard("register_session_shutdown", () =>
      pi.on("session_shutdown", (event: SessionShutdownEvent, ctx: ExtensionContext) =>
        this.onSessionShutdown(event, ctx),
      ),
    );
    this.guard("register_command", () =>
      pi.registerCommand(COMMAND_NAME, {
        description: "Code graph freshness: /cgc-fresh status | /cgc-fresh sync",
        getArgumentCompletions: (prefix: string) => {
          try {
            const items = ["status", "sync"].filter((s) => s.startsWith(String(prefix ?? "").trim()));
            return items.length > 0 ? items.map((value) => ({ value, label: value })) : null;
          } catch {
            return null;
          }
        },
        handler: (args: string, ctx: ExtensionCommandContext) => this.onCommand(args, ctx),
      }),
    );
  }

  // ---- handlers -------------------------------------------------------

  private onSessionStart(event: unknown, ctx: unknown): void {
    this.remember(ctx);
    if (this.ended) {
      // A harness that reuses an instance after shutdown gets a new connection.
      this.ended = false;
      this.connection = undefined;
      this.state = undefined;
    }
    const session = this.sessionId(ctx);
    this.session = session;
    const reason = nonEmptyString(asRecord(event).reason) ?? "other";
    this.ensureConnection(ctx).setSessionStart({ type: "session_start", session, reason });
    this.renderFooter();
  }

  private onToolCall(event: unknown, ctx: unknown): void {
    this.remember(ctx);
    if (this.ended) return;
    const record = asRecord(event);
    const tool = nonEmptyString(record.toolName);
    if (tool === undefined) return;
    const paths = pathsFromToolInput(record.input);
    this.ensureConnection(ctx).send({ type: "tool_call", session: this.sessionId(ctx), tool, paths });
    this.renderFooter();
  }

  private onToolResult(event: unknown, ctx: unknown): void {
    this.remember(ctx);
    if (this.ended) return;
    const record = asRecord(event);
    const tool = nonEmptyString(record.toolName);
    if (tool === undefined) return;
    const ok = record.isError !== true;
    this.ensureConnection(ctx).send({ type: "tool_result", session: this.sessionId(ctx), tool, ok });
    this.renderFooter();
  }

  /** Pi exits right after this, so the final frame is flushed (bounded). */
  private async onSessionShutdown(event: unknown, ctx: unknown): Promise<void> {
    try {
      this.remember(ctx);
      if (this.ended) return;
      this.ended = true;
      this.setFooter(undefined);
      const connection = this.connection;
      if (connection !== undefined) {
        const reason = nonEmptyString(asRecord(event).reason);
        const session = this.sessionId(ctx);
        connection.send(
          reason !== undefined
            ? { type: "session_shutdown", session, reason }
            : { type: "session_shutdown", session },
        );
        await connection.flush(this.settings.shutdownFlushMs);
        connection.close();
      }
    } catch (error) {
      this.settings.debug("handler_failed", { handler: "session_shutdown", error: String(error) });
    } finally {
      // The context goes stale once Pi tears this instance down.
      this.ctx = undefined;
      this.heldNotices = [];
    }
  }

  private async onCommand(args: unknown, ctx: unknown): Promise<void> {
    try {
      this.remember(ctx);
      const words = (typeof args === "string" ? args : "").trim().split(/\s+/);
      const subcommand = words[0] === "" || words[0] === undefined ? "status" : words[0];
      if (subcommand === "status") {
        await this.commandStatus(ctx);
      } else if (subcommand === "sync") {
        await this.commandSync(ctx);
      } else {
        this.notify(`usage: /${COMMAND_NAME} [status|sync]`, "info");
      }
    } catch (error) {
      this.settings.debug("handler_failed", { handler: "command", error: String(error) });
    }
  }

  private async commandStatus(ctx: unknown): Promise<void> {
    const reply = await this.requestFor(ctx, "status");
    if (reply?.type === "state") {
      this.notify(statusReport(reply, this.settings.now()), "info");
    } else if (reply?.type === "error") {
      this.notify(`cgc-fresh: ${reply.message}`, "warning");
    } else {
      this.notify("cgc-fresh: no service is running for this workspace", "info");
    }
  }

  private async commandSync(ctx: unknown): Promise<void> {
    const reply = await this.requestFor(ctx, "sync");
    if (reply?.type === "ack") {
      this.notify("cgc-fresh: sync requested", "info");
    } else if (reply?.type === "error") {
      this.notify(`cgc-fresh: sync not started: ${reply.message}`, "warning");
    } else if (reply !== undefined) {
      this.notify("cgc-fresh: sync requested", "info");
    } else {
      this.notify("cgc-fresh: no service is running for this workspace", "info");
    }
  }

  private requestFor(ctx: unknown, type: "status" | "sync"): Promise<ServerFrame | undefined> {
    if (this.ended) return Promise.resolve(undefined);
    return this.ensureConnection(ctx).request(type, this.settings.requestTimeoutMs);
  }

  // ---- service frames -------------------------------------------------

  private onFrame(frame: ServerFrame): void {
    if (this.ended) return;
    if (frame.type === "state") {
      this.state = frame;
      this.renderFooter();
    } else if (frame.type === "notice") {
      this.onNotice(frame);
    } else if (frame.type === "error" && frame.code === "unavailable" && frame.id === undefined) {
      // Unasked for, this is the service refusing this session (its
      // live-session bound): the person should know the graph's freshness
      // is not tracked as theirs. Errors answering a request are shown by
      // that request's handler; others answer malformed frames and stay in
      // the debug log.
      this.notify(`cgc-fresh: ${frame.message}`.slice(0, MAX_NOTICE_CHARS), "warning");
    }
  }

  private onNotice(notice: NoticeFrame): void {
    // Notices are for the person at this harness, about this session or
    // the whole workspace; never for an agent, never for another session.
    if (notice.audience !== undefined && notice.audience !== "user") return;
    if (notice.session !== undefined && this.session !== undefined && notice.session !== this.session) return;
    if (this.ui() === undefined) {
      this.heldNotices.push(notice);
      if (this.heldNotices.length > MAX_HELD_NOTICES) this.heldNotices.shift();
      return;
    }
    this.notify(notice.text.slice(0, MAX_NOTICE_CHARS), notice.level);
  }

  private onServiceDown(): void {
    // A missing or dead service shows nothing rather than an old claim.
    this.state = undefined;
    if (!this.ended) this.setFooter(undefined);
  }

  // ---- plumbing -------------------------------------------------------

  private ensureConnection(ctx: unknown): ServiceConnection {
    if (this.connection !== undefined) return this.connection;
    const { env } = this.settings;
    const workspace = canonicalWorkspace(this.cwdOf(ctx));
    const socketPath = socketPathFor(workspace, env);
    const autostart: Autostart | undefined =
      envVar(env, "CGC_FRESH_NO_AUTOSTART") === undefined
        ? {
            command: envVar(env, "CGC_FRESH_BIN") ?? "cgc-fresh",
            args: ["serve", "--workspace", workspace, "--socket", socketPath],
            cwd: workspace,
            env: { ...env },
          }
        : undefined;
    this.settings.debug("bridge_started", { instance: this.instance, workspace, socket: socketPath });
    this.connection = new ServiceConnection({
      socketPath,
      hello: { type: "hello", client: CLIENT_NAME, instance: this.instance, protocol: PROTOCOL_VERSION },
      autostart,
      maxQueuedFrames: this.settings.maxQueuedFrames,
      retryDelaysMs: this.settings.retryDelaysMs,
      cooldownMs: this.settings.cooldownMs,
      connectTimeoutMs: this.settings.connectTimeoutMs,
      now: this.settings.now,
      onFrame: (frame) => this.onFrame(frame),
      onDown: () => this.onServiceDown(),
      debug: this.settings.debug,
    });
    return this.connection;
  }

  /** Keeps the latest context: notices arrive between handler calls. */
  private remember(ctx: unknown): void {
    if (typeof ctx !== "object" || ctx === null) return;
    this.ctx = ctx as ExtensionContext;
    if (this.heldNotices.length > 0 && this.ui() !== undefined) {
      const held = this.heldNotices;
      this.heldNotices = [];
      for (const notice of held) this.onNotice(notice);
    }
  }

  private sessionId(ctx: unknown): string {
    try {
      const manager = asRecord(asRecord(ctx).sessionManager);
      const getSessionId = manager.getSessionId;
      if (typeof getSessionId === "function") {
        const id = nonEmptyString(getSessionId.call(manager));
        if (id !== undefined) return id;
      }
    } catch {
      // A stale or odd context: fall back to what we know.
    }
    return this.session ?? this.instance;
  }

  private cwdOf(ctx: unknown): string {
    try {
      const cwd = nonEmptyString(asRecord(ctx).cwd);
      if (cwd !== undefined) return cwd;
    } catch {
      // A stale context throws on every getter.
    }
    return process.cwd();
  }

  private ui(): UiLike | undefined {
    try {
      const ctx = this.ctx as unknown as Record<string, unknown> | undefined;
      if (ctx === undefined || ctx.hasUI === false) return undefined;
      const ui = ctx.ui;
      return typeof ui === "object" && ui !== null ? (ui as UiLike) : undefined;
    } catch {
      return undefined;
    }
  }

  private notify(text: string, level: "info" | "warning" | "error"): void {
    try {
      const ui = this.ui();
      if (typeof ui?.notify === "function") ui.notify(text, level);
    } catch (error) {
      this.settings.debug("ui_failed", { call: "notify", error: String(error) });
    }
  }

  private renderFooter(): void {
    if (this.state === undefined) return;
    this.setFooter(footerText(this.state, this.settings.now()));
  }

  private setFooter(text: string | undefined): void {
    if (text === this.shownFooter) return;
    try {
      const ui = this.ui();
      if (typeof ui?.setStatus !== "function") return;
      ui.setStatus(STATUS_KEY, text);
      this.shownFooter = text;
    } catch (error) {
      this.settings.debug("ui_failed", { call: "setStatus", error: String(error) });
    }
  }

  /** Runs `body`, records and swallows any error, and always returns `undefined`. */
  private guard(name: string, body: () => void): undefined {
    try {
      body();
    } catch (error) {
      try {
        this.settings.debug("handler_failed", { handler: name, error: String(error) });
      } catch {
        // Nothing may escape a handler.
      }
    }
    return undefined;
  }
}
