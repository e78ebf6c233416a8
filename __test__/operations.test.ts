// Operating a live headless resident (the offline demo agent: Pi's scripted faux provider)
// without restarting it: /healthz and /metrics over its real socket, the operator's status
// and cancel through the CLI and the control socket, SIGHUP and a changed credentials file
// reloading the tokens (SIGHUP never ends it), and info-level logs free of the caller's
// message and the agent's answer.
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import { A2AListener, TaskPlane } from "../index.js";
import { Operations } from "../extensions/operations.ts";
import { PiRpc, repoRoot } from "./helpers/pi.ts";

const OLD_TOKEN = "operations-old-token-0123456789";
const NEW_TOKEN = "operations-new-token-0123456789-abcdef";
const cli = join(repoRoot, "bin", "a2a-task-plane.js");

const credentialsFile = (token: string) => JSON.stringify({ credentials: [{ token, principal: "ops" }] });

/** Resolves once `probe(stderr)` finds something; fails when the child exits first or after `ms`. */
async function until<T>(what: string, child: ChildProcess, stderr: () => string, probe: (s: string) => T | undefined, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const found = probe(stderr());
    if (found !== undefined) return found;
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the resident exited (${child.exitCode ?? child.signalCode}) waiting for ${what}:\n${stderr()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}:\n${stderr()}`);
}

test("a live resident: health and metrics, operator status and cancel, SIGHUP and file-change reloads, no content in info logs", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "pi-ops-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const credentials = join(dir, "credentials.json");
  writeFileSync(credentials, credentialsFile(OLD_TOKEN), { mode: 0o600 });
  const root = join(dir, "task-plane");
  // Each turn takes 3 s: a second Task sent meanwhile waits in the queue, SUBMITTED.
  const agentDir = join(dir, "agent");
  mkdirSync(join(agentDir, "extensions"), { recursive: true });
  writeFileSync(
    join(agentDir, "extensions", "slow.ts"),
    `export default function slow(pi) {
      pi.on("tool_call", async (event) => {
        if (event.toolName === "a2a_read_task") await new Promise((r) => setTimeout(r, 3000));
      });
    }\n`,
  );
  const env = {
    ...process.env,
    PI_CODING_AGENT_DIR: agentDir,
    PI_OFFLINE: "1",
    PI_SKIP_VERSION_CHECK: "1",
    PI_TELEMETRY: "0",
    CHANNELS_TASK_STORE_PATH: root,
    A2A_PORT: "0",
    A2A_CREDENTIALS_PATH: credentials,
    A2A_LOG: "info",
  };
  const child = spawn(process.execPath, [cli, "resident", "--demo"], { cwd: dir, env, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr?.on("data", (d) => (stderr += d));
  child.stdout?.resume();
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const run = (...args: string[]) => spawnSync(process.execPath, [cli, "--store", root, ...args], { env, encoding: "utf8", timeout: 60_000 });
  const content = `confidential-words-${randomUUID()}`;
  try {
    const url = await until("the running line", child, () => stderr, (s) => /a2a-resident: running .*A2A listener (http:\/\/127\.0\.0\.1:\d+)/.exec(s)?.[1], 120_000);
    const call = (path: string, token?: string, body?: unknown) =>
      fetch(`${url}${path}`, {
        method: body === undefined ? "GET" : "POST",
        headers: { ...(token ? { Authorization: `Bearer ${token}` } : {}), "Content-Type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    const send = async (text: string, returnImmediately: boolean) => {
      const res = await call("/message:send", OLD_TOKEN, { message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text }] }, configuration: { returnImmediately } });
      assert.equal(res.status, 200, await res.clone().text());
      return (await res.json()).task;
    };

    // Health: no credential, no caller data.
    const health = await call("/healthz");
    assert.equal(health.status, 200);
    const body = await health.json();
    assert.equal(body.status, "ok", JSON.stringify(body));
    assert.equal(body.store.state, "open");
    assert.equal(body.queue.waiting, 0);

    // A full round trip whose message (and the demo agent's answer, which quotes it) must
    // stay out of the info-level log.
    const done = await send(content, false);
    assert.equal(done.status.state, "TASK_STATE_COMPLETED", JSON.stringify(done));

    assert.equal((await call("/metrics")).status, 401, "metrics need a credential");
    const metrics = await call("/metrics", OLD_TOKEN);
    assert.equal(metrics.status, 200);
    assert.match(metrics.headers.get("content-type") ?? "", /^text\/plain/);
    const text = await metrics.text();
    for (const line of [
      'a2a_messages_total{outcome="accepted"} 1',
      'a2a_tasks_settled_total{state="completed"} 1',
      'a2a_turns_total{outcome="started"} 1',
      'a2a_requests_total{binding="http_json",route="send",status="200"} 1',
      'a2a_requests_total{binding="http",route="healthz",status="200"} 1',
      "a2a_queue_held 0",
    ])
      assert.ok(text.includes(line), `missing ${line} in\n${text}`);

    // The operator's cancel reaches the live resident through its control socket (0600).
    assert.equal(statSync(join(root, "control.sock")).mode & 0o777, 0o600);
    await send("keeps the agent busy", true);
    const waiting = await send("waits behind it", true);
    const canceled = run("cancel", waiting.id, "--reason", "sent twice by mistake");
    assert.equal(canceled.status, 0, canceled.stderr);
    assert.match(canceled.stdout, new RegExp(`${waiting.id} canceled`));
    const task = await (await call(`/tasks/${waiting.id}`, OLD_TOKEN)).json();
    assert.equal(task.status.state, "TASK_STATE_CANCELED");
    assert.equal(task.status.message.parts[0].text, "Canceled by the operator: sent twice by mistake");
    const again = run("cancel", waiting.id);
    assert.equal(again.status, 1, "a terminal Task is not canceled again");
    assert.match(again.stderr, /cannot be canceled/);
    const status = run("status");
    assert.equal(status.status, 0, status.stderr);
    assert.match(status.stdout, /A2A task plane: store .*\nServing A2A/);

    // SIGHUP reloads the credentials and never ends the resident.
    writeFileSync(credentials, credentialsFile(NEW_TOKEN));
    child.kill("SIGHUP");
    await until("the reload", child, () => stderr, (s) => (s.includes('"event":"a2a_credentials_reloaded"') ? true : undefined), 10_000);
    assert.equal((await call("/tasks", OLD_TOKEN)).status, 401, "a removed token is refused at once");
    assert.equal((await call("/tasks", NEW_TOKEN)).status, 200, "the new token works");
    assert.equal(child.exitCode, null, "SIGHUP did not end the resident");

    // A changed file is read again without a signal; an unusable one keeps the tokens in use.
    writeFileSync(credentials, "{ not the credentials file any more");
    await until("the refused reload", child, () => stderr, (s) => (s.includes('"event":"a2a_credentials_reload_failed"') ? true : undefined), 10_000);
    assert.equal((await call("/tasks", NEW_TOKEN)).status, 200, "the tokens in use stay");

    child.kill("SIGTERM");
    assert.equal(await exited, 0, stderr);
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
  }
  const noResident = run("status");
  assert.equal(noResident.status, 3, noResident.stderr);
  assert.match(noResident.stderr, /no resident is running/);
  const log = readFileSync(join(root, "logs", "task-plane.log"), "utf8");
  assert.match(log, /"event":"a2a_task_state"/, "the round trip was logged");
  assert.ok(!log.includes(content) && !stderr.includes(content), "no message or answer text at info level");
});

test("a reload tells Pi's screen what happened: the tokens in use, or why they stay; the control socket refuses what it does not know", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "pi-ops-reload-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const credentials = join(dir, "credentials.json");
  writeFileSync(credentials, credentialsFile(OLD_TOKEN), { mode: 0o600 });
  const plane = await TaskPlane.open(join(dir, "task-plane"));
  const listener = A2AListener.start(plane, { port: 0, credentialsPath: credentials });
  const shown: { text: string; level: string }[] = [];
  const operations = new Operations({ plane, listener, log: () => undefined, notify: (text, level) => shown.push({ text, level }), status: () => "status text" });
  try {
    writeFileSync(credentials, "{ half a file");
    await operations.reload("test");
    assert.equal(shown.length, 1);
    assert.equal(shown[0].level, "error");
    assert.match(shown[0].text, /credentials not reloaded, the tokens in use stay: .*credentials\.json/);
    const get = (token: string) => fetch(`${listener.url}/tasks`, { headers: { Authorization: `Bearer ${token}`, "A2A-Version": "1.0" } });
    assert.equal((await get(OLD_TOKEN)).status, 200);

    writeFileSync(credentials, credentialsFile(NEW_TOKEN));
    await operations.reload("test");
    assert.deepEqual(shown.at(-1), { text: "A2A: credentials reloaded (1 in use).", level: "info" });
    assert.equal((await get(OLD_TOKEN)).status, 401);

    assert.deepEqual(await operations.answer('{"op": "status"}'), { ok: true, text: "status text" });
    assert.equal((await operations.answer("not json")).ok, false);
    assert.match(JSON.stringify(await operations.answer('{"op": "drop"}')), /unknown op \\"drop\\"; use status or cancel/);
    const missing = await operations.cancel("no-such-task", undefined);
    assert.equal(missing.ok, false);
    assert.equal(!missing.ok && missing.code, "TASK_NOT_FOUND");
  } finally {
    operations.close();
    listener.close();
    plane.close();
  }
});

test("in Pi with no usable model: /healthz says held (model), and /a2a cancel cancels a waiting Task with the operator's reason", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "pi-ops-cancel-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const credentials = join(dir, "credentials.json");
  writeFileSync(credentials, credentialsFile(OLD_TOKEN), { mode: 0o600 });
  const pi = new PiRpc([repoRoot], { A2A_SERVER: "1", A2A_PORT: "0", A2A_CREDENTIALS_PATH: credentials }, { model: false });
  const notified = async (message: string, prefix: string): Promise<string> => {
    const start = pi.records.length;
    const seen = pi.waitFor((r) => r.type === "extension_ui_request" && r.method === "notify" && pi.records.indexOf(r) >= start && String(r.message).startsWith(prefix));
    const handled = await pi.call({ type: "prompt", message });
    assert.equal(handled.success, true, JSON.stringify(handled));
    return String((await seen).message);
  };
  try {
    const url = /at (http:\/\/127\.0\.0\.1:\d+)/.exec(await notified("/a2a", "A2A task plane"))?.[1];
    assert.ok(url);
    const auth = { Authorization: `Bearer ${OLD_TOKEN}`, "Content-Type": "application/json" };
    const sent = await fetch(`${url}/message:send`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "waits for a model" }] }, configuration: { returnImmediately: true } }),
    });
    const taskId = (await sent.json()).task.id as string;
    const health = await (await fetch(`${url}/healthz`)).json();
    assert.equal(health.status, "held", JSON.stringify(health));
    assert.equal(health.held, "model");

    const reply = await notified(`/a2a cancel ${taskId} nobody will work on it today`, `A2A task ${taskId}`);
    assert.equal(reply, `A2A task ${taskId} canceled: nobody will work on it today.`);
    const task = await (await fetch(`${url}/tasks/${taskId}`, { headers: auth })).json();
    assert.equal(task.status.state, "TASK_STATE_CANCELED");
    assert.equal(task.status.message.parts[0].text, "Canceled by the operator: nobody will work on it today");
    assert.match(await notified(`/a2a cancel ${taskId}`, `A2A task ${taskId}`), /not canceled: .*cannot be canceled/);
  } finally {
    assert.equal(await pi.close(), 0, pi.stderr);
  }
});
