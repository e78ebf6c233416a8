// The session driver against the real addon, with a stand-in for Pi's context: without a
// usable model it takes no wake and holds the queue (each waiting Task says why); once a
// model is selected it releases the queue, and a turn the provider refuses for want of
// credentials holds it again, no retry spent.
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { AgentBridge, type TaskActivity, TaskPlane } from "../index.js";
import { fauxProvider } from "@earendil-works/pi-ai";
import { ModelRegistry, ModelRuntime } from "@earendil-works/pi-coding-agent";
import { isAuthFailure, modelProblem, TaskSessionDriver } from "../extensions/task-sessions.ts";

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

test("Pi's `unknown` placeholder is no model; a model whose provider has no credentials is none either, and the fix names its key variable", async () => {
  // Pi's own model registry over an empty agent directory and no key in the environment.
  const agentDir = mkdtempSync(join(tmpdir(), "driver-agent-"));
  for (const name of ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_OAUTH_TOKEN", "OPENAI_API_KEY"]) delete process.env[name];
  const runtime = await ModelRuntime.create({ authPath: join(agentDir, "auth.json"), modelsPath: join(agentDir, "models.json"), refreshOnCreate: false });
  const modelRegistry = new ModelRegistry(runtime);
  const ctx = (model: unknown) => ({ model, modelRegistry }) as unknown as ExtensionContext;
  assert.match((await modelProblem(ctx({ provider: "unknown", id: "unknown" })))?.operator ?? "", /no model selected/);
  assert.match((await modelProblem(ctx(undefined)))?.footer ?? "", /^held: no model$/);
  const claude = runtime.getModels("anthropic")[0];
  assert.ok(claude, "Pi knows Anthropic's models");
  const noKey = await modelProblem(ctx(claude));
  assert.equal(noKey?.footer, "held: no key for anthropic");
  assert.match(noKey?.callers ?? "", /provider anthropic has no credentials.*set ANTHROPIC_API_KEY in the resident's environment.*\/login anthropic/);
  assert.doesNotMatch(noKey?.callers ?? "", /\/model/, "a service's fix is not Pi's model picker");
  await runtime.setRuntimeApiKey("anthropic", "sk-test-not-a-real-key");
  assert.equal(await modelProblem(ctx(claude)), undefined, "with a key the model is usable");
  // A provider an extension registers (the faux one) resolves its own credentials.
  const faux = fauxProvider({ provider: "faux", models: [{ id: "faux-1" }] });
  runtime.registerNativeProvider(faux.provider);
  assert.equal(await modelProblem(ctx(runtime.getModel("faux", "faux-1"))), undefined);
});

test("a turn's authentication error is told from other failures", () => {
  for (const auth of [
    "No API key found for anthropic.",
    '401 {"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}',
    "Incorrect API key provided: sk-abc",
    "Request failed: Unauthorized",
  ]) {
    assert.ok(isAuthFailure(auth), auth);
  }
  for (const other of ["overloaded_error: Overloaded", "429 rate limit", "fetch failed", "context length exceeded (4010 tokens)"]) {
    assert.ok(!isAuthFailure(other), other);
  }
});

test("the driver holds the queue without a usable model, releases it once one is selected, and a provider's refusal of the key holds it again", async () => {
  const root = join(mkdtempSync(join(tmpdir(), "driver-")), "task-plane");
  const plane = await TaskPlane.open(root);
  const bridge = await AgentBridge.start(plane);
  const context = {
    cwd: root,
    model: { provider: "unknown", id: "unknown" } as unknown,
    thinkingLevel: "off",
    modelRegistry: { hasConfiguredAuth: () => true, getProvider: () => undefined },
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

    // A model is selected whose provider has no key: the turn is tried and fails with
    // the provider's authentication error, which holds the queue instead of spending a
    // retry; the Task (delivered, so WORKING) says why and what the operator does.
    context.model = { provider: "nowhere", id: "no-such-model", api: "openai-completions" };
    driver.poke();
    await activity("the refusal's note", (a) => a.taskId === taskId && /refused its credentials/.test(a.message ?? ""), 30_000);
    assert.match(bridge.held ?? "", /provider nowhere refused its credentials/);
    const refused = await statusOf(plane, "alice", taskId);
    assert.equal(refused.state, "TASK_STATE_WORKING");
    assert.match(refused.message?.parts[0].text ?? "", /This task waits and is worked on once the operator fixes them \(log in once with Pi/);
    assert.doesNotMatch(refused.message?.parts[0].text ?? "", /tries again/, "no retry was spent");
    assert.equal(driver.heldFor?.footer, "held: nowhere refused the key");
    // Logged once turnEnded is done (the note above is written during it).
    await until(`a2a_turn_ended in the log (${logged.join(",")})`, () => logged.includes("a2a_turn_ended"));
  } finally {
    await driver.stop();
    bridge.close();
    plane.close();
  }
});
