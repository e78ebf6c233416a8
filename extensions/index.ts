// The Pi extension of the A2A task plane. The factory only registers (Pi runs factories in
// invocations that never start a session); everything it opens is opened on
// `session_start` and closed on `session_shutdown`, so /new, /resume, /fork and /reload
// close and reopen cleanly in one process. All rules live in the Rust addon.
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { protocolVersion } from "../index.js";

export default function a2aTaskPlane(pi: ExtensionAPI): void {
  pi.registerCommand("a2a", {
    description: "Show the A2A task plane's status",
    handler: async (_args, ctx) => {
      ctx.ui.notify(`A2A task plane loaded: protocol ${protocolVersion()} (HTTP+JSON)`, "info");
    },
  });
}
