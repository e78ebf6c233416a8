// The driver: takes each wake from the Rust queue and runs that Task's turn in the Task's
// own durable Pi session (created on first use, reopened afterwards), in process, with
// the resident's current model and thinking level and only the task tools. It reports the
// turn's end to the queue, which clears the turn's authority.
import { realpathSync } from "node:fs";
import { dirname, join, sep } from "node:path";
import { fileURLToPath } from "node:url";
import type { ExtensionAPI, ExtensionContext, ExtensionFactory } from "@earendil-works/pi-coding-agent";
import {
  createAgentSession,
  DefaultResourceLoader,
  getAgentDir,
  ModelRuntime,
  SessionManager,
  SettingsManager,
} from "@earendil-works/pi-coding-agent";
import type { AgentBridge, WakeInfo } from "../index.js";
import { registerTaskTools } from "./task-tools.ts";

/** What a caller reads while the resident has no usable model (the details, and what to
 * do about them, are for the operator: the Pi UI and the log). */
export const NO_MODEL_FOR_CALLERS =
  "The resident agent has no usable model at the moment, so this task waits; its operator has been told, and the task is worked on as soon as a model is available.";

/** Why the resident cannot work Tasks with its current model, or `undefined` when it can.
 * Pi's placeholder model (provider and id `unknown`) is no model; a model whose provider
 * has no key or login configured cannot answer either. (The credentials Pi resolves for
 * the check are not kept.) */
export async function modelProblem(ctx: ExtensionContext | undefined): Promise<string | undefined> {
  const model = ctx?.model;
  if (!ctx || !model || model.provider === "unknown" || model.id === "unknown") {
    return "the resident Pi has no model selected, so tasks wait until one is (select one with /model or /login in Pi, or start it with --model)";
  }
  if (ctx.modelRegistry.hasConfiguredAuth(model)) return undefined;
  // Providers registered at run time (or needing no key) are not in the configured set.
  const auth = await ctx.modelRegistry.getApiKeyAndHeaders(model);
  if (auth.ok) return undefined;
  return `the resident Pi's model ${model.provider}/${model.id} cannot be used (${auth.error}), so tasks wait until it can (use /login in Pi, or choose another model with /model)`;
}

/** This package's root: its own extension must never load into a task session. */
const packageRoot = realpathSync(join(dirname(fileURLToPath(import.meta.url)), ".."));

function isThisPackage(path: string): boolean {
  try {
    const real = realpathSync(path);
    return real === packageRoot || real.startsWith(packageRoot + sep);
  } catch {
    return false;
  }
}

/** The body-free wake: the Task's content is read through a2a_read_task, never pasted. */
export function wakePrompt(taskId: string): string {
  return `[a2a] Task ${taskId} is yours to work on now. Read it with a2a_read_task, then settle it with a2a_complete_task (or ask the caller with a2a_require_input). Record declared outputs with a2a_record_output.`;
}

/** Pi session ids are [A-Za-z0-9._-]; task ids are UUIDs, so the id is the task id. */
export function sessionIdFor(taskId: string): string {
  return `a2a-task-${taskId}`;
}

export type Log = (event: string, fields?: Record<string, unknown>, level?: "debug" | "info" | "warn" | "error") => void;

/** Called when the driver's state changes (a turn starts or ends, the queue is held or
 * released), so the UI can show it. */
export type ChangeListener = () => void;

export class TaskSessionDriver {
  private stopped = false;
  private loop: Promise<void> | undefined;
  private current: { abort(): Promise<void> } | undefined;
  private pause: { timer: NodeJS.Timeout; resolve: () => void } | undefined;
  private readonly pi: ExtensionAPI;
  private readonly bridge: AgentBridge;
  private readonly ctx: () => ExtensionContext | undefined;
  /** Creates (durably) and returns the folder of a Task's session. */
  private readonly sessionDir: (taskId: string) => Promise<string>;
  private readonly log: Log;
  private readonly onChange: ChangeListener;
  /** The Task whose turn runs now. */
  active: string | undefined;
  /** Why the queue is held (for the operator), if it is. */
  heldFor: string | undefined;

  constructor(
    pi: ExtensionAPI,
    bridge: AgentBridge,
    ctx: () => ExtensionContext | undefined,
    sessionDir: (taskId: string) => Promise<string>,
    log: Log,
    onChange: ChangeListener = () => undefined,
  ) {
    this.pi = pi;
    this.bridge = bridge;
    this.ctx = ctx;
    this.sessionDir = sessionDir;
    this.log = log;
    this.onChange = onChange;
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Re-checks the model now (Pi selected another one). */
  poke(): void {
    const pause = this.pause;
    this.pause = undefined;
    if (pause) {
      clearTimeout(pause.timer);
      pause.resolve();
    }
  }

  /** Stops taking wakes and aborts the turn in progress (its claim stays WOKEN, so the
   * next start offers the Task again); resolves once the loop has ended its last turn.
   * Close the bridge only after this, so no turn runs without its authority. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.poke();
    await this.current?.abort().catch(() => undefined);
    await this.loop;
  }

  /** Waits up to `ms` (less when poked or stopped), without keeping Node alive. */
  private rest(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.pause = undefined;
        resolve();
      }, ms);
      timer.unref();
      this.pause = { timer, resolve };
    });
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      // Without a usable model no wake is taken (none would succeed): the queue is held,
      // and each waiting Task's status tells its caller why, until a model is selected.
      const problem = await modelProblem(this.ctx());
      if (problem !== this.heldFor) {
        try {
          await this.bridge.hold(problem ? NO_MODEL_FOR_CALLERS : null);
        } catch (err) {
          this.log("a2a_wake_error", { message: String(err) }, "error");
          return;
        }
        if (problem) this.log("a2a_no_model", { message: problem }, "warn");
        this.heldFor = problem;
        this.onChange();
      }
      if (problem) {
        await this.rest(1_000);
        continue;
      }
      let wake: WakeInfo | null;
      try {
        wake = await this.bridge.nextWake(500);
      } catch (err) {
        this.log("a2a_wake_error", { message: String(err) }, "error");
        return;
      }
      if (!wake || this.stopped) continue;
      let reason: string | undefined;
      this.active = wake.taskId;
      this.onChange();
      try {
        await this.runTurn(wake);
      } catch (err) {
        reason = err instanceof Error ? err.message : String(err);
      }
      this.active = undefined;
      this.onChange();
      if (this.stopped) {
        // Aborted by shutdown: the claim stays WOKEN and the next start offers it again.
        this.log("a2a_turn_aborted", { taskId: wake.taskId, delivery: wake.delivery });
        return;
      }
      try {
        // Rust logs a failed turn (a2a_turn_failed) and tells the caller why.
        await this.bridge.turnEnded(wake.taskId, reason === undefined ? "ended" : "failed", reason);
      } catch (err) {
        this.log("a2a_turn_end_error", { taskId: wake.taskId, message: String(err) }, "error");
      }
      // Once the queue knows: from here on no tool acts for this Task.
      this.log("a2a_turn_ended", { taskId: wake.taskId, delivery: wake.delivery, outcome: reason === undefined ? "ended" : "failed" });
    }
  }

  private async runTurn(wake: WakeInfo): Promise<void> {
    const ctx = this.ctx();
    const model = ctx?.model;
    if (!ctx || !model) throw new Error("the resident Pi has no model selected");
    const cwd = ctx.cwd;
    const dir = await this.sessionDir(wake.taskId);
    const id = sessionIdFor(wake.taskId);
    const existing = SessionManager.findById(cwd, id, dir);
    const sessionManager = existing ? SessionManager.open(existing, dir) : SessionManager.create(cwd, dir, { id });

    const agentDir = getAgentDir();
    const modelRuntime = await ModelRuntime.create({
      authPath: join(agentDir, "auth.json"),
      modelsPath: join(agentDir, "models.json"),
      refreshOnCreate: false,
    });
    // A provider an extension registered (not in auth.json/models.json) must be copied in.
    const provider = ctx.modelRegistry.getProvider(model.provider);
    if (provider && !modelRuntime.getModel(model.provider, model.id)) modelRuntime.registerNativeProvider(provider);

    const tools: ExtensionFactory = (child) => registerTaskTools(child, () => this.bridge);
    // The resident's own settings, so the task session gets the resident's extensions...
    const settingsManager = SettingsManager.create(cwd, agentDir);
    const resourceLoader = new DefaultResourceLoader({
      cwd,
      agentDir,
      settingsManager,
      extensionFactories: [tools],
      // ...except this package: a task session never opens a second plane or listener.
      extensionsOverride: (base) => ({ ...base, extensions: base.extensions.filter((e) => !isThisPackage(e.resolvedPath)) }),
      noSkills: true,
      noPromptTemplates: true,
      noThemes: true,
    });
    await resourceLoader.reload();
    const { session } = await createAgentSession({
      cwd,
      agentDir,
      modelRuntime,
      settingsManager,
      resourceLoader,
      sessionManager,
      model: modelRuntime.getModel(model.provider, model.id) ?? model,
      thinkingLevel: ctx.thinkingLevel ?? this.pi.getThinkingLevel(),
    });
    this.current = session;
    try {
      // Shutdown began while the session was being set up: no prompt (the claim stays
      // WOKEN, and the next start offers the Task again).
      if (this.stopped) return;
      await session.bindExtensions({ mode: "print" });
      // The turn ends on agent_settled (Pi's final idle signal; agent_end may repeat on
      // retries), not merely when prompt() returns.
      let settled!: () => void;
      const idle = new Promise<void>((resolve) => (settled = resolve));
      const unsubscribe = session.subscribe((event: { type: string }) => {
        if (event.type === "agent_settled") settled();
      });
      this.log("a2a_turn_started", { taskId: wake.taskId, delivery: wake.delivery, session: existing ? "reopened" : "created" });
      try {
        await session.prompt(wakePrompt(wake.taskId));
        await Promise.race([idle, new Promise((r) => setTimeout(r, 5_000).unref())]);
      } finally {
        unsubscribe();
      }
      // A model error ends the run with an error message instead of throwing: that turn
      // failed, and its caller should learn why.
      const last = session.messages.at(-1) as { role?: string; stopReason?: string; errorMessage?: string } | undefined;
      if (last?.role === "assistant" && last.stopReason === "error") {
        throw new Error(`the model answered with an error: ${last.errorMessage ?? "no details"}`);
      }
    } finally {
      this.current = undefined;
      await session.extensionRunner.emit({ type: "session_shutdown", reason: "quit" } as never);
      session.dispose();
    }
  }
}
