// A2A over plain fetch for tests that drive a running resident: waiting for a Task to
// finish by subscribing to it (its updates arrive as they are committed), not by polling.

const TERMINAL = new Set(["TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"]);

/**
 * Waits until the Task is terminal and resolves with its state: subscribes
 * (`GET /tasks/{id}:subscribe`) and reads its updates as they come; a Task that is terminal
 * already (subscribe refuses it) is read with `GET /tasks/{id}`. Fails after `ms`, naming
 * the last state seen.
 */
export async function terminalState(url: string, token: string, taskId: string, ms: number): Promise<string> {
  const headers = { Authorization: `Bearer ${token}`, "A2A-Version": "1.0" };
  const signal = AbortSignal.timeout(ms);
  let state = "(none)";
  try {
    const res = await fetch(`${url}/tasks/${taskId}:subscribe`, { headers, signal });
    if (res.status === 400) {
      // UNSUPPORTED_OPERATION: terminal already.
      await res.body?.cancel();
      const got = await fetch(`${url}/tasks/${taskId}`, { headers, signal });
      return (await got.json()).status.state;
    }
    if (res.status !== 200 || !res.body) throw new Error(`subscribe answered ${res.status}: ${await res.text()}`);
    const decoder = new TextDecoder();
    let pending = "";
    for await (const chunk of res.body) {
      pending += decoder.decode(chunk, { stream: true });
      for (let end = pending.indexOf("\n\n"); end >= 0; end = pending.indexOf("\n\n")) {
        const data = pending
          .slice(0, end)
          .split("\n")
          .find((l) => l.startsWith("data: "));
        pending = pending.slice(end + 2);
        if (!data) continue; // a keep-alive
        const event = JSON.parse(data.slice("data: ".length));
        state = event.task?.status?.state ?? event.statusUpdate?.status?.state ?? state;
        // Leaving the loop cancels the stream (the connection is let go).
        if (TERMINAL.has(state)) return state;
      }
    }
    throw new Error(`the stream of task ${taskId} ended at ${state}`);
  } catch (err) {
    if (signal.aborted) throw new Error(`task ${taskId} was not terminal within ${ms} ms (last seen: ${state})`);
    throw err;
  }
}
