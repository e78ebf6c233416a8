// The official @a2a-js/sdk client over JSON-RPC (its JsonRpcTransport, unchanged, chosen
// from our Agent Card) plays the shared scenarios (helpers/sdk-scenarios.ts) against our
// listener.
import assert from "node:assert/strict";
import {
  ClientFactory,
  ClientFactoryOptions,
  createAuthenticatingFetchWithRetry,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";
import { sdkScenarios } from "./helpers/sdk-scenarios.ts";
import type { Named } from "./helpers/sdk-messages.ts";

/** A client that speaks JSON-RPC only, through `fetchImpl`: it finds the JSONRPC interface
 * in the card. */
function jsonRpcClient(url: string, fetchImpl: typeof fetch) {
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
      preferredTransports: ["JSONRPC"],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    }),
  );
  return factory.createFromUrl(url);
}

sdkScenarios({
  name: "JSON-RPC",
  clientFor: (url, token) =>
    jsonRpcClient(
      url,
      createAuthenticatingFetchWithRetry(fetch, {
        headers: async () => ({ Authorization: `Bearer ${token}` }),
        shouldRetryWithHeaders: async () => undefined,
      }),
    ),
  // A fetch that rewrites the header plays a client of a later version.
  laterVersionClient: (url, token, version) =>
    jsonRpcClient(url, (input, init) => {
      const headers = new Headers(init?.headers);
      headers.set("A2A-Version", version);
      headers.set("Authorization", `Bearer ${token}`);
      return fetch(input, { ...init, headers });
    }),
  // JSON-RPC's code for it is Invalid params; the ErrorInfo in `data` names the reason.
  isConflict: (err) => {
    const e = err as Named & { data?: { reason?: string }[] };
    assert.equal(e.name, "RequestMalformedError");
    assert.equal(e.data?.[0]?.reason, "DUPLICATE_MESSAGE_ID");
    return true;
  },
});
