// The store inspection CLI: lists and shows Tasks, finds a Task's Pi session, counts, and
// checks the store. It opens the store read-only (no root lock, never a write), so it works
// while the resident runs. Run it as `bin/a2a-task-plane <command>`.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { StoreInspector, type TaskState, taskStates } from "../index.js";
import { age, exportCommand, stateName, taskDetail, taskLines } from "../extensions/resident-ui.ts";

const { active, interrupted, terminal } = taskStates();
const states = [...active, ...interrupted, ...terminal].map(stateName);

const USAGE = `usage: a2a-task-plane [--store <root>] <command> [options]

Looks inside a task-plane store, read-only (no lock, never a write; fine while the resident runs).
  tasks [--state S] [--principal P] [--context C] [--limit N] [--json]
                      the newest-status Tasks of every principal (default 50)
  show <taskId> [--json]
                      one Task: status, history, artifacts, its Pi session (--json: the A2A Task)
  session <taskId>    the Task's Pi session file, and how to export it as a page
  export <taskId> <file.html>
                      writes the Task's Pi session as an HTML page (Pi's own export)
  stats [--json]      counts by state, store size, the oldest live Task
  check               SQLite's integrity check and the store's own invariants (exit 1 on a problem)
<taskId> is the id, or 6+ characters of its start or end (the short id shown is its end).
--store defaults to CHANNELS_TASK_STORE_PATH, else \${XDG_DATA_HOME:-~/.local/share}/outfitter/channels/task-plane.
States: ${states.join(", ")}.`;

class UsageError extends Error {}

function parse(argv: string[]): { command: string; positional: string[]; flags: Map<string, string | true> } {
  const flags = new Map<string, string | true>();
  const positional: string[] = [];
  const valued = new Set(["--store", "--state", "--principal", "--context", "--limit"]);
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === "-h" || arg === "--help") flags.set("--help", true);
    else if (arg === "--json") flags.set("--json", true);
    else if (valued.has(arg)) {
      const value = argv[++i];
      if (value === undefined) throw new UsageError(`${arg} needs a value`);
      flags.set(arg, value);
    } else if (arg.startsWith("--")) throw new UsageError(`unknown option ${arg}`);
    else positional.push(arg);
  }
  return { command: positional.shift() ?? "", positional, flags };
}

/** The full id of the Task named by `typed` (see the usage); throws a person's error. */
async function findTask(inspector: StoreInspector, typed: string | undefined, command: string): Promise<string> {
  if (!typed) throw new UsageError(`${command} needs a task id`);
  const taskId = await inspector.resolveTaskId(typed);
  if (!taskId) throw new Error(`no task id starts or ends with ${typed} in ${inspector.root} (a2a-task-plane tasks lists them)`);
  return taskId;
}

/** The Task's Pi session file; throws when it has none. */
function sessionOf(inspector: StoreInspector, taskId: string): string {
  const file = inspector.sessionFile(taskId);
  if (!file) {
    throw new Error(`task ${taskId} has no Pi session in ${inspector.root}/sessions (the agent has not worked on it, or it was compacted)`);
  }
  return file;
}

/** Pi's own export of a session file to HTML: its CLI's `--export`, run by this Node (Pi
 * needs Node 22, as this command does), offline and without its update check. Pi exports
 * no function for it. Returns the file written. */
function exportSession(session: string, file: string): string {
  const pi = fileURLToPath(import.meta.resolve("@earendil-works/pi-coding-agent"));
  const cli = join(dirname(pi), "bundle", "cli.js");
  if (!existsSync(cli)) throw new Error(`Pi's command is not at ${cli}; reinstall @earendil-works/pi-coding-agent`);
  const run = spawnSync(process.execPath, [cli, "--export", session, file], {
    env: { ...process.env, PI_OFFLINE: "1", PI_SKIP_VERSION_CHECK: "1", PI_TELEMETRY: "0" },
    stdio: ["ignore", "pipe", "pipe"],
    encoding: "utf8",
    timeout: 120_000,
  });
  if (run.status !== 0 || !existsSync(file)) {
    const why = (run.stderr || run.stdout || run.error?.message || `exit status ${run.status}`).trim();
    throw new Error(`Pi could not export ${session} to ${file}: ${why}`);
  }
  return file;
}

// The operator's spelling (`input-required`); the addon checks it and names the states it
// takes when it is none of them.
const stateArg = (s: string) => s.replace(/-/g, "_") as TaskState;

async function main(): Promise<number> {
  const { command, positional, flags } = parse(process.argv.slice(2));
  if (flags.has("--help") || command === "") {
    process.stdout.write(`${USAGE}\n`);
    return command === "" && !flags.has("--help") ? 2 : 0;
  }
  const json = flags.has("--json");
  const store = flags.get("--store");
  const inspector = StoreInspector.open(typeof store === "string" ? store : undefined);
  const out = (text: string) => process.stdout.write(`${text}\n`);
  try {
    switch (command) {
      case "tasks": {
        const get = (k: string) => (typeof flags.get(k) === "string" ? (flags.get(k) as string) : undefined);
        const limit = get("--limit");
        if (limit !== undefined && !/^\d+$/.test(limit)) throw new UsageError("--limit takes a whole number");
        const tasks = await inspector.tasks({
          state: get("--state") ? stateArg(get("--state") as string) : undefined,
          principal: get("--principal"),
          contextId: get("--context"),
          limit: limit === undefined ? undefined : Number(limit),
        });
        out(json ? JSON.stringify(tasks, null, 2) : taskLines(tasks));
        return 0;
      }
      case "show": {
        const taskId = await findTask(inspector, positional[0], "show");
        const found = await inspector.task(taskId);
        if (!found) throw new Error(`no task ${taskId} in ${inspector.root}`);
        out(json ? JSON.stringify(found.task, null, 2) : taskDetail(found.principal, found.source, found.task, inspector.sessionFile(taskId) ?? undefined, inspector.root));
        return 0;
      }
      case "session": {
        const taskId = await findTask(inspector, positional[0], "session");
        out(sessionOf(inspector, taskId));
        out(`export it as a page: ${exportCommand(inspector.root, taskId)}`);
        return 0;
      }
      case "export": {
        const [, file] = positional;
        const taskId = await findTask(inspector, positional[0], "export");
        if (!file) throw new UsageError("export needs the file to write, e.g. task.html");
        const session = sessionOf(inspector, taskId);
        const written = exportSession(session, resolve(file));
        out(`wrote ${written} (task ${taskId})`);
        return 0;
      }
      case "stats": {
        const stats = await inspector.stats();
        if (json) {
          out(JSON.stringify(stats, null, 2));
          return 0;
        }
        out(`Store ${inspector.root}: ${(stats.storeBytes / 1048576).toFixed(1)} MiB, ${stats.tasks} tasks, ${stats.claims} claims, ${stats.contexts} contexts, ${stats.sessionFolders} session folders`);
        for (const [state, n] of Object.entries(stats.byState).sort()) out(`  ${stateName(state).padEnd(15)} ${n}`);
        out(
          stats.oldestLiveTaskId
            ? `Oldest live task: ${stats.oldestLiveTaskId}, created ${age(stats.oldestLiveCreatedMs ?? 0)}`
            : "No live task.",
        );
        return 0;
      }
      case "check": {
        const problems = await inspector.check();
        if (problems.length === 0) {
          out(`Store ${inspector.root}: ok (SQLite integrity check and the store's invariants)`);
          return 0;
        }
        for (const p of problems) out(`problem: ${p}`);
        out(`${problems.length} problem(s) in ${inspector.root}`);
        return 1;
      }
      default:
        throw new UsageError(`unknown command ${command}`);
    }
  } finally {
    inspector.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    const text = err instanceof Error ? err.message : String(err);
    process.stderr.write(err instanceof UsageError ? `a2a-task-plane: ${text}\n${USAGE}\n` : `a2a-task-plane: ${text}\n`);
    process.exit(err instanceof UsageError ? 2 : 1);
  },
);
