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

/** Why the resident cannot work Tasks now, for each audience: the operator (Pi's
 * notification and the log), the footer (`held: …`), and the callers (each held Task's
 * status note: the provider and the fix for a service, never Pi commands alone). */
export interface ModelProblem {
  operator: string;
  footer: string;
  callers: string;
}

/** A provider's environment variable for its API key, as its own key lookup asks for it
 * (the first `…_API_KEY` it reads, else the first variable), found by running that lookup
 * against an empty environment; `undefined` when it reads none (OAuth only, or its own
 * scheme). Pi names these variables nowhere else an extension can read. */
export async function keyVariable(ctx: ExtensionContext, provider: string): Promise<string | undefined> {
  const auth = ctx.modelRegistry.getProvider(provider)?.auth?.apiKey;
  // A key configured in models.json (a literal, or a command Pi would run) is not a
  // variable: its lookup is not run again here.
  if (!auth) return undefined;
  const status = ctx.modelRegistry.getProviderAuthStatus(provider) as { configured: boolean; source?: string };
  if (status.configured && status.source !== "environment") return undefined;
  const asked: string[] = [];
  const env = async (name: string): Promise<undefined> => {
    asked.push(name);
    return undefined;
  };
  try {
    await auth.resolve({ ctx: { env } as never, credential: undefined, signal: new AbortController().signal } as never);
  } catch {
    // A lookup that needs more than variables (files, commands) says nothing more here.
  }
  return asked.find((name) => name.endsWith("_API_KEY")) ?? asked[0];
}

/** What an operator does so that `provider` has credentials: its key variable in the
 * resident's environment, or Pi's login kept in the agent directory. */
async function credentialFix(ctx: ExtensionContext, provider: string): Promise<string> {
  const variable = await keyVariable(ctx, provider);
  const login = `log in once with Pi (\`pi\`, then /login ${provider}) using the resident's PI_CODING_AGENT_DIR`;
  return variable ? `set ${variable} in the resident's environment and restart it, or ${login}` : login;
}

/** Whether a turn's error is the provider refusing (or missing) the credentials: no key,
 * 401/403, or the provider's own authentication error. Retrying cannot help until the
 * operator fixes the credentials, so such a turn holds the queue. */
export function isAuthFailure(error: string): boolean {
  return /no api key|api key not valid|invalid[ _-]?(x-)?api[ _-]?key|incorrect api key|authentication[ _]?error|unauthori[sz]ed|\b401\b|invalid bearer token|oauth token (has )?expired|permission_denied/i.test(
    error,
  );
}

/** The problem of a provider that refused the credentials in a turn (`error`). */
export async function authProblem(ctx: ExtensionContext, provider: string, error: string): Promise<ModelProblem> {
  const fix = await credentialFix(ctx, provider);
  const cause = error.split("\n")[0].trim();
  return {
    operator: `the model provider ${provider} refused the resident's credentials (${cause}), so tasks wait: ${fix}`,
    footer: `held: ${provider} refused the key`,
    callers: `The resident agent cannot work on tasks now: its model provider ${provider} refused its credentials. This task waits and is worked on once the operator fixes them (${fix}).`,
  };
}

/** Why the resident cannot work Tasks with its current model, or `undefined` when it can.
 * Pi's placeholder model (provider and id \`unknown\`) is no model; a model whose provider
 * has no credentials (no key, no login, none configured: what Pi calls not available)
 * cannot answer either. The credentials Pi resolves for the check are not kept. */
export async function modelProblem(ctx: ExtensionContext | undefined): Promise<ModelProblem | undefined> {
  const model = ctx?.model;
  if (!ctx || !model || model.provider === "unknown" || model.id === "unknown") {
    return {
      operator: "the resident Pi has no model selected, so tasks wait until one is (start it with --provider/--model, or select one with /model in Pi)",
      footer: "held: no model",
      callers:
        "The resident agent has no usable model at the moment, so this task waits; its operator has been told, and the task is worked on as soon as a model is available.",
    };
  }
  if (ctx.modelRegistry.hasConfiguredAuth(model)) return undefined;
  let missing: string | undefined;
  try {
    // Providers registered at run time, and keyless ones configured in models.json, are
    // not in the configured set: their own lookup says whether they resolve.
    if (await ctx.modelRegistry.getProviderAuth(model.provider)) return undefined;
    missing = "no API key or login";
  } catch (err) {
    missing = err instanceof Error ? err.message : String(err);
  }
  const fix = await credentialFix(ctx, model.provider);
  return {
    operator: `the resident Pi's model ${model.provider}/${model.id} cannot be used (${missing}), so tasks wait: ${fix}`,
    footer: `held: no key for ${model.provider}`,
    callers: `The resident agent cannot work on tasks now: its model provider ${model.provider} has no credentials. This task waits and is worked on once the operator provides them (${fix}).`,
  };
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

/** How long a provider's refusal of the credentials holds the queue before one turn tries
 * again (the operator may have fixed them meanwhile, e.g. with /login). */
export const AUTH_RECHECK_MS = 5 * 60_000;

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
  /** Why the queue is held, if it is. */
  heldFor: ModelProblem | undefined;
  /** A provider refused the credentials in a turn: held until then (or a new model). */
  private refused: { problem: ModelProblem; until: number } | undefined;

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

  /** Re-checks the model now (Pi selected another one, so a refusal of the last one's
   * credentials no longer holds the queue). */
  poke(): void {
    this.refused = undefined;
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

  /** Why the queue must be held now: the model's problem, else a provider that refused
   * the credentials in a turn (until another model is selected, or for
   * AUTH_RECHECK_MS, after which one turn tries again). */
  private async problem(): Promise<ModelProblem | undefined> {
    const problem = await modelProblem(this.ctx());
    if (problem) return problem;
    if (this.refused && Date.now() < this.refused.until) return this.refused.problem;
    this.refused = undefined;
    return undefined;
  }

  /** Holds the queue for `problem` (each waiting Task's status tells its caller why), or
   * releases it (`undefined`). Returns false when the queue is gone. */
  private async holdFor(problem: ModelProblem | undefined): Promise<boolean> {
    if (problem?.callers === this.heldFor?.callers) return true;
    try {
      await this.bridge.hold(problem ? problem.callers : null);
    } catch (err) {
      this.log("a2a_wake_error", { message: String(err) }, "error");
      return false;
    }
    if (problem) this.log("a2a_no_model", { message: problem.operator }, "warn");
    this.heldFor = problem;
    this.onChange();
    return true;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      // Without a usable model no wake is taken (none would succeed): the queue is held,
      // and each waiting Task's status tells its caller why, until a model is selected.
      const problem = await this.problem();
      if (!(await this.holdFor(problem))) return;
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
      // The provider refused the credentials: retrying cannot help until the operator
      // fixes them, so the queue is held first and the Task waits at its front, no retry
      // spent.
      const ctx = this.ctx();
      const provider = ctx?.model?.provider;
      let outcome: "ended" | "failed" | "held" = reason === undefined ? "ended" : "failed";
      if (reason !== undefined && ctx && provider && isAuthFailure(reason)) {
        this.refused = { problem: await authProblem(ctx, provider, reason), until: Date.now() + AUTH_RECHECK_MS };
        if (await this.holdFor(this.refused.problem)) outcome = "held";
      }
      try {
        // Rust logs a failed turn (a2a_turn_failed) and tells the caller why.
        await this.bridge.turnEnded(wake.taskId, outcome, reason);
      } catch (err) {
        this.log("a2a_turn_end_error", { taskId: wake.taskId, message: String(err) }, "error");
      }
      // Once the queue knows: from here on no tool acts for this Task.
      this.log("a2a_turn_ended", { taskId: wake.taskId, delivery: wake.delivery, outcome });
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
