// The official Python client, a2a-sdk from PyPI (tools/python-client.sh makes its venv),
// unchanged, against our listener on loopback, backed by the real addon. Its scenarios
// (__test__/python-client/scenarios.py) run once per protocol binding the Agent Card lists:
// a binding the card does not list is not one we serve yet, and one it lists always runs.
// The agent is a scripted embedder agent (`plane.embedderAgent()`, not Pi) and a direct
// responder (the listener's executor); what they do depends on the message's first word.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { A2AListener, type EmbedderAgent, type ExecutorRequest, TaskPlane } from "../index.js";
import { type ScriptedAgent, startScriptedAgent } from "./helpers/scripted-agent.ts";

const run = promisify(execFile);
const repo = join(dirname(fileURLToPath(import.meta.url)), "..");
const TOKEN = "py-sdk-token-0123456789";
const OTHER_TOKEN = "py-other-token-0123456789";
/** The bindings scenarios.py knows how to speak (the SDK's names, as in the card). */
const SPOKEN = ["JSONRPC", "HTTP+JSON", "GRPC"];
/** Every scenario, in the order scenarios.py plays them. */
const SCENARIOS = [
  "blocking_send_completes",
  "direct_message",
  "stream_to_terminal_event",
  "get_with_history_length",
  "list_with_paging",
  "input_required_then_continue",
  "subscribe_then_cancel",
  "cancel_terminal_and_unknown",
  "reused_message_id",
  "unsupported_version",
  "principal_isolation",
];
/** One binding's whole run ends within this (each scenario has 30 s inside it). */
const RUN_MS = 240_000;

const dir = mkdtempSync(join(tmpdir(), "tp-pysdk-"));
let plane: TaskPlane;
let agent: EmbedderAgent;
let listener: A2AListener;
let python: string;
let scripted: ScriptedAgent;

/** Answers "direct …" with a Message; anything else becomes a Task. */
async function directResponder({ message }: ExecutorRequest): Promise<Record<string, unknown> | null> {
  const text = (message.parts as { text?: string }[] | undefined)?.[0]?.text ?? "";
  return text.startsWith("direct") ? { role: "ROLE_AGENT", parts: [{ text: `direct answer ${randomUUID()}` }] } : null;
}

type Line = { binding: string; scenario?: string; scenarios?: string[]; ok?: boolean; detail?: string };

/** Plays every scenario over one binding; the lines it printed, and its stderr for context. */
async function playScenarios(binding: string): Promise<{ lines: Line[]; stderr: string }> {
  const args = [join(repo, "__test__/python-client/scenarios.py"), "--url", listener.url, "--binding", binding];
  args.push("--token", TOKEN, "--other-token", OTHER_TOKEN);
  const result = await run(python, args, { timeout: RUN_MS, killSignal: "SIGKILL", maxBuffer: 16 << 20 }).catch(
    // It exits 1 when a scenario failed: its lines say which, and each is asserted below.
    (err: { stdout?: string; stderr?: string; code?: number | string; signal?: string }) => {
      if (err.code !== 1) throw new Error(`scenarios.py over ${binding} ended with ${err.code ?? err.signal}: ${err.stderr}`);
      return { stdout: err.stdout ?? "", stderr: err.stderr ?? "" };
    },
  );
  const lines = result.stdout
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as Line);
  return { lines, stderr: result.stderr };
}

before(async () => {
  const credentials = join(dir, "credentials.json");
  const entries = [
    { token: TOKEN, principal: "py-user" },
    { token: OTHER_TOKEN, principal: "py-other" },
  ];
  writeFileSync(credentials, JSON.stringify({ credentials: entries }), { mode: 0o600 });
  plane = await TaskPlane.open(join(dir, "store"));
  agent = plane.embedderAgent();
  listener = A2AListener.start(plane, { port: 0, credentialsPath: credentials, blockingTimeoutMs: 5000, executor: directResponder });
  scripted = startScriptedAgent(agent);
  // Makes the venv on the first run (PyPI; about 40 s), reuses it afterwards.
  const made = await run("bash", [join(repo, "tools/python-client.sh")], { timeout: 600_000 });
  python = made.stdout.trim().split("\n").at(-1) ?? "";
});

after(async () => {
  await scripted.stop();
  listener.close();
  plane.close();
  rmSync(dir, { recursive: true, force: true });
});

test("the Python a2a-sdk plays every scenario over each binding the Agent Card lists", async (t) => {
  const card = (await (await fetch(`${listener.url}/.well-known/agent-card.json`)).json()) as {
    supportedInterfaces: { protocolBinding: string }[];
  };
  const listed = [...new Set(card.supportedInterfaces.map((i) => i.protocolBinding))];
  assert.ok(listed.includes("HTTP+JSON"), `the card lists HTTP+JSON: ${JSON.stringify(listed)}`);
  const ran: string[] = [];
  for (const binding of listed) {
    await t.test(binding, async (t) => {
      assert.ok(SPOKEN.includes(binding), `the card lists ${binding}, which scenarios.py does not speak (${SPOKEN.join(", ")})`);
      const { lines, stderr } = await playScenarios(binding);
      assert.deepEqual(lines[0]?.scenarios, SCENARIOS, `scenarios.py plays every scenario (stderr: ${stderr})`);
      ran.push(binding);
      for (const name of SCENARIOS) {
        await t.test(name, (t) => {
          const result = lines.find((line) => line.scenario === name);
          assert.ok(result, `${name} reported no result (stderr: ${stderr})`);
          assert.equal(result.binding, binding);
          assert.ok(result.ok, `${binding} ${name}: ${result.detail}`);
          t.diagnostic(result.detail ?? "");
        });
      }
    });
  }
  assert.deepEqual(ran, listed, "every binding the card lists ran");
});

test("the scripted agent met no error", () => {
  assert.deepEqual(scripted.errors, []);
});
