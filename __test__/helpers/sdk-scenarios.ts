// The scenarios the official @a2a-js/sdk client plays against our listener over one
// binding (HTTP+JSON, JSON-RPC, gRPC), on loopback, backed by the real addon: blocking
// send, stream, list with paging, input-required then continue, subscribe then cancel, the
// typed errors, a reused messageId, a version the server does not speak, direct Messages
// from an executor, a wrong token, and principal isolation. Each binding's test file names
// its client; the agent is a scripted embedder agent (`plane.embedderAgent()`, not Pi).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Role, TaskState } from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  createAuthenticatingFetchWithRetry,
  DefaultAgentCardResolver,
  type TransportFactory,
} from "@a2a-js/sdk/client";
import { A2AListener, type EmbedderAgent, TaskPlane } from "../../index.js";
import { type ScriptedAgent, startScriptedAgent } from "./scripted-agent.ts";
import { message, type Named, reasonIs, request, textOf } from "./sdk-messages.ts";

/** How one binding's official client is made, and how it reports what differs. */
export interface SdkBinding {
  /** As the test names say it: `HTTP+JSON`, `JSON-RPC`, `gRPC`. */
  name: string;
  /** A client of `url`'s card that speaks this binding only, with `token`. */
  clientFor(url: string, token: string): Promise<Client>;
  /** A client that says it speaks A2A `version` (the SDK always sends its own 1.0). */
  laterVersionClient(url: string, token: string, version: string): Promise<Client>;
  /** Checks the error of a reused messageId with other content (the binding's form). */
  isConflict(err: unknown): boolean;
  /** Checks the error of a call with a token the server does not know (the binding's form). */
  isUnauthenticated(err: unknown): boolean;
}

/** `clientFor` and `laterVersionClient` of a binding the SDK speaks over fetch (HTTP+JSON,
 * JSON-RPC): clients that speak `protocol` only (the card's interface of that name), through
 * the `transport` made with a fetch that sends the bearer token, or that also rewrites
 * `A2A-Version` (the SDK always sends its own 1.0) to play a client of a later version. */
export function overFetch(
  protocol: string,
  transport: (fetchImpl: typeof fetch) => TransportFactory,
): Pick<SdkBinding, "clientFor" | "laterVersionClient"> {
  const clientThrough = (url: string, fetchImpl: typeof fetch) =>
    new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        transports: [transport(fetchImpl)],
        preferredTransports: [protocol],
        cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
      }),
    ).createFromUrl(url);
  return {
    clientFor: (url, token) =>
      clientThrough(
        url,
        createAuthenticatingFetchWithRetry(fetch, {
          headers: async () => ({ Authorization: `Bearer ${token}` }),
          shouldRetryWithHeaders: async () => undefined,
        }),
      ),
    laterVersionClient: (url, token, version) =>
      clientThrough(url, (input, init) => {
        const headers = new Headers(init?.headers);
        headers.set("A2A-Version", version);
        headers.set("Authorization", `Bearer ${token}`);
        return fetch(input, { ...init, headers });
      }),
  };
}

const TOKEN = "sdk-scenario-token-0123456789";
const OTHER = "other-scenario-token-0123456789";

/** Registers the scenarios, with their listener, plane and agent, for `binding`. */
export function sdkScenarios(binding: SdkBinding): void {
  const dir = mkdtempSync(join(tmpdir(), "tp-sdk-scenarios-"));
  let plane: TaskPlane;
  let agent: EmbedderAgent;
  let listener: A2AListener;
  let client: Client;
  let scripted: ScriptedAgent;
  const credentials = join(dir, "credentials.json");

  before(async () => {
    writeFileSync(credentials, JSON.stringify({ credentials: [{ token: TOKEN, principal: "sdk-user" }, { token: OTHER, principal: "other" }] }), { mode: 0o600 });
    plane = await TaskPlane.open(join(dir, "store"));
    agent = plane.embedderAgent();
    listener = A2AListener.start(plane, { port: 0, credentialsPath: credentials, blockingTimeoutMs: 5000 });
    scripted = startScriptedAgent(agent);
    client = await binding.clientFor(listener.url, TOKEN);
  });

  after(async () => {
    await scripted.stop();
    listener.close();
    plane.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test(`over ${binding.name}: sendMessage blocks until COMPLETED; getTask honours historyLength`, async () => {
    const result = await client.sendMessage(request(message("summarise")));
    assert.ok("status" in result, "a Task, not a Message");
    assert.equal(result.status?.state, TaskState.TASK_STATE_COMPLETED);
    assert.deepEqual(result.artifacts.map((a) => textOf(a.parts)), ["half way", "echo: summarise"]);
    assert.equal(textOf(result.history[0]?.parts), "summarise");
    const task = await client.getTask({ tenant: "", id: result.id, historyLength: 1 });
    assert.equal(task.id, result.id);
    assert.equal(task.history.length, 1);
    const list = await client.listTasks({ tenant: "", contextId: result.contextId, status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: "", statusTimestampAfter: undefined, pageSize: 10 });
    assert.equal(list.totalSize, 1);
    assert.equal(list.tasks[0]?.id, result.id);
    assert.equal(list.pageSize, 10);
  });

  test(`over ${binding.name}: sendMessageStream yields the Task and its updates to the terminal event`, async () => {
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

  test(`over ${binding.name}: sendMessageStream of a Task worked once the client holds its snapshot yields every update in order`, async () => {
    const events: string[] = [];
    for await (const event of client.sendMessageStream(request(message("gated")))) {
      const p = event.payload;
      if (p?.$case === "task") events.push(`task:${TaskState[p.value.status?.state ?? 0]}`);
      // The agent works the Task only once the client holds its snapshot.
      if (p?.$case === "task") scripted.openGate();
      if (p?.$case === "statusUpdate") events.push(`status:${TaskState[p.value.status?.state ?? 0]}`);
      if (p?.$case === "artifactUpdate") events.push(`artifact:${p.value.artifact?.name}`);
    }
    assert.deepEqual(events, [
      "task:TASK_STATE_SUBMITTED",
      "status:TASK_STATE_WORKING",
      "artifact:progress",
      "artifact:answer",
      "status:TASK_STATE_COMPLETED",
    ]);
  });

  test(`over ${binding.name}: listTasks pages with its token`, async () => {
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

  test(`over ${binding.name}: input-required, then subscribe, then the continuation settles it`, async () => {
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

  test(`over ${binding.name}: subscribe then cancel; a terminal or unknown Task gets the typed error`, async () => {
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
      assert.equal(err.reason, "TASK_NOT_CANCELABLE");
      assert.equal(err.name, "TaskNotCancelableError");
      return true;
    });
    await assert.rejects(client.cancelTask({ tenant: "", id: "no-such-task", metadata: undefined }), (err: Named) => {
      assert.equal(err.name, "TaskNotFoundError");
      return true;
    });
    await assert.rejects(client.getTask({ tenant: "", id: "no-such-task" }), (err: Named) => err.name === "TaskNotFoundError");
  });

  test(`over ${binding.name}: a reused messageId returns the prior Task; other content is the conflict`, async () => {
    const messageId = randomUUID();
    const first = await client.sendMessage(request(message("once", "", "", messageId)));
    const again = await client.sendMessage(request(message("once", "", "", messageId)));
    assert.ok("status" in first && "status" in again);
    assert.equal(again.id, first.id);
    await assert.rejects(client.sendMessage(request(message("something else", "", "", messageId))), binding.isConflict);
  });

  test(`over ${binding.name}: a version the server does not speak is VERSION_NOT_SUPPORTED`, async () => {
    // The client always sends its own version (1.0): the binding's later client rewrites it.
    const sdk = await binding.laterVersionClient(listener.url, TOKEN, "2.0");
    await assert.rejects(sdk.getTask({ tenant: "", id: "x" }), (err: Named) => {
      assert.equal(err.name, "VersionNotSupportedError");
      return true;
    });
  });

  test(`over ${binding.name}: a JS executor answers a simple interaction with a direct Message, its duplicate returns the first verbatim, and declined, failed or late answers become Tasks`, async () => {
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
      const sdk = await binding.clientFor(direct.url, TOKEN);
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

  test(`over ${binding.name}: setExecutor puts an executor on a running listener and takes it off again`, async () => {
    let asked = 0;
    const executor = async () => {
      asked += 1;
      return { role: "ROLE_AGENT", parts: [{ text: "direct" }] };
    };
    const before = await client.sendMessage(request(message("no executor yet")));
    assert.ok("status" in before, "without an executor: a Task");
    listener.setExecutor(executor);
    try {
      const direct = await client.sendMessage(request(message("now one answers")));
      assert.ok(!("status" in direct), "with an executor: a direct Message");
      assert.equal(textOf(direct.parts), "direct");
    } finally {
      listener.setExecutor(null);
    }
    const after = await client.sendMessage(request(message("taken off again")));
    assert.ok("status" in after, "executor removed: a Task");
    assert.equal(asked, 1, "asked only while it was set");
    const closed = A2AListener.start(plane, { port: 0, credentialsPath: credentials });
    closed.close();
    assert.throws(() => closed.setExecutor(null), (err: Error & { code?: string }) => err.code === "FAILED_PRECONDITION");
  });

  test(`over ${binding.name}: a token the server does not know is refused`, async () => {
    const intruder = await binding.clientFor(listener.url, "not-a-valid-token-000");
    await assert.rejects(intruder.sendMessage(request(message("x"))), binding.isUnauthenticated);
  });

  test(`over ${binding.name}: another caller's Task is not found, listed, cancelled, subscribed to or continued`, async () => {
    const mine = await client.sendMessage(request(message("work"), true));
    assert.ok("status" in mine);
    const other = await binding.clientFor(listener.url, OTHER);
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
}
