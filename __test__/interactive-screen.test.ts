// Pi's interactive screen stays clean while the resident works: real Pi in its TUI mode
// inside tmux (a real terminal; its stderr is that terminal too), 30 A2A tasks worked by
// the scripted faux model, then the screen is read back. No log line may be drawn on it;
// the footer shows the listener and the queue; the burst is a notification or few, not 60.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";
import { ACTIVITY_WINDOW_MS } from "../extensions/resident-ui.ts";
import { terminalState } from "./helpers/a2a-http.ts";
import { fauxAgentExtension, piCli, repoRoot } from "./helpers/pi.ts";

const TOKEN = "screen-token-0123456789abcdef";
const hasTmux = spawnSync("tmux", ["-V"]).status === 0;

test("the interactive screen shows no log lines, a footer with the queue, and one line per burst", { skip: hasTmux ? false : "tmux is not installed" }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "pi-screen-"));
  const credentials = join(dir, "credentials.json");
  writeFileSync(credentials, JSON.stringify({ credentials: [{ token: TOKEN, principal: "screen" }] }), { mode: 0o600 });
  const manifest = join(dir, "workflow-composition.json");
  writeFileSync(manifest, JSON.stringify({ workflows: [{ id: "summarise", outputs: { summary: { type: "doc.summary" } } }] }));
  const store = join(dir, "task-plane");
  const socket = `a2a-screen-${process.pid}`;
  const tmux = (...args: string[]) => execFileSync("tmux", ["-L", socket, ...args], { encoding: "utf8" });
  const env = {
    PI_CODING_AGENT_DIR: join(dir, "agent"),
    PI_OFFLINE: "1",
    PI_SKIP_VERSION_CHECK: "1",
    PI_TELEMETRY: "0",
    CHANNELS_TASK_STORE_PATH: store,
    A2A_SERVER: "1",
    A2A_PORT: "0",
    A2A_CREDENTIALS_PATH: credentials,
    A2A_WORKFLOW_MANIFEST: manifest,
  };
  const command = [
    "env",
    ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
    process.execPath,
    piCli,
    "--no-session",
    "-ne",
    "-e",
    repoRoot,
    "-e",
    fauxAgentExtension,
    "--provider",
    "faux",
    "--model",
    "faux-1",
  ]
    .map((a) => `'${a.replace(/'/g, "'\\''")}'`)
    .join(" ");
  tmux("new-session", "-d", "-s", "resident", "-x", "140", "-y", "45", "-c", dir, command);
  const screen = () => tmux("capture-pane", "-p", "-t", "resident");
  try {
    const logFile = join(store, "logs", "task-plane.log");
    let url = "";
    for (const deadline = Date.now() + 30_000; !url && Date.now() < deadline; ) {
      url = existsSync(logFile) ? (/"event":"a2a_listener_ready".*"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(readFileSync(logFile, "utf8"))?.[1] ?? "") : "";
      // The log file is the only place the URL appears: read it until it does (bounded).
      if (!url) await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(url, `the listener started; screen:\n${screen()}`);
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) {
      const res = await fetch(`${url}/message:send`, {
        method: "POST",
        headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
        body: JSON.stringify({
          message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: `task ${i}` }] },
          configuration: { returnImmediately: true },
        }),
      });
      ids.push((await res.json()).task.id);
    }
    // Each Task's updates, as they are committed, until it is terminal.
    const deadline = Date.now() + 60_000;
    for (const id of ids) {
      assert.equal(await terminalState(url, TOKEN, id, Math.max(deadline - Date.now(), 1)), "TASK_STATE_COMPLETED", id);
    }
    // The screen has no event to wait on: look until the footer says the queue is idle.
    const idle = new RegExp(`A2A ${url.replace(/\./g, "\\.")} · idle`);
    for (const until = Date.now() + 20_000; !idle.test(screen()) && Date.now() < until; ) {
      await new Promise((r) => setTimeout(r, 100));
    }
    // The notification window is what is under test: one more window, so the last one's
    // line is drawn.
    await new Promise((r) => setTimeout(r, ACTIVITY_WINDOW_MS + 500));
    const shown = screen();
    assert.doesNotMatch(shown, /"event"|\{"ts"/, `no log line on the screen:\n${shown}`);
    assert.match(shown, idle, shown);
    // 60 events (30 arrivals, 30 completions) in one notification line per 1 s window (Pi
    // may also fold consecutive notices): a few lines, however fast the machine, never 60.
    const notifications = shown.split("\n").filter((l) => /^\s*A2A(:| task )/.test(l));
    assert.ok(notifications.length >= 1 && notifications.length <= 15, `30 tasks are a few lines, not 60:\n${shown}`);
    assert.match(readFileSync(logFile, "utf8"), /"event":"a2a_turn_started"/, "the lines went to the log file instead");
  } finally {
    try {
      tmux("kill-server");
    } catch {
      // already gone
    }
  }
});
