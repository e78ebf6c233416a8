// The package as a user gets it. `npm pack` (the prebuilt addon, without debug info), then
// `npm install <tarball>` into a fresh folder under a temporary HOME, with a PATH that has
// no cargo or rustc. From there `a2a-task-plane resident --demo` works a Task to COMPLETED
// and stops with 0 on SIGTERM; the operator guide's systemd ExecStart line runs as written with
// PATH=/usr/bin:/bin plus Node and serves; `pi install <that folder>` gives a fresh Pi the
// four tools and, with A2A_SERVER=1, the listener; and `pi install git:…` of a checkout
// without cargo stops with one line saying what to install, and with cargo builds the
// addon from source.
import assert from "node:assert/strict";
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fauxProviderExtension, piCli, repoRoot } from "./helpers/pi.ts";

const nodeDir = dirname(process.execPath);
/** What a service manager gives a unit: the system's directories, plus where Node is. */
const minimalPath = `${nodeDir}:/usr/bin:/bin`;
const home = mkdtempSync(join(tmpdir(), "a2a-install-home-"));
const installDir = join(home, ".local", "lib", "a2a-resident");
const packageDir = join(installDir, "node_modules", "a2a-task-plane");
const command = join(installDir, "node_modules", ".bin", "a2a-task-plane");
const started = new Set<ChildProcess>();

/** Nothing from the developer's shell (cargo, the napi variables, CARGO_BUILD_TARGET). */
function serviceEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: minimalPath,
    HOME: home,
    LANG: "C.UTF-8",
    PI_CODING_AGENT_DIR: mkdtempSync(join(tmpdir(), "a2a-install-agent-")),
    PI_OFFLINE: "1",
    PI_SKIP_VERSION_CHECK: "1",
    PI_TELEMETRY: "0",
    A2A_PORT: "0",
    CHANNELS_TASK_STORE_PATH: join(mkdtempSync(join(tmpdir(), "a2a-install-store-")), "task-plane"),
    ...extra,
  };
}

function onPath(tool: string, path: string): boolean {
  return spawnSync("sh", ["-c", `command -v ${tool}`], { env: { PATH: path } }).status === 0;
}

before(() => {
  assert.ok(!onPath("cargo", minimalPath) && !onPath("rustc", minimalPath), `cargo or rustc is on ${minimalPath}: this test needs a PATH without them`);
  const packDir = mkdtempSync(join(tmpdir(), "a2a-pack-"));
  // prepack: the addon current for this checkout (nothing to build after setup.sh), stripped.
  const packed = JSON.parse(execFileSync("npm", ["pack", "--json", "--pack-destination", packDir], { cwd: repoRoot, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }));
  const files = (packed[0].files as { path: string }[]).map((f) => f.path);
  for (const wanted of ["LICENSE", "CHANGELOG.md", "bin/a2a-task-plane.js", "extensions/index.ts"]) assert.ok(files.includes(wanted), `${wanted} is packed: ${files}`);
  assert.ok(files.some((f) => /^a2a-task-plane\.linux-[a-z0-9]+-(gnu|musl)\.node$/.test(f)), `the prebuilt addon is packed: ${files}`);
  const tarball = join(packDir, packed[0].filename);
  process.stderr.write(`package-install: ${packed[0].filename} is ${(statSync(tarball).size / 1048576).toFixed(1)} MB\n`);
  // Pi and typebox are peer dependencies: named here at the versions this checkout is
  // tested with (from npm's cache), as npm would otherwise pick their newest.
  const dev = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")).devDependencies;
  mkdirSync(installDir, { recursive: true });
  execFileSync(
    "npm",
    ["install", "--no-audit", "--no-fund", "--loglevel=error", tarball, `@earendil-works/pi-coding-agent@${dev["@earendil-works/pi-coding-agent"]}`, `typebox@${dev.typebox}`],
    // The caller's npm settings (cache, certificates, proxy) reach the registry; only PATH is the service's.
    { cwd: installDir, env: { ...process.env, PATH: minimalPath }, stdio: ["ignore", "inherit", "inherit"] },
  );
});

after(() => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
});

test("the packed addon carries no debug info", () => {
  const addon = execFileSync("sh", ["-c", `ls ${packageDir}/a2a-task-plane.*.node`], { encoding: "utf8" }).trim();
  const sections = execFileSync("readelf", ["-S", "-W", addon], { encoding: "utf8" });
  assert.doesNotMatch(sections, /\.debug_/);
});

interface Running {
  child: ChildProcess;
  stderr: () => string;
  exited: Promise<number | null>;
}

function start(file: string, args: string[], env: Record<string, string>): Running {
  const child = spawn(file, args, { cwd: home, env, stdio: ["ignore", "pipe", "pipe"] });
  started.add(child);
  let stderr = "";
  child.stderr?.on("data", (d) => (stderr += d));
  child.stdout?.resume();
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, stderr: () => stderr, exited };
}

/** The resident's listener URL from its running line; fails when it exits first or after `ms`. */
function listenerUrl(resident: Running, ms: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const look = () => {
      const url = /a2a-resident: running .*A2A listener (http:\/\/127\.0\.0\.1:\d+)/.exec(resident.stderr())?.[1];
      if (url) finish(() => resolve(url));
    };
    const exited = (code: number | null) => finish(() => reject(new Error(`the resident exited (${code}):\n${resident.stderr()}`)));
    const timer = setTimeout(() => finish(() => reject(new Error(`no running line within ${ms} ms:\n${resident.stderr()}`))), ms);
    const finish = (then: () => void) => {
      clearTimeout(timer);
      resident.child.stderr?.off("data", look);
      resident.child.off("exit", exited);
      then();
    };
    resident.child.stderr?.on("data", look);
    resident.child.once("exit", exited);
    look();
  });
}

async function stopWithSigterm(resident: Running): Promise<number | null> {
  resident.child.kill("SIGTERM");
  const timer = setTimeout(() => resident.child.kill("SIGKILL"), 30_000);
  try {
    return await resident.exited;
  } finally {
    clearTimeout(timer);
  }
}

/** The token of the credentials file the resident made under HOME (it never prints one). */
function createdToken(): string {
  const file = join(home, ".local", "share", "outfitter", "channels", "a2a-credentials.json");
  assert.equal(statSync(file).mode & 0o777, 0o600);
  return JSON.parse(readFileSync(file, "utf8")).credentials[0].token;
}

test("the installed `a2a-task-plane resident --demo` works a Task to COMPLETED with no cargo on PATH, and stops with 0 on SIGTERM", async () => {
  const resident = start(command, ["resident", "--demo"], serviceEnv());
  const url = await listenerUrl(resident, 120_000);
  const token = createdToken();
  const res = await fetch(`${url}/message:send`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ message: { messageId: randomUUID(), role: "ROLE_USER", parts: [{ text: "hello from an installed package" }] } }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  const { task } = await res.json();
  assert.equal(task.status.state, "TASK_STATE_COMPLETED", JSON.stringify(task));
  assert.equal(await stopWithSigterm(resident), 0, resident.stderr());
  assert.doesNotMatch(resident.stderr(), new RegExp(token), "the token is never printed");
});

test("the operator guide's systemd ExecStart line runs as written with PATH=/usr/bin:/bin plus Node and a temporary HOME, and serves", async () => {
  const guide = readFileSync(join(repoRoot, "docs", "operations.md"), "utf8");
  const line = /^ExecStart=(.+)$/m.exec(guide)?.[1];
  assert.ok(line, "docs/operations.md has a unit with an ExecStart line");
  // systemd's %h is the user's home; the line has no quoting to undo.
  const [file, ...args] = line.replaceAll("%h", home).split(/\s+/);
  const resident = start(file, args, serviceEnv());
  const url = await listenerUrl(resident, 120_000);
  const card = await fetch(`${url}/.well-known/agent-card.json`);
  assert.equal(card.status, 200);
  const tasks = await fetch(`${url}/tasks`, { headers: { Authorization: `Bearer ${createdToken()}` } });
  assert.equal(tasks.status, 200, await tasks.clone().text());
  assert.equal(await stopWithSigterm(resident), 0, resident.stderr());
});

test("`pi install` of the installed package gives a fresh Pi the four tools and, with A2A_SERVER=1, the listener", async () => {
  const env = serviceEnv();
  const install = spawnSync(process.execPath, [piCli, "install", packageDir], { env, encoding: "utf8" });
  assert.equal(install.status, 0, install.stdout + install.stderr);
  const settings = JSON.parse(readFileSync(join(env.PI_CODING_AGENT_DIR, "settings.json"), "utf8"));
  assert.ok(JSON.stringify(settings.packages).includes("a2a-task-plane"), JSON.stringify(settings));
  // Reports the tools Pi has once a session starts.
  const probe = join(mkdtempSync(join(tmpdir(), "a2a-install-probe-")), "probe.ts");
  writeFileSync(
    probe,
    `export default function probe(pi) {
      pi.on("session_start", () => process.stderr.write("probe tools " + JSON.stringify(pi.getAllTools().map((t) => t.name)) + "\\n"));
    }\n`,
  );
  const credentials = join(home, "pi-credentials.json");
  writeFileSync(credentials, JSON.stringify({ credentials: [{ token: "install-test-token-0123456789", principal: "tester" }] }), { mode: 0o600 });
  // Headless (RPC mode); the package comes from the settings `pi install` wrote, not from -e.
  const pi = start(
    process.execPath,
    [piCli, "--mode", "rpc", "--no-session", "-nc", "-ns", "-np", "--no-themes", "--provider", "faux", "--model", "faux-1", "-e", fauxProviderExtension, "-e", probe],
    { ...env, A2A_SERVER: "1", A2A_CREDENTIALS_PATH: credentials },
  );
  const stdin = pi.child.stdin;
  const seen = (pattern: RegExp) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no ${pattern} within 60 s:\n${pi.stderr()}`)), 60_000);
      const look = () => {
        const m = pattern.exec(pi.stderr());
        if (m) {
          clearTimeout(timer);
          pi.child.stderr?.off("data", look);
          resolve(m);
        }
      };
      pi.child.stderr?.on("data", look);
      look();
    });
  try {
    const tools = JSON.parse((await seen(/probe tools (\[.*\])/))[1]) as string[];
    for (const tool of ["a2a_read_task", "a2a_record_output", "a2a_require_input", "a2a_complete_task"]) assert.ok(tools.includes(tool), `${tool} in ${tools}`);
    const url = (await seen(/"event":"a2a_server_started".*?"url":"(http:\/\/127\.0\.0\.1:\d+)"/))[1];
    const listed = await fetch(`${url}/tasks`, { headers: { Authorization: "Bearer install-test-token-0123456789" } });
    assert.equal(listed.status, 200, await listed.clone().text());
  } finally {
    stdin?.end();
  }
  const timer = setTimeout(() => pi.child.kill("SIGKILL"), 20_000);
  const code = await pi.exited;
  clearTimeout(timer);
  assert.equal(code, 0, pi.stderr());
  assert.doesNotMatch(pi.stderr(), /Extension error|Failed to load extension/);
});

test("`pi install git:…` of a checkout, with no cargo to build the addon, stops with one line saying what to install", () => {
  // A git URL that git itself maps to a local bare clone of this checkout's commit: no network.
  const bare = join(mkdtempSync(join(tmpdir(), "a2a-install-git-")), "a2a-task-plane.git");
  execFileSync("git", ["clone", "--quiet", "--bare", repoRoot, bare]);
  const url = "https://git.invalid/example/a2a-task-plane";
  const env = serviceEnv({
    GIT_CONFIG_COUNT: "1",
    GIT_CONFIG_KEY_0: `url.${bare}.insteadOf`,
    GIT_CONFIG_VALUE_0: url,
    npm_config_cache: join(process.env.HOME ?? home, ".npm"),
  });
  const install = spawnSync(process.execPath, [piCli, "install", `git:${url}`], { env, encoding: "utf8" });
  assert.notEqual(install.status, 0, install.stdout + install.stderr);
  const lines = (install.stdout + install.stderr).split("\n").filter((l) => l.startsWith("a2a-task-plane: "));
  assert.equal(lines.length, 1, install.stdout + install.stderr);
  assert.match(lines[0], /no prebuilt addon for linux-\S+ in this copy and no cargo to build one: install Rust \(https:\/\/rustup\.rs\)/);
  assert.ok(!existsSync(join(env.PI_CODING_AGENT_DIR, "git", "git.invalid")), "a failed install leaves no clone behind");
});

test("`pi install git:…` of a checkout, with cargo, builds the addon from source and the installed package loads it", () => {
  const cargo = spawnSync("sh", ["-c", "command -v cargo"], { encoding: "utf8" }).stdout.trim();
  assert.ok(cargo, "this test needs cargo on the test's PATH (tools/setup.sh needs it too)");
  const bare = join(mkdtempSync(join(tmpdir(), "a2a-install-git-")), "a2a-task-plane.git");
  execFileSync("git", ["clone", "--quiet", "--bare", repoRoot, bare]);
  const url = "https://git.invalid/example/a2a-task-plane";
  const realHome = process.env.HOME ?? home;
  const env = serviceEnv({
    // cargo's directory on the service's PATH; rustup's homes named, as HOME is elsewhere.
    PATH: `${dirname(cargo)}:${minimalPath}`,
    RUSTUP_HOME: process.env.RUSTUP_HOME ?? join(realHome, ".rustup"),
    CARGO_HOME: process.env.CARGO_HOME ?? join(realHome, ".cargo"),
    // One target folder for every run of this test: the dependencies build once per machine.
    CARGO_TARGET_DIR: join(repoRoot, "target", "source-install"),
    GIT_CONFIG_COUNT: "1",
    GIT_CONFIG_KEY_0: `url.${bare}.insteadOf`,
    GIT_CONFIG_VALUE_0: url,
    npm_config_cache: join(realHome, ".npm"),
  });
  const install = spawnSync(process.execPath, [piCli, "install", `git:${url}`], { env, encoding: "utf8" });
  assert.equal(install.status, 0, install.stdout + install.stderr);
  const cloned = join(env.PI_CODING_AGENT_DIR, "git", "git.invalid", "example", "a2a-task-plane");
  const addon = join(cloned, execFileSync("sh", ["-c", "ls a2a-task-plane.linux-*.node"], { cwd: cloned, encoding: "utf8" }).trim());
  assert.ok(existsSync(addon), `the source build left its addon in ${cloned}`);
  const states = execFileSync(process.execPath, ["-e", "import('./index.js').then((a) => console.log(JSON.stringify(a.taskStates().terminal)))"], { cwd: cloned, env, encoding: "utf8" });
  assert.match(states, /TASK_STATE_COMPLETED/);
});
