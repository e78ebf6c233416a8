// What the person at the resident's terminal sees: startup problems through Pi's UI (never
// on stderr in the interactive screen), a footer status with the listener and the queue,
// one notification per burst of task activity, and `/a2a tasks` / `/a2a show`. Pi's RPC
// mode carries every UI call as an `extension_ui_request`, so real Pi shows what was asked.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import { footerText, summarizeActivity } from "../extensions/resident-ui.ts";
import { fauxAgentExtension, PiRpc, repoRoot, type RpcRecord } from "./helpers/pi.ts";

const TOKEN = "ui-token-0123456789abcdef";

function setup(extra: Record<string, string> = {}) {
  const dir = mkdtempSync(join(tmpdir(), "pi-ui-"));
  const credentials = join(dir, "credentials.json");
  writeFileSync(credentials, JSON.stringify({ credentials: [{ token: TOKEN, principal: "uitester" }] }), { mode: 0o600 });
  chmodSync(credentials, 0o600);
  // The scripted agent records a `summary` output: declare it.
  const manifest = join(dir, "workflow-composition.json");
  writeFileSync(manifest, JSON.stringify({ workflows: [{ id: "summarise", outputs: { summary: { type: "doc.summary" } } }] }));
  return {
    dir,
    credentials,
    env: { A2A_SERVER: "1", A2A_PORT: "0", A2A_CREDENTIALS_PATH: credentials, A2A_WORKFLOW_MANIFEST: manifest, ...extra },
  };
}

const notices = (pi: PiRpc): string[] =>
  pi.records.filter((r) => r.type === "extension_ui_request" && r.method === "notify").map((r) => String(r.message));
const statuses = (pi: PiRpc): string[] =>
  pi.records
    .filter((r) => r.type === "extension_ui_request" && r.method === "setStatus" && r.statusKey === "a2a")
    .map((r) => String(r.statusText));

async function command(pi: PiRpc, text: string, prefix: RegExp): Promise<string> {
  const start = pi.records.length;
  const notified = pi.waitFor(
    (r: RpcRecord) => r.type === "extension_ui_request" && r.method === "notify" && pi.records.indexOf(r) >= start && prefix.test(String(r.message)),
  );
  await pi.call({ type: "prompt", message: text });
  return String((await notified).message);
}

test("a burst of activity is one notification line; a single event says what it was", () => {
  const arrivals = Array.from({ length: 100 }, () => ({ taskId: randomUUID() }));
  assert.deepEqual(summarizeActivity(arrivals), { text: "A2A: 100 tasks arrived", level: "info" });
  const one = randomUUID();
  assert.deepEqual(summarizeActivity([{ taskId: one, state: "TASK_STATE_FAILED", message: "the manifest did not load" }]), {
    text: `A2A task ${one.slice(-8)} failed: the manifest did not load`,
    level: "warning",
  });
  const mixed = summarizeActivity([
    { taskId: one },
    { taskId: one, state: "TASK_STATE_WORKING" },
    { taskId: one, state: "TASK_STATE_INPUT_REQUIRED", message: "Which color?" },
  ]);
  assert.deepEqual(mixed, { text: "A2A: 1 task arrived, 1 waits for the caller", level: "info" });
  assert.deepEqual(summarizeActivity([{ taskId: one, state: "TASK_STATE_AUTH_REQUIRED" }]), {
    text: `A2A task ${one.slice(-8)} waits for its caller`,
    level: "info",
  });
  // Notes that keep the state (why a task waits) are for callers, not a notification.
  assert.equal(summarizeActivity([{ taskId: one, state: "TASK_STATE_SUBMITTED", message: "no model" }]), undefined);
  assert.equal(footerText({ url: "http://127.0.0.1:8788", waiting: 0 }), "A2A http://127.0.0.1:8788 · idle");
  assert.equal(
    footerText({ url: "http://127.0.0.1:8788", waiting: 3, active: "01a251bb-993d-73ff-b424-5f05c59df948" }),
    "A2A http://127.0.0.1:8788 · working c59df948 · 3 waiting",
  );
  assert.equal(footerText({ url: "u", waiting: 2, held: "held: no key for anthropic" }), "A2A u · held: no key for anthropic · 2 waiting");
});

test("the footer shows the listener and the queue; arrivals and settlements are notified; /a2a tasks and show", async () => {
  const { env } = setup();
  const pi = new PiRpc([repoRoot], env, { model: fauxAgentExtension });
  try {
    const ready = await pi.waitFor((r) => r.type === "extension_ui_request" && r.method === "notify" && /A2A listener serving at/.test(String(r.message)));
    const url = /serving at (http:\/\/127\.0\.0\.1:\d+)/.exec(String(ready.message))?.[1];
    assert.ok(url);
    await pi.waitFor((r) => r.type === "extension_ui_request" && r.method === "setStatus" && String(r.statusText) === `A2A ${url} · idle`);
    const res = await fetch(`${url}/message:send`, {
      method: "POST",
      headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
      body: JSON.stringify({ message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "summarise the ui test" }] } }),
    });
    const task = (await res.json()).task;
    assert.equal(task.status.state, "TASK_STATE_COMPLETED");
    // Arrival and completion are one line when they fall in one window (the usual case),
    // else one line each.
    const note = await pi.waitFor(
      (r) =>
        r.type === "extension_ui_request" &&
        r.method === "notify" &&
        (/^A2A: 1 task arrived, 1 completed$/.test(String(r.message)) || String(r.message) === `A2A task ${task.id.slice(-8)} completed`),
    );
    assert.equal(note.notifyType, "info");
    assert.ok(statuses(pi).includes(`A2A ${url} · working ${task.id.slice(-8)}`), statuses(pi).join("\n"));

    const listed = await command(pi, "/a2a tasks completed", /uitester/);
    assert.match(listed, new RegExp(`^A2A tasks, newest status first \\(1;.*\n${task.id.slice(-8)}\\s+uitester\\s+completed\\s+\\d+ s ago$`));
    const shown = await command(pi, `/a2a show ${task.id}`, /^Task /);
    assert.match(shown, /Status: completed/);
    assert.match(shown, /caller: summarise the ui test/);
    assert.match(shown, /Artifacts: summary, response/);
    assert.match(shown, new RegExp(`Pi session: \\S+/sessions/${task.id}/\\S+\\.jsonl`));
    assert.match(shown, /export it as a page: \S+ \S+a2a-task-plane\.js --store \S+ export [0-9a-f]{8} task\.html/);
    const bad = await command(pi, "/a2a tasks sleeping", /invalid `state`/);
    assert.match(bad, /use one of TASK_STATE_SUBMITTED, TASK_STATE_WORKING, .*, or the short names submitted, working/);
  } finally {
    assert.equal(await pi.close(), 0, pi.stderr);
  }
});

test("startup problems reach the person through the UI: credentials readable by others, a broken manifest, no model", async () => {
  const { dir, credentials, env } = setup();
  chmodSync(credentials, 0o644);
  const manifest = join(dir, "workflow-composition.json");
  writeFileSync(manifest, "{ not json");
  const pi = new PiRpc([repoRoot], { ...env, A2A_WORKFLOW_MANIFEST: manifest }, { model: false });
  try {
    await pi.waitFor((r) => r.type === "extension_ui_request" && r.method === "notify" && /no model selected/.test(String(r.message)));
    const all = notices(pi).join("\n");
    assert.match(all, /readable by other users \(mode 644\).*chmod 600/);
    assert.match(all, /workflow manifest \(A2A_WORKFLOW_MANIFEST\) did not load.*is not JSON/);
    await pi.waitFor((r) => r.type === "extension_ui_request" && r.method === "setStatus" && /held: no model · /.test(String(r.statusText)));
  } finally {
    assert.equal(await pi.close(), 0, pi.stderr);
  }
});

test("a start failure in the interactive-capable UI is one notification, not a stack trace", async () => {
  const { env } = setup({ A2A_CREDENTIALS_PATH: "/nonexistent/credentials.json" });
  const pi = new PiRpc([repoRoot], env);
  try {
    // RPC mode has a UI but no screen of its own: the failure is an extension error line
    // (one line, no stack) and the status says the plane is not running.
    const status = await command(pi, "/a2a", /^A2A task plane/);
    assert.match(status, /not running\nA2A task plane not started: A2A_CREDENTIALS_PATH: cannot read \/nonexistent\/credentials.json.*create it/);
  } finally {
    await pi.close();
  }
  assert.doesNotMatch(pi.stderr, /^\s+at /m, "no stack trace");
});
