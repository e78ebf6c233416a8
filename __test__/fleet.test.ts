// A fleet (docs/fleet.md, issue #38): node processes (__test__/fixtures/fleet-node.ts, the
// addon's TaskPlane.open with A2A_STORE_URL), each with its own port and local store root,
// on one throwaway PostgreSQL (helpers/postgres.ts). What one database gives a fleet without
// wakes across nodes: one Task per messageId whichever nodes it reaches, principal isolation
// whichever node is asked, and nothing acknowledged lost when a node dies by kill -9.
// Every wait is bounded; every process started here is stopped here, by its pid.
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { terminalState } from "./helpers/a2a-http.ts";
import { fauxAgentExtension, PiRpc, repoRoot } from "./helpers/pi.ts";
import { startPostgres, type TestPostgres } from "./helpers/postgres.ts";

const fixture = join(repoRoot, "__test__/fixtures/fleet-node.ts");
const TOKENS = { alice: "alice-token-0123456789abcdef", bob: "bob-token-0123456789abcdef0" };
type Caller = keyof typeof TOKENS;

let pg: TestPostgres;
let scratch: string;
let credentials: string;
const children = new Set<ChildProcess>();

before(async () => {
  pg = await startPostgres();
  scratch = mkdtempSync(join(tmpdir(), "tp-fleet-"));
  credentials = join(scratch, "credentials.json");
  writeFileSync(
    credentials,
    JSON.stringify({ credentials: Object.entries(TOKENS).map(([principal, token]) => ({ token, principal })) }),
    { mode: 0o600 },
  );
});

after(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  pg?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

interface Node {
  url: string;
  child: ChildProcess;
  /** SIGTERM, then the exit (bounded). */
  stop(): Promise<void>;
}

/** A node process on `storeUrl` with a fresh local root; resolves once it listens. */
async function startNode(storeUrl: string): Promise<Node> {
  const root = mkdtempSync(join(scratch, "node-"));
  const child = spawn(process.execPath, [fixture, join(root, "store"), credentials], {
    env: { ...process.env, A2A_STORE_URL: storeUrl, A2A_GRPC: "0", A2A_LOG_DIR: join(root, "logs") },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(child);
  let stderr = "";
  child.stderr?.on("data", (d) => (stderr += d));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`node did not listen within 30 s: ${stderr}`)), 30_000);
    let out = "";
    child.stdout?.on("data", (d) => {
      out += d;
      const m = /LISTENING (\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`node exited (${code}) before listening: ${stderr}`));
    });
  });
  return {
    url,
    child,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000).unref())]);
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    },
  };
}

async function call(node: Node, caller: Caller, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${node.url}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { Authorization: `Bearer ${TOKENS[caller]}`, "A2A-Version": "1.0", "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(20_000),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

const send = (node: Node, caller: Caller, messageId: string, text: string, extra: Record<string, unknown> = {}) =>
  call(node, caller, "/message:send", {
    message: { messageId, role: "ROLE_USER", parts: [{ text }], ...extra },
    configuration: { returnImmediately: true },
  });

/** Every Task id the caller's listing shows, through every page (bounded). */
async function listAll(node: Node, caller: Caller): Promise<string[]> {
  const ids: string[] = [];
  let token = "";
  for (let page = 0; page < 100; page++) {
    const got = await call(node, caller, `/tasks?pageSize=100${token ? `&pageToken=${encodeURIComponent(token)}` : ""}`);
    assert.equal(got.status, 200, JSON.stringify(got.json));
    ids.push(...(got.json.tasks ?? []).map((t: { id: string }) => t.id));
    token = got.json.nextPageToken ?? "";
    if (!token) return ids;
  }
  throw new Error("more than 100 pages of Tasks");
}

test("a node whose A2A_STORE_URL names no reachable database does not start, naming the variable and not the password", async () => {
  await assert.rejects(startNode("postgres://a2a:s3cret-pw@127.0.0.1:1/nowhere"), (err: Error) => {
    assert.match(err.message, /A2A_STORE_URL/);
    assert.doesNotMatch(err.message, /s3cret-pw/);
    return true;
  });
});

test("the same messageId sent to two nodes at once gives one Task", async () => {
  const db = pg.createDatabase();
  const [a, b] = await Promise.all([startNode(db), startNode(db)]);
  try {
    for (let round = 0; round < 10; round++) {
      const messageId = randomUUID();
      const [x, y] = await Promise.all([send(a, "alice", messageId, `hello ${round}`), send(b, "alice", messageId, `hello ${round}`)]);
      assert.equal(x.status, 200, JSON.stringify(x.json));
      assert.equal(y.status, 200, JSON.stringify(y.json));
      assert.ok(x.json.task?.id, JSON.stringify(x.json));
      assert.equal(x.json.task.id, y.json.task?.id, `round ${round}: two Tasks for one messageId`);
    }
    // (Sorted: the agents may still be settling them, which reorders a listing.)
    const listed = (await listAll(a, "alice")).sort();
    assert.equal(listed.length, 10);
    assert.deepEqual((await listAll(b, "alice")).sort(), listed, "both nodes list the same Tasks");
  } finally {
    await Promise.all([a.stop(), b.stop()]);
  }
});

test("another principal's Task is not found, listed, canceled, subscribed to or continued through another node", async () => {
  const db = pg.createDatabase();
  const [a, b] = await Promise.all([startNode(db), startNode(db)]);
  try {
    const sent = await send(a, "alice", randomUUID(), "work on it");
    assert.equal(sent.status, 200, JSON.stringify(sent.json));
    const task = sent.json.task;
    // Alice reads it through B: the database is one.
    const own = await call(b, "alice", `/tasks/${task.id}`);
    assert.equal(own.status, 200, JSON.stringify(own.json));
    assert.equal(own.json.id, task.id);

    const get = await call(b, "bob", `/tasks/${task.id}`);
    assert.equal(get.status, 404, JSON.stringify(get.json));
    assert.deepEqual(await listAll(b, "bob"), []);
    const cancel = await call(b, "bob", `/tasks/${task.id}:cancel`, {});
    assert.equal(cancel.status, 404, JSON.stringify(cancel.json));
    const subscribe = await fetch(`${b.url}/tasks/${task.id}:subscribe`, {
      headers: { Authorization: `Bearer ${TOKENS.bob}`, "A2A-Version": "1.0" },
      signal: AbortSignal.timeout(20_000),
    });
    assert.equal(subscribe.status, 404, await subscribe.text());
    const continued = await send(b, "bob", randomUUID(), "take it over", { taskId: task.id, contextId: task.contextId });
    assert.equal(continued.status, 404, JSON.stringify(continued.json));
    // Nothing bob did touched it.
    const after = await call(a, "alice", `/tasks/${task.id}`);
    assert.notEqual(after.json.status.state, "TASK_STATE_CANCELED");
    assert.equal(after.json.history.length, 1);
  } finally {
    await Promise.all([a.stop(), b.stop()]);
  }
});

test("kill -9 of a node under load loses nothing it acknowledged", async (t) => {
  const db = pg.createDatabase();
  const [a, b] = await Promise.all([startNode(db), startNode(db)]);
  try {
    const acked = new Map<string, string>(); // messageId → taskId
    const unanswered: { messageId: string; text: string }[] = [];
    let killed = false;
    const KILL_AFTER = 60;
    const worker = async () => {
      // Bounded: at most 100 sends per worker.
      for (let i = 0; i < 100 && !killed; i++) {
        const messageId = randomUUID();
        const text = `load ${i}`;
        try {
          const r = await send(a, "alice", messageId, text);
          if (r.status === 200 && r.json.task?.id) acked.set(messageId, r.json.task.id);
          else unanswered.push({ messageId, text });
        } catch {
          unanswered.push({ messageId, text });
        }
        if (!killed && acked.size >= KILL_AFTER) {
          killed = true;
          a.child.kill("SIGKILL");
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    assert.ok(killed, `the node was not killed (only ${acked.size} acknowledged)`);
    t.diagnostic(`${acked.size} acknowledged before the kill, ${unanswered.length} sent without an answer`);
    await new Promise<void>((resolve) => (a.child.exitCode !== null || a.child.signalCode !== null ? resolve() : a.child.once("exit", () => resolve())));

    // Every acknowledged Task is readable on the surviving node, and listed exactly once.
    for (const [messageId, taskId] of acked) {
      const got = await call(b, "alice", `/tasks/${taskId}`);
      assert.equal(got.status, 200, `task ${taskId} (message ${messageId}): ${JSON.stringify(got.json)}`);
    }
    const listed = await listAll(b, "alice");
    const counts = new Map<string, number>();
    for (const id of listed) counts.set(id, (counts.get(id) ?? 0) + 1);
    for (const taskId of acked.values()) assert.equal(counts.get(taskId), 1, `task ${taskId} listed ${counts.get(taskId) ?? 0} times`);
    // A caller retries what it heard no answer to on the surviving node: the same
    // messageId gives the Task the dead node may have made, never a second one.
    for (const { messageId, text } of unanswered) {
      const r = await send(b, "alice", messageId, text);
      assert.equal(r.status, 200, JSON.stringify(r.json));
    }
    const final = await listAll(b, "alice");
    assert.equal(new Set(final).size, final.length, "a Task listed twice");
    assert.equal(final.length, acked.size + unanswered.length, "one Task per messageId");
  } finally {
    await Promise.all([a.stop(), b.stop()]);
  }
});

// Node A's write reaches node B's subscriber by NOTIFY a2a_task (docs/fleet.md,
// "Updates across nodes").
test(
  "a subscriber on one node sees another node's writes",
  async () => {
    const db = pg.createDatabase();
    const [a, b] = await Promise.all([startNode(db), startNode(db)]);
    try {
      // "work…" stays WORKING under the node's agent.
      const sent = await send(a, "alice", randomUUID(), "work until canceled");
      const task = sent.json.task;
      const subscribed = terminalState(b.url, TOKENS.alice, task.id, 10_000);
      // Give the subscription time to be taken before the write it must see.
      await new Promise((r) => setTimeout(r, 300));
      const canceled = await call(a, "alice", `/tasks/${task.id}:cancel`, {});
      assert.equal(canceled.status, 200, JSON.stringify(canceled.json));
      assert.equal(await subscribed, "TASK_STATE_CANCELED");
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  },
);

/** The listener URL a resident shows in `/a2a`. */
async function residentUrl(pi: PiRpc): Promise<string> {
  const notified = pi.waitFor((r) => r.type === "extension_ui_request" && r.method === "notify" && String(r.message).includes("A2A task plane"));
  await pi.call({ type: "prompt", message: "/a2a" });
  const url = /at (http:\/\/127\.0\.0\.1:\d+)/.exec(String((await notified).message))?.[1];
  assert.ok(url, "the listener runs");
  return url;
}

/** A real Pi resident's environment on database `db`: serving A2A (HTTP+JSON), with the
 * workflow that declares the faux agent's `summary` output, and `extra`. */
function residentEnv(db: string, extra: Record<string, string>): Record<string, string> {
  const manifest = join(scratch, "workflow-summarise.json");
  writeFileSync(manifest, JSON.stringify({ workflows: [{ id: "summarise", outputs: { summary: { type: "doc.summary" } } }] }));
  return {
    A2A_STORE_URL: db,
    A2A_SERVER: "1",
    A2A_PORT: "0",
    A2A_GRPC: "0",
    A2A_CREDENTIALS_PATH: credentials,
    A2A_WORKFLOW_MANIFEST: manifest,
    ...extra,
  };
}

test("with real Pi residents, a Task whose resident is killed mid-turn is worked by another once its lease expires", async () => {
  // The shortest lease: A's claim on the Task lapses 3 s after its last renewal.
  const env = residentEnv(pg.createDatabase(), { A2A_WAKE_LEASE_MS: "3000" });
  // A's model never finishes a "stall…" turn; B's works it.
  const a = new PiRpc([repoRoot], { ...env, FAUX_STALL: "1" }, { model: fauxAgentExtension });
  let b: PiRpc | undefined;
  try {
    const urlA = await residentUrl(a);
    const sent = await call({ url: urlA } as Node, "alice", "/message:send", {
      message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "stall on this one" }] },
      configuration: { returnImmediately: true },
    });
    assert.equal(sent.status, 200, JSON.stringify(sent.json));
    const task = sent.json.task;
    await a.waitForStderr(new RegExp(`"event":"a2a_turn_started"[^\n]*"taskId":"${task.id}"`));
    // B starts while A works the Task: A's live lease keeps B off it.
    b = new PiRpc([repoRoot], env, { model: fauxAgentExtension });
    const urlB = await residentUrl(b);
    await new Promise((r) => setTimeout(r, 1_000));
    const during = await call({ url: urlB } as Node, "alice", `/tasks/${task.id}`);
    assert.equal(during.json.status.state, "TASK_STATE_WORKING", JSON.stringify(during.json));
    assert.doesNotMatch(b.stderr, new RegExp(`"event":"a2a_turn_started"[^\n]*"taskId":"${task.id}"`), "B took a Task A still held");
    // A dies mid-turn: no turn end, no release, no more renewals.
    const died = new Promise<void>((resolve) => a.child.once("exit", () => resolve()));
    a.child.kill("SIGKILL");
    await died;
    // B takes it when A's lease expires (delivery 2: the count is the claim's) and settles it.
    await b.waitForStderr(new RegExp(`"event":"a2a_turn_started"[^\n]*"taskId":"${task.id}"`), 30_000);
    let state = "";
    for (let i = 0; i < 300 && state !== "TASK_STATE_COMPLETED"; i++) {
      const got = await call({ url: urlB } as Node, "alice", `/tasks/${task.id}`);
      state = got.json.status.state;
      if (state !== "TASK_STATE_COMPLETED") await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(state, "TASK_STATE_COMPLETED", b.stderr);
    assert.match(b.stderr, new RegExp(`"event":"a2a_turn_started"[^\n]*"delivery":2[^\n]*"taskId":"${task.id}"|"event":"a2a_turn_started"[^\n]*"taskId":"${task.id}"[^\n]*"delivery":2`));
  } finally {
    if (a.child.exitCode === null && a.child.signalCode === null) a.child.kill("SIGKILL");
    if (b) assert.equal(await b.close(), 0, b.stderr);
  }
});

test("with real Pi residents, a Task continued on another node resumes its conversation (its session followed it)", async () => {
  const db = pg.createDatabase();
  const env = residentEnv(db, { A2A_BLOCKING_TIMEOUT_MS: "30000" });
  // One resident at a time: any resident on the database may take a wake, so A works the
  // first turn alone and B, started once A has stopped, the second.
  const a = new PiRpc([repoRoot], env, { model: fauxAgentExtension });
  let b: PiRpc | undefined;
  try {
    const urlA = await residentUrl(a);
    const blocking = (url: string, messageId: string, text: string, extra: Record<string, unknown> = {}) =>
      call({ url } as Node, "alice", "/message:send", { message: { messageId, role: "ROLE_USER", parts: [{ text }], ...extra } });
    // Turn 1 on node A: the model asks back; the Task waits for its caller.
    const asked = (await blocking(urlA, randomUUID(), "please ask me which color")).json.task;
    assert.equal(asked.status.state, "TASK_STATE_INPUT_REQUIRED", JSON.stringify(asked));
    // Its session is kept when A's turn ends.
    await a.waitForStderr(new RegExp(`"event":"a2a_turn_ended"[^\n]*"taskId":"${asked.id}"`));
    assert.equal(await a.close(), 0, a.stderr);
    b = new PiRpc([repoRoot], env, { model: fauxAgentExtension });
    const urlB = await residentUrl(b);
    // The answer reaches node B: B's resident works the Task in the session A left.
    const done = (await blocking(urlB, randomUUID(), "blue", { taskId: asked.id, contextId: asked.contextId })).json.task;
    assert.equal(done.status.state, "TASK_STATE_COMPLETED", JSON.stringify(done));
    const response = done.artifacts.find((x: { name: string }) => x.name === "response");
    assert.match(response.parts[0].text, /turns in this session: 2/, "node B's turn saw node A's");
    await b.waitForStderr(new RegExp(`"event":"a2a_turn_ended"[^\n]*"taskId":"${asked.id}"`));
    assert.match(b.stderr, /"event":"a2a_session_restored"/);
    assert.match(b.stderr, /"event":"a2a_turn_started"[^\n]*"session":"reopened"/);
    // A's copy is the first turn only; B's (kept again) holds both.
    const file = (root: string) => {
      const dir = join(root, "sessions", asked.id);
      const [name] = readdirSync(dir).filter((f) => f.endsWith(".jsonl"));
      return readFileSync(join(dir, name), "utf8");
    };
    assert.ok(file(b.storeRoot).startsWith(file(a.storeRoot)), "B's session continues A's");
    assert.ok(file(b.storeRoot).length > file(a.storeRoot).length);
    // The operator's commands reach a resident on PostgreSQL through its control socket;
    // the offline inspector refuses, naming the variable.
    const cli = join(repoRoot, "bin", "a2a-task-plane");
    const withUrl = { ...process.env, A2A_STORE_URL: db };
    const status = spawnSync(cli, ["--store", b.storeRoot, "status"], { encoding: "utf8", env: withUrl, timeout: 60_000 });
    assert.equal(status.status, 0, status.stderr);
    const inspect = spawnSync(cli, ["--store", b.storeRoot, "show", asked.id], { encoding: "utf8", env: withUrl, timeout: 60_000 });
    assert.notEqual(inspect.status, 0);
    assert.match(inspect.stderr, /A2A_STORE_URL/);
  } finally {
    const codeA = a.child.exitCode ?? (await a.close());
    assert.equal(codeA, 0, a.stderr);
    if (b) assert.equal(await b.close(), 0, b.stderr);
  }
});
