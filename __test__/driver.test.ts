// The session driver against the real addon, with a stand-in for Pi's context: without a
// usable model it takes no wake and holds the queue (each waiting Task says why); once a
// model is selected it releases the queue, and a turn that fails tells the caller why.
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { AgentBridge, type TaskActivity, TaskPlane } from "../index.js";
import { modelProblem, TaskSessionDriver } from "../extensions/task-sessions.ts";

type Status = { state: string; message?: { parts: { text: string }[] } };

async function statusOf(plane: TaskPlane, principal: string, taskId: string): Promise<Status> {
  return ((await plane.getTask(principal, taskId)) as { status: Status }).status;
}

/** Polls `probe` (bounded): only for what no event announces (the bridge's hold). */
async function until(what: string, probe: () => Promise<boolean> | boolean, ms = 10_000): Promise<void> {
  for (const deadline = Date.now() + ms; !(await probe()); ) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Watches the bridge's activity (every Task's status changes, as they are committed) and
 * returns a wait for the first one that matches, seen already or still to come. */
function activityOf(bridge: AgentBridge): (what: string, matches: (a: TaskActivity) => boolean, ms?: number) => Promise<TaskActivity> {
  const seen: TaskActivity[] = [];
  const waiters: { matches: (a: TaskActivity) => boolean; found: (a: TaskActivity) => void }[] = [];
  bridge.watchActivity((err, batch) => {
    if (err) return;
    for (const a of batch) {
      seen.push(a);
      for (const w of waiters.filter((w) => w.matches(a))) {
        waiters.splice(waiters.indexOf(w), 1);
        w.found(a);
      }
    }
  });
  return (what, matches, ms = 10_000) => {
    const already = seen.find(matches);
    if (already) return Promise.resolve(already);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no activity showed ${what} within ${ms} ms`)), ms);
      waiters.push({ matches, found: (a) => (clearTimeout(timer), resolve(a)) });
    });
  };
}

test("Pi's `unknown` placeholder is no model; a model without credentials is none either", async () => {
  const registry = (configured: boolean, auth: { ok: boolean; error?: string }) =>
    ({ hasConfiguredAuth: () => configured, getApiKeyAndHeaders: async () => auth }) as unknown as ExtensionContext["modelRegistry"];
  const ctx = (model: unknown, modelRegistry = registry(true, { ok: true })) => ({ model, modelRegistry }) as unknown as ExtensionContext;
  assert.match((await modelProblem(ctx({ provider: "unknown", id: "unknown" }))) ?? "", /no model selected/);
  assert.match((await modelProblem(ctx(undefined))) ?? "", /no model selected/);
  assert.equal(await modelProblem(ctx({ provider: "anthropic", id: "claude" })), undefined);
  const noKey = registry(false, { ok: false, error: 'No API key found for "anthropic"' });
  assert.match((await modelProblem(ctx({ provider: "anthropic", id: "claude" }, noKey))) ?? "", /anthropic\/claude cannot be used \(No API key found/);
  assert.equal(await modelProblem(ctx({ provider: "local", id: "m" }, registry(false, { ok: true }))), undefined);
});

test("the driver holds the queue without a usable model, releases it once one is selected, and a failed turn says why", async () => {
  const root = join(mkdtempSync(join(tmpdir(), "driver-")), "task-plane");
  const plane = await TaskPlane.open(root);
  const bridge = await AgentBridge.start(plane);
  const context = {
    cwd: root,
    model: { provider: "unknown", id: "unknown" } as unknown,
    thinkingLevel: "off",
    modelRegistry: { hasConfiguredAuth: () => true, getApiKeyAndHeaders: async () => ({ ok: true }), getProvider: () => undefined },
  };
  const pi = { getThinkingLevel: () => "off" } as unknown as ExtensionAPI;
  const logged: string[] = [];
  const driver = new TaskSessionDriver(pi, bridge, () => context as unknown as ExtensionContext, (id) => plane.sessionDir(id), (event) =>
    void logged.push(event),
  );
  const activity = activityOf(bridge);
  driver.start();
  try {
    await until("the hold", () => bridge.held !== null && bridge.held !== undefined);
    const accepted = await plane.acceptInContext("alice", { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "hi" }] });
    const taskId = accepted.taskId as string;
    await activity("the note", (a) => a.taskId === taskId && a.message !== undefined);
    const held = await statusOf(plane, "alice", taskId);
    assert.equal(held.state, "TASK_STATE_SUBMITTED");
    assert.match(held.message?.parts[0].text ?? "", /has no usable model at the moment, so this task waits; its operator has been told/);
    assert.deepEqual(logged, ["a2a_no_model"], "no turn was tried; the operator's log says why");

    // A model is selected (one this stand-in cannot run): the queue is released, the turn
    // is tried, fails, and the Task says why and when it is tried again.
    context.model = { provider: "nowhere", id: "no-such-model", api: "openai-completions" };
    driver.poke();
    await activity("the failed turn's note", (a) => a.taskId === taskId && /turn on this task failed/.test(a.message ?? ""), 30_000);
    assert.equal(bridge.held ?? null, null);
    const failed = await statusOf(plane, "alice", taskId);
    assert.equal(failed.state, "TASK_STATE_WORKING");
    assert.match(failed.message?.parts[0].text ?? "", /It tries again in 5 s \(retry 1 of 3\)/);
    // Logged once turnEnded is done (the note above is written during it).
    await until(`a2a_turn_ended in the log (${logged.join(",")})`, () => logged.includes("a2a_turn_ended"));
  } finally {
    await driver.stop();
    bridge.close();
    plane.close();
  }
});
