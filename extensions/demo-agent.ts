// The OFFLINE DEMO AGENT: a scripted stand-in for a model (Pi's faux provider), so a
// newcomer can watch an A2A Task go from `curl` to COMPLETED without any API key. It is
// not an LLM: it reads the task and answers with a fixed, clearly labelled echo.
// Loaded only by `--demo` (`bash tools/run.sh --demo`, `a2a-task-plane resident --demo`); never
// by the package as an extension.
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { fauxAssistantMessage, fauxProvider, fauxText, fauxToolCall } from "@earendil-works/pi-ai";

type Msg = { role: string; content?: unknown; toolName?: string; isError?: boolean };
const textOf = (m: Msg | undefined): string =>
  typeof m?.content === "string" ? m.content : Array.isArray(m?.content) ? m.content.map((c: { text?: string }) => c.text ?? "").join("") : "";

export default function demoAgent(pi: ExtensionAPI): void {
  const faux = fauxProvider({ provider: "a2a-demo", models: [{ id: "scripted-demo-agent" }] });
  const step = (context: { messages: Msg[] }) => {
    const messages = context.messages;
    const last = messages[messages.length - 1];
    const wake = [...messages].reverse().find((m) => m.role === "user" && /\[a2a\] Task (\S+)/.test(textOf(m)));
    const taskId = /\[a2a\] Task (\S+)/.exec(textOf(wake))?.[1];
    if (last?.role === "user" && taskId && textOf(last).includes("[a2a] Task")) {
      return fauxAssistantMessage([fauxText("[demo agent] reading the task"), fauxToolCall("a2a_read_task", { taskId })], { stopReason: "toolUse" });
    }
    if (last?.role === "toolResult" && last.toolName === "a2a_read_task" && taskId && !last.isError) {
      const said = textOf(last)
        .split("\n")
        .filter((l) => l.startsWith("| ") && !l.startsWith("| ["))
        .map((l) => l.slice(2))
        .join(" / ");
      const response = `[offline demo agent: scripted, not a model] I received your task: "${said}". Configure a real model in Pi to have it worked on.`;
      return fauxAssistantMessage([fauxToolCall("a2a_complete_task", { taskId, outcome: "completed", response })], { stopReason: "toolUse" });
    }
    if (last?.role === "toolResult") return fauxAssistantMessage(`[demo agent] ${textOf(last)}`);
    return fauxAssistantMessage("[offline demo agent] I only work A2A tasks: send one to the listener (see the README).");
  };
  faux.setResponses(Array.from({ length: 10_000 }, () => step));
  pi.registerProvider(faux.provider);
}
