// The scripted embedder agent the official-client tests drive (`plane.embedderAgent()`, not
// Pi): "ask…" asks back, "work…" stays WORKING until canceled, anything else (a
// continuation's answer too) records a progress artifact and completes with an echo;
// "gated…" does that too, but starts only once the test opens the gate (`openGate()`).
import type { EmbedderAgent } from "../../index.js";

export interface ScriptedAgent {
  /** Errors it met (a test fails with them), except on a Task canceled under it. */
  errors: string[];
  /** Lets "gated…" Tasks be worked (they wait at most 20 s for it), from now on. */
  openGate(): void;
  /** Stops taking acceptances and waits for the loop to end. */
  stop(): Promise<void>;
}

/** Rejects after `ms`, naming what was waited for (the timer does not keep Node alive). */
function deadline(ms: number, what: string): Promise<never> {
  return new Promise((_, reject) => setTimeout(() => reject(new Error(`waited ${ms} ms for ${what}`)), ms).unref());
}

export function startScriptedAgent(agent: EmbedderAgent): ScriptedAgent {
  let running = true;
  const errors: string[] = [];
  let openGate: () => void = () => {};
  const gate = new Promise<void>((resolve) => (openGate = resolve));
  const loop = (async () => {
    while (running) {
      const accepted = await agent.nextAccepted(100);
      if (!accepted) continue;
      const id = accepted.taskId;
      const text = (accepted.message as { parts: { text?: string }[] }).parts[0]?.text ?? "";
      try {
        if (text.startsWith("gated")) await Promise.race([gate, deadline(20_000, "the test to open the gate")]);
        await agent.startWork(id);
        if (text.startsWith("ask")) {
          await agent.requireInput(id, "input_required", { parts: [{ text: "which one?" }] });
        } else if (!text.startsWith("work")) {
          await agent.recordArtifact(id, { name: "progress", parts: [{ text: "half way" }] });
          await agent.complete(id, [{ name: "answer", parts: [{ text: `echo: ${text}` }] }], { parts: [{ text: "done" }] });
        }
      } catch (err) {
        // A Task canceled under the agent refuses further work: that is what cancel is for.
        const now = (await agent.readTask(id)) as { status?: { state?: string } } | null;
        if (now?.status?.state !== "TASK_STATE_CANCELED") errors.push(`task ${id} (script "${text}"): ${String(err)}`);
      }
    }
  })();
  return {
    errors,
    openGate,
    stop: async () => {
      running = false;
      await loop;
    },
  };
}
