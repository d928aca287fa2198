/**
 * A minimal Chrome DevTools Protocol client for wrangler dev's inspector port.
 *
 * DESCRIPTION
 *   cdp(port)                   a session with the Worker's target: send(method, params) resolves
 *                               with the result; close(). CPU profiles of the Worker's thread
 *                               (bench/profile.ts, bench:backlog --profile).
 *   stopNetworkCapture(port)    sends Network.disable to the Worker's runtime (see WHY).
 *
 * WHY stopNetworkCapture
 *   wrangler dev's inspector proxy (a Worker of its own, InspectorProxyWorker) opens a DevTools
 *   session with the user Worker at start and enables the Network domain on it, whether or not
 *   DevTools is attached. From then on, every subrequest the Worker makes (a local D1 query is
 *   one, its result in the event) costs three Network events: serialised by workerd, parsed by
 *   the proxy, sent to wrangler's Node process and formatted, with its body, into wrangler's
 *   debug log file (~/.config/.wrangler/logs, written whatever --log-level says); while no
 *   DevTools is attached, the proxy also keeps every event in memory, unread. The proxy forwards
 *   a DevTools client's commands on that same session, so one Network.disable ends it (until
 *   the proxy opens a new session: a restart of the runtime, which a frozen bundle never has).
 *   Measured with bench:backlog --backlog 0 (one run each, same machine): with the capture on,
 *   64 submission loops cut delivery to 0.31 of the empty queue's rate; with it off, 0.64. No
 *   such capture exists in production; the dev servers of tests and benches turn it off.
 *
 * ERRORS
 *   Rejects when the inspector has no target or the WebSocket does not open; a command's error
 *   rejects its send().
 */
import WebSocket from "ws";

export interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
export interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/**
 * The time each sample of a profile stands for, ms: its delta from the sample before, but at most
 * GAP_INTERVALS sampling intervals (`intervalUs`, as given to Profiler.setSamplingInterval).
 * On this machine's two shared cores the sampler thread is often not scheduled: in a bench:mix
 * profile at 1 ms the median delta was 2.2 ms, and the few deltas above 5 ms (the largest 1.8 s)
 * held 41 of its 46 sampled seconds. Such a delta is mostly time the thread was idle, and the one
 * sample after it was charged all of it: a class that runs after idle time (an alarm) looked
 * several times its cost, and the sampled total came to twice the CPU /proc measured.
 */
export function sampleMs(p: Profile, intervalUs: number): number[] {
  const cap = (GAP_INTERVALS * intervalUs) / 1000;
  return p.samples.map((_, i) => Math.min(cap, (p.timeDeltas[i] ?? 0) / 1000));
}
/** A sample stands for at most this many sampling intervals (sampleMs). */
export const GAP_INTERVALS = 4;

/** A CDP session over wrangler's inspector proxy. */
export async function cdp(
  port: number,
): Promise<{ send: (method: string, params?: object) => Promise<unknown>; close: () => void }> {
  const targets = (await (await fetch(`http://127.0.0.1:${port}/json`)).json()) as {
    webSocketDebuggerUrl: string;
    title?: string;
  }[];
  const target = targets.find((t) => t.title?.includes("cohort")) ?? targets[0];
  if (!target) throw new Error("no inspector target");
  // wrangler's inspector proxy wants an allowed Origin from a client that sends a User-Agent.
  const ws = new WebSocket(target.webSocketDebuggerUrl, {
    headers: { origin: "http://localhost", "user-agent": "cohort-cdp" },
  });
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  let next = 1;
  const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  ws.on("message", (data) => {
    const msg = JSON.parse(String(data)) as { id?: number; result?: unknown; error?: unknown };
    const w = msg.id === undefined ? undefined : waiting.get(msg.id);
    if (!w) return;
    waiting.delete(msg.id!);
    if (msg.error) w.reject(new Error(JSON.stringify(msg.error)));
    else w.resolve(msg.result);
  });
  ws.on("close", () => {
    for (const w of waiting.values()) w.reject(new Error("inspector session closed"));
    waiting.clear();
  });
  return {
    send: (method, params = {}) =>
      new Promise((resolve, reject) => {
        const id = next++;
        waiting.set(id, { resolve, reject });
        ws.send(JSON.stringify({ id, method, params }));
      }),
    close: () => ws.close(),
  };
}

/** Turns off the Network events wrangler's inspector proxy asks of the Worker (see WHY). */
export async function stopNetworkCapture(port: number): Promise<void> {
  const session = await cdp(port);
  try {
    await session.send("Network.disable");
  } finally {
    session.close();
  }
}
