// Real Pi (headless, RPC mode) loads this package as an extension from its directory, the
// way `pi -e <dir>` and a settings.json package entry do: the task plane opens on
// session_start, the listener runs only with A2A_SERVER=1, and everything closes on exit.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import { TaskPlane } from "../index.js";
import { PiRpc, repoRoot } from "./helpers/pi.ts";

async function a2aStatus(pi: PiRpc): Promise<string> {
  const start = pi.records.length; // only a notification that answers this command
  const notified = pi.waitFor(
    (r) => r.type === "extension_ui_request" && r.method === "notify" && pi.records.indexOf(r) >= start && String(r.message).startsWith("A2A task plane"),
  );
  const handled = await pi.call({ type: "prompt", message: "/a2a" });
  assert.equal(handled.success, true, JSON.stringify(handled));
  return String((await notified).message);
}

test("pi loads the package; the task plane opens on its store root and no listener runs by default", async () => {
  const pi = new PiRpc([repoRoot]);
  try {
    const commands = await pi.call({ type: "get_commands" });
    const list = (commands.data as { commands: { name: string; source: string }[] }).commands;
    assert.equal(list.find((c) => c.name === "a2a")?.source, "extension");
    const status = await a2aStatus(pi);
    assert.match(status, new RegExp(`store ${pi.storeRoot}`));
    assert.match(status, /No listener \(set A2A_SERVER=1/);
    // The root is held while Pi runs.
    await assert.rejects(TaskPlane.open(pi.storeRoot), /already open/);
  } finally {
    assert.equal(await pi.close(), 0, pi.stderr);
  }
  assert.doesNotMatch(pi.stderr, /Extension error|Failed to load extension/);
  // ...and released on shutdown.
  (await TaskPlane.open(pi.storeRoot)).close();
});

test("with A2A_SERVER=1 the listener serves the card on loopback and stops with Pi", async () => {
  const dir = mkdtempSync(join(tmpdir(), "pi-a2a-"));
  const credentials = join(dir, "credentials.json");
  writeFileSync(credentials, JSON.stringify({ credentials: [{ token: "pi-test-token-0123456789", principal: "tester" }] }));
  const pi = new PiRpc([repoRoot], { A2A_SERVER: "1", A2A_PORT: "0", A2A_CREDENTIALS_PATH: credentials, A2A_AGENT_NAME: "Test resident" });
  let url = "";
  try {
    const status = await a2aStatus(pi);
    url = /at (http:\/\/127\.0\.0\.1:\d+)/.exec(status)?.[1] ?? "";
    assert.ok(url, status);
    const card = await (await fetch(`${url}/.well-known/agent-card.json`)).json();
    assert.equal(card.name, "Test resident");
    assert.equal(card.supportedInterfaces[0].url, url);
    const unauthorized = await fetch(`${url}/tasks`);
    assert.equal(unauthorized.status, 401);
    const tasks = await fetch(`${url}/tasks`, { headers: { Authorization: "Bearer pi-test-token-0123456789" } });
    assert.equal((await tasks.json()).totalSize, 0);
  } finally {
    assert.equal(await pi.close(), 0, pi.stderr);
  }
  assert.match(pi.stderr, /"event":"a2a_server_started"/);
  await assert.rejects(fetch(`${url}/.well-known/agent-card.json`), "nothing listens after Pi exits");
});

test("another extension's direct responder answers a simple interaction with a direct Message; a second registration replaces the first", async () => {
  const dir = mkdtempSync(join(tmpdir(), "pi-a2a-"));
  const credentials = join(dir, "credentials.json");
  const token = "pi-test-token-0123456789";
  writeFileSync(credentials, JSON.stringify({ credentials: [{ token, principal: "tester" }] }));
  const responder = join(repoRoot, "__test__/fixtures/direct-responder.ts");
  const pi = new PiRpc([repoRoot, responder], { A2A_SERVER: "1", A2A_PORT: "0", A2A_CREDENTIALS_PATH: credentials });
  try {
    const url = /at (http:\/\/127\.0\.0\.1:\d+)/.exec(await a2aStatus(pi))?.[1] ?? "";
    assert.ok(url);
    const send = async (messageId: string, text: string) => {
      const response = await fetch(`${url}/message:send`, {
        method: "POST",
        headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json", "A2A-Version": "1.0" },
        body: JSON.stringify({ message: { messageId, role: "ROLE_USER", parts: [{ text }] }, configuration: { returnImmediately: true } }),
      });
      assert.equal(response.status, 200);
      return (await response.json()) as { message?: { role: string; parts: { text: string }[] }; task?: { id: string } };
    };
    const ping = await send("m-1", "ping");
    assert.equal(ping.message?.role, "ROLE_AGENT", JSON.stringify(ping));
    assert.equal(ping.message?.parts[0]?.text, "pong tester", "the second responder's answer");
    assert.equal(ping.task, undefined, "no Task exists");
    const work = await send("m-2", "something to work on");
    assert.ok(work.task?.id, `declined: a Task (${JSON.stringify(work)})`);
  } finally {
    assert.equal(await pi.close(), 0, pi.stderr);
  }
  assert.match(pi.stderr, /"event":"a2a_executor_replaced"/);
});

test("an unusable A2A setting is reported by Pi, naming the variable", async () => {
  const pi = new PiRpc([repoRoot], { A2A_SERVER: "1", A2A_CREDENTIALS_PATH: "/nonexistent/credentials.json", A2A_PORT: "0" });
  try {
    await pi.call({ type: "get_commands" });
    assert.match(await a2aStatus(pi), /not running/);
  } finally {
    await pi.close();
  }
  assert.match(pi.stderr, /A2A_CREDENTIALS_PATH: cannot read \/nonexistent\/credentials\.json/);
});

test("the legacy A2A_STORE_PATH gets one clear warning and is not merged", async () => {
  const pi = new PiRpc([repoRoot], { A2A_STORE_PATH: "/var/lib/old-a2a/tasks.json" });
  try {
    assert.match(await a2aStatus(pi), /store /);
  } finally {
    await pi.close();
  }
  const warnings = pi.stderr.split("\n").filter((l) => l.includes("a2a_legacy_store_not_merged"));
  assert.equal(warnings.length, 1);
  assert.match(warnings[0]!, /not merged into the task-plane store/);
});

test("/new closes the task plane and the listener and reopens them in the same process", async () => {
  const dir = mkdtempSync(join(tmpdir(), "pi-a2a-"));
  const credentials = join(dir, "credentials.json");
  writeFileSync(credentials, JSON.stringify({ credentials: [{ token: "pi-test-token-0123456789", principal: "tester" }] }));
  const pi = new PiRpc([repoRoot], { A2A_SERVER: "1", A2A_PORT: "0", A2A_CREDENTIALS_PATH: credentials });
  try {
    const before = /at (http:\/\/\S+)/.exec(await a2aStatus(pi))?.[1];
    const switched = await pi.call({ type: "new_session" });
    assert.equal(switched.success, true, JSON.stringify(switched));
    const after = /at (http:\/\/\S+)/.exec(await a2aStatus(pi))?.[1];
    assert.ok(before && after, "the listener runs before and after");
    await assert.rejects(fetch(`${before}/.well-known/agent-card.json`), "the old listener is closed");
    assert.equal((await fetch(`${after}/.well-known/agent-card.json`)).status, 200);
  } finally {
    assert.equal(await pi.close(), 0, pi.stderr);
  }
  assert.doesNotMatch(pi.stderr, /already open|a2a_task_plane_start_failed/);
  assert.equal(pi.stderr.split("a2a_server_started").length - 1, 2);
  assert.equal(pi.stderr.split("a2a_server_stopped").length - 1, 2);
});
