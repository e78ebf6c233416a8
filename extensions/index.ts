// The Pi extension of the A2A task plane. The factory only registers (Pi runs factories in
// invocations that never start a session); everything it opens is opened on
// `session_start` and closed on `session_shutdown`, so /new, /resume, /fork and /reload
// close and reopen cleanly in one process. All rules live in the Rust addon.
import { join } from "node:path";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { A2AListener, AgentBridge, listenerEnabled, protocolVersion, startupWarnings, TaskPlane } from "../index.js";
import { TaskSessionDriver } from "./task-sessions.ts";
import { registerTaskTools } from "./task-tools.ts";

/** One structured log line on stderr (Pi's print and RPC modes keep stdout for themselves). */
function log(event: string, fields: Record<string, unknown> = {}): void {
  process.stderr.write(`${JSON.stringify({ ts: Date.now(), event, ...fields })}\n`);
}

export default function a2aTaskPlane(pi: ExtensionAPI): void {
  let plane: TaskPlane | undefined;
  let listener: A2AListener | undefined;
  let bridge: AgentBridge | undefined;
  let driver: TaskSessionDriver | undefined;
  let context: ExtensionContext | undefined;

  // The tools exist whenever the task plane runs, listener or not; outside a woken
  // Task's turn they refuse (no authority).
  registerTaskTools(pi, () => bridge);

  const status = (): string => {
    if (!plane) return "A2A task plane: not running";
    const served = listener ? `, serving A2A ${protocolVersion()} (HTTP+JSON) at ${listener.url}` : ", no listener (set A2A_SERVER=1)";
    return `A2A task plane: store ${plane.root}${served}`;
  };

  const closeAll = async (): Promise<void> => {
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
    for (const warning of startupWarnings()) log("a2a_legacy_store_not_merged", { message: warning });
    try {
      plane = TaskPlane.open();
      bridge = AgentBridge.start(plane);
      if (listenerEnabled()) listener = A2AListener.start(plane);
    } catch (err) {
      await closeAll();
      // Logged here too: Pi reports a failing session_start differently in each mode.
      log("a2a_task_plane_start_failed", { message: err instanceof Error ? err.message : String(err) });
      throw err;
    }
    driver = new TaskSessionDriver(pi, bridge, () => context, join(plane.root, "sessions"), log);
    driver.start();
    if (!ctx.model) {
      const message =
        "No model is configured in Pi, so A2A tasks will wait (and their turns fail). Set one up with /login or --model, or try the offline demo agent: bash tools/run.sh --demo";
      log("a2a_no_model", { message });
      if (ctx.hasUI) ctx.ui.notify(message, "warning");
    }
    if (ctx.hasUI) ctx.ui.setStatus("a2a", listener ? `A2A ${listener.url}` : "A2A store open");
  });

  pi.on("session_shutdown", async () => {
    await closeAll();
    context = undefined;
  });

  pi.registerCommand("a2a", {
    description: "Show the A2A task plane's status",
    handler: async (_args, ctx) => {
      ctx.ui.notify(status(), "info");
    },
  });
}
