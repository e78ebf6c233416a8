// The official @a2a-js/sdk client over JSON-RPC (its JsonRpcTransport, unchanged, chosen
// from our Agent Card), against our listener on loopback, backed by the real addon: the
// scenarios a2a-sdk-client.test.ts runs over REST, and principal isolation. The agent is a
// scripted embedder agent (`plane.embedderAgent()`, not Pi).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { TaskState } from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  createAuthenticatingFetchWithRetry,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";
import { A2AListener, type EmbedderAgent, TaskPlane } from "../index.js";
import { type ScriptedAgent, startScriptedAgent } from "./helpers/scripted-agent.ts";
import { message, type Named, reasonIs, request, textOf } from "./helpers/sdk-messages.ts";

const TOKEN = "sdk-rpc-token-0123456789";
const OTHER = "other-rpc-token-0123456789";
const dir = mkdtempSync(join(tmpdir(), "tp-sdk-rpc-"));
let plane: TaskPlane;
let agent: EmbedderAgent;
let listener: A2AListener;
let client: Client;
let scripted: ScriptedAgent;

/** A client that speaks JSON-RPC only: it finds the JSONRPC interface in the card. */
async function clientFor(token: string, url = listener.url): Promise<Client> {
  const authFetch = createAuthenticatingFetchWithRetry(fetch, {
    headers: async () => ({ Authorization: `Bearer ${token}` }),
    shouldRetryWithHeaders: async () => undefined,
  });
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch })],
      preferredTransports: ["JSONRPC"],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl: authFetch }),
    }),
  );
  return factory.createFromUrl(url);
}

const credentials = join(dir, "credentials.json");

before(async () => {
  writeFileSync(credentials, JSON.stringify({ credentials: [{ token: TOKEN, principal: "rpc-user" }, { token: OTHER, principal: "other" }] }), { mode: 0o600 });
  plane = await TaskPlane.open(join(dir, "store"));
  agent = plane.embedderAgent();
  listener = A2AListener.start(plane, { port: 0, credentialsPath: credentials, blockingTimeoutMs: 5000 });
  scripted = startScriptedAgent(agent);
  client = await clientFor(TOKEN);
});

after(async () => {
  await scripted.stop();
  listener.close();
  plane.close();
  rmSync(dir, { recursive: true, force: true });
});

test("over JSON-RPC: sendMessage blocks until COMPLETED; getTask honours historyLength", async () => {
  const result = await client.sendMessage(request(message("summarise")));
  assert.ok("status" in result, "a Task, not a Message");
  assert.equal(result.status?.state, TaskState.TASK_STATE_COMPLETED);
  assert.deepEqual(result.artifacts.map((a) => textOf(a.parts)), ["half way", "echo: summarise"]);
  const task = await client.getTask({ tenant: "", id: result.id, historyLength: 1 });
  assert.equal(task.id, result.id);
  assert.equal(task.history.length, 1);
});

test("over JSON-RPC: sendMessageStream yields the Task and its updates to the terminal event", async () => {
  const events: string[] = [];
  for await (const event of client.sendMessageStream(request(message("stream me")))) {
    const p = event.payload;
    if (p?.$case === "task") events.push("task");
    if (p?.$case === "statusUpdate") events.push(`status:${TaskState[p.value.status?.state ?? 0]}`);
    if (p?.$case === "artifactUpdate") events.push(`artifact:${p.value.artifact?.name}`);
  }
  assert.equal(events[0], "task");
  assert.equal(events.at(-1), "status:TASK_STATE_COMPLETED");
  assert.ok(events.includes("artifact:answer"), events.join(" "));
});

test("over JSON-RPC: listTasks pages with its token", async () => {
  const contextId = randomUUID();
  const first = await client.sendMessage(request(message("one", "", contextId)));
  assert.ok("status" in first);
  await client.sendMessage(request(message("two", "", first.contextId)));
  const query = { tenant: "", contextId: first.contextId, status: TaskState.TASK_STATE_UNSPECIFIED, statusTimestampAfter: undefined };
  const page = await client.listTasks({ ...query, pageToken: "", pageSize: 1 });
  assert.equal(page.tasks.length, 1);
  assert.equal(page.totalSize, 2);
  assert.notEqual(page.nextPageToken, "");
  const rest = await client.listTasks({ ...query, pageToken: page.nextPageToken, pageSize: 1 });
  assert.equal(rest.tasks.length, 1);
  assert.equal(rest.nextPageToken, "");
  assert.notEqual(rest.tasks[0]?.id, page.tasks[0]?.id);
});

test("over JSON-RPC: input-required, then subscribe, then the continuation settles it", async () => {
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
  await Promise.race([snapshot, subscription]);
  const answered = await client.sendMessage(request(message("the blue one", asked.id, asked.contextId)));
  assert.ok("status" in answered);
  assert.equal(answered.id, asked.id);
  assert.equal(answered.status?.state, TaskState.TASK_STATE_COMPLETED);
  await subscription;
  assert.equal(seen[0], "task:TASK_STATE_INPUT_REQUIRED");
  assert.equal(seen.at(-1), "status:TASK_STATE_COMPLETED");
  const terminal = (async () => {
    for await (const _ of client.resubscribeTask({ tenant: "", id: asked.id })) {
      // a terminal Task is refused before any event
    }
  })();
  await assert.rejects(terminal, reasonIs("UNSUPPORTED_OPERATION"));
});

test("over JSON-RPC: subscribe then cancel; a terminal or unknown Task gets the typed error", async () => {
  const working = await client.sendMessage(request(message("work"), true));
  assert.ok("status" in working);
  const states: string[] = [];
  const subscription = (async () => {
    for await (const event of client.resubscribeTask({ tenant: "", id: working.id })) {
      const p = event.payload;
      if (p?.$case === "task") states.push(TaskState[p.value.status?.state ?? 0]);
      if (p?.$case === "statusUpdate") states.push(TaskState[p.value.status?.state ?? 0]);
    }
  })();
  const canceled = await client.cancelTask({ tenant: "", id: working.id, metadata: undefined });
  assert.equal(canceled.status?.state, TaskState.TASK_STATE_CANCELED);
  await subscription;
  assert.equal(states.at(-1), "TASK_STATE_CANCELED");
  await assert.rejects(client.cancelTask({ tenant: "", id: working.id, metadata: undefined }), (err: Named) => {
    assert.equal(err.name, "TaskNotCancelableError");
    return true;
  });
  await assert.rejects(client.cancelTask({ tenant: "", id: "no-such-task", metadata: undefined }), (err: Named) => {
    assert.equal(err.name, "TaskNotFoundError");
    return true;
  });
  await assert.rejects(client.getTask({ tenant: "", id: "no-such-task" }), (err: Named) => err.name === "TaskNotFoundError");
});

test("over JSON-RPC: a reused messageId returns the prior Task; other content is the conflict", async () => {
  const messageId = randomUUID();
  const first = await client.sendMessage(request(message("once", "", "", messageId)));
  const again = await client.sendMessage(request(message("once", "", "", messageId)));
  assert.ok("status" in first && "status" in again);
  assert.equal(again.id, first.id);
  // JSON-RPC's code for it is Invalid params; the ErrorInfo in `data` names the reason.
  await assert.rejects(client.sendMessage(request(message("something else", "", "", messageId))), (err: Named & { data?: { reason?: string }[] }) => {
    assert.equal(err.name, "RequestMalformedError");
    assert.equal(err.data?.[0]?.reason, "DUPLICATE_MESSAGE_ID");
    return true;
  });
});

test("over JSON-RPC: a version the server does not speak is VERSION_NOT_SUPPORTED", async () => {
  // The client always sends its own version (1.0): a fetch that rewrites the header plays a
  // client of a later version.
  const later: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set("A2A-Version", "2.0");
    headers.set("Authorization", `Bearer ${TOKEN}`);
    return fetch(input, { ...init, headers });
  };
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl: later })],
      preferredTransports: ["JSONRPC"],
    }),
  );
  const sdk = await factory.createFromUrl(listener.url);
  await assert.rejects(sdk.getTask({ tenant: "", id: "x" }), (err: Named) => {
    assert.equal(err.name, "VersionNotSupportedError");
    return true;
  });
});

test("over JSON-RPC: a direct Message from the executor", async () => {
  listener.setExecutor(async () => ({ role: "ROLE_AGENT", parts: [{ text: "direct" }] }));
  try {
    const direct = await client.sendMessage(request(message("hi")));
    assert.ok(!("status" in direct), "a Message, not a Task");
    assert.equal(textOf(direct.parts), "direct");
  } finally {
    listener.setExecutor(null);
  }
});

test("over JSON-RPC: another caller's Task is not found, listed, cancelled, subscribed to or continued", async () => {
  const mine = await client.sendMessage(request(message("work"), true));
  assert.ok("status" in mine);
  const other = await clientFor(OTHER);
  await assert.rejects(other.getTask({ tenant: "", id: mine.id }), reasonIs("TASK_NOT_FOUND"));
  await assert.rejects(other.cancelTask({ tenant: "", id: mine.id, metadata: undefined }), reasonIs("TASK_NOT_FOUND"));
  const subscribe = (async () => {
    for await (const _ of other.resubscribeTask({ tenant: "", id: mine.id })) {
      // refused before any event
    }
  })();
  await assert.rejects(subscribe, reasonIs("TASK_NOT_FOUND"));
  await assert.rejects(other.sendMessage(request(message("mine now", mine.id, mine.contextId))), reasonIs("TASK_NOT_FOUND"));
  const theirs = await other.listTasks({ tenant: "", contextId: "", status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: "", statusTimestampAfter: undefined });
  assert.equal(theirs.totalSize, 0);
  const still = await client.getTask({ tenant: "", id: mine.id });
  assert.equal(still.status?.state, TaskState.TASK_STATE_WORKING);
  await client.cancelTask({ tenant: "", id: mine.id, metadata: undefined });
});

test("the scripted agent met no error", () => {
  assert.deepEqual(scripted.errors, []);
});
