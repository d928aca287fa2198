/**
 * Gates for the egress pool tests (started by sink-setup.ts, in Node): each gate is a TCP port
 * that forwards to Dante's SOCKS5 port while it is up, and drops every connection at once while
 * it is down, so that an egress of a pool can fail and come back while the path it stands for is
 * still the real SOCKS5 bridge; closing a gate also cuts the tunnels open through it (a cached
 * connection of a delivery agent fails its next use). An HTTP control server on 127.0.0.1 answers
 *   POST /gates/<name>/up | /gates/<name>/down   and   GET /gates → { <name>: { up, connections } }.
 */
import { createServer as createHttpServer } from "node:http";
import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";

export interface Gates {
  ports: Record<string, number>;
  controlUrl: string;
  close(): Promise<void>;
}

export async function startGates(names: string[], targetPort: number): Promise<Gates> {
  const state = new Map(names.map((n) => [n, { up: true, connections: 0 }]));
  const sockets = new Set<Socket>();
  const open = new Map(names.map((n) => [n, new Set<Socket>()]));
  const servers: Server[] = [];
  const ports: Record<string, number> = {};
  for (const name of names) {
    const server = createServer((client) => {
      const s = state.get(name)!;
      s.connections++;
      sockets.add(client);
      client.on("close", () => sockets.delete(client));
      client.on("error", () => undefined);
      if (!s.up) return void client.destroy();
      const upstream = connect(targetPort, "127.0.0.1");
      sockets.add(upstream);
      open.get(name)!.add(client);
      client.on("close", () => open.get(name)!.delete(client));
      upstream.on("close", () => sockets.delete(upstream));
      upstream.on("error", () => client.destroy());
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    ports[name] = (server.address() as AddressInfo).port;
    servers.push(server);
  }
  const control = createHttpServer((req, res) => {
    const m = /^\/gates\/([^/]+)\/(up|down)$/.exec(req.url ?? "");
    if (req.method === "POST" && m && state.has(m[1]!)) {
      state.get(m[1]!)!.up = m[2] === "up";
      if (m[2] === "down") for (const c of open.get(m[1]!)!) c.destroy();
      return void res.writeHead(204).end();
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(Object.fromEntries(state)));
  });
  await new Promise<void>((resolve) => control.listen(0, "127.0.0.1", resolve));
  return {
    ports,
    controlUrl: `http://127.0.0.1:${(control.address() as AddressInfo).port}/gates`,
    close: async () => {
      for (const s of sockets) s.destroy();
      await Promise.all([...servers, control].map((s) => new Promise<void>((r) => s.close(() => r()))));
    },
  };
}
