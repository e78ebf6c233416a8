// Real Pi (headless, RPC mode) loads this package as an extension from its directory, the
// way `pi -e <dir>` and a settings.json package entry do, and its command calls into Rust.
import assert from "node:assert/strict";
import test from "node:test";
import { PiRpc, repoRoot } from "./helpers/pi.ts";

test("pi loads the package and its /a2a command reports from the Rust addon", async () => {
  const pi = new PiRpc([repoRoot]);
  try {
    const commands = await pi.call({ type: "get_commands" });
    assert.equal(commands.success, true, JSON.stringify(commands));
    const list = (commands.data as { commands: { name: string; source: string }[] }).commands;
    const a2a = list.find((c) => c.name === "a2a");
    assert.ok(a2a, `no a2a command among ${JSON.stringify(list.map((c) => c.name))}`);
    assert.equal(a2a.source, "extension");

    const notified = pi.waitFor((r) => r.type === "extension_ui_request" && r.method === "notify");
    const handled = await pi.call({ type: "prompt", message: "/a2a" });
    assert.equal(handled.success, true, JSON.stringify(handled));
    const notice = await notified;
    assert.match(String(notice.message), /A2A task plane loaded: protocol 1\.0/);
  } finally {
    assert.equal(await pi.close(), 0, pi.stderr);
  }
  assert.doesNotMatch(pi.stderr, /Extension error|Failed to load extension/);
});
