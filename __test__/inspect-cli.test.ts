// The inspection CLI (`bin/a2a-task-plane`) against a store these tests build: it lists,
// shows, finds sessions, counts and checks, read-only: while the store is open elsewhere
// (no root lock taken) and without changing a byte of a closed one.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import { AgentBridge, TaskPlane } from "../index.js";
import { repoRoot } from "./helpers/pi.ts";

const cli = join(repoRoot, "bin", "a2a-task-plane");
const run = (...args: string[]) => {
  const r = spawnSync(cli, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  return { code: r.status, out: r.stdout, err: r.stderr };
};

/** Every file of the root with a digest of its bytes. */
const snapshot = (root: string) =>
  Object.fromEntries(
    readdirSync(root, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => {
        const path = join(e.parentPath, e.name);
        return [path, createHash("sha256").update(readFileSync(path)).digest("hex")];
      }),
  );

test("the inspection CLI lists, shows, finds sessions, counts and checks, read-only", async () => {
  const root = join(mkdtempSync(join(tmpdir(), "inspect-")), "task-plane");
  const plane = await TaskPlane.open(root);
  const bridge = await AgentBridge.start(plane);
  let done = "";
  let waiting = "";
  try {
    done = (await plane.acceptInContext("alice", { messageId: "m-1", role: "ROLE_USER", parts: [{ text: "summarise the report" }] })).taskId as string;
    waiting = (await plane.acceptInContext("bob", { messageId: "m-2", role: "ROLE_USER", parts: [{ text: "still waiting" }] })).taskId as string;
    const wake = await bridge.nextWake(5_000);
    assert.equal(wake?.taskId, done);
    const dir = await plane.sessionDir(done);
    writeFileSync(join(dir, "2026-12-03T00-00-00-000Z_a2a-task-x.jsonl"), "{}\n");
    await bridge.completeTask(done, "completed", "here is the summary");
    await bridge.turnEnded(done, "ended");

    // While the store is open (the resident runs): no lock is taken.
    const tasks = run("--store", root, "tasks");
    assert.equal(tasks.code, 0, tasks.err);
    assert.match(tasks.out, new RegExp(`${done.slice(-8)}\\s+alice\\s+completed`));
    assert.match(tasks.out, new RegExp(`${waiting.slice(-8)}\\s+bob\\s+submitted`));
    const byState = run("--store", root, "tasks", "--state", "input-required");
    assert.equal(byState.out.trim(), "No A2A tasks.");
    const json = JSON.parse(run("--store", root, "tasks", "--principal", "bob", "--json").out);
    assert.deepEqual(json.map((t: { taskId: string }) => t.taskId), [waiting]);

    const show = run("--store", root, "show", done);
    assert.equal(show.code, 0, show.err);
    assert.match(show.out, /Status: completed/);
    assert.match(show.out, /caller: summarise the report/);
    assert.match(show.out, /Artifacts: response/);
    assert.match(show.out, /export it as a page: \S+ \S+a2a-task-plane\.js --store \S+ export [0-9a-f]{8} task\.html/);
    const a2a = JSON.parse(run("--store", root, "show", done, "--json").out);
    assert.equal(a2a.id, done);
    assert.equal(a2a.status.state, "TASK_STATE_COMPLETED");

    const session = run("--store", root, "session", done);
    assert.match(session.out, new RegExp(`sessions/${done}/\\S+\\.jsonl\\nexport it as a page: \\S+ \\S+a2a-task-plane\\.js --store \\S+ export ${done.slice(-8)} task\\.html`));
    assert.equal(run("--store", root, "session", waiting).code, 1);

    const stats = run("--store", root, "stats", "--json");
    const s = JSON.parse(stats.out);
    assert.equal(s.tasks, 2);
    assert.equal(s.byState.TASK_STATE_COMPLETED, 1);
    assert.equal(s.byState.TASK_STATE_SUBMITTED, 1);
    assert.equal(s.oldestLiveTaskId, waiting);
    assert.ok(s.storeBytes > 0);
    assert.match(run("--store", root, "stats").out, /Oldest live task: /);

    const check = run("--store", root, "check");
    assert.equal(check.code, 0, check.out + check.err);
    assert.match(check.out, /: ok/);
  } finally {
    bridge.close();
    plane.close();
  }

  // A closed store: the CLI changes none of its data and creates no file. (The `-shm`
  // file is SQLite's shared-memory index of the WAL, which every reader updates.)
  const shm = join(root, "task-plane.sqlite3-shm");
  const data = (files: Record<string, string>) => Object.fromEntries(Object.entries(files).filter(([path]) => path !== shm));
  const before = snapshot(root);
  for (const args of [["tasks"], ["show", done], ["stats"], ["check"]]) {
    const r = run("--store", root, ...args);
    assert.equal(r.code, 0, `${args}: ${r.err}`);
  }
  const after = snapshot(root);
  assert.deepEqual(Object.keys(after).sort(), Object.keys(before).sort(), "no file created or removed");
  assert.deepEqual(data(after), data(before), "not a byte of the store's data changed");

  // Errors say what and where.
  const missing = run("--store", join(root, "nope"), "tasks");
  assert.equal(missing.code, 1);
  assert.match(missing.err, /no task-plane store here/);
  const usage = run("--store", root, "frobnicate");
  assert.equal(usage.code, 2);
  assert.match(usage.err, /unknown command frobnicate/);
  assert.equal(run("--help").code, 0);
});

test("the inspection CLI refuses a plane on PostgreSQL, naming A2A_STORE_URL and what to use", () => {
  const root = join(mkdtempSync(join(tmpdir(), "inspect-pg-")), "task-plane");
  const r = spawnSync(cli, ["--store", root, "tasks"], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, A2A_STORE_URL: "postgres://a2a:s3cret@127.0.0.1:1/fleet" },
  });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /A2A_STORE_URL/);
  assert.match(r.stderr, /reads only the embedded SQLite store/);
  assert.match(r.stderr, /a2a-task-plane status/);
  assert.doesNotMatch(r.stderr, /s3cret/);
});
