// The resident's real path (issue #10): `AgentBridge` wakes worked one turn at a time, as
// the Pi extension's driver (extensions/task-sessions.ts) works them, minus the model. Per
// Task: nextWake → plane.sessionDir (the folder of the Task's Pi session) → readTask
// (a2a_read_task) → completeTask "completed" with one text response (a2a_complete_task) →
// turnEnded "ended"; an activity watcher is installed as the extension installs one.
// Intake runs concurrently: by default over HTTP (the A2A listener, `message:send` with
// returnImmediately) from a child process of this script, so the measured process holds only
// what a resident holds; `--intake local` calls `plane.acceptInContext` in this process
// instead. The intake keeps at most `--backlog` Tasks accepted and not yet woken (the wake
// queue gives up beyond 128 waiting), so the driver always finds work and never overflows;
// it is let go on in bursts of `--burst` Tasks (one burst per that many wakes): a burst's
// acceptances share commits, `--burst 1` has each Task arrive alone.
//
// After `--warmup` turns, the window covers the next `--tasks` turns (or `--seconds`,
// whichever ends first): Tasks/s, each driver step's latency, and per Task the CPU time,
// run-queue wait and context switches of this process's threads grouped by name
// (/proc/self/task/*/schedstat and status). Then the intake stops, the driver works what is
// left, and every accepted Task must be COMPLETED: otherwise it exits 1 naming what is not.
// `benches/bridge.sh` runs it under `perf record` (fsyncs, pwrites, switches and wake-ups
// between threads, per Task); it enables perf for the window only, through the fifos named
// by BRIDGE_PERF_CTL / BRIDGE_PERF_ACK.
//
// Store writes (writer jobs) requested per Task, read from the code:
//   1. acceptance: plane::route::intake → accept_in_context_job (src/plane/intake.rs)
//   2. delivery: nextWake → WakeQueue::next_wake_async → TaskPlane::deliver_wake
//      (src/wake/, src/plane/wakes.rs): WORKING + WOKEN + WAKE_DELIVERED 1, one job
//   3. completion: completeTask → AgentTools::complete_task → TaskPlane::complete
//      (src/tools/mod.rs, src/plane/agent.rs): artifact + history + COMPLETED, one job
//   readTask and turnEnded("ended") of a settled Task only read (src/tools/mod.rs,
//   src/wake/); sessionDir writes no store row but creates sessions/<taskId>/ and fsyncs
//   its parent (src/plane/session.rs, src/store/durable.rs).
//
// Run: node benches/bridge.ts [--tasks N] [--seconds S] [--warmup W] [--intake http|local]
//        [--concurrency C] [--backlog B] [--burst G] [--bare] [--load-cpu K]
// Prints `PID`, `LOADPID` (HTTP intake), `TASKS` and `SECONDS` lines for the wrapper.
// A benchmark, not a test: the machine's other load moves the numbers.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, openSync, readdirSync, readFileSync, readSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { A2AListener, AgentBridge, StoreInspector, TaskPlane, type TaskState } from "../index.js";

const TOKEN = "bench-token-0123456789abcdef";
const PRINCIPAL = "bench";
/** A driver that finds no wake for this long while the intake goes on is stuck. */
const STALL_MS = 10_000;
/** Once the intake has stopped, the driver works wakes until none comes for this long. */
const DRAIN_IDLE_MS = 1_000;

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

function userMessage(i: number): Record<string, unknown> {
  return { messageId: `bench-${i}`, role: "ROLE_USER", parts: [{ text: `Task ${i}: answer "done".` }] };
}

/** Issues `send(i)` with at most `concurrency` in flight and at most `limit` in all; `grant`
 * raises the limit (one per Task woken), `stop` stops issuing and resolves to the number
 * accepted once every send has ended. The first failure stops it. */
class Pump {
  issued = 0;
  accepted = 0;
  failure: string | undefined;
  private limit: number;
  private stopped = false;
  private waiters: (() => void)[] = [];
  private readonly send: (i: number) => Promise<void>;
  private readonly onFailure: (failure: string) => void;
  private readonly workers: Promise<void>[];

  constructor(send: (i: number) => Promise<void>, concurrency: number, limit: number, onFailure: (failure: string) => void = () => undefined) {
    this.send = send;
    this.limit = limit;
    this.onFailure = onFailure;
    this.workers = Array.from({ length: concurrency }, () => this.work());
  }

  grant(n: number): void {
    this.limit += n;
    this.wake();
  }

  async stop(): Promise<number> {
    this.stopped = true;
    this.wake();
    await Promise.all(this.workers);
    return this.accepted;
  }

  private wake(): void {
    for (const waiter of this.waiters.splice(0)) waiter();
  }

  private async work(): Promise<void> {
    while (!this.stopped && this.failure === undefined) {
      if (this.issued >= this.limit) {
        await new Promise<void>((resolve) => this.waiters.push(resolve));
        continue;
      }
      const i = this.issued++;
      try {
        await this.send(i);
        this.accepted += 1;
      } catch (err) {
        if (this.failure === undefined) {
          this.failure = `intake of message bench-${i} failed: ${message(err)}`;
          this.onFailure(this.failure);
        }
        this.stopped = true;
        this.wake();
      }
    }
  }
}

/** What the driver sees of the intake, in this process or in the load child. */
interface Intake {
  grant(n: number): void;
  stop(): Promise<number>;
  readonly failure: string | undefined;
}

type LoadConfig = { url: string; token: string; concurrency: number; limit: number };
type ToLoad = { credit?: number; stop?: true };
type FromLoad = { failure?: string; done?: number };

/** The HTTP load generator (a child process of the benchmark): `message:send` with
 * returnImmediately on keep-alive connections, paced by the credits the parent grants. */
async function runLoad(config: LoadConfig): Promise<void> {
  const report = (m: FromLoad): Promise<void> => new Promise((resolve) => process.send!(m, () => resolve()));
  const url = `${config.url.replace(/\/$/, "")}/message:send`;
  const headers = { authorization: `Bearer ${config.token}`, "content-type": "application/json", "a2a-version": "1.0" };
  const pump = new Pump(
    async (i) => {
      const body = JSON.stringify({ message: userMessage(i), configuration: { returnImmediately: true } });
      const res = await fetch(url, { method: "POST", headers, body });
      const text = await res.text();
      if (!res.ok) throw new Error(`HTTP ${res.status}: ${text.slice(0, 300)}`);
    },
    config.concurrency,
    config.limit,
    (failure) => void report({ failure }),
  );
  process.on("message", (m: ToLoad) => {
    if (m.credit) pump.grant(m.credit);
    if (m.stop) void pump.stop().then(async (accepted) => {
      await report({ done: accepted });
      process.exit(0);
    });
  });
  // The parent's end (or death) ends the load.
  process.on("disconnect", () => process.exit(0));
}

/** The HTTP intake as the driver sees it: its grants go to the child. */
class RemoteIntake implements Intake {
  failure: string | undefined;
  private done: ((accepted: number) => void) | undefined;
  private readonly child: ChildProcess;

  constructor(child: ChildProcess) {
    this.child = child;
    child.on("message", (m: FromLoad) => {
      if (m.failure !== undefined) this.failure ??= m.failure;
      if (m.done !== undefined) this.done?.(m.done);
    });
    child.on("exit", (code, signal) => {
      if (this.done === undefined) this.failure ??= `the load generator exited early (${signal ?? `code ${code}`})`;
    });
    child.on("error", (err) => (this.failure ??= `the load generator: ${message(err)}`));
  }

  grant(n: number): void {
    if (this.child.connected) this.child.send({ credit: n } satisfies ToLoad);
  }

  stop(): Promise<number> {
    return new Promise((resolve) => {
      this.done = resolve;
      this.child.send({ stop: true } satisfies ToLoad);
    });
  }
}

/** One thread's counters: CPU time and run-queue wait (ns, schedstat), context switches. */
type ThreadSample = { comm: string; runNs: number; waitNs: number; voluntary: number; involuntary: number };

function threadSamples(): Map<number, ThreadSample> {
  const samples = new Map<number, ThreadSample>();
  for (const entry of readdirSync("/proc/self/task")) {
    const dir = `/proc/self/task/${entry}`;
    try {
      const [runNs, waitNs] = readFileSync(`${dir}/schedstat`, "utf8").trim().split(/\s+/).map(Number);
      const status = readFileSync(`${dir}/status`, "utf8");
      const field = (name: string) => Number(new RegExp(`^${name}:\\s*(\\d+)`, "m").exec(status)?.[1] ?? 0);
      samples.set(Number(entry), {
        comm: readFileSync(`${dir}/comm`, "utf8").trim(),
        runNs,
        waitNs,
        voluntary: field("voluntary_ctxt_switches"),
        involuntary: field("nonvoluntary_ctxt_switches"),
      });
    } catch {
      // The thread ended meanwhile.
    }
  }
  return samples;
}

/** The thread group a thread belongs to (the kernel keeps 15 characters of a name);
 * benches/bridge.sh groups perf's samples the same way. */
function threadGroup(tid: number, comm: string): string {
  if (tid === process.pid) return "node main (JS)";
  switch (comm) {
    case "node":
      return "node (V8 platform)";
    case "task-plane-writ":
      return "task-plane-writer";
    case "task-plane-chec":
      return "task-plane-checkpoint";
    case "task-plane-wake":
      return "task-plane-wakes";
    case "task-plane-acti":
      return "task-plane-activity";
    default:
      return comm;
  }
}

/** perf's control fifos (from benches/bridge.sh), or nothing when run without perf. */
function perfControl(): (command: "enable" | "disable") => void {
  const ctlPath = process.env.BRIDGE_PERF_CTL;
  const ackPath = process.env.BRIDGE_PERF_ACK;
  if (!ctlPath || !ackPath) return () => undefined;
  const ctl = openSync(ctlPath, "w");
  const ack = openSync(ackPath, "r");
  return (command) => {
    writeSync(ctl, `${command}\n`);
    const buf = Buffer.alloc(16);
    let got = "";
    while (!got.includes("ack")) {
      const n = readSync(ack, buf);
      if (n === 0) throw new Error(`perf closed its control fifo before acknowledging ${command}`);
      got += buf.subarray(0, n).toString();
    }
  };
}

const STEPS = ["nextWake", "sessionDir", "readTask", "completeTask", "turnEnded"] as const;
type Step = (typeof STEPS)[number];

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))];
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      tasks: { type: "string", default: "2000" },
      seconds: { type: "string", default: "60" },
      warmup: { type: "string", default: "200" },
      intake: { type: "string", default: "http" },
      concurrency: { type: "string", default: "64" },
      backlog: { type: "string", default: "96" },
      burst: { type: "string", default: "16" },
      bare: { type: "boolean", default: false },
      "load-cpu": { type: "string" },
    },
  });
  const int = (name: string, text: string, min: number, max: number): number => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < min || n > max) throw new Error(`--${name} must be an integer in ${min}..${max}, got \`${text}\``);
    return n;
  };
  const tasks = int("tasks", values.tasks, 1, 10_000_000);
  const seconds = int("seconds", values.seconds, 1, 86_400);
  const warmup = int("warmup", values.warmup, 0, 1_000_000);
  const concurrency = int("concurrency", values.concurrency, 1, 1024);
  // The wake queue admits at most 128 waiting wakes (src/wake/ MAX_WAITING).
  const backlog = int("backlog", values.backlog, 1, 120);
  const burst = int("burst", values.burst, 1, backlog);
  const intakeKind = values.intake;
  if (intakeKind !== "http" && intakeKind !== "local") throw new Error(`--intake must be http or local, got \`${intakeKind}\``);
  const loadCpu = values["load-cpu"] === undefined ? undefined : int("load-cpu", values["load-cpu"], 0, 4095);
  const bare = values.bare;

  const perf = perfControl();
  const dir = mkdtempSync(join(tmpdir(), "tp-bridge-bench-"));
  // Warm-up and the final drain are bounded by the stall check; this bounds everything.
  const watchdogSeconds = seconds + 120;
  setTimeout(() => {
    console.error(`bridge bench: not finished after ${watchdogSeconds} s (the window is at most ${seconds} s): giving up`);
    rmSync(dir, { recursive: true, force: true });
    process.exit(1);
  }, watchdogSeconds * 1000).unref();
  let plane: TaskPlane | undefined;
  let bridge: AgentBridge | undefined;
  let listener: A2AListener | undefined;
  let child: ChildProcess | undefined;
  try {
    plane = await TaskPlane.open(join(dir, "store"));
    const openPlane = plane;
    bridge = await AgentBridge.start(plane);
    const activeBridge = bridge;
    let activityBatches = 0;
    if (!bare) activeBridge.watchActivity(() => void (activityBatches += 1));

    let intake: Intake;
    if (intakeKind === "http") {
      const credentials = join(dir, "credentials.json");
      writeFileSync(credentials, JSON.stringify({ credentials: [{ token: TOKEN, principal: PRINCIPAL }] }), { mode: 0o600 });
      listener = A2AListener.start(plane, { host: "127.0.0.1", port: 0, credentialsPath: credentials });
      const config: LoadConfig = { url: listener.url, token: TOKEN, concurrency, limit: backlog };
      const node = [process.execPath, import.meta.filename];
      const [command, ...args] = loadCpu === undefined ? node : ["taskset", "-c", String(loadCpu), ...node];
      child = spawn(command, args, { stdio: ["ignore", "inherit", "inherit", "ipc"], env: { ...process.env, BRIDGE_BENCH_LOAD: JSON.stringify(config) } });
      console.log(`LOADPID ${child.pid}`);
      intake = new RemoteIntake(child);
    } else {
      intake = new Pump(async (i) => {
        const accepted = await openPlane.acceptInContext(PRINCIPAL, userMessage(i));
        if (accepted.disposition !== "created") throw new Error(`disposition ${accepted.disposition}`);
      }, concurrency, backlog);
    }
    console.log(`PID ${process.pid}`);

    // The driver: one turn at a time, as extensions/task-sessions.ts runs them.
    let woken = 0;
    let owed = 0;
    let starved = 0;
    let timing: Record<Step, number[]> | undefined;
    /** One turn; `false` when no wake came within `idleMs`. */
    const turn = async (idleMs: number): Promise<boolean> => {
      if (activeBridge.waiting === 0) starved += 1;
      const t0 = performance.now();
      let wake = null;
      for (let idle = 0; !wake && idle < idleMs; idle += 500) {
        if (intake.failure !== undefined) throw new Error(intake.failure);
        wake = await activeBridge.nextWake(Math.min(500, idleMs - idle));
      }
      if (!wake) return false;
      woken += 1;
      owed += 1;
      if (owed >= burst) {
        intake.grant(owed);
        owed = 0;
      }
      const t1 = performance.now();
      if (wake.delivery !== 1) throw new Error(`Task ${wake.taskId} was offered again (delivery ${wake.delivery}): an earlier turn left it unsettled`);
      if (!bare) await openPlane.sessionDir(wake.taskId);
      const t2 = performance.now();
      const { text } = await activeBridge.readTask(wake.taskId);
      if (!text.includes("answer \"done\"")) throw new Error(`a2a_read_task of ${wake.taskId} lacks the caller's text: ${text}`);
      const t3 = performance.now();
      await activeBridge.completeTask(wake.taskId, "completed", "done");
      const t4 = performance.now();
      await activeBridge.turnEnded(wake.taskId, "ended");
      const t5 = performance.now();
      if (timing) {
        timing.nextWake.push(t1 - t0);
        timing.sessionDir.push(t2 - t1);
        timing.readTask.push(t3 - t2);
        timing.completeTask.push(t4 - t3);
        timing.turnEnded.push(t5 - t4);
      }
      return true;
    };
    const mustTurn = async (): Promise<void> => {
      if (!(await turn(STALL_MS))) {
        throw new Error(`no wake for ${STALL_MS / 1000} s after ${woken} Tasks woken (${activeBridge.waiting} waiting): the driver is stuck`);
      }
    };

    for (let i = 0; i < warmup; i++) await mustTurn();

    // The window.
    timing = { nextWake: [], sessionDir: [], readTask: [], completeTask: [], turnEnded: [] };
    starved = 0;
    const batchesBefore = activityBatches;
    const waitingBefore = activeBridge.waiting;
    const before = threadSamples();
    const usageBefore = process.resourceUsage();
    perf("enable");
    const start = performance.now();
    const deadline = start + seconds * 1000;
    let turns = 0;
    while (turns < tasks && performance.now() < deadline) {
      await mustTurn();
      turns += 1;
    }
    const elapsed = (performance.now() - start) / 1000;
    perf("disable");
    const usageAfter = process.resourceUsage();
    const after = threadSamples();
    const waitingAfter = activeBridge.waiting;
    const batches = activityBatches - batchesBefore;
    const windowTiming = timing;
    timing = undefined;

    // Work what is left, then every accepted Task must be COMPLETED.
    const accepted = await intake.stop();
    if (intake.failure !== undefined) throw new Error(intake.failure);
    while (await turn(DRAIN_IDLE_MS));
    const inspector = StoreInspector.open(plane.root);
    const stats = await inspector.stats();
    inspector.close();
    const completed = stats.byState.TASK_STATE_COMPLETED ?? 0;
    const others = Object.entries(stats.byState).filter(([state, n]) => state !== "TASK_STATE_COMPLETED" && n > 0);
    if (completed !== accepted || woken !== accepted || others.length > 0) {
      const what: string[] = [];
      for (const [state, n] of others) {
        const some = await plane.recentTasks(state as TaskState, 3);
        what.push(`${n} ${state} (e.g. ${some.map((t) => t.taskId).join(", ")})`);
      }
      throw new Error(
        `Tasks left unsettled: ${accepted} accepted, ${woken} woken, ${completed} COMPLETED, ${what.join("; ") || "none in another state"}; ${stats.tasks} Tasks in the store`,
      );
    }

    // The report.
    const perTask = (total: number) => total / turns;
    const fmt = (n: number, digits = 0) => n.toFixed(digits).padStart(8);
    console.log(
      `bridge bench: ${turns} Tasks in ${elapsed.toFixed(2)} s → ${(turns / elapsed).toFixed(0)} Tasks/s, one turn at a time` +
        ` (after ${warmup} warm-up turns; intake ${intakeKind === "http" ? "over HTTP from a child process" : "in process (acceptInContext)"},` +
        ` ${concurrency} in flight, backlog ≤ ${backlog}, in bursts of ${burst}; ${bare ? "bare: no sessionDir, no activity watcher" : "with sessionDir and an activity watcher, as the extension"})`,
    );
    console.log(
      `  wakes waiting at start ${waitingBefore}, at end ${waitingAfter} (≈ ${turns + waitingAfter - waitingBefore} acceptances in the window);` +
        ` the driver found no wake waiting ${starved} times; ${(batches / turns).toFixed(2)} activity batches per Task; all ${accepted} accepted Tasks COMPLETED`,
    );
    console.log("\nThe driver's steps, per Task (µs):      mean      p50      p99   share");
    const turnMean = STEPS.reduce((sum, step) => sum + windowTiming[step].reduce((a, b) => a + b, 0), 0) / turns;
    for (const step of STEPS) {
      if (bare && step === "sessionDir") continue;
      const ms = windowTiming[step];
      const sorted = [...ms].sort((a, b) => a - b);
      const mean = ms.reduce((a, b) => a + b, 0) / ms.length;
      console.log(
        `  ${step.padEnd(36)}${fmt(mean * 1000)} ${fmt(percentile(sorted, 50) * 1000)} ${fmt(percentile(sorted, 99) * 1000)} ${fmt((100 * mean) / turnMean, 1)}%`,
      );
    }
    console.log(`  ${"turn (sum of the steps)".padEnd(36)}${fmt(turnMean * 1000)}`);

    type Row = { threads: number; runNs: number; waitNs: number; voluntary: number; involuntary: number };
    const groups = new Map<string, Row>();
    for (const [tid, end] of after) {
      const begin = before.get(tid) ?? { comm: end.comm, runNs: 0, waitNs: 0, voluntary: 0, involuntary: 0 };
      const name = threadGroup(tid, end.comm);
      const row = groups.get(name) ?? { threads: 0, runNs: 0, waitNs: 0, voluntary: 0, involuntary: 0 };
      row.threads += 1;
      row.runNs += end.runNs - begin.runNs;
      row.waitNs += end.waitNs - begin.waitNs;
      row.voluntary += end.voluntary - begin.voluntary;
      row.involuntary += end.involuntary - begin.involuntary;
      groups.set(name, row);
    }
    const ended = [...before.keys()].filter((tid) => !after.has(tid)).length;
    console.log("\nPer Task, by thread (/proc/self/task):  threads   CPU µs  runq µs   vol cs invol cs");
    const total: Row = { threads: 0, runNs: 0, waitNs: 0, voluntary: 0, involuntary: 0 };
    for (const [name, row] of [...groups].sort((a, b) => b[1].runNs - a[1].runNs)) {
      if (row.runNs === 0 && row.voluntary === 0 && row.involuntary === 0) continue;
      for (const key of ["threads", "runNs", "waitNs", "voluntary", "involuntary"] as const) total[key] += row[key];
      console.log(
        `  ${name.padEnd(36)} ${String(row.threads).padStart(6)} ${fmt(perTask(row.runNs) / 1000, 1)} ${fmt(perTask(row.waitNs) / 1000, 1)} ${fmt(perTask(row.voluntary), 2)} ${fmt(perTask(row.involuntary), 2)}`,
      );
    }
    console.log(
      `  ${"all threads above".padEnd(36)} ${String(total.threads).padStart(6)} ${fmt(perTask(total.runNs) / 1000, 1)} ${fmt(perTask(total.waitNs) / 1000, 1)} ${fmt(perTask(total.voluntary), 2)} ${fmt(perTask(total.involuntary), 2)}`,
    );
    const cpuUs = usageAfter.userCPUTime + usageAfter.systemCPUTime - usageBefore.userCPUTime - usageBefore.systemCPUTime;
    console.log(
      `  ${"process (getrusage: user+sys)".padEnd(36)} ${"".padStart(6)} ${fmt(perTask(cpuUs), 1)} ${"".padStart(8)} ${fmt(perTask(usageAfter.voluntaryContextSwitches - usageBefore.voluntaryContextSwitches), 2)} ${fmt(perTask(usageAfter.involuntaryContextSwitches - usageBefore.involuntaryContextSwitches), 2)}`,
    );
    console.log(
      `  (user ${(perTask(usageAfter.userCPUTime - usageBefore.userCPUTime)).toFixed(1)} µs, sys ${(perTask(usageAfter.systemCPUTime - usageBefore.systemCPUTime)).toFixed(1)} µs per Task` +
        `${ended > 0 ? `; ${ended} threads ended during the window, counted only in the process row` : ""})`,
    );
    console.log(
      "\nStore writes requested per Task (read from the code): 3 — the acceptance, the delivery (nextWake), the completion (completeTask);" +
        " readTask and turnEnded only read; sessionDir fsyncs the sessions/ folder.",
    );
    console.log(`TASKS ${turns}`);
    console.log(`SECONDS ${elapsed.toFixed(3)}`);
  } finally {
    bridge?.close();
    listener?.close();
    plane?.close();
    if (child && child.exitCode === null && child.signalCode === null) child.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

const load = process.env.BRIDGE_BENCH_LOAD;
if (load !== undefined) {
  await runLoad(JSON.parse(load) as LoadConfig);
} else {
  try {
    await main();
  } catch (err) {
    console.error(`bridge bench: ${message(err)}`);
    process.exit(1);
  }
  // The addon's threads end on close; nothing else keeps the process.
  process.exit(0);
}
