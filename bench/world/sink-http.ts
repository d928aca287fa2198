/**
 * An HTTP view of a world sink (sink.ts), for tests that run in the Workers runtime and cannot
 * call into the Node process that holds the sink.
 *
 * DESCRIPTION
 *   serveSinkView(sink)  an HTTP server on 127.0.0.1, port 0, answering (JSON):
 *     GET /stats                  the counters (SinkStats, without the idle gaps);
 *     GET /recipient?address=A    { delivered: [epoch ms…], greylist: GreylistRecord | null }.
 *   Returns { url, close }.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { WorldSink } from "./sink";

/** Starts the view (see the header). */
export function serveSinkView(sink: WorldSink): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const json = (body: unknown) =>
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
    if (url.pathname === "/stats") {
      const { idleGapsMs: _gaps, ...counts } = sink.stats();
      return json(counts);
    }
    if (url.pathname === "/recipient") {
      const a = (url.searchParams.get("address") ?? "").toLowerCase();
      return json({ delivered: sink.deliveries().get(a) ?? [], greylist: sink.greylist().get(a) ?? null });
    }
    res.writeHead(404).end();
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}`,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}
