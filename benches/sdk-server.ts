// The comparison target of `benches/compare-sdk.sh`: the official @a2a-js/sdk server with
// its in-memory task store, on 127.0.0.1, serving both of the SDK's HTTP bindings from one
// request handler (HTTP+JSON at /a2a, JSON-RPC at /jsonrpc, both listed in its Agent Card,
// where the load generator finds the JSON-RPC one), its gRPC service (`grpcService` on
// @grpc/grpc-js, on a port of its own, listed as GRPC) on the same handler and store, and
// an executor that settles every Task at once (the same work our benchmark's agent does).
// Not part of the product.
// Run: node benches/sdk-server.ts   → prints "LISTENING <HTTP+JSON interface url>"
import * as grpc from "@grpc/grpc-js";
import express from "express";
import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import { TaskState, type AgentCard } from "@a2a-js/sdk";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server";
import type { AgentExecutor, ExecutionEventBus, RequestContext } from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from "@a2a-js/sdk/server/express";
import { A2AService, grpcService } from "@a2a-js/sdk/server/grpc";

class SettleAtOnce implements AgentExecutor {
  async execute(ctx: RequestContext, bus: ExecutionEventBus): Promise<void> {
    bus.publish(
      AgentEvent.task({
        id: ctx.taskId,
        contextId: ctx.contextId,
        status: { state: TaskState.TASK_STATE_COMPLETED, timestamp: new Date().toISOString(), message: undefined },
        history: [ctx.userMessage],
        artifacts: [
          {
            artifactId: randomUUID(),
            name: "answer",
            description: "",
            metadata: undefined,
            extensions: [],
            parts: [{ content: { $case: "text", value: "done" }, metadata: undefined, filename: "", mediaType: "text/plain" }],
          },
        ],
        metadata: undefined,
      }),
    );
    bus.finished();
  }
  async cancelTask(): Promise<void> {}
}

const grpcServer = new grpc.Server();
const grpcPort = await new Promise<number>((resolve, reject) =>
  grpcServer.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) =>
    err ? reject(err) : resolve(port),
  ),
);
const app = express();
const server = app.listen(0, "127.0.0.1", () => {
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const card = {
    name: "sdk-reference",
    description: "official SDK server for comparison",
    version: "1.0.0",
    supportedInterfaces: [
      { url: `${base}/a2a`, protocolBinding: "HTTP+JSON", protocolVersion: "1.0", tenant: "" },
      // The SDK's JSON-RPC handler serves only a version its card lists for JSONRPC.
      { url: `${base}/jsonrpc`, protocolBinding: "JSONRPC", protocolVersion: "1.0", tenant: "" },
      { url: `127.0.0.1:${grpcPort}`, protocolBinding: "GRPC", protocolVersion: "1.0", tenant: "" },
    ],
    capabilities: { streaming: true, pushNotifications: false, extensions: [] },
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: [],
    securitySchemes: {},
    securityRequirements: [],
    signatures: [],
  } as unknown as AgentCard;
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new SettleAtOnce());
  app.use("/.well-known/agent-card.json", agentCardHandler({ agentCardProvider: handler }));
  app.use("/a2a", restHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  app.use("/jsonrpc", jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  grpcServer.addService(A2AService, grpcService({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
  console.log(`LISTENING ${base}/a2a`);
});
process.on("SIGTERM", () => {
  grpcServer.forceShutdown();
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
