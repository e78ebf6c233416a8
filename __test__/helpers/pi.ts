// Runs the real Pi CLI headless for tests: RPC mode, an isolated agent dir, no network, the
// scripted faux provider. Pi reads piped stdin, so every run ends by closing stdin.
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
export const piCli = join(repoRoot, "node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js");
export const fauxProviderExtension = join(repoRoot, "__test__/fixtures/faux-provider.ts");
export const fauxAgentExtension = join(repoRoot, "__test__/fixtures/faux-agent.ts");

export type RpcRecord = { type: string; id?: string; [key: string]: unknown };

export class PiRpc {
  readonly child: ChildProcessWithoutNullStreams;
  readonly records: RpcRecord[] = [];
  stderr = "";
  private buffer = "";
  private waiters: { pred: (r: RpcRecord) => boolean; resolve: (r: RpcRecord) => void }[] = [];
  private stderrWaiters: { pattern: RegExp; resolve: () => void }[] = [];
  private nextId = 0;

  /** A private store root for this Pi (the default root is the user's real one). */
  readonly storeRoot: string;

  constructor(
    extensions: string[],
    env: Record<string, string> = {},
    options: { model?: string | false; storeRoot?: string; extraArgs?: string[]; agentDir?: string } = {},
  ) {
    const agentDir = options.agentDir ?? mkdtempSync(join(tmpdir(), "pi-agent-"));
    this.storeRoot = options.storeRoot ?? join(mkdtempSync(join(tmpdir(), "pi-store-")), "task-plane");
    // The scripted model: the plain faux provider by default, or another fixture; `false`
    // runs Pi with no model at all.
    const model = options.model === undefined ? fauxProviderExtension : options.model;
    const modelArgs = model === false ? [] : ["--provider", "faux", "--model", "faux-1", "-e", model];
    this.child = spawn(
      process.execPath,
      [piCli, "--mode", "rpc", "--no-session", "-ne", "-nc", "-ns", "-np", "--no-themes",
        ...modelArgs, ...(options.extraArgs ?? []), ...extensions.flatMap((e) => ["-e", e])],
      {
        cwd: repoRoot,
        env: {
          ...process.env,
          PI_CODING_AGENT_DIR: agentDir,
          PI_OFFLINE: "1",
          PI_SKIP_VERSION_CHECK: "1",
          PI_TELEMETRY: "0",
          CHANNELS_TASK_STORE_PATH: this.storeRoot,
          A2A_SERVER: "0",
          ...env,
        },
        stdio: ["pipe", "pipe", "pipe"],
      },
    );
    this.child.stderr.on("data", (d) => {
      this.stderr += d;
      for (const w of [...this.stderrWaiters]) {
        if (w.pattern.test(this.stderr)) {
          this.stderrWaiters.splice(this.stderrWaiters.indexOf(w), 1);
          w.resolve();
        }
      }
    });
    this.child.stdout.on("data", (d) => {
      this.buffer += d;
      // RPC frames are split on "\n" only (not readline, which also splits on U+2028).
      for (let i = this.buffer.indexOf("\n"); i >= 0; i = this.buffer.indexOf("\n")) {
        const line = this.buffer.slice(0, i).replace(/\r$/, "");
        this.buffer = this.buffer.slice(i + 1);
        if (!line) continue;
        const record = JSON.parse(line) as RpcRecord;
        this.records.push(record);
        for (const w of [...this.waiters]) {
          if (w.pred(record)) {
            this.waiters.splice(this.waiters.indexOf(w), 1);
            w.resolve(record);
          }
        }
      }
    });
  }

  waitFor(pred: (r: RpcRecord) => boolean, ms = 20_000): Promise<RpcRecord> {
    const seen = this.records.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for an RPC record; stderr:\n${this.stderr}`)), ms);
      this.waiters.push({ pred, resolve: (r) => { clearTimeout(timer); resolve(r); } });
    });
  }

  /** Resolves once Pi's stderr (its log lines) matches `pattern`. */
  waitForStderr(pattern: RegExp, ms = 20_000): Promise<void> {
    if (pattern.test(this.stderr)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${pattern} on stderr:\n${this.stderr}`)), ms);
      this.stderrWaiters.push({ pattern, resolve: () => { clearTimeout(timer); resolve(); } });
    });
  }

  /** Sends one RPC command and resolves with its response. */
  async call(command: Record<string, unknown>): Promise<RpcRecord> {
    const id = `t${++this.nextId}`;
    this.child.stdin.write(`${JSON.stringify({ id, ...command })}\n`);
    return this.waitFor((r) => r.type === "response" && r.id === id);
  }

  /** Closes stdin (an orderly shutdown: session_shutdown runs) and waits for the exit code. */
  async close(ms = 20_000): Promise<number | null> {
    const exited = new Promise<number | null>((resolve) => this.child.once("exit", (code) => resolve(code)));
    this.child.stdin.end();
    const timer = setTimeout(() => this.child.kill("SIGKILL"), ms);
    try {
      return await exited;
    } finally {
      clearTimeout(timer);
    }
  }
}
