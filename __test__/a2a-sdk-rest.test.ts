// The official @a2a-js/sdk client over HTTP+JSON (its RestTransport, unchanged, chosen
// from our Agent Card, bearer token) plays the shared scenarios (helpers/sdk-scenarios.ts)
// against our listener.
import assert from "node:assert/strict";
import { RestTransportFactory } from "@a2a-js/sdk/client";
import { overFetch, sdkScenarios } from "./helpers/sdk-scenarios.ts";
import type { Named } from "./helpers/sdk-messages.ts";

sdkScenarios({
  name: "HTTP+JSON",
  ...overFetch("HTTP+JSON", (fetchImpl) => new RestTransportFactory({ fetchImpl })),
  // DUPLICATE_MESSAGE_ID is not a reason the SDK types: its error keeps the 409 and our text.
  isConflict: (err) => {
    const e = err as Named & { statusCode?: number };
    assert.equal(e.statusCode, 409, `${e.name}: ${e.message}`);
    assert.match(e.message, /already used with a different payload/);
    return true;
  },
  isUnauthenticated: (err) => {
    const e = err as Named & { statusCode?: number };
    assert.equal(e.statusCode, 401);
    assert.match(e.message, /bearer token is required/);
    return true;
  },
});
