// Operating a live resident (issue #37): a provider without a key holds the queue and says
// so at once; the short ids shown find their Task (by 6+ characters of an id's start or
// end) in Pi and the CLI; the CLI's export writes a Task's session as a page; a workflow
// manifest that did not load is in the start-up line and on the Task of its caller; and a
// follow-up Task of a conversation is told of the earlier ones. Real Pi throughout (the
// resident headless, or RPC mode with the scripted faux provider), loopback HTTP.
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import { shortTaskId } from "../index.js";
import { fauxAgentExtension, PiRpc, repoRoot } from "./helpers/pi.ts";

const TOKEN = "operate-token-0123456789abcdef";
const OUTFITTER = "https://github.com/ai-outfitter/channels/a2a-extensions/outfitter-task/v1";
const cli = join(repoRoot, "bin/a2a-task-plane.js");
const fauxConversation = join(repoRoot, "__test__/fixtures/faux-conversation.ts");

function setup(extra: Record<string, string> = {}) {
  const dir = mkdtempSync(join(tmpdir(), "pi-operate-"));
  const credentials = join(dir, "credentials.json");
  writeFileSync(credentials, JSON.stringify({ credentials: [{ token: TOKEN, principal: "ops" }] }), { mode: 0o600 });
  return { dir, env: { A2A_SERVER: "1", A2A_PORT: "0", A2A_CREDENTIALS_PATH: credentials, A2A_BLOCKING_TIMEOUT_MS: "30000", ...extra } };
}

async function send(url: string, text: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
  const res = await fetch(`${url}/message:send`, {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json", ...headers },
    body: JSON.stringify({ message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text }], ...extra } }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()).task;
}

async function listenerUrl(pi: PiRpc): Promise<string> {
  const notified = pi.waitFor((r) => r.type === "extension_ui_request" && r.method === "notify" && String(r.message).includes("A2A task plane"));
  await pi.call({ type: "prompt", message: "/a2a" });
  const url = /at (http:\/\/127\.0\.0\.1:\d+)/.exec(String((await notified).message))?.[1];
  assert.ok(url, "the listener runs");
  return url;
}

/** The package's command, as an operator runs it. */
function run(...args: string[]) {
  const r = spawnSync(process.execPath, [cli, ...args], { encoding: "utf8", env: { ...process.env, PI_OFFLINE: "1" }, timeout: 120_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

test("a provider without a key holds the queue: the Task waits SUBMITTED with a note naming the provider and its key variable, at once; a manifest that did not load is in the running line", async () => {
  const { dir, env } = setup({ A2A_BLOCKING_TIMEOUT_MS: "600000", A2A_WORKFLOW_MANIFEST: "/nonexistent/workflow-composition.json" });
  const childEnv: Record<string, string | undefined> = {
    ...process.env,
    ...env,
    PI_CODING_AGENT_DIR: join(dir, "agent"),
    PI_OFFLINE: "1",
    PI_SKIP_VERSION_CHECK: "1",
    PI_TELEMETRY: "0",
    CHANNELS_TASK_STORE_PATH: join(dir, "task-plane"),
    XDG_DATA_HOME: dir,
  };
  for (const name of Object.keys(childEnv)) if (name.startsWith("ANTHROPIC_")) delete childEnv[name];
  const child: ChildProcess = spawn(process.execPath, [cli, "resident", "--provider", "anthropic", "--model", "claude-sonnet-4-5"], {
    cwd: dir,
    env: childEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  const running = new Promise<string>((resolve, reject) => {
    child.stderr?.on("data", (d) => {
      stderr += d;
      const line = /a2a-resident: running[^\n]*/.exec(stderr)?.[0];
      if (line) resolve(line);
    });
    child.once("exit", (code) => reject(new Error(`the resident exited (${code}):\n${stderr}`)));
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  try {
    const line = await running;
    assert.match(line, /model anthropic\/claude-sonnet-4-5/);
    assert.match(line, /PROBLEM: the workflow manifest \(A2A_WORKFLOW_MANIFEST\) did not load.*\/nonexistent\/workflow-composition\.json/);
    assert.match(line, /PROBLEM: the resident Pi's model anthropic\/claude-sonnet-4-5 cannot be used \(no API key or login\), so tasks wait: set ANTHROPIC_API_KEY/);
    const url = /A2A listener (http:\/\/127\.0\.0\.1:\d+)/.exec(line)?.[1] as string;
    // The blocking timeout is 10 minutes, longer than this test may run: the answer comes
    // because the queue is held, not because the wait ran out.
    const task = await send(url, "hello");
    assert.equal(task.status.state, "TASK_STATE_SUBMITTED", JSON.stringify(task));
    const note = task.status.message.parts[0].text;
    assert.match(note, /its model provider anthropic has no credentials/);
    assert.match(note, /set ANTHROPIC_API_KEY in the resident's environment/);
    assert.match(stderr, /"event":"a2a_no_model"[^\n]*no API key or login/);
    assert.doesNotMatch(stderr, /a2a_turn_started|a2a_turn_failed/, "no turn is burnt without a key");
  } finally {
    child.kill("SIGTERM");
  }
  assert.equal(await exited, 0, stderr);
});

test("short ids come from the random tail and find their Task in Pi and the CLI; the CLI exports a Task's session as a page", async () => {
  const { dir, env } = setup();
  const pi = new PiRpc([repoRoot], env, { model: fauxAgentExtension });
  let first: { id: string; contextId: string };
  let second: { id: string };
  try {
    const url = await listenerUrl(pi);
    first = await send(url, "summarise the first report");
    second = await send(url, "summarise the second report");
    assert.equal(first.id.slice(0, 6), second.id.slice(0, 6), "tasks of one minute share their time prefix");
    assert.notEqual(shortTaskId(first.id), shortTaskId(second.id));
    assert.equal(shortTaskId(first.id), first.id.slice(-8));
    const shown = pi.waitFor((r) => r.type === "extension_ui_request" && r.method === "notify" && String(r.message).startsWith(`Task ${first.id}`));
    await pi.call({ type: "prompt", message: `/a2a show ${shortTaskId(first.id)}` });
    const detail = String((await shown).message);
    assert.match(detail, /^Status: /m);
    assert.match(detail, /export it as a page: .*a2a-task-plane\.js --store \S+ export [0-9a-f]{8} task\.html/);
    const ambiguous = pi.waitFor((r) => r.type === "extension_ui_request" && r.method === "notify" && /more than one task id/.test(String(r.message)));
    await pi.call({ type: "prompt", message: `/a2a show ${first.id.slice(0, 6)}` });
    const candidates = String((await ambiguous).message);
    assert.ok(candidates.includes(first.id) && candidates.includes(second.id), candidates);
  } finally {
    assert.equal(await pi.close(), 0, pi.stderr);
  }
  const store = ["--store", pi.storeRoot];
  const listed = run(...store, "tasks");
  assert.equal(listed.code, 0, listed.err);
  assert.ok(listed.out.includes(shortTaskId(second.id)) && !listed.out.includes(second.id), listed.out);
  // Any 6+ characters of the start or the end; the whole id too.
  for (const typed of [shortTaskId(first.id), first.id.slice(-6), first.id.slice(0, 13), first.id.toUpperCase()]) {
    const shown = run(...store, "show", typed);
    assert.equal(shown.code, 0, `${typed}: ${shown.err}`);
    assert.match(shown.out, new RegExp(`^Task ${first.id} `), typed);
  }
  const ambiguous = run(...store, "show", first.id.slice(0, 6));
  assert.equal(ambiguous.code, 1);
  assert.match(ambiguous.err, /is part of more than one task id: .*; type more of the id/);
  const missing = run(...store, "show", "ffffff");
  assert.equal(missing.code, 1);
  assert.match(missing.err, /no task id starts or ends with ffffff in /);
  assert.match(run(...store, "show", "a8af5").err, /too short: give at least 6 characters/);
  // The export command the CLI prints runs as printed.
  const session = run(...store, "session", shortTaskId(first.id));
  assert.equal(session.code, 0, session.err);
  const printed = /export it as a page: (.*)$/m.exec(session.out)?.[1] as string;
  const page = join(dir, "task.html");
  const exported = spawnSync("bash", ["-c", printed.replace(/ task\.html$/, ` ${page}`)], { encoding: "utf8", env: { ...process.env, PI_OFFLINE: "1" }, timeout: 120_000 });
  assert.equal(exported.status, 0, exported.stderr);
  assert.match(exported.stdout, new RegExp(`wrote ${page} \\(task ${first.id}\\)`));
  assert.ok(existsSync(page));
  const html = readFileSync(page, "utf8");
  assert.match(html, /<html/i);
  // Pi's page carries the session as base64 JSON.
  const data = /id="session-data"[^>]*>([A-Za-z0-9+/=]+)</.exec(html)?.[1] ?? "";
  assert.ok(Buffer.from(data, "base64").toString("utf8").includes(`a2a-task-${first.id}`), "the page is the Task's session");
  const noSession = run(...store, "export", "ffffff", join(dir, "x.html"));
  assert.equal(noSession.code, 1);
});

test("a follow-up Task in the same context is told of the earlier Tasks: ids, states, request and answer, bounded", async () => {
  const { env } = setup();
  const pi = new PiRpc([repoRoot], env, { model: fauxConversation });
  try {
    const url = await listenerUrl(pi);
    const first = await send(url, "my name is Ada");
    assert.equal(first.artifacts.at(-1).parts[0].text, "no earlier tasks");
    const long = `please remember ${"x".repeat(3_000)}`;
    const second = await send(url, long, { contextId: first.contextId });
    const third = await send(url, "what is my name?", { contextId: first.contextId });
    const told = third.artifacts.at(-1).parts[0].text as string;
    assert.match(told, /^Earlier tasks of this conversation \(2, oldest first/);
    const at = (s: string) => told.indexOf(s);
    assert.ok(at(`| [earlier task ${first.id} — completed]`) >= 0, told);
    assert.ok(at(`| [earlier task ${second.id} — completed]`) > at(first.id), "oldest first");
    assert.ok(at("| my name is Ada") > 0 && at("| no earlier tasks") > 0, "the request and the answer");
    assert.ok(!told.includes("x".repeat(1_000)) && told.includes(`${"x".repeat(900)}…`), "texts are cut");
    assert.ok(!told.includes("what is my name"), "the task itself is not an earlier one");
    // Another context of the same caller starts afresh.
    const other = await send(url, "unrelated");
    assert.equal(other.artifacts.at(-1).parts[0].text, "no earlier tasks");
  } finally {
    assert.equal(await pi.close(), 0, pi.stderr);
  }
});

test("a workflow manifest that did not load is told on the Task of a caller that needs it", async () => {
  const { env } = setup({ A2A_WORKFLOW_MANIFEST: "/nonexistent/workflow-composition.json" });
  const pi = new PiRpc([repoRoot], env, { model: fauxAgentExtension });
  try {
    const url = await listenerUrl(pi);
    const res = await fetch(`${url}/message:stream`, {
      method: "POST",
      headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json", "A2A-Extensions": OUTFITTER },
      body: JSON.stringify({ message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "summarise this" }] } }),
    });
    assert.equal(res.status, 200);
    // The stream ends once the Task is terminal (it fails: its outputs cannot be recorded).
    const events = await res.text();
    assert.match(events, /The resident agent's workflow manifest did not load, so this task's declared outputs cannot be recorded; its operator has been told/);
    assert.match(events, /TASK_STATE_FAILED/);
  } finally {
    assert.equal(await pi.close(), 0, pi.stderr);
  }
});
