// The scenarios the official @a2a-js/sdk client plays against our listener over one
// binding (JSON-RPC, gRPC), on loopback, backed by the real addon: blocking send, stream,
// list with paging, input-required then continue, subscribe then cancel, the typed errors,
// a reused messageId, a version the server does not speak, a direct Message, and
// principal isolation. Each binding's test file names its client; the agent is a scripted
// embedder agent (`plane.embedderAgent()`, not Pi).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { TaskState } from "@a2a-js/sdk";
import type { Client } from "@a2a-js/sdk/client";
import { A2AListener, type EmbedderAgent, TaskPlane } from "../../index.js";
import { type ScriptedAgent, startScriptedAgent } from "./scripted-agent.ts";
import { message, type Named, reasonIs, request, textOf } from "./sdk-messages.ts";

/** How one binding's official client is made, and how it reports what differs. */
export interface SdkBinding {
  /** As the test names say it: `JSON-RPC`, `gRPC`. */
  name: string;
  /** A client of `url`'s card that speaks this binding only, with `token`. */
  clientFor(url: string, token: string): Promise<Client>;
  /** A client that says it speaks A2A `version` (the SDK always sends its own 1.0). */
  laterVersionClient(url: string, token: string, version: string): Promise<Client>;
  /** Checks the error of a reused messageId with other content (the binding's form). */
  isConflict(err: unknown): boolean;
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
    const task = await client.getTask({ tenant: "", id: result.id, historyLength: 1 });
    assert.equal(task.id, result.id);
    assert.equal(task.history.length, 1);
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

  test(`over ${binding.name}: a direct Message from the executor`, async () => {
    listener.setExecutor(async () => ({ role: "ROLE_AGENT", parts: [{ text: "direct" }] }));
    try {
      const direct = await client.sendMessage(request(message("hi")));
      assert.ok(!("status" in direct), "a Message, not a Task");
      assert.equal(textOf(direct.parts), "direct");
    } finally {
      listener.setExecutor(null);
    }
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
