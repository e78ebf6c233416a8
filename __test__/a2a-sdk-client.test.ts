// The official @a2a-js/sdk client (REST transport, bearer token), unchanged, against our
// listener on loopback, backed by the real addon. The agent is a scripted embedder agent
// (`plane.embedderAgent()`, not Pi): what it does depends on the message text.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Role, TaskState, type Message, type SendMessageRequest } from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  createAuthenticatingFetchWithRetry,
  DefaultAgentCardResolver,
  RestTransportFactory,
} from "@a2a-js/sdk/client";
import { A2AListener, type EmbedderAgent, TaskPlane } from "../index.js";

const TOKEN = "sdk-test-token-0123456789";
const dir = mkdtempSync(join(tmpdir(), "tp-sdk-"));
let plane: TaskPlane;
let agent: EmbedderAgent;
let listener: A2AListener;
let client: Client;
let agentRunning = true;
let agentLoop: Promise<void>;
/** Errors the scripted agent met: the last test fails with them. */
const agentErrors: string[] = [];
/** A "gated" Task waits until the test opens the gate (once the client holds its snapshot). */
let openGate: () => void = () => {};
const gate = new Promise<void>((resolve) => (openGate = resolve));

async function clientFor(token: string, url = listener.url): Promise<Client> {
  const authFetch = createAuthenticatingFetchWithRetry(fetch, {
    headers: async () => ({ Authorization: `Bearer ${token}` }),
    shouldRetryWithHeaders: async () => undefined,
  });
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new RestTransportFactory({ fetchImpl: authFetch })],
      preferredTransports: ["HTTP+JSON"],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl: authFetch }),
    }),
  );
  return factory.createFromUrl(url);
}

function message(text: string, taskId = "", contextId = ""): Message {
  return {
    messageId: randomUUID(),
    contextId,
    taskId,
    role: Role.ROLE_USER,
    parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

function request(msg: Message): SendMessageRequest {
  return { tenant: "", message: msg, configuration: undefined, metadata: undefined };
}

const textOf = (parts: { content?: { $case: string; value?: unknown } }[] | undefined) =>
  (parts ?? []).map((p) => (p.content?.$case === "text" ? String(p.content.value) : "")).join("");

/** Rejects after `ms`, naming what was waited for (the timer does not keep Node alive). */
function deadline(ms: number, what: string): Promise<never> {
  return new Promise((_, reject) => setTimeout(() => reject(new Error(`waited ${ms} ms for ${what}`)), ms).unref());
}

/** The scripted agent: runs until the test file ends. An error it meets is kept (the last
 * test fails with it), except on a Task the test canceled under it. */
async function runAgent(): Promise<void> {
  while (agentRunning) {
    const accepted = await agent.nextAccepted(100);
    if (!accepted) continue;
    const text = (accepted.message as { parts: { text?: string }[] }).parts[0]?.text ?? "";
    const id = accepted.taskId;
    try {
      if (text.startsWith("ask")) {
        await agent.startWork(id);
        await agent.requireInput(id, "input_required", { parts: [{ text: "which one?" }] });
      } else if (text.startsWith("work")) {
        await agent.startWork(id);
      } else {
        if (text.startsWith("gated")) await Promise.race([gate, deadline(20_000, "the test to open the gate")]);
        await agent.startWork(id);
        await agent.recordArtifact(id, { name: "progress", parts: [{ text: "half way" }] });
        await agent.complete(id, [{ name: "answer", parts: [{ text: `echo: ${text}` }] }], { parts: [{ text: "done" }] });
      }
    } catch (err) {
      // A Task canceled under the agent refuses further work: that is what cancel is for.
      const now = (await agent.readTask(id)) as { status?: { state?: string } } | null;
      if (now?.status?.state !== "TASK_STATE_CANCELED") agentErrors.push(`task ${id} (script "${text}"): ${String(err)}`);
    }
  }
}

const credentials = join(dir, "credentials.json");

before(async () => {
  writeFileSync(credentials, JSON.stringify({ credentials: [{ token: TOKEN, principal: "sdk-user" }, { token: "other-token-0123456789", principal: "other" }] }));
  plane = await TaskPlane.open(join(dir, "store"));
  agent = plane.embedderAgent();
  listener = A2AListener.start(plane, { port: 0, credentialsPath: credentials, blockingTimeoutMs: 5000 });
  agentLoop = runAgent();
  client = await clientFor(TOKEN);
});

after(async () => {
  agentRunning = false;
  await agentLoop;
  listener.close();
  plane.close();
  rmSync(dir, { recursive: true, force: true });
});

test("sendMessage blocks until the Task completes and returns its artifacts", async () => {
  const result = await client.sendMessage(request(message("summarise")));
  assert.ok("status" in result, "a Task, not a Message");
  assert.equal(result.status?.state, TaskState.TASK_STATE_COMPLETED);
  assert.deepEqual(result.artifacts.map((a) => textOf(a.parts)), ["half way", "echo: summarise"]);
  assert.equal(textOf(result.history[0]?.parts), "summarise");
});

test("sendMessageStream yields the Task, live updates, and ends when it settles", async () => {
  const events: string[] = [];
  for await (const event of client.sendMessageStream(request(message("gated")))) {
    const payload = event.payload;
    if (payload?.$case === "task") events.push(`task:${TaskState[payload.value.status?.state ?? 0]}`);
    // The agent works the Task only once the client holds its snapshot.
    if (payload?.$case === "task") openGate();
    if (payload?.$case === "statusUpdate") events.push(`status:${TaskState[payload.value.status?.state ?? 0]}`);
    if (payload?.$case === "artifactUpdate") events.push(`artifact:${payload.value.artifact?.name}`);
  }
  assert.deepEqual(events, [
    "task:TASK_STATE_SUBMITTED",
    "status:TASK_STATE_WORKING",
    "artifact:progress",
    "artifact:answer",
    "status:TASK_STATE_COMPLETED",
  ]);
});

test("getTask and listTasks read durable state, scoped to the caller", async () => {
  const sent = await client.sendMessage(request(message("for get")));
  assert.ok("status" in sent);
  const task = await client.getTask({ tenant: "", id: sent.id, historyLength: 1 });
  assert.equal(task.id, sent.id);
  assert.equal(task.history.length, 1);
  const list = await client.listTasks({ tenant: "", contextId: sent.contextId, status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: "", statusTimestampAfter: undefined, pageSize: 10 });
  assert.equal(list.totalSize, 1);
  assert.equal(list.tasks[0]?.id, sent.id);
  assert.equal(list.pageSize, 10);
  const other = await clientFor("other-token-0123456789");
  await assert.rejects(other.getTask({ tenant: "", id: sent.id }), (err: Error & { reason?: string }) => err.reason === "TASK_NOT_FOUND");
  const theirs = await other.listTasks({ tenant: "", contextId: "", status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: "", statusTimestampAfter: undefined });
  assert.equal(theirs.totalSize, 0);
});

test("cancelTask cancels a working Task; a terminal one is not cancelable", async () => {
  const working = await client.sendMessage({ ...request(message("work")), configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: true } });
  assert.ok("status" in working);
  const canceled = await client.cancelTask({ tenant: "", id: working.id, metadata: undefined });
  assert.equal(canceled.status?.state, TaskState.TASK_STATE_CANCELED);
  await assert.rejects(client.cancelTask({ tenant: "", id: working.id, metadata: undefined }), (err: Error & { reason?: string; name: string }) => {
    assert.equal(err.reason, "TASK_NOT_CANCELABLE");
    assert.equal(err.name, "TaskNotCancelableError");
    return true;
  });
});

test("resubscribeTask streams an interrupted Task until a continuation settles it; terminal Tasks are refused", async () => {
  const asked = await client.sendMessage(request(message("ask")));
  assert.ok("status" in asked);
  assert.equal(asked.status?.state, TaskState.TASK_STATE_INPUT_REQUIRED);
  const seen: string[] = [];
  let subscribed: () => void = () => {};
  const snapshot = new Promise<void>((resolve) => (subscribed = resolve));
  const subscription = (async () => {
    for await (const event of client.resubscribeTask({ tenant: "", id: asked.id })) {
      const p = event.payload;
      if (p?.$case === "task") seen.push(`task:${TaskState[p.value.status?.state ?? 0]}`);
      if (p?.$case === "statusUpdate") seen.push(`status:${TaskState[p.value.status?.state ?? 0]}`);
      subscribed();
    }
  })();
  // The continuation is sent once the subscriber holds the snapshot (or the stream ended).
  await Promise.race([snapshot, subscription]);
  const answered = await client.sendMessage(request(message("the blue one", asked.id, asked.contextId)));
  assert.ok("status" in answered);
  assert.equal(answered.id, asked.id);
  assert.equal(answered.status?.state, TaskState.TASK_STATE_COMPLETED);
  await subscription;
  assert.equal(seen[0], "task:TASK_STATE_INPUT_REQUIRED");
  assert.equal(seen.at(-1), "status:TASK_STATE_COMPLETED");
  await assert.rejects(
    (async () => {
      for await (const _ of client.resubscribeTask({ tenant: "", id: asked.id })) {
        // a terminal Task is refused before any event
      }
    })(),
    (err: Error & { reason?: string }) => err.reason === "UNSUPPORTED_OPERATION",
  );
});

test("a JS executor answers a simple interaction with a direct Message, its duplicate returns the first verbatim, and declined, failed or late answers become Tasks", async () => {
  const asked: string[] = [];
  const direct = A2AListener.start(plane, {
    port: 0,
    credentialsPath: credentials,
    blockingTimeoutMs: 5000,
    executorTimeoutMs: 300,
    executor: async ({ principal, message }) => {
      const text = (message.parts as { text?: string }[])[0]?.text ?? "";
      asked.push(`${principal}:${text}`);
      if (text === "ping") return { role: "ROLE_AGENT", parts: [{ text: `pong ${randomUUID()}` }] };
      if (text === "throw") throw new Error("the executor broke");
      if (text === "late") return new Promise<null>(() => {});
      return null;
    },
  });
  try {
    const sdk = await clientFor(TOKEN, direct.url);
    const ping = message("ping");
    const first = await sdk.sendMessage(request(ping));
    assert.ok(!("status" in first), "a Message, not a Task");
    assert.equal(first.role, Role.ROLE_AGENT);
    assert.match(textOf(first.parts), /^pong /);
    assert.equal(first.taskId, "", "no Task exists");
    const again = await sdk.sendMessage(request(ping));
    assert.deepEqual(again, first, "the first reply, verbatim");
    assert.deepEqual(asked, ["sdk-user:ping"], "a duplicate is not asked again");
    for (const text of ["declined", "throw", "late"]) {
      const result = await sdk.sendMessage(request(message(text)));
      assert.ok("status" in result, `${text}: a Task, not a Message`);
      assert.equal(result.status?.state, TaskState.TASK_STATE_COMPLETED, text);
      assert.deepEqual(result.artifacts.map((a) => textOf(a.parts)), ["half way", `echo: ${text}`]);
    }
  } finally {
    direct.close();
  }
});

test("setExecutor puts an executor on a running listener and takes it off again", async () => {
  let asked = 0;
  const executor = async () => {
    asked += 1;
    return { role: "ROLE_AGENT", parts: [{ text: "direct" }] };
  };
  const sdk = await clientFor(TOKEN);
  const before = await sdk.sendMessage(request(message("no executor yet")));
  assert.ok("status" in before, "without an executor: a Task");
  listener.setExecutor(executor);
  try {
    const direct = await sdk.sendMessage(request(message("now one answers")));
    assert.ok(!("status" in direct), "with an executor: a direct Message");
    assert.equal(textOf(direct.parts), "direct");
  } finally {
    listener.setExecutor(null);
  }
  const after = await sdk.sendMessage(request(message("taken off again")));
  assert.ok("status" in after, "executor removed: a Task");
  assert.equal(asked, 1, "asked only while it was set");
  const closed = A2AListener.start(plane, { port: 0, credentialsPath: credentials });
  closed.close();
  assert.throws(() => closed.setExecutor(null), (err: Error & { code?: string }) => err.code === "FAILED_PRECONDITION");
});

test("errors reach the client as typed A2A errors", async () => {
  await assert.rejects(client.getTask({ tenant: "", id: "no-such-task" }), (err: Error & { reason?: string; name: string }) => {
    assert.equal(err.name, "TaskNotFoundError");
    return true;
  });
  const intruder = await clientFor("not-a-valid-token-000");
  await assert.rejects(intruder.sendMessage(request(message("x"))), (err: Error & { statusCode?: number }) => {
    assert.equal(err.statusCode, 401);
    assert.match(err.message, /bearer token is required/);
    return true;
  });
});

test("the scripted agent met no error", () => {
  assert.deepEqual(agentErrors, []);
});
