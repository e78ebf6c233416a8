// The task plane through the addon: open/close a store root, intake, idempotency, reads,
// and errors that reach JS as exceptions (no Rust panic crosses into Node).
import assert from "node:assert/strict";
import { pbkdf2 } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import { A2AListener, AgentBridge, type Continuation, type DeliveryInput, defaultStoreRoot, TaskPlane } from "../index.js";

const tempRoot = () => join(mkdtempSync(join(tmpdir(), "tp-node-")), "store");
const message = (messageId: string, text: string, extra: Record<string, unknown> = {}) => ({
  messageId,
  role: "ROLE_USER",
  parts: [{ text }],
  ...extra,
});

test("acceptInContext commits a Task that getTask reads back as an A2A Task", async () => {
  const root = tempRoot();
  const plane = await TaskPlane.open(root);
  try {
    const accepted = await plane.acceptInContext("alice", message("m-1", "hello", { metadata: { n: 3 } }));
    assert.equal(accepted.disposition, "created");
    assert.equal(accepted.state, "TASK_STATE_SUBMITTED");
    const task = (await plane.getTask("alice", accepted.taskId!)) as any;
    assert.equal(task.id, accepted.taskId);
    assert.equal(task.contextId, accepted.contextId);
    assert.equal(task.status.state, "TASK_STATE_SUBMITTED");
    assert.match(task.status.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.deepEqual(task.history[0].parts, [{ text: "hello" }]);
    assert.deepEqual(task.history[0].metadata, { n: 3 });
    assert.equal(await plane.getTask("bob", accepted.taskId!), null, "another principal sees nothing");

    const dup = await plane.acceptInContext("alice", message("m-1", "hello", { metadata: { n: 3 } }));
    assert.equal(dup.disposition, "duplicate");
    assert.equal(dup.taskId, accepted.taskId);
    await assert.rejects(plane.acceptInContext("alice", message("m-1", "changed")), /already used with a different payload/);
  } finally {
    plane.close();
    rmSync(root, { recursive: true, force: true });
  }
});

test("a root is held until close(); then it can be reopened in the same process", async () => {
  const root = tempRoot();
  const first = await TaskPlane.open(root);
  await assert.rejects(TaskPlane.open(root), /already open \(held by pid \d+\).*CHANNELS_TASK_STORE_PATH/);
  const accepted = await first.acceptInContext("alice", message("m-1", "x"));
  first.close();
  assert.equal(first.closed, true);
  await assert.rejects(first.acceptInContext("alice", message("m-2", "x")), /closed/);
  const second = await TaskPlane.open(root);
  try {
    assert.equal(((await second.getTask("alice", accepted.taskId!)) as any).id, accepted.taskId);
  } finally {
    second.close();
    rmSync(root, { recursive: true, force: true });
  }
});

test("native sources: conversation contexts, direct replies and checkpoints", async () => {
  const root = tempRoot();
  const plane = await TaskPlane.open(root);
  try {
    plane.registerSource("slack", "none");
    assert.throws(
      () => plane.registerSource("slack", "sometimes" as Continuation),
      /invalid `continuation`: `sometimes`; use one of none, reply_anchors, explicit_task_id/,
    );
    const event = (id: string) => ({
      principal: "team",
      source: "slack",
      eventId: id,
      conversationKey: "C1:T1",
      locator: { ts: "1700000000.0001" },
      message: message(`slack-${id}`, "please"),
    });
    const a = await plane.accept(event("ev-1"));
    const b = await plane.accept(event("ev-2"));
    assert.equal(a.contextId, b.contextId);
    assert.notEqual(a.taskId, b.taskId);
    await assert.rejects(plane.advanceCheckpoint("team", "slack", "c-3", ["ev-1", "ev-3"]), /ev-3.*has not been accepted/);
    await plane.advanceCheckpoint("team", "slack", "c-2", ["ev-1", "ev-2"]);
    assert.equal(await plane.checkpoint("team", "slack"), "c-2");
    await assert.rejects(plane.accept({ ...event("bad/id") }), /invalid `eventId`/);
    await assert.rejects(plane.accept({ ...event("ev-9"), source: "discord" }), /not registered/);

    const reply = { messageId: "r-1", role: "ROLE_AGENT", parts: [{ text: "Hi!" }] };
    const direct = await plane.respondDirectly("alice", message("hi-1", "hi"), reply);
    assert.equal(direct.taskId, undefined);
    assert.deepEqual(direct.directReply.parts, [{ text: "Hi!" }]);
    const again = await plane.respondDirectly("alice", message("hi-1", "hi"), { ...reply, parts: [{ text: "other" }] });
    assert.equal(again.disposition, "duplicate");
    assert.deepEqual(again.directReply, direct.directReply);
  } finally {
    plane.close();
    rmSync(root, { recursive: true, force: true });
  }
});

test("malformed input is a JS error naming the field", async () => {
  const root = tempRoot();
  const plane = await TaskPlane.open(root);
  try {
    assert.throws(() => plane.acceptInContext("alice", { messageId: "m", role: "ROLE_USER", parts: [{ text: 5 }] }), /field `parts\[0\]\.text`/);
    // An explicit taskId continues that Task, as over HTTP: only the principal's own.
    await assert.rejects(plane.acceptInContext("alice", message("m", "x", { taskId: "t" })), (err: Error & { code?: string }) => err.code === "TASK_NOT_FOUND" && /task t not found/.test(err.message));
    await assert.rejects(plane.acceptInContext("bad principal", message("m", "x")), /invalid `principal`/);
    await assert.rejects(plane.continueTask("alice", "no-such-task", message("m", "x")), /task no-such-task not found/);
  } finally {
    plane.close();
    rmSync(root, { recursive: true, force: true });
  }
});

/** Restores the named variables in the real environment (assigning `process.env` a new
 * object would detach it from the environment the addon reads). */
function restoreEnv(saved: Record<string, string | undefined>): void {
  for (const [key, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
}

test("defaultStoreRoot follows CHANNELS_TASK_STORE_PATH and XDG_DATA_HOME", () => {
  const saved = { CHANNELS_TASK_STORE_PATH: process.env.CHANNELS_TASK_STORE_PATH, XDG_DATA_HOME: process.env.XDG_DATA_HOME };
  try {
    process.env.CHANNELS_TASK_STORE_PATH = "/srv/task-plane";
    assert.equal(defaultStoreRoot(), "/srv/task-plane");
    delete process.env.CHANNELS_TASK_STORE_PATH;
    process.env.XDG_DATA_HOME = "/data";
    assert.equal(defaultStoreRoot(), "/data/outfitter/channels/task-plane");
    process.env.CHANNELS_TASK_STORE_PATH = "relative";
    assert.throws(() => defaultStoreRoot(), /CHANNELS_TASK_STORE_PATH: `relative` is not an absolute path/);
  } finally {
    restoreEnv(saved);
  }
});

test("outbound delivery: concurrent identical responses share one provider mutation", async () => {
  const root = tempRoot();
  const plane = await TaskPlane.open(root);
  try {
    const request: DeliveryInput = {
      deliveryId: "d-1",
      principal: "team",
      source: "mail",
      operationId: "op-1",
      payloadDigest: `sha256:${"a".repeat(64)}`,
      recovery: "lookup",
    };
    let mutations = 0;
    const deliver = async () => {
      const step = await plane.beginDelivery(request);
      if (step.next !== "send") return step.outcome!;
      mutations += 1;
      // The provider call's latency, not a synchronisation: the others arrive while it is
      // in flight, and the outcome must not depend on whether they do.
      await new Promise((r) => setTimeout(r, 20));
      return plane.finishDelivery(request, step.lease!, { providerResponseId: "resp-1" });
    };
    const outcomes = await Promise.all([deliver(), deliver(), deliver()]);
    assert.equal(mutations, 1);
    assert.deepEqual(outcomes.map((o) => [o.state, o.providerResponseId]), [["delivered", "resp-1"], ["delivered", "resp-1"], ["delivered", "resp-1"]]);
    assert.equal(outcomes.filter((o) => o.sentNow).length, 1);
    await assert.rejects(plane.beginDelivery({ ...request, payloadDigest: `sha256:${"b".repeat(64)}` }), /a reused operation id must carry the same payload/);
    await assert.rejects(plane.finishDelivery({ ...request, deliveryId: "never-begun" }, "0".repeat(32), { providerResponseId: "x" }), /was not begun/);
  } finally {
    plane.close();
    rmSync(root, { recursive: true, force: true });
  }
});

test("waiting for wakes and acceptances holds none of libuv's pool threads", async () => {
  const root = join(mkdtempSync(join(tmpdir(), "tp-pool-")), "task-plane");
  const plane = await TaskPlane.open(root);
  const bridge = await AgentBridge.start(plane);
  const agent = plane.embedderAgent();
  try {
    // Eight waits, twice libuv's default pool of four: were each a pool thread, Node's
    // own fs and crypto work below would queue behind them until they time out.
    const waits = [
      ...Array.from({ length: 4 }, () => bridge.nextWake(3_000)),
      ...Array.from({ length: 4 }, () => agent.nextAccepted(3_000)),
    ];
    const nodeWork = Promise.all([
      readFile(new URL(import.meta.url)),
      new Promise((resolve, reject) => pbkdf2("x", "y", 1, 32, "sha256", (err, key) => (err ? reject(err) : resolve(key)))),
    ]).then(() => "node's pool answered");
    const first = await Promise.race([nodeWork, Promise.all(waits).then(() => "the waits ended")]);
    assert.equal(first, "node's pool answered");
    // The waits still end cleanly: an acceptance wakes them, close() ends the rest.
    await plane.acceptInContext("alice", { messageId: "m-pool", role: "ROLE_USER", parts: [{ text: "hi" }] });
    bridge.close();
    plane.close();
    const results = await Promise.all(waits);
    assert.ok(results.some((r) => r !== null), "the acceptance reached a waiter");
  } finally {
    bridge.close();
    plane.close();
  }
});

/** The threads of this process (Linux), or undefined elsewhere. */
async function threadCount(): Promise<number | undefined> {
  const status = await readFile("/proc/self/status", "utf8").catch(() => undefined);
  const threads = status?.match(/^Threads:\s+(\d+)$/m)?.[1];
  return threads === undefined ? undefined : Number(threads);
}

test("waiting for a held delivery lease holds none of libuv's pool threads", async () => {
  const root = join(mkdtempSync(join(tmpdir(), "tp-lease-")), "task-plane");
  const plane = await TaskPlane.open(root);
  try {
    const request: DeliveryInput = {
      deliveryId: "d-pool",
      principal: "team",
      source: "mail",
      operationId: "op-pool",
      payloadDigest: `sha256:${"c".repeat(64)}`,
      recovery: "idempotency_key",
    };
    // A long lease: the holder ends it by finishing, so nobody waits for it to run out.
    const holder = await plane.beginDelivery(request, false, 60_000);
    assert.equal(holder.next, "send");
    assert.match(holder.lease!, /^[0-9a-f]{32}$/);
    assert.ok(holder.leaseExpiresAt! > Date.now());
    const before = await threadCount();
    // Eight waiters, twice libuv's default pool of four: were each a pool thread, Node's
    // own fs and crypto work below would queue behind them until the lease ran out.
    const waiters = Array.from({ length: 8 }, () => plane.beginDelivery(request));
    const nodeWork = Promise.all([
      readFile(new URL(import.meta.url)),
      new Promise((resolve, reject) => pbkdf2("x", "y", 1, 32, "sha256", (err, key) => (err ? reject(err) : resolve(key)))),
    ]).then(() => "node's pool answered");
    const first = await Promise.race([nodeWork, Promise.all(waiters).then(() => "the waiters ended")]);
    assert.equal(first, "node's pool answered");
    // Nor does a waiter hold a thread of the addon's runtime: it is a future, not a blocked
    // thread (none is started for them; a blocked one each would start several).
    const during = await threadCount();
    if (before !== undefined && during !== undefined) assert.ok(during - before < 4, `the waiters took ${during - before} threads`);
    // The holder finishes; every waiter shares its outcome (one provider mutation).
    await plane.finishDelivery(request, holder.lease!, { providerResponseId: "resp-pool" });
    for (const step of await Promise.all(waiters)) {
      assert.equal(step.next, "finished");
      assert.equal(step.lease, undefined);
      assert.deepEqual([step.outcome!.state, step.outcome!.providerResponseId, step.outcome!.sentNow], ["delivered", "resp-pool", false]);
    }
  } finally {
    plane.close();
    rmSync(root, { recursive: true, force: true });
  }
});

test("an expired delivery lease is taken over through recovery, and the old holder refused", async () => {
  const root = join(mkdtempSync(join(tmpdir(), "tp-lease-")), "task-plane");
  const plane = await TaskPlane.open(root);
  try {
    const request: DeliveryInput = {
      deliveryId: "d-taken",
      principal: "team",
      source: "mail",
      operationId: "op-taken",
      payloadDigest: `sha256:${"d".repeat(64)}`,
      recovery: "idempotency_key",
    };
    // The holder never finishes (it hung); the next caller waits for its lease to run out.
    const stale = await plane.beginDelivery(request, false, 200);
    const taken = await plane.beginDelivery(request);
    assert.equal(taken.next, "send", "the idempotency key makes sending again safe");
    assert.notEqual(taken.lease, stale.lease);
    await assert.rejects(plane.finishDelivery(request, stale.lease!, { providerResponseId: "late" }), (err: Error & { code?: string }) => {
      assert.equal(err.code, "FAILED_PRECONDITION");
      assert.match(err.message, /^delivery d-taken: this lease expired after 200 ms and was taken over by another caller/);
      return true;
    });
    const done = await plane.finishDelivery(request, taken.lease!, { providerResponseId: "resp-2" });
    assert.deepEqual([done.state, done.providerResponseId, done.sentNow], ["delivered", "resp-2", true]);

    // Without a reconciler, a lookup delivery taken over fails closed as ambiguous.
    const lookup = { ...request, deliveryId: "d-lookup", operationId: "op-lookup", recovery: "lookup" as const };
    await plane.beginDelivery(lookup, false, 200);
    const blind = await plane.beginDelivery(lookup);
    assert.equal(blind.next, "finished");
    assert.equal(blind.outcome!.state, "ambiguous");
  } finally {
    plane.close();
    rmSync(root, { recursive: true, force: true });
  }
});

test("listener options override their A2A_* variables and are validated by the same rules, naming the option", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tp-options-"));
  const credentials = join(dir, "credentials.json");
  writeFileSync(credentials, JSON.stringify({ credentials: [{ token: "options-token-0123456789", principal: "opt" }] }), { mode: 0o600 });
  const plane = await TaskPlane.open(join(dir, "task-plane"));
  const saved = { A2A_AGENT_NAME: process.env.A2A_AGENT_NAME, A2A_PORT: process.env.A2A_PORT };
  process.env.A2A_AGENT_NAME = "From the environment";
  process.env.A2A_PORT = "not-a-port";
  try {
    // The environment applies where no option is given; a given option wins.
    const listener = A2AListener.start(plane, { port: 0, credentialsPath: credentials });
    try {
      const card = await (await fetch(`${listener.url}/.well-known/agent-card.json`)).json();
      assert.equal(card.name, "From the environment");
    } finally {
      listener.close();
    }
    const named = A2AListener.start(plane, { port: 0, credentialsPath: credentials, agentName: "From the option" });
    try {
      const card = await (await fetch(`${named.url}/.well-known/agent-card.json`)).json();
      assert.equal(card.name, "From the option");
    } finally {
      named.close();
    }
    // Out of range: refused exactly as the variable would be, naming the option.
    assert.throws(
      () => A2AListener.start(plane, { port: 0, credentialsPath: credentials, idleTimeoutMs: 5 }),
      /invalid option `idleTimeoutMs` \(the same rule as A2A_IDLE_TIMEOUT_MS\): `5` is not a whole number in 100\.\.=/,
    );
    assert.throws(() => A2AListener.start(plane, { port: 0, credentialsPath: "relative.json" }), /invalid option `credentialsPath`.*not an absolute path/);
    // The stream and write limits follow the same rule.
    assert.throws(
      () => A2AListener.start(plane, { port: 0, credentialsPath: credentials, maxStreamsPerPrincipal: 0 }),
      /invalid option `maxStreamsPerPrincipal` \(the same rule as A2A_MAX_STREAMS_PER_PRINCIPAL\)/,
    );
    assert.throws(
      () => A2AListener.start(plane, { port: 0, credentialsPath: credentials, writeTimeoutMs: 1 }),
      /invalid option `writeTimeoutMs` \(the same rule as A2A_WRITE_TIMEOUT_MS\)/,
    );
    const limited = A2AListener.start(plane, { port: 0, credentialsPath: credentials, maxStreams: 1, writeTimeoutMs: 500 });
    limited.close();
    // An unusable variable that no option overrides is still an error naming it.
    assert.throws(() => A2AListener.start(plane, { credentialsPath: credentials }), /A2A_PORT: `not-a-port` is not a port number/);
  } finally {
    restoreEnv(saved);
    plane.close();
  }
});

test("nextAccepted gives each acceptance to one call, in order, keeps unclaimed ones, and answers null on timeout and close", async () => {
  const root = tempRoot();
  const plane = await TaskPlane.open(root);
  const agent = plane.embedderAgent();
  try {
    // Nobody waits: the acceptances are kept, oldest first, for the next calls.
    const a = await plane.acceptInContext("alice", message("m-a", "a"));
    const b = await plane.acceptInContext("alice", message("m-b", "b"));
    assert.equal((await agent.nextAccepted(1_000))?.taskId, a.taskId);
    assert.equal((await agent.nextAccepted(1_000))?.taskId, b.taskId);
    // Nothing left: a short wait times out with null, and a duplicate accepts nothing new.
    await plane.acceptInContext("alice", message("m-a", "a"));
    const started = Date.now();
    assert.equal(await agent.nextAccepted(50), null);
    assert.ok(Date.now() - started >= 40, "the wait lasted its timeout");
    // Three calls waiting, with different timeouts: each of two acceptances goes to one
    // call, the oldest waiting first, and the third call still times out on its own.
    const waits = [agent.nextAccepted(5_000), agent.nextAccepted(5_000), agent.nextAccepted(100)];
    const c = await plane.acceptInContext("alice", message("m-c", "c"));
    const d = await plane.acceptInContext("alice", message("m-d", "d"));
    const got = await Promise.all(waits);
    assert.deepEqual(got.map((x) => x?.taskId ?? null), [c.taskId, d.taskId, null]);
    // A call waiting when the plane closes answers null at once.
    const pending = agent.nextAccepted(60_000);
    const closedAt = Date.now();
    plane.close();
    assert.equal(await pending, null);
    assert.ok(Date.now() - closedAt < 30_000, "close() ended the wait");
    assert.equal(await agent.nextAccepted(10), null, "a closed plane accepts nothing");
  } finally {
    plane.close();
    rmSync(root, { recursive: true, force: true });
  }
});

test("nextAccepted hands over the accepted message with its Task", async () => {
  const root = tempRoot();
  const plane = await TaskPlane.open(root);
  const agent = plane.embedderAgent();
  try {
    // A new Task: the message is the Task's first history entry, as readTask gives it.
    const sent = message("m-new", "please ask", { metadata: { from: "test" } });
    const created = await plane.acceptInContext("alice", sent);
    const first = await agent.nextAccepted(1_000);
    assert.ok(first);
    assert.equal(first.taskId, created.taskId);
    assert.equal(first.continued, false);
    const read = (await agent.readTask(created.taskId!)) as any;
    assert.deepEqual(first.message, read.history[0]);
    assert.equal(first.message.messageId, "m-new");
    assert.equal(first.message.taskId, created.taskId);
    assert.equal(first.message.contextId, created.contextId);
    assert.deepEqual(first.message.metadata, { from: "test" });
    // Its caller answers an input request: the answer is handed over as a continuation.
    await agent.startWork(created.taskId!);
    await agent.requireInput(created.taskId!, "input_required", { parts: [{ text: "which one?" }] });
    await plane.continueTask("alice", created.taskId!, message("m-answer", "the blue one"));
    const next = await agent.nextAccepted(1_000);
    assert.ok(next);
    assert.equal(next.taskId, created.taskId);
    assert.equal(next.continued, true);
    const again = (await agent.readTask(created.taskId!)) as any;
    assert.deepEqual(next.message, again.history.at(-1));
    assert.deepEqual(next.message.parts, [{ text: "the blue one" }]);
    // A duplicate accepts nothing: no message is handed over for it.
    await plane.continueTask("alice", created.taskId!, message("m-answer", "the blue one"));
    assert.equal(await agent.nextAccepted(50), null);
  } finally {
    plane.close();
    rmSync(root, { recursive: true, force: true });
  }
});

test("an embedder agent's writes apply in call order, also past a full write queue", async () => {
  const root = tempRoot();
  const plane = await TaskPlane.open(root);
  const agent = plane.embedderAgent();
  try {
    const tasks = 4_000;
    const accepted = await Promise.all(
      Array.from({ length: tasks }, (_, i) => plane.acceptInContext("alice", message(`m-order-${i}`, "work"))),
    );
    // Three writes per Task, none awaited before the next is made: 12,000 writes in one go,
    // more than the writer's queue holds (4,096), so some wait for room. Any of them
    // applied out of order fails: an artifact or WORKING after COMPLETED is refused.
    const writes: Promise<unknown>[] = [];
    for (const { taskId } of accepted) {
      writes.push(agent.startWork(taskId!));
      writes.push(agent.recordArtifact(taskId!, { artifactId: `a-${taskId}`, parts: [{ text: "part" }] }));
      writes.push(agent.complete(taskId!, [], { messageId: `r-${taskId}`, role: "ROLE_AGENT", parts: [{ text: "done" }] }));
    }
    const outcomes = await Promise.allSettled(writes);
    const refused = outcomes.filter((o) => o.status === "rejected") as PromiseRejectedResult[];
    assert.deepEqual(refused.map((o) => String(o.reason)).slice(0, 3), [], "every write applied, in order");
    for (const { taskId } of [accepted[0], accepted[tasks - 1]]) {
      const task = (await agent.readTask(taskId!)) as any;
      assert.equal(task.status.state, "TASK_STATE_COMPLETED");
      assert.deepEqual(task.artifacts.map((a: any) => a.artifactId), [`a-${taskId}`]);
    }
  } finally {
    plane.close();
    rmSync(root, { recursive: true, force: true });
  }
});

test("A2A documents from JS are read as JSON.stringify reads them, and what it cannot encode is an error, not a crash", async () => {
  const root = tempRoot();
  const plane = await TaskPlane.open(root);
  const agent = plane.embedderAgent();
  try {
    // `undefined` members are left out and `toJSON` is honoured, as in JSON.stringify.
    const created = await plane.acceptInContext("alice", { ...message("m-json", "hi"), metadata: undefined });
    const taskId = created.taskId ?? assert.fail("a new Task");
    const stamped = { toJSON: () => ({ text: "from toJSON" }) };
    await agent.startWork(taskId);
    await agent.complete(taskId, [{ name: "answer", parts: [stamped], description: undefined }]);
    const task = (await plane.getTask("alice", taskId)) as { artifacts: { parts: { text: string }[] }[] };
    assert.equal(task.artifacts[0].parts[0].text, "from toJSON");
    // What JSON cannot encode throws JSON.stringify's own TypeError; nothing is written.
    const cyclic: Record<string, unknown> = { parts: [{ text: "loop" }] };
    cyclic.self = cyclic;
    assert.throws(() => plane.acceptInContext("alice", cyclic), TypeError);
    assert.throws(() => plane.acceptInContext("alice", { ...message("m-big", "x"), metadata: { n: 1n } }), TypeError);
    assert.throws(() => agent.recordArtifact(taskId, cyclic), TypeError);
    // A value with no JSON text, or artifacts that are not a list, is refused by name.
    assert.throws(() => plane.acceptInContext("alice", undefined as unknown as object), /expected a JSON value/);
    assert.throws(() => agent.complete(taskId, { name: "x" } as unknown as []), /`artifacts` must be an array/);
    // A document that is not the A2A type is refused naming the member at fault.
    assert.throws(() => agent.complete(taskId, [{ parts: [{ text: 5 }] }] as unknown as []), /\[0\]\.parts\[0\]\.text/);
    assert.throws(() => agent.recordArtifact(taskId, { parts: [] }), /parts/);
    const again = await plane.acceptInContext("alice", message("m-json-2", "again"));
    assert.notEqual(again.taskId, taskId);
  } finally {
    plane.close();
    rmSync(root, { recursive: true, force: true });
  }
});
