// The store inspection CLI: lists and shows Tasks, finds a Task's Pi session, counts, and
// checks the store. It opens the store read-only (no root lock, never a write), so it works
// while the resident runs. Run it as `bin/a2a-task-plane <command>`.
import { StoreInspector, type TaskState, taskStates } from "../index.js";
import { age, stateName, taskDetail, taskLines } from "../extensions/resident-ui.ts";

const { active, interrupted, terminal } = taskStates();
const states = [...active, ...interrupted, ...terminal].map(stateName);

const USAGE = `usage: a2a-task-plane [--store <root>] <command> [options]

Looks inside a task-plane store, read-only (no lock, never a write; fine while the resident runs).
  tasks [--state S] [--principal P] [--context C] [--limit N] [--json]
                      the newest-status Tasks of every principal (default 50)
  show <taskId> [--json]
                      one Task: status, history, artifacts, its Pi session (--json: the A2A Task)
  session <taskId>    the Task's Pi session file, and how to export it as a page
  stats [--json]      counts by state, store size, the oldest live Task
  check               SQLite's integrity check and the store's own invariants (exit 1 on a problem)
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
        const [taskId] = positional;
        if (!taskId) throw new UsageError("show needs a task id");
        const found = await inspector.task(taskId);
        if (!found) {
          process.stderr.write(`a2a-task-plane: no task ${taskId} in ${inspector.root}\n`);
          return 1;
        }
        out(json ? JSON.stringify(found.task, null, 2) : taskDetail(found.principal, found.source, found.task, inspector.sessionFile(taskId) ?? undefined));
        return 0;
      }
      case "session": {
        const [taskId] = positional;
        if (!taskId) throw new UsageError("session needs a task id");
        const file = inspector.sessionFile(taskId);
        if (!file) {
          process.stderr.write(`a2a-task-plane: task ${taskId} has no Pi session in ${inspector.root}/sessions (the agent has not worked on it, or it was compacted)\n`);
          return 1;
        }
        out(file);
        out(`export it as a page: pi --export ${file} task.html`);
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
