// Set-up is idempotent and quick: run again with nothing changed it builds nothing and runs
// no cargo, and napi's build and a plain cargo command after `. tools/setup.sh` share one
// build of the crate (napi's variables no longer make either compile it again).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import test from "node:test";
import { repoRoot } from "./helpers/pi.ts";

const bash = (script: string) => {
  const r = spawnSync("bash", ["-c", script], { cwd: repoRoot, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], maxBuffer: 64 << 20 });
  assert.equal(r.status, 0, `${script}\n${r.stderr}`);
  return r;
};

test("a second set-up builds nothing and runs no cargo", () => {
  bash(". tools/setup.sh");
  // cargo is not even reachable: a current addon needs none.
  const again = bash('PATH=/usr/bin:/bin; . tools/setup.sh; command -v cargo || echo "no cargo"');
  assert.doesNotMatch(again.stderr, /building the Rust addon/);
  assert.match(again.stdout, /no cargo/);
});

test("napi's build and cargo test after set-up share one build of the crate", () => {
  const napi = bash(". tools/setup.sh && npm run --silent build >/dev/null");
  assert.doesNotMatch(napi.stderr, /Compiling a2a-task-plane/, "napi's build compiled the crate again");
  const cargo = bash(". tools/setup.sh && cargo test --release --no-run --message-format=json");
  const lib = cargo.stdout
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l))
    .filter((m) => m.reason === "compiler-artifact" && m.target.name === "a2a_task_plane" && !m.profile.test);
  assert.equal(lib.length, 1, cargo.stdout);
  assert.equal(lib[0].fresh, true, "cargo test compiled the crate again");
  const again = bash(". tools/setup.sh && npm run --silent build >/dev/null");
  assert.doesNotMatch(again.stderr, /Compiling a2a-task-plane/, "napi's build after cargo test compiled the crate again");
});
