// The official clients over TLS: the listener started with A2A_TLS_CERT / A2A_TLS_KEY (a
// test CA's server certificate, made by __test__/python-client/test_ca.py), the Python
// a2a-sdk trusting that CA over every binding the Agent Card lists (scenarios.py --ca), and
// the JS SDK in a child `node` trusting it through NODE_EXTRA_CA_CERTS, as a user would.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import { promisify } from "node:util";
import { A2AListener, type EmbedderAgent, TaskPlane } from "../index.js";
import { Operations } from "../extensions/operations.ts";
import { type ScriptedAgent, startScriptedAgent } from "./helpers/scripted-agent.ts";

const run = promisify(execFile);
const repo = join(dirname(fileURLToPath(import.meta.url)), "..");
const TOKEN = "tls-token-0123456789";
const OTHER_TOKEN = "tls-other-token-0123456789";
/** What the Python client plays over each binding: a send, a stream, a subscription. */
const SCENARIOS = ["blocking_send_completes", "stream_to_terminal_event", "subscribe_then_cancel"];
const RUN_MS = 120_000;

const dir = mkdtempSync(join(tmpdir(), "tp-tls-"));
let plane: TaskPlane;
let agent: EmbedderAgent;
let listener: A2AListener;
let python: string;
let scripted: ScriptedAgent;

before(async () => {
  const made = await run("bash", [join(repo, "tools/python-client.sh")], { timeout: 600_000 });
  python = made.stdout.trim().split("\n").at(-1) ?? "";
  await run(python, [join(repo, "__test__/python-client/test_ca.py"), dir], { timeout: 60_000 });
  const credentials = join(dir, "credentials.json");
  const entries = [
    { token: TOKEN, principal: "tls-user" },
    { token: OTHER_TOKEN, principal: "tls-other" },
  ];
  writeFileSync(credentials, JSON.stringify({ credentials: entries }), { mode: 0o600 });
  plane = await TaskPlane.open(join(dir, "store"));
  agent = plane.embedderAgent();
  // TLS is configured by its variables only (as a resident's environment sets them).
  process.env.A2A_TLS_CERT = join(dir, "cert.pem");
  process.env.A2A_TLS_KEY = join(dir, "key.pem");
  try {
    listener = A2AListener.start(plane, { port: 0, credentialsPath: credentials, blockingTimeoutMs: 5000 });
  } finally {
    delete process.env.A2A_TLS_CERT;
    delete process.env.A2A_TLS_KEY;
  }
  scripted = startScriptedAgent(agent);
});

after(async () => {
  await scripted?.stop();
  listener?.close();
  plane?.close();
  rmSync(dir, { recursive: true, force: true });
});

test("the listener serves https, and its card names https", async () => {
  assert.match(listener.url, /^https:\/\/127\.0\.0\.1:\d+$/);
  assert.equal(listener.reloadTls(), true, "TLS is on, and its files reload");
});

test("the Python a2a-sdk trusting the test CA plays its scenarios over every binding the card lists", async (t) => {
  const bindings = ["JSONRPC", "HTTP+JSON", "GRPC"];
  for (const binding of bindings) {
    await t.test(binding, async () => {
      const args = [join(repo, "__test__/python-client/scenarios.py"), "--url", listener.url, "--binding", binding];
      args.push("--token", TOKEN, "--other-token", OTHER_TOKEN, "--ca", join(dir, "ca.pem"), "--only", SCENARIOS.join(","));
      const result = await run(python, args, { timeout: RUN_MS, killSignal: "SIGKILL", maxBuffer: 16 << 20 }).catch(
        (err: { stdout?: string; stderr?: string; code?: number | string }) => {
          if (err.code !== 1) throw new Error(`scenarios.py over ${binding} ended with ${err.code}: ${err.stderr}`);
          return { stdout: err.stdout ?? "", stderr: err.stderr ?? "" };
        },
      );
      const lines = result.stdout
        .split("\n")
        .filter((line) => line.trim() !== "")
        .map((line) => JSON.parse(line) as { scenario?: string; scenarios?: string[]; ok?: boolean; detail?: string });
      assert.deepEqual(lines[0]?.scenarios, SCENARIOS, `stderr: ${result.stderr}`);
      for (const name of SCENARIOS) {
        const line = lines.find((l) => l.scenario === name);
        assert.ok(line?.ok, `${binding} ${name}: ${line?.detail ?? `no result (stderr: ${result.stderr})`}`);
      }
    });
  }
});

/** The JS SDK in a child node: sends one message over `binding`, prints the Task's state. */
const JS_CLIENT = `
import { ClientFactory, ClientFactoryOptions, createAuthenticatingFetchWithRetry, DefaultAgentCardResolver,
  JsonRpcTransportFactory, RestTransportFactory } from "@a2a-js/sdk/client";
const [url, token, binding] = process.argv.slice(1);
const authFetch = createAuthenticatingFetchWithRetry(fetch, {
  headers: async () => ({ Authorization: "Bearer " + token }),
  shouldRetryWithHeaders: async () => undefined,
});
const transport = binding === "JSONRPC" ? new JsonRpcTransportFactory({ fetchImpl: authFetch }) : new RestTransportFactory({ fetchImpl: authFetch });
const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
  transports: [transport], preferredTransports: [binding], cardResolver: new DefaultAgentCardResolver({ fetchImpl: authFetch }),
}));
const client = await factory.createFromUrl(url);
const result = await client.sendMessage({ message: { messageId: crypto.randomUUID(), contextId: "", taskId: "", role: 1,
  parts: [{ content: { $case: "text", value: "over tls" }, metadata: undefined, filename: "", mediaType: "" }],
  metadata: undefined, extensions: [], referenceTaskIds: [] } });
console.log(JSON.stringify(result.status?.state ?? result));
`;

test("the JS SDK trusting the test CA through NODE_EXTRA_CA_CERTS sends over HTTP+JSON and JSON-RPC", async () => {
  for (const binding of ["HTTP+JSON", "JSONRPC"]) {
    const env = { ...process.env, NODE_EXTRA_CA_CERTS: join(dir, "ca.pem") };
    const args = ["--input-type=module", "-e", JS_CLIENT, listener.url, TOKEN, binding];
    const { stdout } = await run(process.execPath, args, { cwd: repo, env, timeout: 60_000, killSignal: "SIGKILL" });
    assert.equal(stdout.trim(), "3", `${binding}: the Task completed (TASK_STATE_COMPLETED), got ${stdout}`);
  }
  const untrusted = { ...process.env, NODE_EXTRA_CA_CERTS: "" };
  await assert.rejects(
    run(process.execPath, ["--input-type=module", "-e", JS_CLIENT, listener.url, TOKEN, "HTTP+JSON"], { cwd: repo, env: untrusted, timeout: 60_000, killSignal: "SIGKILL" }),
    /certificate/i,
    "a client that does not trust the CA is refused",
  );
});

test("SIGHUP's reload puts the certificate files in use again and tells Pi; an unusable key keeps the one in use", async () => {
  const shown: { text: string; level: string }[] = [];
  const operations = new Operations({ plane, listener, log: () => undefined, notify: (text, level) => shown.push({ text, level }), status: () => "" });
  const key = join(dir, "key.pem");
  copyFileSync(key, join(dir, "key.pem.good"));
  try {
    writeFileSync(key, "not a key");
    await operations.reload("test");
    const refused = shown.find((n) => n.text.includes("TLS"));
    assert.equal(refused?.level, "error", JSON.stringify(shown));
    assert.match(refused?.text ?? "", /TLS certificate not reloaded, the one in use stays: .*A2A_TLS_KEY.*key\.pem/);
    assert.throws(() => listener.reloadTls(), /FAILED_PRECONDITION|A2A_TLS_KEY/);

    copyFileSync(join(dir, "key.pem.good"), key);
    shown.length = 0;
    await operations.reload("test");
    assert.deepEqual(shown.find((n) => n.text.includes("TLS")), { text: "A2A: TLS certificate reloaded.", level: "info" });
  } finally {
    operations.close();
  }
});

test("the scripted agent met no error", () => {
  assert.deepEqual(scripted.errors, []);
});
