// Every error from the addon carries a stable `code` JS can switch on: for an error of the
// plane, the A2A reason the HTTP listener gives the same error (one mapping in Rust); for a
// bad argument, INVALID_ARGUMENT. Synchronous throws, rejections of calls run on libuv's pool
// and of calls awaited on the addon's runtime carry it alike.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import {
  A2AListener,
  AgentBridge,
  type Continuation,
  type DeliveryInput,
  normalizeMessage,
  StoreInspector,
  TaskPlane,
  type TaskState,
  type TurnOutcome,
} from "../index.js";

const TOKEN = "codes-token-0123456789";
type Coded = Error & { code?: string };

function setup() {
  const dir = mkdtempSync(join(tmpdir(), "tp-codes-"));
  const credentials = join(dir, "credentials.json");
  writeFileSync(credentials, JSON.stringify({ credentials: [{ token: TOKEN, principal: "alice" }] }), { mode: 0o600 });
  return { dir, root: join(dir, "store"), credentials };
}

const message = (messageId: string, text: string) => ({ messageId, role: "ROLE_USER", parts: [{ text }] });

/** The error `work` throws or rejects with. */
async function failure(work: () => unknown): Promise<Coded> {
  try {
    await work();
  } catch (err) {
    assert.ok(err instanceof Error, `a JS Error, not ${String(err)}`);
    return err as Coded;
  }
  assert.fail("expected an error");
}

/** The A2A reason of an HTTP error response. */
async function reason(res: Response): Promise<string> {
  const body = (await res.json()) as { error: { details: { reason?: string }[] } };
  return body.error.details.find((d) => d.reason)?.reason ?? "";
}

test("a plane error's code is the A2A reason the listener gives the same error", async () => {
  const { dir, root, credentials } = setup();
  const plane = await TaskPlane.open(root);
  const listener = A2AListener.start(plane, { port: 0, credentialsPath: credentials });
  const http = (path: string, body?: unknown) =>
    fetch(`${listener.url}${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  try {
    // No such Task.
    const notFound = await failure(() => plane.continueTask("alice", "no-such-task", message("m-0", "x")));
    assert.equal(notFound.code, "TASK_NOT_FOUND");
    assert.match(notFound.message, /task no-such-task not found/);
    assert.equal(await reason(await http("/tasks/no-such-task")), notFound.code);

    // A messageId used again with another payload.
    await plane.acceptInContext("alice", message("m-1", "first"));
    const duplicate = await failure(() => plane.acceptInContext("alice", message("m-1", "second")));
    assert.equal(duplicate.code, "DUPLICATE_MESSAGE_ID");
    assert.match(duplicate.message, /messageId m-1 was already used with a different payload/);
    const sent = await http("/message:send", { message: message("m-1", "third") });
    assert.equal(sent.status, 409);
    assert.equal(await reason(sent), duplicate.code);

    // A field the plane refuses.
    const badPrincipal = await failure(() => plane.acceptInContext("bad principal", message("m-2", "x")));
    assert.equal(badPrincipal.code, "INVALID_ARGUMENT");
    assert.match(badPrincipal.message, /invalid `principal`/);
    // The role of a message is the plane's rule too, for the caller's and the agent's.
    const agentRole = await failure(() => plane.acceptInContext("alice", { ...message("m-3", "x"), role: "ROLE_AGENT" }));
    assert.equal(agentRole.code, "INVALID_ARGUMENT");
    assert.match(agentRole.message, /invalid `message.role`: an inbound message is the caller's: ROLE_USER/);
    const agent = plane.embedderAgent();
    const { taskId } = await plane.acceptInContext("alice", message("m-4", "work"));
    await agent.startWork(taskId!);
    const userRole = await failure(() => agent.finish(taskId!, "failed", { role: "ROLE_USER", parts: [{ text: "no" }] }));
    assert.equal(userRole.code, "INVALID_ARGUMENT");
    assert.match(userRole.message, /invalid `message.role`: a message from the agent is ROLE_AGENT/);
  } finally {
    listener.close();
    plane.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a tool call without turn authority is FAILED_PRECONDITION and changes nothing", async () => {
  const { dir, root } = setup();
  const plane = await TaskPlane.open(root);
  const bridge = await AgentBridge.start(plane);
  try {
    // Nothing takes a wake (no driver calls nextWake), so no turn is active.
    const { taskId } = await plane.acceptInContext("alice", message("m-1", "work"));
    assert.ok(taskId);
    assert.equal(bridge.authority ?? null, null);
    for (const call of [
      () => bridge.readTask(taskId),
      () => bridge.completeTask(taskId, "completed", "done"),
      () => bridge.recordOutput(taskId, "summary", { text: "x" }),
      () => bridge.requireInput(taskId, "which one?"),
    ]) {
      const refused = await failure(call);
      assert.equal(refused.code, "FAILED_PRECONDITION");
      assert.match(refused.message, /no task turn is active/);
    }
    const task = (await plane.getTask("alice", taskId)) as { status: { state: string }; artifacts?: unknown[] };
    assert.equal(task.status.state, "TASK_STATE_SUBMITTED");
    assert.equal(task.artifacts, undefined);
  } finally {
    bridge.close();
    plane.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("an invalid enum argument is INVALID_ARGUMENT, naming the parameter and its values", async () => {
  const { dir, root } = setup();
  const plane = await TaskPlane.open(root);
  const bridge = await AgentBridge.start(plane);
  const inspector = StoreInspector.open(root);
  try {
    const continuation = await failure(() => plane.registerSource("mail", "sometimes" as Continuation));
    assert.equal(continuation.code, "INVALID_ARGUMENT");
    assert.equal(continuation.message, "invalid `continuation`: `sometimes`; use one of none, reply_anchors, explicit_task_id");

    const outcome = await failure(() => bridge.turnEnded("t-1", "done" as TurnOutcome));
    assert.equal(outcome.code, "INVALID_ARGUMENT");
    assert.equal(outcome.message, "invalid `outcome`: `done`; use one of ended, failed, held");

    const notAString = await failure(() => bridge.completeTask("t-1", 7 as never, "x"));
    assert.equal(notAString.code, "INVALID_ARGUMENT");
    assert.equal(notAString.message, "invalid `outcome`: not a string; use one of completed, rejected");

    // In an object argument, too.
    const state = await failure(() => inspector.tasks({ state: "sleeping" as TaskState }));
    assert.equal(state.code, "INVALID_ARGUMENT");
    assert.match(state.message, /^invalid `state`: `sleeping`; use one of TASK_STATE_SUBMITTED, .*, or the short names submitted, working/);
    const request: DeliveryInput = {
      deliveryId: "d-1",
      principal: "alice",
      source: "mail",
      operationId: "op-1",
      payloadDigest: `sha256:${"a".repeat(64)}`,
      recovery: "eventually" as DeliveryInput["recovery"],
    };
    const recovery = await failure(() => plane.beginDelivery(request));
    assert.equal(recovery.code, "INVALID_ARGUMENT");
    assert.equal(recovery.message, "invalid `recovery`: `eventually`; use one of idempotency_key, lookup, ambiguous");

    // A short state name is still taken (the operator's commands use them).
    assert.deepEqual(await plane.recentTasks("working" as TaskState), []);

    const malformed = await failure(() => normalizeMessage("not json"));
    assert.equal(malformed.code, "INVALID_ARGUMENT");
  } finally {
    inspector.close();
    bridge.close();
    plane.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("calls awaited on the addon's runtime reject with the code too", async () => {
  const { dir, root } = setup();
  const plane = await TaskPlane.open(root);
  try {
    const request: DeliveryInput = {
      deliveryId: "d-1",
      principal: "alice",
      source: "mail",
      operationId: "op-1",
      payloadDigest: `sha256:${"a".repeat(64)}`,
      recovery: "idempotency_key",
    };
    const step = await plane.beginDelivery(request);
    assert.equal(step.next, "send");
    await plane.finishDelivery(request, step.lease!, { providerResponseId: "resp-1" });
    // beginDelivery runs off libuv's pool, on the addon's runtime.
    const conflict = await failure(() => plane.beginDelivery({ ...request, deliveryId: "d-2", payloadDigest: `sha256:${"b".repeat(64)}` }));
    assert.equal(conflict.code, "FAILED_PRECONDITION");
    assert.match(conflict.message, /a reused operation id must carry the same payload/);
  } finally {
    plane.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a delivery lease that is not the caller's is FAILED_PRECONDITION; a bad leaseMs INVALID_ARGUMENT", async () => {
  const { dir, root } = setup();
  const plane = await TaskPlane.open(root);
  try {
    const request: DeliveryInput = {
      deliveryId: "d-1",
      principal: "alice",
      source: "mail",
      operationId: "op-1",
      payloadDigest: `sha256:${"a".repeat(64)}`,
      recovery: "lookup",
    };
    const step = await plane.beginDelivery(request);
    const wrong = await failure(() => plane.finishDelivery(request, "f".repeat(32), { providerResponseId: "resp-1" }));
    assert.equal(wrong.code, "FAILED_PRECONDITION");
    assert.match(wrong.message, /^delivery d-1 was not begun with this lease in this process: .*call beginDelivery and present the lease it returns$/);
    const lookup = await failure(() => plane.resolveLookup(request, "f".repeat(32), "resp-1"));
    assert.equal(lookup.code, "FAILED_PRECONDITION");
    // The holder's lease works.
    const done = await plane.finishDelivery(request, step.lease!, { providerResponseId: "resp-1" });
    assert.equal(done.state, "delivered");

    for (const leaseMs of [0, 99, 600_001]) {
      const bad = await failure(() => plane.beginDelivery({ ...request, deliveryId: "d-2" }, false, leaseMs));
      assert.equal(bad.code, "INVALID_ARGUMENT");
      assert.equal(bad.message, `invalid \`leaseMs\`: must be 100..=600000 milliseconds (100 ms to 10 min), got ${leaseMs}`);
    }
    // Thrown at the call, before anything waits.
    assert.throws(() => plane.beginDelivery(request, false, 0), (err: Coded) => err.code === "INVALID_ARGUMENT");
  } finally {
    plane.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a closed plane is UNAVAILABLE; a closed inspector FAILED_PRECONDITION", async () => {
  const { dir, root } = setup();
  const plane = await TaskPlane.open(root);
  plane.close();
  try {
    const closed = await failure(() => plane.getTask("alice", "t-1"));
    assert.equal(closed.code, "UNAVAILABLE");
    const inspector = StoreInspector.open(root);
    inspector.close();
    const inspectorClosed = await failure(() => inspector.stats());
    assert.equal(inspectorClosed.code, "FAILED_PRECONDITION");
    assert.match(inspectorClosed.message, /the store inspector is closed/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
