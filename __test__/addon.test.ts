// The addon loads under Node 22 and its first exports call into Rust.
import assert from "node:assert/strict";
import test from "node:test";
import { normalizeMessage, normalizeSendMessageRequest, protocolVersion, taskStates } from "../index.js";

test("protocolVersion comes from Rust", () => {
  assert.equal(protocolVersion(), "1.0");
});

test("the sets of Task states come from Rust: each state is active, interrupted or terminal", () => {
  const { active, interrupted, terminal } = taskStates();
  assert.deepEqual(active, ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"]);
  assert.deepEqual(interrupted, ["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"]);
  assert.deepEqual(terminal, ["TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"]);
});

test("normalizeMessage returns canonical ProtoJSON", () => {
  const input = JSON.stringify({
    message_id: "m-1", // snake_case is accepted on input
    role: "ROLE_USER",
    parts: [{ text: "hi" }, { data: { days: 3 } }],
    contextId: "",
  });
  assert.equal(normalizeMessage(input), '{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"hi"},{"data":{"days":3}}]}');
});

test("a malformed Message is an error that names the field", () => {
  assert.throws(
    () => normalizeMessage('{"messageId":"m","role":"ROLE_USER","parts":[{"text":7}]}'),
    (err: Error) => {
      assert.match(err.message, /invalid Message: field `parts\[0\]\.text`: invalid type: integer `7`, expected a string/);
      assert.equal((err as Error & { code?: string }).code, "INVALID_ARGUMENT");
      return true;
    },
  );
  assert.throws(() => normalizeMessage('{"messageId":"m","role":"user","parts":[{"text":"x"}]}'), /field `role`/);
  assert.throws(() => normalizeMessage("not json"), /invalid Message/);
});

test("normalizeSendMessageRequest checks REQUIRED members", () => {
  assert.throws(() => normalizeSendMessageRequest("{}"), /field `message`: is required/);
  const ok = normalizeSendMessageRequest('{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{"returnImmediately":false}}');
  assert.equal(ok, '{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"configuration":{}}');
});
