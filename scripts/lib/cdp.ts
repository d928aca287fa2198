/**
 * A minimal Chrome DevTools Protocol client for wrangler dev's inspector port (CPU profiles of
 * the Worker's thread): scripts/profile-relay.ts and bench:backlog --profile use it.
 * Node 20 needs --experimental-websocket for the global WebSocket.
 */
export interface ProfileNode { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }
export interface Profile { nodes: ProfileNode[]; startTime: number; endTime: number; samples: number[]; timeDeltas: number[] }

/** A minimal CDP session over wrangler's inspector proxy. */
export async function cdp(port: number): Promise<{ send: (method: string, params?: object) => Promise<unknown>; close: () => void }> {
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json`)).json()) as { webSocketDebuggerUrl: string; title?: string }[];
  const target = targets.find((t) => t.title?.includes("cohort")) ?? targets[0];
  if (!target) throw new Error("no inspector target");
  // wrangler's inspector proxy wants an allowed Origin from a client that sends a User-Agent.
  const ws = new WebSocket(target.webSocketDebuggerUrl, { headers: { origin: "http://localhost" } } as unknown as string[]);
  await new Promise((resolve, reject) => { ws.addEventListener("open", resolve, { once: true }); ws.addEventListener("error", reject, { once: true }); });
  let next = 1;
  const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  ws.addEventListener("message", (ev: { data: unknown }) => {
    const msg = JSON.parse(String(ev.data)) as { id?: number; result?: unknown; error?: unknown };
    const w = msg.id === undefined ? undefined : waiting.get(msg.id);
    if (!w) return;
    waiting.delete(msg.id!);
    if (msg.error) w.reject(new Error(JSON.stringify(msg.error)));
    else w.resolve(msg.result);
  });
  return {
    send: (method, params = {}) => new Promise((resolve, reject) => { const id = next++; waiting.set(id, { resolve, reject }); ws.send(JSON.stringify({ id, method, params })); }),
    close: () => ws.close(),
  };
}

