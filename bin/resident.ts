#!/usr/bin/env node
// The resident agent as a service: Pi (through its SDK, in this process) with this package
// loaded as an extension and no terminal, no input and no screen. It stays up until SIGTERM
// or SIGINT, then shuts down cleanly: the extension's session_shutdown stops the driver
// (an in-flight turn is aborted and left replayable), closes the listener (its streams end)
// and the store; exit status 0. SIGHUP never stops it: it reloads the credentials file and
// runs retention (the extension's `a2a:reload`). If the task plane cannot start, it prints
// one line naming the cause and the fix and exits 1. Log lines (JSON) go to stderr and to
// the log file.
//
//   a2a-task-plane resident [--demo] [--provider P --model M] [--thinking L]
//
// (bin/a2a-task-plane.js loads it; `bash tools/run.sh --headless` from a clone runs the same.)
// As a service it serves A2A unless told otherwise: see serviceDefaults.
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  type CreateAgentSessionRuntimeFactory,
  createAgentSessionFromServices,
  createAgentSessionRuntime,
  createAgentSessionServices,
  createEventBus,
  getAgentDir,
  resolveCliModel,
  SessionManager,
} from "@earendil-works/pi-coding-agent";

const packageRoot = join(dirname(fileURLToPath(import.meta.url)), "..");
const NAME = "a2a-resident";

const USAGE = `usage: a2a-task-plane resident [--demo] [--provider <name> --model <pattern>] [--thinking <level>]

Runs the resident Pi agent with the A2A task plane and no terminal, until SIGTERM or SIGINT.
SIGHUP reloads the credentials file and runs retention; the resident keeps running.
  --demo               use the offline demo agent (scripted, not a model; no key needed)
  --provider, --model  the model that works the tasks (default: Pi's configured default)
  --thinking           the thinking level (off, minimal, low, medium, high, xhigh)
The task plane reads its A2A_* and CHANNELS_TASK_STORE_PATH variables (see the README).
Unless set: A2A_SERVER=1 (serve A2A over HTTP) and A2A_CREDENTIALS_PATH=
\${XDG_DATA_HOME:-~/.local/share}/outfitter/channels/a2a-credentials.json, created once
(mode 0600) with a random bearer token for principal 'local'.`;

/** One line on stderr for a person (or journald), then exit. */
function fail(text: string, code = 1): never {
  process.stderr.write(`${NAME}: ${text}\n`);
  process.exit(code);
}

interface Options {
  demo: boolean;
  provider?: string;
  model?: string;
  thinking?: string;
}

function parseArgs(argv: string[]): Options {
  const options: Options = { demo: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined || v.startsWith("--")) fail(`${arg} needs a value\n${USAGE}`, 2);
      return v;
    };
    if (arg === "--help" || arg === "-h") {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    } else if (arg === "--demo") options.demo = true;
    else if (arg === "--provider") options.provider = value();
    else if (arg === "--model") options.model = value();
    else if (arg === "--thinking") options.thinking = value();
    else fail(`unknown argument ${arg}\n${USAGE}`, 2);
  }
  if (options.demo && (options.provider || options.model)) fail("--demo brings its own model; leave out --provider/--model", 2);
  if (options.provider && !options.model) fail(`--provider needs --model (for example --provider ${options.provider} --model <pattern>)`, 2);
  if (options.demo) {
    options.provider = "a2a-demo";
    options.model = "scripted-demo-agent";
  }
  return options;
}

/**
 * A resident serves A2A: the listener is on unless A2A_SERVER says otherwise, and without
 * A2A_CREDENTIALS_PATH a credentials file is made once (mode 0600, in a 0700 folder) with a
 * random token for principal 'local'. The token is never printed: a service's output is a log.
 */
function serviceDefaults(): void {
  if (!process.env.A2A_SERVER) process.env.A2A_SERVER = "1";
  if (process.env.A2A_CREDENTIALS_PATH) return;
  const dir = join(process.env.XDG_DATA_HOME || join(homedir(), ".local", "share"), "outfitter", "channels");
  const file = join(dir, "a2a-credentials.json");
  process.env.A2A_CREDENTIALS_PATH = file;
  if (existsSync(file)) return;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const credentials = { credentials: [{ token: randomBytes(32).toString("hex"), principal: "local" }] };
  writeFileSync(file, `${JSON.stringify(credentials)}\n`, { mode: 0o600, flag: "wx" });
  process.stderr.write(`${NAME}: created ${file} (mode 0600) with a bearer token for principal 'local'\n`);
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2));
  serviceDefaults();
  // Signals are caught from the start: one that arrives while the resident starts stops it
  // cleanly once it has started (the store is open by then and must be closed).
  const events = createEventBus();
  let stopRequested: string | undefined;
  let stopNow: ((signal: string) => void) | undefined;
  const onSignal = (signal: string) => (stopNow ? stopNow(signal) : (stopRequested ??= signal));
  process.on("SIGTERM", () => onSignal("SIGTERM"));
  process.on("SIGINT", () => onSignal("SIGINT"));
  // Node's default for SIGHUP ends the process (exit 129): a service reloads instead. One
  // that arrives before the extension listens changes nothing (it read the file at start).
  process.on("SIGHUP", () => events.emit("a2a:reload", { reason: "SIGHUP" }));
  const cwd = process.cwd();
  const agentDir = getAgentDir();
  const extensions = [packageRoot, ...(options.demo ? [join(packageRoot, "extensions", "demo-agent.ts")] : [])];
  const ready = new Promise<{ url?: string; store: string; log?: string; problems?: string[] }>((resolve) =>
    events.on("a2a:ready", (data) => resolve(data as { url?: string; store: string; log?: string; problems?: string[] })),
  );

  const createRuntime: CreateAgentSessionRuntimeFactory = async ({ cwd, agentDir, sessionManager, sessionStartEvent }) => {
    const services = await createAgentSessionServices({
      cwd,
      agentDir,
      resourceLoaderOptions: { additionalExtensionPaths: extensions, eventBus: events },
    });
    const loadErrors = services.resourceLoader.getExtensions().errors;
    if (loadErrors.length > 0) fail(`cannot load extension ${loadErrors[0].path}: ${loadErrors[0].error}`);
    let model;
    let thinkingLevel;
    if (options.model) {
      const resolved = resolveCliModel({
        cliProvider: options.provider,
        cliModel: options.model,
        cliThinking: options.thinking as never,
        modelRuntime: services.modelRuntime,
      });
      if (resolved.error || !resolved.model) fail(resolved.error ?? `no model matches ${options.model}`, 2);
      model = resolved.model;
      thinkingLevel = resolved.thinkingLevel;
    }
    if (options.thinking) thinkingLevel = options.thinking as never;
    const created = await createAgentSessionFromServices({ services, sessionManager, sessionStartEvent, model, thinkingLevel });
    return { ...created, services, diagnostics: services.diagnostics };
  };
  // The resident's own conversation is not kept: every Task has its own durable session.
  const runtime = await createAgentSessionRuntime(createRuntime, { cwd, agentDir, sessionManager: SessionManager.inMemory(cwd) });

  let startFailure: string | undefined;
  await runtime.session.bindExtensions({
    mode: "print",
    onError: (err) => {
      const ours = err.extensionPath.startsWith(packageRoot) && !err.extensionPath.includes("demo-agent");
      if (ours && err.event === "session_start") startFailure = err.error;
      else process.stderr.write(`${NAME}: extension ${err.extensionPath} failed in ${err.event}: ${err.error}\n`);
    },
  });
  if (startFailure) {
    await runtime.dispose().catch(() => undefined);
    fail(startFailure);
  }

  // Nothing else keeps Node's event loop alive while the resident waits for work.
  const keepAlive = setInterval(() => undefined, 1 << 30);
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) {
      process.stderr.write(`${NAME}: ${signal} again while stopping; exiting now\n`);
      process.exit(1);
    }
    stopping = true;
    clearInterval(keepAlive);
    runtime
      .dispose()
      .then(() => process.exit(0))
      .catch((err: unknown) => fail(`shutdown failed: ${err instanceof Error ? err.message : String(err)}`));
  };
  stopNow = stop;
  if (stopRequested) return stop(stopRequested);
  // Input is never read: a closed or /dev/null stdin changes nothing.

  const info = await Promise.race([ready, new Promise<undefined>((r) => void setTimeout(r, 5_000))]);
  const model = runtime.session.model;
  const modelName = model && model.provider !== "unknown" ? `${model.provider}/${model.id}` : "none";
  // A problem the task plane runs with (a workflow manifest that did not load) is part of
  // the one line a service's operator reads.
  const problems = (info?.problems ?? []).map((p) => ` PROBLEM: ${p}.`).join("");
  process.stderr.write(
    info
      ? `${NAME}: running (pid ${process.pid}); A2A listener ${info.url ?? "off (A2A_SERVER is not 1)"}; store ${info.store}; log ${info.log ?? "stderr only"}; model ${modelName}. Stop with SIGTERM; reload credentials with SIGHUP.${problems}\n`
      : `${NAME}: running (pid ${process.pid}); model ${modelName}. Stop with SIGTERM; reload credentials with SIGHUP.\n`,
  );
}

main().catch((err: unknown) => fail(err instanceof Error ? err.message : String(err)));
