// The official @a2a-js/sdk client over JSON-RPC (its JsonRpcTransport, unchanged, chosen
// from our Agent Card) plays the shared scenarios (helpers/sdk-scenarios.ts) against our
// listener.
import assert from "node:assert/strict";
import { JsonRpcTransportFactory } from "@a2a-js/sdk/client";
import { overFetch, sdkScenarios } from "./helpers/sdk-scenarios.ts";
import type { Named } from "./helpers/sdk-messages.ts";

sdkScenarios({
  name: "JSON-RPC",
  ...overFetch("JSONRPC", (fetchImpl) => new JsonRpcTransportFactory({ fetchImpl })),
  // JSON-RPC's code for it is Invalid params; the ErrorInfo in `data` names the reason.
  isConflict: (err) => {
    const e = err as Named & { data?: { reason?: string }[] };
    assert.equal(e.name, "RequestMalformedError");
    assert.equal(e.data?.[0]?.reason, "DUPLICATE_MESSAGE_ID");
    return true;
  },
  // Refused before JSON-RPC: the transport's error quotes the HTTP 401 and its body.
  isUnauthenticated: (err) => {
    const e = err as Error;
    assert.match(e.message, /Status: 401\b/);
    assert.match(e.message, /"reason":"UNAUTHENTICATED"/);
    assert.match(e.message, /bearer token is required/);
    return true;
  },
});
