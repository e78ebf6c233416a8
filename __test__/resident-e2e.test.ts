// End to end with real Pi run headless (RPC mode, the scripted faux model, no network): an
// A2A message through the listener wakes the resident, the Task runs in its own Pi
// session, the model uses the a2a_* tools, and the client sees the outputs and COMPLETED.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import { terminalState } from "./helpers/a2a-http.ts";
import { fauxAgentExtension, PiRpc, repoRoot } from "./helpers/pi.ts";

const TOKEN = "e2e-token-0123456789abcdef";
const OUTFITTER = "https://github.com/ai-outfitter/channels/a2a-extensions/outfitter-task/v1";

function setup() {
  const dir = mkdtempSync(join(tmpdir(), "pi-e2e-"));
  const credentials = join(dir, "credentials.json");
  writeFileSync(credentials, JSON.stringify({ credentials: [{ token: TOKEN, principal: "e2e" }] }));
  const manifest = join(dir, "workflow-composition.json");
  writeFileSync(manifest, JSON.stringify({ workflows: [{ id: "summarise", outputs: { summary: { type: "doc.summary" } } }] }));
  const env = { A2A_SERVER: "1", A2A_PORT: "0", A2A_CREDENTIALS_PATH: credentials, A2A_WORKFLOW_MANIFEST: manifest, A2A_BLOCKING_TIMEOUT_MS: "30000" };
  return { dir, env };
}

async function listenerUrl(pi: PiRpc): Promise<string> {
  const notified = pi.waitFor((r) => r.type === "extension_ui_request" && r.method === "notify" && String(r.message).includes("A2A task plane"));
  await pi.call({ type: "prompt", message: "/a2a" });
  const url = /at (http:\/\/127\.0\.0\.1:\d+)/.exec(String((await notified).message))?.[1];
  assert.ok(url, "the listener runs");
  return url;
}

async function send(url: string, text: string, extra: Record<string, unknown> = {}, config: Record<string, unknown> = {}) {
  const res = await fetch(`${url}/message:send`, {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json", "A2A-Extensions": OUTFITTER },
    body: JSON.stringify({ message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text }], ...extra }, configuration: config }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()).task;
}

test("an A2A message wakes the resident; its task session reads, records an output and completes", async () => {
  const { env } = setup();
  const pi = new PiRpc([repoRoot], env, { model: fauxAgentExtension });
  try {
    const url = await listenerUrl(pi);
    const task = await send(url, "summarise the quarterly report");
    assert.equal(task.status.state, "TASK_STATE_COMPLETED", JSON.stringify(task));
    const [summary, response] = task.artifacts;
    assert.equal(summary.name, "summary");
    assert.deepEqual(summary.metadata["outfitter-task/v1"], {
      output: "summary",
      type: "doc.summary",
      value: { text: "summary of: summarise the quarterly report" },
    });
    assert.equal(response.name, "response");
    assert.match(response.parts[0].text, /^done/);
    assert.equal(task.history[0].parts[0].text, "summarise the quarterly report");
    assert.equal(task.metadata["outfitter-task/v1"].task.taskId, task.id);
  } finally {
    assert.equal(await pi.close(), 0, pi.stderr);
  }
  assert.match(pi.stderr, /"event":"a2a_turn_started".*"session":"created"/);
});

test("require_input pauses the task; the explicit follow-up reopens the same session with its history", async () => {
  const { env } = setup();
  const pi = new PiRpc([repoRoot], env, { model: fauxAgentExtension });
  try {
    const url = await listenerUrl(pi);
    const asked = await send(url, "please ask me which color");
    assert.equal(asked.status.state, "TASK_STATE_INPUT_REQUIRED", JSON.stringify(asked));
    assert.equal(asked.status.message.parts[0].text, "Which color?");
    const done = await send(url, "blue", { taskId: asked.id, contextId: asked.contextId });
    assert.equal(done.id, asked.id);
    assert.equal(done.status.state, "TASK_STATE_COMPLETED", JSON.stringify(done));
    const response = done.artifacts.find((a: { name: string }) => a.name === "response");
    assert.match(response.parts[0].text, /turns in this session: 2/, "the reopened session still holds the first turn");
    const sessions = readdirSync(join(pi.storeRoot, "sessions", asked.id)).filter((f) => f.endsWith(".jsonl"));
    assert.equal(sessions.length, 1, "one durable session for the task");
  } finally {
    assert.equal(await pi.close(), 0, pi.stderr);
  }
  assert.match(pi.stderr, /"event":"a2a_turn_started".*"session":"reopened"/);
});

test("a tool call for a task without authority fails", async () => {
  const { env } = setup();
  const pi = new PiRpc([repoRoot], env, { model: fauxAgentExtension });
  try {
    const url = await listenerUrl(pi);
    const task = await send(url, "summarise this");
    assert.equal(task.status.state, "TASK_STATE_COMPLETED");
    // The Task settles inside its turn; the turn's authority ends after it.
    await pi.waitForStderr(new RegExp(`"event":"a2a_turn_ended"[^\n]*"taskId":"${task.id}"`));
    const ended = pi.waitFor((r) => r.type === "tool_execution_end" && r.toolName === "a2a_read_task");
    await pi.call({ type: "prompt", message: `call a2a_read_task for ${task.id}` });
    const result = (await ended) as { isError?: boolean; result?: { content?: { text: string }[] } };
    assert.equal(result.isError, true);
    assert.match(result.result?.content?.[0]?.text ?? "", /no task turn is active/);
  } finally {
    await pi.close();
  }
});

test("without a usable model tasks wait and say why; a restart with a model works them", async () => {
  const { env } = setup();
  // First resident: no model at all. No turn is tried (none could succeed): the queue is
  // held and the Task's status tells its caller why, so a blocking send explains itself.
  const first = new PiRpc([repoRoot], { ...env, A2A_BLOCKING_TIMEOUT_MS: "1500" }, { model: false });
  let taskId = "";
  try {
    const url = await listenerUrl(first);
    const waited = await send(url, "summarise after the restart");
    taskId = waited.id;
    assert.equal(waited.status.state, "TASK_STATE_SUBMITTED", JSON.stringify(waited));
    assert.match(waited.status.message.parts[0].text, /has no usable model at the moment, so this task waits/);
    assert.doesNotMatch(waited.status.message.parts[0].text, /\/login|\/model/, "operator advice stays with the operator");
    assert.doesNotMatch(first.stderr, /a2a_turn_failed/, "no turn is burnt without a model");
  } finally {
    assert.equal(await first.close(), 0, first.stderr);
  }
  // Second resident on the same store, with a model: startup offers the Task again.
  const second = new PiRpc([repoRoot], env, { model: fauxAgentExtension, storeRoot: first.storeRoot });
  try {
    const url = await listenerUrl(second);
    const state = await terminalState(url, TOKEN, taskId, 20_000);
    assert.equal(state, "TASK_STATE_COMPLETED", second.stderr);
  } finally {
    assert.equal(await second.close(), 0, second.stderr);
  }
});

test("the offline demo agent of the run command takes a task from curl-style HTTP to COMPLETED", async () => {
  const { env } = setup();
  // What `bash tools/run.sh --demo` runs: the package, the demo agent and its scripted model.
  const demo = new PiRpc([repoRoot, join(repoRoot, "extensions/demo-agent.ts")], env, {
    model: false,
    extraArgs: ["--provider", "a2a-demo", "--model", "scripted-demo-agent"],
  });
  try {
    const url = await listenerUrl(demo);
    const task = await send(url, "hello demo");
    assert.equal(task.status.state, "TASK_STATE_COMPLETED", JSON.stringify(task));
    assert.match(task.artifacts.at(-1).parts[0].text, /offline demo agent: scripted, not a model.*hello demo/);
  } finally {
    assert.equal(await demo.close(), 0, demo.stderr);
  }
});

test("a task session gets the resident's other extensions but never loads this package again", async () => {
  const { env } = setup();
  const agentDir = mkdtempSync(join(tmpdir(), "pi-agent-"));
  mkdirSync(join(agentDir, "extensions"));
  writeFileSync(
    join(agentDir, "extensions", "probe.ts"),
    `export default function probe(pi) {
      pi.on("session_start", (_event, ctx) => process.stderr.write("[probe] session_start " + (ctx.sessionManager.getSessionFile() ?? "ephemeral") + "\\n"));
    }\n`,
  );
  // The resident's settings also list this package; the task session must skip it.
  writeFileSync(join(agentDir, "settings.json"), JSON.stringify({ packages: [repoRoot] }));
  const pi = new PiRpc([repoRoot], env, { model: fauxAgentExtension, agentDir });
  let taskId = "";
  try {
    const url = await listenerUrl(pi);
    const task = await send(url, "summarise with the probe loaded");
    taskId = task.id;
    assert.equal(task.status.state, "TASK_STATE_COMPLETED");
  } finally {
    assert.equal(await pi.close(), 0, pi.stderr);
  }
  assert.match(pi.stderr, new RegExp(`\\[probe\\] session_start \\S*sessions/${taskId}/`), pi.stderr);
  assert.equal(pi.stderr.split("a2a_server_started").length - 1, 1, "one listener: the task session did not load this package");
});
