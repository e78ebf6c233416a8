// The official @a2a-js/sdk client over gRPC (its GrpcTransport on @grpc/grpc-js, unchanged,
// dialing the GRPC interface our Agent Card lists) plays the shared scenarios
// (helpers/sdk-scenarios.ts) against our listener. The bearer token and a later client's
// `A2A-Version` travel as the SDK carries every header on gRPC: service parameters, sent
// as metadata.
import assert from "node:assert/strict";
import { ClientFactory, ClientFactoryOptions, type BeforeArgs, type CallInterceptor } from "@a2a-js/sdk/client";
import { GrpcTransportFactory } from "@a2a-js/sdk/client/grpc";
import { sdkScenarios } from "./helpers/sdk-scenarios.ts";

/** Sets service parameters (gRPC metadata) on every call, after the SDK's own. */
function metadata(entries: Record<string, string>): CallInterceptor {
  return {
    before: async (args: BeforeArgs) => {
      args.options = { ...args.options, serviceParameters: { ...args.options?.serviceParameters, ...entries } };
    },
    after: async () => {},
  };
}

/** A client that speaks gRPC only: it finds the GRPC interface in the card. */
function grpcClient(url: string, token: string, extra: Record<string, string> = {}) {
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new GrpcTransportFactory()],
      preferredTransports: ["GRPC"],
      clientConfig: { interceptors: [metadata({ authorization: `Bearer ${token}`, ...extra })] },
    }),
  );
  return factory.createFromUrl(url);
}

sdkScenarios({
  name: "gRPC",
  clientFor: (url, token) => grpcClient(url, token),
  // An interceptor after the SDK's own plays a client of a later version.
  laterVersionClient: (url, token, version) => grpcClient(url, token, { "A2A-Version": version }),
  // No typed error names the conflict: the status (ALREADY_EXISTS) and its ErrorInfo say it.
  isConflict: (err) => {
    const e = err as Error;
    assert.match(String(e.message), /messageId|ALREADY_EXISTS|DUPLICATE_MESSAGE_ID/, `${e.name}: ${e.message}`);
    return true;
  },
  // The status UNAUTHENTICATED (16) and our text, as the transport words it.
  isUnauthenticated: (err) => {
    const e = err as Error;
    assert.match(e.message, /: 16 a valid bearer token is required/, `${e.name}: ${e.message}`);
    return true;
  },
});
