// Our side of `benches/compare-sdk.sh`: the task plane as a Node process on the public addon
// API, the way an embedder runs it: a store in a fresh temporary folder (every acceptance
// and state change fsynced), the A2A listener on 127.0.0.1, and an agent that settles each
// Task at once (startWork, then complete with one text artifact and no status message,
// issued back to back), the same work the SDK servers' executors do (theirs publish a
// COMPLETED Task with one artifact and no status message). Not part of the product.
// With `--awaiting` the agent awaits each write before it makes the next (startWork, then
// complete), as an agent that works a Task step by step does: each write is its own commit,
// and a blocking send's waiter sees WORKING before COMPLETED.
// The listener serves every binding its defaults turn on: HTTP+JSON and JSON-RPC on its
// port, gRPC on an ephemeral port of its own (port 0; A2A_GRPC=0 in the environment turns
// it off), all three listed in the Agent Card, where the load generator finds them.
// Run: node benches/ours-server.ts [--awaiting]   → prints "LISTENING <interface url> <token>"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { A2AListener, TaskPlane } from "../index.js";

const TOKEN = "bench-token-0123456789abcdef";
const dir = mkdtempSync(join(tmpdir(), "tp-ours-server-"));
const credentials = join(dir, "credentials.json");
writeFileSync(credentials, JSON.stringify({ credentials: [{ token: TOKEN, principal: "bench" }] }), { mode: 0o600 });
const plane = await TaskPlane.open(join(dir, "store"));
// The embedder API (no Pi, no turn authority): this process is its own agent.
const embedder = plane.embedderAgent();
const listener = A2AListener.start(plane, { port: 0, credentialsPath: credentials, maxConnections: 1024 });

// Acceptances are taken one at a time and settled concurrently (at most 256 in flight), so
// the agent's own commits group like the callers' do.
let running = true;
let inFlight = 0;
const MAX_IN_FLIGHT = 256;
let slot: (() => void) | undefined;
const awaiting = process.argv.includes("--awaiting");
const ANSWER = [{ name: "answer", parts: [{ text: "done" }] }];
async function settle(taskId: string): Promise<void> {
  try {
    if (awaiting) {
      await embedder.startWork(taskId);
      await embedder.complete(taskId, ANSWER);
      return;
    }
    // Issued back to back, as the SDK's executor publishes its events without waiting: the
    // agent's writes apply in call order (WORKING, then COMPLETED), often in one commit, and
    // each Promise settles once its write is durable. (Two awaits rather than Promise.all:
    // its extra Promises per Task grew V8's young generation, +7 MB peak RSS in the stream
    // case.)
    const started = embedder.startWork(taskId);
    const completed = embedder.complete(taskId, ANSWER);
    try {
      await started;
    } finally {
      await completed;
    }
  } catch (err) {
    console.error(`agent: ${taskId}: ${(err as Error).message}`);
  } finally {
    inFlight -= 1;
    slot?.();
  }
}
async function agent(): Promise<void> {
  while (running) {
    if (inFlight >= MAX_IN_FLIGHT) await new Promise<void>((resolve) => (slot = resolve));
    const accepted = await embedder.nextAccepted(200);
    if (!accepted) continue;
    inFlight += 1;
    void settle(accepted.taskId);
  }
}
const agentDone = agent();
console.log(`LISTENING ${listener.url} ${TOKEN}`);

async function stop(): Promise<void> {
  running = false;
  await agentDone;
  listener.close();
  plane.close();
  rmSync(dir, { recursive: true, force: true });
  process.exit(0);
}
process.on("SIGTERM", () => void stop());
process.on("SIGINT", () => void stop());
