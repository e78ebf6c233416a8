// The Pi extension's four a2a_* tools reach Tasks only through AgentBridge, whose every
// call checks the turn's authority: on a Task that has no active turn each tool refuses
// (FAILED_PRECONDITION) and the Task does not change. The claim-free EmbedderAgent is for
// embedders without Pi; no extension module reaches for it.
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { AgentBridge, RESPONSE_MAX_CHARS, TaskPlane } from "../index.js";
import { registerTaskTools } from "../extensions/task-tools.ts";
import { repoRoot } from "./helpers/pi.ts";

type Tool = { name: string; execute: (id: string, params: Record<string, unknown>) => Promise<unknown> };

test("the extension's tools refuse to act on a Task that has no active turn", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tp-tools-"));
  const plane = await TaskPlane.open(join(dir, "store"));
  const bridge = await AgentBridge.start(plane);
  const tools = new Map<string, Tool>();
  const pi = { registerTool: (tool: Tool) => void tools.set(tool.name, tool) } as unknown as ExtensionAPI;
  registerTaskTools(pi, () => bridge);
  try {
    const { taskId } = await plane.acceptInContext("alice", { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "work" }] });
    assert.ok(taskId);
    // Nothing took a wake (no driver runs), so no turn is active.
    assert.equal(bridge.authority ?? null, null);
    const calls: [string, Record<string, unknown>][] = [
      ["a2a_read_task", { taskId }],
      ["a2a_record_output", { taskId, output: "summary", value: { text: "x" } }],
      ["a2a_require_input", { taskId, question: "which one?" }],
      ["a2a_complete_task", { taskId, outcome: "completed", response: "done" }],
      ["a2a_complete_task", { taskId, outcome: "rejected", response: "no" }],
    ];
    assert.deepEqual([...tools.keys()].sort(), ["a2a_complete_task", "a2a_read_task", "a2a_record_output", "a2a_require_input"]);
    for (const [name, params] of calls) {
      const tool = tools.get(name);
      assert.ok(tool, name);
      await assert.rejects(tool.execute("call-1", params), (err: Error & { code?: string }) => {
        assert.equal(err.code, "FAILED_PRECONDITION", `${name}: ${err.message}`);
        assert.match(err.message, new RegExp(`no task turn is active, so task ${taskId} cannot be changed`));
        return true;
      });
    }
    const task = (await plane.getTask("alice", taskId)) as { status: { state: string; message?: unknown }; artifacts?: unknown[]; history: unknown[] };
    assert.equal(task.status.state, "TASK_STATE_SUBMITTED");
    assert.equal(task.status.message, undefined);
    assert.equal(task.artifacts, undefined);
    assert.equal(task.history.length, 1);
  } finally {
    bridge.close();
    plane.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a2a_complete_task's response is checked by the addon alone: blank or over RESPONSE_MAX_CHARS is refused", async () => {
  const dir = mkdtempSync(join(tmpdir(), "tp-tools-"));
  const plane = await TaskPlane.open(join(dir, "store"));
  const bridge = await AgentBridge.start(plane);
  const tools = new Map<string, Tool & { parameters: { properties: Record<string, Record<string, unknown>> } }>();
  const pi = { registerTool: (tool: Tool) => void tools.set(tool.name, tool as never) } as unknown as ExtensionAPI;
  registerTaskTools(pi, () => bridge);
  try {
    assert.equal(RESPONSE_MAX_CHARS, 40_000);
    const complete = tools.get("a2a_complete_task");
    assert.ok(complete);
    // The schema tells the model the limit and checks nothing the addon checks.
    const response = complete.parameters.properties.response;
    assert.equal(response.minLength, undefined);
    assert.equal(response.maxLength, undefined);
    assert.match(String(response.description), new RegExp(`at most ${RESPONSE_MAX_CHARS} characters`));

    const { taskId } = await plane.acceptInContext("alice", { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "work" }] });
    assert.ok(taskId);
    assert.equal((await bridge.nextWake(5_000))?.taskId, taskId, "the wake makes its Task the turn's");
    for (const [text, says] of [
      [" \n ", /invalid `response`: must not be empty/],
      ["a".repeat(RESPONSE_MAX_CHARS + 1), new RegExp(`is ${RESPONSE_MAX_CHARS + 1} characters long, more than the ${RESPONSE_MAX_CHARS} allowed`)],
    ] as const) {
      await assert.rejects(complete.execute("call-1", { taskId, outcome: "completed", response: text }), (err: Error & { code?: string }) => {
        assert.equal(err.code, "INVALID_ARGUMENT", err.message);
        assert.match(err.message, says);
        return true;
      });
    }
    await complete.execute("call-2", { taskId, outcome: "completed", response: "a".repeat(RESPONSE_MAX_CHARS) });
    const task = (await plane.getTask("alice", taskId, 0)) as { status: { state: string } };
    assert.equal(task.status.state, "TASK_STATE_COMPLETED");
  } finally {
    bridge.close();
    plane.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("no extension module reaches for the claim-free embedder agent", () => {
  const dir = join(repoRoot, "extensions");
  const modules = readdirSync(dir).filter((f) => f.endsWith(".ts"));
  assert.ok(modules.includes("task-tools.ts"));
  for (const file of modules) {
    assert.doesNotMatch(readFileSync(join(dir, file), "utf8"), /embedderAgent|EmbedderAgent/, file);
  }
});
