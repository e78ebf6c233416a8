// The Pi extension of the A2A task plane. The factory only registers (Pi runs factories in
// invocations that never start a session); everything it opens is opened on
// `session_start` and closed on `session_shutdown`, so /new, /resume, /fork and /reload
// close and reopen cleanly in one process. All rules live in the Rust addon.
//
// It never writes to the terminal: log lines go through the addon's one sink (a rotating
// file under the store root, and stderr only outside Pi's interactive screen), and the
// person at the terminal is told things through Pi's UI (see resident-ui.ts).
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import {
  A2AListener,
  AgentBridge,
  configureLogging,
  type ExecutorRequest,
  listenerEnabled,
  log,
  protocolVersion,
  startupWarnings,
  TaskPlane,
  type TaskState,
  taskStates,
} from "../index.js";
import { Operations } from "./operations.ts";
import { ResidentUi, taskDetail, taskLines } from "./resident-ui.ts";
import { modelProblem, TaskSessionDriver } from "./task-sessions.ts";
import { registerTaskTools } from "./task-tools.ts";

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** A start failure as one line: the cause (which names the variable or file) and the fix. */
export function startFailure(err: unknown): string {
  const cause = message(err).split("\n")[0].trim();
  return `A2A task plane not started: ${cause}`;
}

/** An error that carries only its message (Pi prints a thrown error's stack, when it has one). */
function plainError(text: string): Error {
  const err = new Error(text);
  err.stack = text;
  return err;
}

const USAGE =
  "usage: /a2a [status] | /a2a tasks [state] | /a2a show <taskId> | /a2a cancel <taskId> [reason] (a taskId: 6+ characters of its start or end, e.g. the short id shown)";

const { active } = taskStates();

export default function a2aTaskPlane(pi: ExtensionAPI): void {
  let plane: TaskPlane | undefined;
  let listener: A2AListener | undefined;
  let bridge: AgentBridge | undefined;
  let driver: TaskSessionDriver | undefined;
  let context: ExtensionContext | undefined;
  let ui: ResidentUi | undefined;
  let logFile: string | undefined;
  let startProblem: string | undefined;
  /** A configuration problem the task plane runs with (a workflow manifest that did not
   * load): in /a2a, in the `a2a:ready` event (the headless runner's start-up line) and in
   * Pi's notifications. */
  let configProblem: string | undefined;
  let operations: Operations | undefined;

  // A direct responder another extension registered: it answers simple interactions with
  // a direct A2A Message before any Task exists (see the README, "Answering simple
  // interactions directly"). One at a time: a second registration replaces the first;
  // `null` removes it. Kept across sessions (this closure outlives them).
  let responder: ((request: ExecutorRequest) => unknown) | undefined;
  pi.events.on("a2a:executor", (data) => {
    if (data !== null && data !== undefined && typeof data !== "function") {
      log("a2a_executor_refused", { message: `a2a:executor takes a function (or null to remove it), not ${typeof data}` }, "warn");
      return;
    }
    if (data && responder) log("a2a_executor_replaced", { message: "a second direct responder replaced the first" }, "warn");
    responder = (data as ((request: ExecutorRequest) => unknown) | null | undefined) ?? undefined;
    log(responder ? "a2a_executor_registered" : "a2a_executor_removed", {});
    listener?.setExecutor(responder ? executor : null);
  });
  // The listener's executor while a responder is registered: its answer, else a Task. The
  // addon bounds its time (A2A_EXECUTOR_TIMEOUT_MS) and makes a late, failed or malformed
  // answer a Task with a log line. Without a responder the listener has no executor, so a
  // message costs no call into JS.
  const executor = async (request: ExecutorRequest): Promise<Record<string, unknown> | null | undefined> =>
    responder ? ((await responder(request)) as Record<string, unknown> | null | undefined) : null;

  // The tools exist whenever the task plane runs, listener or not; outside a woken
  // Task's turn they refuse (no authority).
  registerTaskTools(pi, () => bridge);

  const status = (): string => {
    if (!plane) return `A2A task plane: not running${startProblem ? `\n${startProblem}` : ""}`;
    const lines = [
      ...(configProblem ? [`Problem: ${configProblem}`] : []),
      `A2A task plane: store ${plane.root}`,
      listener
        ? `Serving A2A ${protocolVersion()} (HTTP+JSON) at ${listener.url}`
        : "No listener (set A2A_SERVER=1 to serve A2A over HTTP)",
      `Log: ${logFile ?? "stderr only"}`,
    ];
    if (bridge) {
      const held = driver?.heldFor;
      const active = bridge.authority;
      lines.push(
        held ? `Queue held: ${held.operator}` : active ? `Working on task ${active}` : "Idle",
        `${bridge.waiting} task(s) waiting`,
      );
    }
    return lines.join("\n");
  };

  const closeAll = async (): Promise<void> => {
    operations?.close();
    operations = undefined;
    // The driver first (it aborts a turn in progress), then the bridge: no turn ever runs
    // without its authority.
    await driver?.stop();
    bridge?.close();
    listener?.close();
    plane?.close();
    driver = undefined;
    bridge = undefined;
    listener = undefined;
    plane = undefined;
  };

  pi.on("session_start", async (_event, ctx: ExtensionContext) => {
    context = ctx;
    if (plane) return;
    const interactive = ctx.mode === "tui";
    ui = new ResidentUi(() => context);
    const screen = ui;
    // Once this handler has returned, the screen is up: show what waited.
    setTimeout(() => screen.ready(), 0);
    startProblem = undefined;
    // Whatever else fails here, stderr is off in Pi's screen from now on.
    const logging = configureLogging({ stderr: !interactive });
    logFile = logging.file ?? undefined;
    for (const problem of logging.problems) {
      log("a2a_log_unavailable", { message: problem }, "warn");
      ui.notify(`A2A logging: ${problem}`, "warning");
    }
    for (const warning of startupWarnings()) {
      log("a2a_legacy_store_not_merged", { message: warning }, "warn");
      ui.notify(warning, "warning");
    }
    try {
      plane = await TaskPlane.open();
      bridge = await AgentBridge.start(plane);
      if (listenerEnabled()) listener = A2AListener.start(plane, responder ? { executor } : {});
    } catch (err) {
      await closeAll();
      startProblem = startFailure(err);
      log("a2a_task_plane_start_failed", { message: startProblem }, "error");
      ui.update({ problem: startProblem });
      if (interactive) {
        ui.notify(`${startProblem}. Fix it, then /reload.`, "error");
        return;
      }
      // Without a screen nobody would notice: the host (headless runner, print or RPC
      // mode) reports this one line and stops.
      throw plainError(startProblem);
    }
    const startedBridge = bridge;
    for (const warning of listener?.warnings ?? []) ui.notify(`A2A: ${warning}`, "warning");
    configProblem = undefined;
    try {
      startedBridge.declaredOutputs();
    } catch (err) {
      configProblem = `the workflow manifest (A2A_WORKFLOW_MANIFEST) did not load, so every declared output is refused: ${message(err)}`;
      // /healthz reads `degraded` and names it.
      plane.reportProblem("workflow_manifest", message(err));
      ui.notify(`A2A ${configProblem}. Fix it, then /reload.`, "error");
    }
    startedBridge.watchActivity((err, batch) => {
      if (err || !batch) return;
      // What happens is in the log as well (a service has no screen): arrivals and every
      // status change except the notes that keep a Task's state.
      // The status message is the agent's or the caller's text: at debug only.
      for (const a of batch) {
        if (!a.state) log("a2a_task_arrived", { taskId: a.taskId });
        else if (!active.includes(a.state)) {
          log("a2a_task_state", { taskId: a.taskId, state: a.state, messageChars: a.message?.length ?? 0 });
          if (a.message) log("a2a_task_state_message", { taskId: a.taskId, message: a.message }, "debug");
        }
      }
      ui?.activity(batch);
      ui?.update({ waiting: startedBridge.waiting });
    });
    const startedPlane = plane;
    // The person is told once each time the queue becomes held for a new reason.
    let toldHold: string | undefined;
    const startedDriver = new TaskSessionDriver(pi, startedBridge, () => context, (taskId) => startedPlane.sessionDir(taskId), log, () => {
      const held = startedDriver.heldFor;
      if (held && held.operator !== toldHold) ui?.notify(`A2A: ${held.operator}.`, "warning");
      toldHold = held?.operator;
      ui?.update({ active: startedDriver.active, waiting: startedBridge.waiting, held: held?.footer });
    });
    driver = startedDriver;
    driver.start();
    operations = new Operations({ plane, listener, log, notify: (text, level) => ui?.notify(text, level), status });
    operations.start();
    ui.update({ url: listener?.url, waiting: startedBridge.waiting });
    if (listener) {
      log("a2a_listener_ready", { url: listener.url, store: plane.root, log: logFile });
      ui.notify(`A2A listener serving at ${listener.url} (bearer tokens: ${process.env.A2A_CREDENTIALS_PATH}); /a2a shows the queue and tasks.`);
    }
    // For a host that embeds Pi (the headless runner announces where it serves).
    // A model that cannot work Tasks is a start-up problem too (the queue holds from the
    // start): a service's operator reads it on the running line.
    const held = await modelProblem(ctx);
    const problems = [configProblem, held?.operator].filter((p): p is string => p !== undefined);
    pi.events.emit("a2a:ready", { url: listener?.url, store: plane.root, log: logFile, problems });
  });

  // SIGHUP in the headless runner: credentials and retention, now.
  pi.events.on("a2a:reload", (data) => {
    const reason = typeof (data as { reason?: unknown })?.reason === "string" ? (data as { reason: string }).reason : "reload";
    void operations?.reload(reason);
  });

  pi.on("model_select", async (_event, ctx) => {
    context = ctx;
    if (!driver) return;
    if (driver.heldFor && !(await modelProblem(ctx))) {
      ui?.notify(`A2A: model ${ctx.model?.provider}/${ctx.model?.id} selected; the waiting tasks are worked on now.`, "info");
    }
    driver.poke();
  });

  pi.on("session_shutdown", async () => {
    await closeAll();
    ui?.close();
    ui = undefined;
    context = undefined;
  });

  pi.registerCommand("a2a", {
    description: "A2A task plane: status, `tasks [state]` (recent tasks), `show <taskId>`, `cancel <taskId> [reason]`",
    handler: async (args, ctx) => {
      const [verb = "status", arg] = args.trim().split(/\s+/).filter(Boolean);
      try {
        if (verb === "status") {
          ctx.ui.notify(status(), "info");
        } else if (verb === "tasks") {
          if (!plane) return ctx.ui.notify(status(), "warning");
          // The person's text: the addon refuses anything but a state, naming the states.
          ctx.ui.notify(taskLines(await plane.recentTasks((arg as TaskState | undefined) ?? null)), "info");
        } else if (verb === "show" && arg) {
          if (!plane) return ctx.ui.notify(status(), "warning");
          const root = plane.root;
          const taskId = await plane.resolveTaskId(arg);
          const found = taskId ? await plane.inspectTask(taskId) : null;
          if (!taskId || !found) return ctx.ui.notify(`No A2A task id starts or ends with ${arg} in ${root}.`, "warning");
          ctx.ui.notify(taskDetail(found.principal, found.source, found.task, plane.sessionFile(taskId) ?? undefined, root), "info");
        } else if (verb === "cancel" && arg) {
          if (!plane || !operations) return ctx.ui.notify(status(), "warning");
          const taskId = await plane.resolveTaskId(arg);
          if (!taskId) return ctx.ui.notify(`No A2A task id starts or ends with ${arg} in ${plane.root}.`, "warning");
          const reason = args.trim().split(/\s+/).slice(2).join(" ");
          const reply = await operations.cancel(taskId, reason);
          ctx.ui.notify(reply.ok ? reply.text : `A2A task ${arg} not canceled: ${reply.error}`, reply.ok ? "info" : "warning");
        } else {
          ctx.ui.notify(USAGE, "warning");
        }
      } catch (err) {
        ctx.ui.notify(`${message(err)}\n${USAGE}`, "error");
      }
    },
  });
}
