/**
 * Webhook receivers for the tests (Node, node:http on 127.0.0.1): real HTTP servers that record
 * every request and answer as scripted, driven by the Workers-runtime tests over a small
 * control API. Also used by bench/webhooks.ts.
 *
 * DESCRIPTION
 *   startReceiverControl()  listens on 127.0.0.1, port 0, and answers:
 *     POST /receivers                 starts a receiver on a free port → { id, port }
 *     PUT  /receivers/:id/script      [{ status, retryAfter?, headers?, delayMs? }, …]: the answers
 *                                     to the next requests, in order; afterwards `default` (200)
 *     PUT  /receivers/:id/default     { status, delayMs? }: the answer once the script is used up
 *     POST /receivers/:id/down        closes the listener and drops open connections
 *                                     (connection refused until up)
 *     POST /receivers/:id/up          listens again on the same port
 *     GET  /receivers/:id/log         [{ headers, body, status, at }], oldest first
 *   Returns { url, receivers, close }; close stops every receiver.
 *   startReceiver()         one receiver, for in-process use (the benchmark).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

/** One recorded request. */
export interface Delivery {
  headers: Record<string, string>;
  body: string;
  status: number;
  at: number;
}

/** A scripted answer. */
export interface Answer {
  status: number;
  retryAfter?: string;
  /** Wait this long before answering, ms. */
  delayMs?: number;
  headers?: Record<string, string>;
}

/** A running receiver. */
export interface Receiver {
  port: number;
  log: Delivery[];
  script: Answer[];
  defaultStatus: number;
  /** Delay of the default answer, ms. */
  defaultDelayMs: number;
  down: () => Promise<void>;
  up: () => Promise<void>;
  close: () => Promise<void>;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

function listen(server: Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** Starts one recording receiver on a free loopback port. */
export async function startReceiver(): Promise<Receiver> {
  const sockets = new Set<Socket>();
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const body = await readBody(req);
    const at = Date.now();
    const answer = r.script.shift() ?? { status: r.defaultStatus, delayMs: r.defaultDelayMs };
    if (answer.delayMs) await new Promise((done) => setTimeout(done, answer.delayMs));
    const headers = Object.fromEntries(
      Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(", ") : (v ?? "")]),
    );
    r.log.push({ headers, body, status: answer.status, at });
    res.writeHead(answer.status, {
      "content-type": "text/plain",
      ...(answer.retryAfter ? { "retry-after": answer.retryAfter } : {}),
      ...(answer.headers ?? {}),
    });
    res.end("ok");
  };
  let server = createServer((req, res) => void handle(req, res));
  const track = (s: Server) =>
    s.on("connection", (sock: Socket) => {
      sockets.add(sock);
      sock.on("close", () => sockets.delete(sock));
    });
  track(server);
  const port = await listen(server, 0);
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });
  const r: Receiver = {
    port,
    log: [],
    script: [],
    defaultStatus: 200,
    defaultDelayMs: 0,
    down: stop,
    up: async () => {
      server = createServer((req, res) => void handle(req, res));
      track(server);
      await listen(server, port);
    },
    close: () => (server.listening ? stop() : Promise.resolve()),
  };
  return r;
}

/** The control API (see the header). */
export async function startReceiverControl(): Promise<{ url: string; close: () => Promise<void> }> {
  const receivers = new Map<string, Receiver>();
  let next = 1;
  const json = (res: ServerResponse, status: number, v: unknown) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(v));
  };
  const route = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://control");
    const body = await readBody(req);
    if (req.method === "POST" && url.pathname === "/receivers") {
      const rcv = await startReceiver();
      const id = String(next++);
      receivers.set(id, rcv);
      return json(res, 201, { id, port: rcv.port });
    }
    const m = /^\/receivers\/(\d+)\/(script|default|down|up|log)$/.exec(url.pathname);
    const rcv = m ? receivers.get(m[1]!) : undefined;
    if (!m || !rcv) return json(res, 404, { error: "no such receiver" });
    const action = m[2];
    if (action === "script") rcv.script.push(...(JSON.parse(body) as Answer[]));
    else if (action === "default") {
      const d = JSON.parse(body) as { status: number; delayMs?: number };
      rcv.defaultStatus = d.status;
      rcv.defaultDelayMs = d.delayMs ?? 0;
    } else if (action === "down") await rcv.down();
    else if (action === "up") await rcv.up();
    else return json(res, 200, rcv.log);
    return json(res, 200, { ok: true });
  };
  const control = createServer((req, res) => {
    route(req, res).catch((e: unknown) => json(res, 500, { error: String(e) }));
  });
  const port = await listen(control, 0);
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      await Promise.all([...receivers.values()].map((r) => r.close()));
      await new Promise<void>((resolve) => control.close(() => resolve()));
    },
  };
}
