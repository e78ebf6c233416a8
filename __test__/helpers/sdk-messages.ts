// What the @a2a-js/sdk scenario tests send and check, shared by the HTTP+JSON, JSON-RPC and gRPC ones.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import type { Message, SendMessageRequest } from "@a2a-js/sdk";
import { Role } from "@a2a-js/sdk";

export function message(text: string, taskId = "", contextId = "", messageId = randomUUID()): Message {
  return {
    messageId,
    contextId,
    taskId,
    role: Role.ROLE_USER,
    parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

export function request(msg: Message, returnImmediately = false): SendMessageRequest {
  const configuration = returnImmediately ? { acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately } : undefined;
  return { tenant: "", message: msg, configuration, metadata: undefined };
}

export const textOf = (parts: { content?: { $case: string; value?: unknown } }[] | undefined) =>
  (parts ?? []).map((p) => (p.content?.$case === "text" ? String(p.content.value) : "")).join("");

export type Named = Error & { reason?: string; name: string };
export const reasonIs = (reason: string) => (err: Named) => {
  assert.equal(err.reason, reason, `${err.name}: ${err.message}`);
  return true;
};
