#!/usr/bin/env node
// The package's command. `a2a-task-plane resident …` runs the resident agent as a service
// (bin/resident.ts); `status` and `cancel` talk to it (bin/operator.ts); every other command
// inspects a store (bin/inspect.ts).
// `a2a-task-plane --help` and `a2a-task-plane resident --help` for usage.
//
// Plain JavaScript on purpose: Node strips TypeScript types only outside node_modules, and
// an installed package lives there. The commands are loaded the way Pi loads extensions,
// with the jiti that Pi (a peer dependency) brings.
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const [command, ...rest] = process.argv.slice(2);
// `status` and `cancel` talk to the live resident (bin/operator.ts), after any --store.
const words = process.argv.slice(2).filter((arg, i, all) => !arg.startsWith("-") && all[i - 1] !== "--store");
const operator = ["status", "cancel"].includes(words[0]);
const script = command === "resident" ? "./resident.ts" : operator ? "./operator.ts" : "./inspect.ts";
const args = command === "resident" ? rest : process.argv.slice(2);

let createJiti;
try {
  const pi = import.meta.resolve("@earendil-works/pi-coding-agent");
  ({ createJiti } = await import(createRequire(pi).resolve("jiti")));
} catch {
  process.stderr.write(
    "a2a-task-plane: Pi is not installed next to this package (it is a peer dependency): npm install @earendil-works/pi-coding-agent\n",
  );
  process.exit(1);
}
// The command reads its arguments from process.argv, as when run on its own.
process.argv = [process.argv[0], fileURLToPath(new URL(script, import.meta.url)), ...args];
await createJiti(import.meta.url, { tryNative: true }).import(script);
