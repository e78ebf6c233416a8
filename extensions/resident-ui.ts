// What the person at the resident's terminal sees of the task plane: notices (queued until
// the screen is up), a footer status (the listener, the Task being worked on, how many
// wait), short notifications when Tasks arrive, settle, fail or wait for their caller
// (collapsed under bursts: a window of activity is one line), and the text of `/a2a`.
// Nothing here writes to stdout or stderr: Pi's UI API only (a no-op without a UI).
import { fileURLToPath } from "node:url";
import type { ExtensionContext } from "@earendil-works/pi-coding-agent";
import { shortTaskId, type TaskActivity, type TaskSummary, taskStates } from "../index.js";

type Level = "info" | "warning" | "error";

/** How long activity is gathered into one notification. */
export const ACTIVITY_WINDOW_MS = 1_000;

const { active, interrupted } = taskStates();

const short = (taskId: string): string => shortTaskId(taskId);

/** This package's command, run by the Node that runs this (Pi needs Node 22, so this one
 * can run Pi's export): a command printed with it runs as is, on PATH or not. */
const command = [process.execPath, fileURLToPath(new URL("../bin/a2a-task-plane.js", import.meta.url))];
const quoted = (word: string): string => (/^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, "'\\''")}'`);

/** The command that writes a Task's Pi session as an HTML page. */
export function exportCommand(storeRoot: string, taskId: string, file = "task.html"): string {
  return [...command, "--store", storeRoot, "export", short(taskId), file].map(quoted).join(" ");
}
/** A state as the operator spells it: `TASK_STATE_INPUT_REQUIRED` → `input-required`. */
export const stateName = (state: string): string => state.replace(/^TASK_STATE_/, "").toLowerCase().replace(/_/g, "-");

/** "3 s ago", "5 min ago", "2 h ago", "4 d ago". */
export function age(ms: number, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 90) return `${s} s ago`;
  if (s < 90 * 60) return `${Math.round(s / 60)} min ago`;
  if (s < 36 * 3600) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

/** One line for a window of activity: a single event says what it was; several are counted. */
export function summarizeActivity(batch: TaskActivity[]): { text: string; level: Level } | undefined {
  const kinds = new Map<string, TaskActivity[]>();
  const waitsForCaller = new Set<string>();
  for (const a of batch) {
    // Status notes of an active Task are for callers, not for a notification.
    if (a.state && active.includes(a.state)) continue;
    const kind = a.state ? stateName(a.state) : "arrived";
    if (a.state && interrupted.includes(a.state)) waitsForCaller.add(kind);
    kinds.set(kind, [...(kinds.get(kind) ?? []), a]);
  }
  if (kinds.size === 0) return undefined;
  const failed = kinds.get("failed") ?? [];
  const level: Level = failed.length > 0 ? "warning" : "info";
  const entries = [...kinds.entries()];
  if (entries.length === 1 && entries[0][1].length === 1) {
    const [kind, [one]] = entries[0];
    const what = waitsForCaller.has(kind) ? "waits for its caller" : kind;
    const why = kind === "failed" && one.message ? `: ${one.message}` : "";
    return { text: `A2A task ${short(one.taskId)} ${what}${why}`, level };
  }
  const order = ["arrived", "completed", "input-required", "auth-required", "rejected", "canceled", "failed"];
  const parts = entries
    .sort(([a], [b]) => order.indexOf(a) - order.indexOf(b))
    .map(([kind, list]) => {
      const n = list.length;
      const task = n === 1 ? "task" : "tasks";
      if (kind === "arrived") return `${n} ${task} arrived`;
      if (waitsForCaller.has(kind)) return `${n} ${n === 1 ? "waits" : "wait"} for the caller`;
      return `${n} ${kind}`;
    });
  const why = failed.length > 0 && failed[0].message ? ` (${short(failed[0].taskId)}: ${failed[0].message})` : "";
  return { text: `A2A: ${parts.join(", ")}${why}`, level };
}

export interface FooterState {
  url?: string;
  active?: string;
  waiting: number;
  /** Why the queue is held, as the footer says it (`held: no key for anthropic`). */
  held?: string;
  problem?: string;
}

/** The footer line: where the listener serves, the Task being worked, the queue. */
export function footerText(state: FooterState): string {
  if (state.problem) return "A2A: not running (see /a2a)";
  const where = state.url ? `A2A ${state.url}` : "A2A (no listener)";
  if (state.held) return `${where} · ${state.held} · ${state.waiting} waiting`;
  const work = state.active ? `working ${short(state.active)}` : "idle";
  return state.waiting > 0 ? `${where} · ${work} · ${state.waiting} waiting` : `${where} · ${work}`;
}

/** Lines for `/a2a tasks`. */
export function taskLines(tasks: TaskSummary[], now = Date.now()): string {
  if (tasks.length === 0) return "No A2A tasks.";
  const lines = tasks.map((t) => `${short(t.taskId)}  ${t.principal.padEnd(12)} ${stateName(t.state).padEnd(15)} ${age(t.statusMs, now)}`);
  return [`A2A tasks, newest status first (${tasks.length}; show <id> for one):`, ...lines].join("\n");
}

type A2APart = { text?: string; data?: unknown; url?: string; raw?: string; filename?: string };
type A2AMessage = { role?: string; parts?: A2APart[] };
type A2ATask = {
  id?: string;
  contextId?: string;
  status?: { state?: string; message?: A2AMessage; timestamp?: string };
  history?: A2AMessage[];
  artifacts?: { name?: string; parts?: A2APart[] }[];
};

const partText = (p: A2APart): string =>
  p.text ?? (p.data !== undefined ? JSON.stringify(p.data) : p.url ?? (p.filename ? `[file ${p.filename}]` : "[binary]"));
const oneLine = (text: string, max = 100): string => {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
};

/** Text for `/a2a show <taskId>` (and the CLI's `show`). */
export function taskDetail(principal: string, source: string, task: A2ATask, sessionFile: string | undefined, storeRoot: string): string {
  const lines = [
    `Task ${task.id} (principal ${principal}, source ${source}, context ${task.contextId})`,
    `Status: ${stateName(task.status?.state ?? "unknown")} at ${task.status?.timestamp ?? "?"}`,
  ];
  const statusText = task.status?.message?.parts?.map(partText).join(" ");
  if (statusText) lines.push(`Status message: ${oneLine(statusText, 300)}`);
  const history = task.history ?? [];
  lines.push(`History (${history.length} messages${history.length > 10 ? ", the last 10" : ""}):`);
  for (const m of history.slice(-10)) {
    const who = m.role === "ROLE_AGENT" ? "agent" : "caller";
    lines.push(`  ${who}: ${oneLine((m.parts ?? []).map(partText).join(" "))}`);
  }
  const artifacts = task.artifacts ?? [];
  lines.push(artifacts.length ? `Artifacts: ${artifacts.map((a) => a.name ?? "(unnamed)").join(", ")}` : "Artifacts: none");
  lines.push(
    sessionFile
      ? `Pi session: ${sessionFile}\n  export it as a page: ${exportCommand(storeRoot, task.id ?? "")}`
      : "Pi session: none yet (the agent has not worked on it)",
  );
  return lines.join("\n");
}

/** The UI of one session_start..session_shutdown span. */
export class ResidentUi {
  private readonly ctx: () => ExtensionContext | undefined;
  private readonly pending: { text: string; level: Level }[] = [];
  private screenUp = false;
  private batch: TaskActivity[] = [];
  private batchTimer: NodeJS.Timeout | undefined;
  private closed = false;
  readonly footer: FooterState = { waiting: 0 };

  constructor(ctx: () => ExtensionContext | undefined) {
    this.ctx = ctx;
  }

  private get ui(): ExtensionContext["ui"] | undefined {
    const ctx = this.ctx();
    return ctx?.hasUI && !this.closed ? ctx.ui : undefined;
  }

  /** Shows `text` once the screen is up (startup notices would be wiped before). */
  notify(text: string, level: Level = "info"): void {
    if (this.screenUp) this.ui?.notify(text, level);
    else this.pending.push({ text, level });
  }

  /** The screen is up: show what waited. Called right after session_start returns. */
  ready(): void {
    this.screenUp = true;
    for (const { text, level } of this.pending.splice(0)) this.ui?.notify(text, level);
    this.render();
  }

  update(change: Partial<FooterState>): void {
    Object.assign(this.footer, change);
    this.render();
  }

  render(): void {
    this.ui?.setStatus("a2a", footerText(this.footer));
  }

  /** Gathers activity; one notification per window. */
  activity(items: TaskActivity[]): void {
    if (this.closed) return;
    this.batch.push(...items);
    this.batchTimer ??= setTimeout(() => {
      this.batchTimer = undefined;
      const summary = summarizeActivity(this.batch.splice(0));
      if (summary) this.notify(summary.text, summary.level);
    }, ACTIVITY_WINDOW_MS).unref();
  }

  close(): void {
    if (this.batchTimer) clearTimeout(this.batchTimer);
    this.batchTimer = undefined;
    this.ui?.setStatus("a2a", undefined);
    this.closed = true;
  }
}
