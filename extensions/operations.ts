// What the operator does beside the running resident, without a restart:
// - credentials reload: on SIGHUP (the headless runner emits `a2a:reload`) and when the
//   credentials file changes (checked every CREDENTIALS_CHECK_MS); an unusable file keeps the
//   tokens in use, and says why in the log and in Pi;
// - retention: hourly while the resident runs (asked every RETENTION_CHECK_MS; the rule is
//   the addon's `compactIfDue`), and at once on SIGHUP;
// - the control socket `<store root>/control.sock` (mode 0600, in the store root's 0700
//   folder): the `a2a-task-plane status` and `cancel` commands reach the live resident
//   through it, so the store keeps its one writer. One JSON line in, one JSON line out.
import { chmodSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import type { A2AListener, CompactionReport, TaskPlane } from "../index.js";

export const CREDENTIALS_CHECK_MS = 2_000;
export const RETENTION_CHECK_MS = 60_000;
/** The control socket's name in the store root. */
export const CONTROL_SOCKET = "control.sock";
/** A request line longer than this is refused (the socket only takes short commands). */
const MAX_REQUEST_BYTES = 16 * 1024;

type Level = "info" | "warning" | "error";
type Log = (event: string, fields: Record<string, unknown>, level?: "debug" | "info" | "warn" | "error") => void;

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));
const errorCode = (err: unknown): string | undefined =>
  typeof err === "object" && err !== null && "code" in err ? String((err as { code: unknown }).code) : undefined;

/** What the operations need of the running extension. */
export interface Running {
  plane: TaskPlane;
  listener?: A2AListener;
  log: Log;
  notify: (text: string, level: Level) => void;
  /** The text `/a2a` shows. */
  status: () => string;
}

/** A control request: `{"op": "status"}` or `{"op": "cancel", "taskId", "reason"?}`. */
export type ControlRequest = { op: "status" } | { op: "cancel"; taskId: string; reason?: string };
export type ControlReply = { ok: true; text: string; task?: unknown } | { ok: false; error: string; code?: string };

const removed = (report: CompactionReport): number => Object.values(report).reduce((a, b) => a + b, 0);

export class Operations {
  private readonly timers: NodeJS.Timeout[] = [];
  private server: Server | undefined;
  private socketPath: string | undefined;

  private readonly running: Running;

  constructor(running: Running) {
    this.running = running;
  }

  /** Starts the periodic checks and the control socket. */
  start(): void {
    const { listener } = this.running;
    if (listener) this.timers.push(setInterval(() => this.credentialsChanged(), CREDENTIALS_CHECK_MS).unref());
    this.timers.push(setInterval(() => void this.retention(false), RETENTION_CHECK_MS).unref());
    this.listen();
  }

  /** SIGHUP: credentials and retention, now. */
  async reload(reason: string): Promise<void> {
    const { listener, log } = this.running;
    log("a2a_reload", { reason });
    if (listener) {
      try {
        this.reloaded(listener.reloadCredentials());
      } catch (err) {
        this.unusable(err);
      }
      try {
        if (listener.reloadTls()) this.running.notify("A2A: TLS certificate reloaded.", "info");
      } catch (err) {
        // Logged by the addon (a2a_tls_reload_failed).
        this.running.notify(`A2A TLS certificate not reloaded, the one in use stays: ${message(err)}`, "error");
      }
    }
    await this.retention(true);
  }

  private credentialsChanged(): void {
    const { listener } = this.running;
    if (!listener) return;
    try {
      const reloaded = listener.reloadCredentialsIfChanged();
      if (reloaded) this.reloaded(reloaded);
    } catch (err) {
      this.unusable(err);
    }
  }

  private reloaded(reloaded: { credentials: number; warnings: string[] }): void {
    this.running.notify(`A2A: credentials reloaded (${reloaded.credentials} in use).`, "info");
    for (const warning of reloaded.warnings) this.running.notify(`A2A: ${warning}`, "warning");
  }

  private unusable(err: unknown): void {
    // The addon has logged it (a2a_credentials_reload_failed); Pi's screen is told too.
    this.running.notify(`A2A credentials not reloaded, the tokens in use stay: ${message(err)}`, "error");
  }

  private async retention(now: boolean): Promise<void> {
    const { plane, log } = this.running;
    try {
      const report = now ? await plane.compact() : await plane.compactIfDue();
      if (report) log("a2a_retention_ran", { trigger: now ? "reload" : "hourly", removed: removed(report) });
    } catch (err) {
      if (!plane.closed) log("a2a_retention_failed", { message: message(err) }, "warn");
    }
  }

  private listen(): void {
    const { plane, log } = this.running;
    const path = join(plane.root, CONTROL_SOCKET);
    // The store root's lock is ours: a socket file left there is a dead resident's.
    rmSync(path, { force: true });
    const server = createServer((socket) => {
      let buffered = "";
      socket.setEncoding("utf8");
      socket.on("error", () => socket.destroy());
      socket.on("data", (chunk: string) => {
        buffered += chunk;
        if (buffered.length > MAX_REQUEST_BYTES) {
          socket.end(`${JSON.stringify({ ok: false, error: "request too long" })}\n`);
          return;
        }
        const end = buffered.indexOf("\n");
        if (end < 0) return;
        void this.answer(buffered.slice(0, end)).then((reply) => socket.end(`${JSON.stringify(reply)}\n`));
      });
    });
    server.on("error", (err) => {
      log("a2a_control_socket_unavailable", { path, message: message(err) }, "warn");
      this.running.notify(`A2A: the control socket ${path} is unavailable (${message(err)}); a2a-task-plane status/cancel cannot reach this resident.`, "warning");
    });
    server.listen(path, () => {
      try {
        chmodSync(path, 0o600);
      } catch (err) {
        log("a2a_control_socket_unavailable", { path, message: message(err) }, "warn");
      }
    });
    server.unref();
    this.server = server;
    this.socketPath = path;
  }

  /** One control request's reply. */
  async answer(line: string): Promise<ControlReply> {
    let request: ControlRequest;
    try {
      request = JSON.parse(line) as ControlRequest;
    } catch {
      return { ok: false, error: "not a JSON request line" };
    }
    if (request.op === "status") return { ok: true, text: this.running.status() };
    if (request.op === "cancel") return this.cancel(request.taskId, request.reason);
    return { ok: false, error: `unknown op ${JSON.stringify((request as { op?: unknown }).op)}; use status or cancel` };
  }

  /** The operator cancels a Task (from the control socket or `/a2a cancel`). */
  async cancel(taskId: unknown, reason: unknown): Promise<ControlReply> {
    const { plane, log } = this.running;
    if (typeof taskId !== "string" || taskId === "") return { ok: false, error: "cancel needs a taskId" };
    const why = typeof reason === "string" && reason.trim() !== "" ? reason.trim() : undefined;
    try {
      const task = await plane.operatorCancel(taskId, why ?? null);
      // The reason is the operator's own words, not a caller's: kept in the log.
      log("a2a_operator_canceled", { taskId, reason: why ?? null });
      return { ok: true, text: `A2A task ${taskId} canceled${why ? `: ${why}` : ""}.`, task };
    } catch (err) {
      return { ok: false, error: message(err), code: errorCode(err) };
    }
  }

  /** Stops the checks and removes the control socket. */
  close(): void {
    for (const timer of this.timers.splice(0)) clearInterval(timer);
    this.server?.close();
    this.server = undefined;
    if (this.socketPath) rmSync(this.socketPath, { force: true });
    this.socketPath = undefined;
  }
}
