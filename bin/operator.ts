// The operator's commands to the live resident: `status` (what `/a2a` shows) and
// `cancel <taskId> [--reason R]`. They reach the resident through its control socket,
// `<store root>/control.sock` (mode 0600: only the resident's user), so the store keeps its
// one writer. Without a running resident they say so and exit 3; the read-only commands
// (tasks, show, stats, check) work without one.
import { connect } from "node:net";
import { join } from "node:path";
import { defaultStoreRoot } from "../index.js";
import { CONTROL_SOCKET, type ControlReply, type ControlRequest } from "../extensions/operations.ts";

const USAGE = `usage: a2a-task-plane [--store <root>] status
       a2a-task-plane [--store <root>] cancel <taskId> [--reason <text>]

Talks to the running resident of the store (through <root>/${CONTROL_SOCKET}, mode 0600).
  status              what /a2a shows in Pi: the listener, the queue (held or not), the log
  cancel <taskId>     cancels the Task whoever its caller is; its status says the operator
                      canceled it, and why with --reason
--store defaults to CHANNELS_TASK_STORE_PATH, else \${XDG_DATA_HOME:-~/.local/share}/outfitter/channels/task-plane.
Exit status: 0 done, 1 refused (no such Task, already terminal), 2 usage, 3 no resident running.`;

/** How long a command waits for the resident's answer. */
const ANSWER_TIMEOUT_MS = 10_000;

class UsageError extends Error {}

function parse(argv: string[]): { store?: string; request: ControlRequest } {
  let store: string | undefined;
  let reason: string | undefined;
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new UsageError(`${arg} needs a value`);
      return v;
    };
    if (arg === "--store") store = value();
    else if (arg === "--reason") reason = value();
    else if (arg.startsWith("--")) throw new UsageError(`unknown option ${arg}`);
    else positional.push(arg);
  }
  const [command, taskId, ...extra] = positional;
  if (extra.length > 0) throw new UsageError(`unexpected ${extra.join(" ")}`);
  if (command === "status" && !taskId && reason === undefined) return { store, request: { op: "status" } };
  if (command === "cancel" && taskId) return { store, request: { op: "cancel", taskId, reason } };
  throw new UsageError(command === "cancel" ? "cancel needs a task id" : `unexpected arguments for ${command}`);
}

class NoResident extends Error {}

/** Sends one request line; resolves to the resident's reply. */
function ask(socketPath: string, request: ControlRequest): Promise<ControlReply> {
  return new Promise((resolve, reject) => {
    const socket = connect(socketPath);
    let buffered = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the resident did not answer within ${ANSWER_TIMEOUT_MS / 1000} s (${socketPath})`));
    }, ANSWER_TIMEOUT_MS);
    socket.setEncoding("utf8");
    socket.on("connect", () => socket.write(`${JSON.stringify(request)}\n`));
    socket.on("data", (chunk: string) => (buffered += chunk));
    socket.on("end", () => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(buffered) as ControlReply);
      } catch {
        reject(new Error(`the resident's answer is not JSON: ${buffered.slice(0, 200)}`));
      }
    });
    socket.on("error", (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(err.code === "ENOENT" || err.code === "ECONNREFUSED" ? new NoResident(socketPath) : err);
    });
  });
}

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const { store, request } = parse(argv);
  const root = store ?? defaultStoreRoot();
  const reply = await ask(join(root, CONTROL_SOCKET), request);
  if (!reply.ok) {
    process.stderr.write(`a2a-task-plane: ${reply.error}\n`);
    return 1;
  }
  process.stdout.write(`${reply.text}\n`);
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof NoResident) {
      process.stderr.write(
        `a2a-task-plane: no resident is running on this store (no answer at ${err.message}); start it (a2a-task-plane resident), or use the read-only commands (tasks, show, stats)\n`,
      );
      process.exit(3);
    }
    const text = err instanceof Error ? err.message : String(err);
    process.stderr.write(err instanceof UsageError ? `a2a-task-plane: ${text}\n${USAGE}\n` : `a2a-task-plane: ${text}\n`);
    process.exit(err instanceof UsageError ? 2 : 1);
  },
);
