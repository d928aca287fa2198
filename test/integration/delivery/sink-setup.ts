/**
 * globalSetup of the `delivery` test project (runs in Node): starts the scripted SMTP sink
 * (scripts/lib/smtp-catcher.ts, smtp-server from npm) on 127.0.0.1, port 0, and hands its SMTP
 * and HTTP listing ports to the tests with `provide`, plus a port nothing listens on; and the
 * fixture DoH resolver (doh-server.ts), whose URL it provides as `doh`; and Dante (a real
 * SOCKS5 server, test/unit/net/dante.ts) with RFC 1929 username/password, provided as `socks`,
 * whose log the resolver serves at GET /log/socks. vitest.config.ts reads them for the project's
 * bindings (MX_PORT, DOH_RESOLVER_URL, EGRESS and its credentials). The scripted servers of
 * scripted-sinks.ts (a 5-session limit, a drop in DATA, a slow sink, a 554 greeting) are provided
 * as `scripted`; the MTA-STS world (sts-world.ts: policy server, rua receiver, MX sinks with a good,
 * a wrong-name and no certificate) as `sts`; two gates in front of Dante (gates.ts) for the egress
 * pools as `gates`; the small mail world of world.ts (its sink on the catcher's port at 127.78.x.y,
 * its names answered by the resolver) as `world`. Everything is stopped when the run ends.
 */
import { createServer, type AddressInfo } from "node:net";
import type { TestProject } from "vitest/node";
import { startCatcher } from "../../../scripts/lib/smtp-catcher";
import { DANTE_USER, startDante } from "../../unit/net/dante";
import { startDohServer } from "./doh-server";
import { startScriptedSinks } from "./scripted-sinks";
import { startStsWorld, stsRecords } from "./sts-world";
import { startGates } from "./gates";
import { worldDnsAnswer } from "../../../bench/world/doh";
import { startWorldSink } from "../../../bench/world/sink";
import { serveSinkView } from "../../../bench/world/sink-http";
import { TEST_WORLD } from "./world";

declare module "vitest" {
  export interface ProvidedContext {
    sink: { smtpPort: number; httpPort: number; closedPort: number };
    doh: { url: string };
    socks: { port: number; username: string; password: string };
    /** The scripted servers of scripted-sinks.ts: ports by name, and where their stats are read. */
    scripted: { ports: Record<string, number>; statsUrl: string };
    /** The MTA-STS world (sts-world.ts): the policy server's port, the rua receiver and its stats, the MX sinks' stats. */
    sts: { policyPort: number; ruaUrl: string; statsUrl: string; sinksUrl: string };
    /** Gates in front of Dante for the egress pool tests (gates.ts): their ports and the control URL. */
    gates: { ports: Record<string, number>; controlUrl: string };
    /** The mail world's sink (world.ts): where its view (bench/world/sink-http.ts) answers. */
    world: { viewUrl: string };
  }
}

/** A port that was free a moment ago and has no listener now. */
function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** Starts the sink and the resolver; returns their teardown. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const catcher = await startCatcher({ scripted: true });
  const dante = await startDante({ method: "username" });
  const sts = await startStsWorld(catcher.smtpPort);
  const gates = await startGates(["g1", "g2"], dante.port);
  const doh = await startDohServer({ socks: () => dante.log() }, stsRecords(sts.ruaUrl), worldDnsAnswer(TEST_WORLD));
  // The mail world's MX hosts listen on the catcher's port (MX_PORT), each at its own address.
  const world = await startWorldSink(TEST_WORLD, { port: catcher.smtpPort });
  const view = await serveSinkView(world);
  // limited: 5 sessions, then 421; drop: connection lost in DATA once per recipient set; slow:
  // 40 ms per message (eviction mid-run); cached: 20 ms per message (agents.test.ts); greet554: the first MX host of mx-greet.test, on the
  // sink's port (MX_PORT) at another loopback address.
  const scripted = await startScriptedSinks([
    { name: "limited", maxClients: 5, dataDelayMs: 150 },
    { name: "drop", dropFirstData: true },
    { name: "slow", dataDelayMs: 40 },
    { name: "cached", dataDelayMs: 20 },
    // 1.5 s and 8 s per message: sessions still open when a test restarts their agent or their
    // Transport DO (lost-agent.test.ts).
    { name: "held", dataDelayMs: 1500 },
    { name: "heldLong", dataDelayMs: 8000 },
    // Yahoo's throttling reply to the first MAIL FROM (reply-rules.test.ts in this directory).
    {
      name: "tss04",
      mailFromReply: {
        code: 421,
        text:
          "4.7.0 [TSS04] Messages from 127.0.0.1 temporarily deferred due to unexpected volume or " +
          "user complaints - 4.16.55.1; see https://postmaster.yahooinc.com/error-codes",
        times: 1,
      },
    },
    { name: "greet554", host: "127.0.0.3", port: catcher.smtpPort, greeting554: true },
  ]);
  project.provide("sink", { smtpPort: catcher.smtpPort, httpPort: catcher.httpPort, closedPort: await closedPort() });
  project.provide("doh", { url: doh.url });
  project.provide("socks", { port: dante.port, ...DANTE_USER });
  project.provide("scripted", { ports: scripted.ports, statsUrl: scripted.statsUrl });
  project.provide("sts", {
    policyPort: sts.policyPort,
    ruaUrl: sts.ruaUrl,
    statsUrl: sts.statsUrl,
    sinksUrl: sts.sinks.statsUrl,
  });
  project.provide("gates", { ports: gates.ports, controlUrl: gates.controlUrl });
  project.provide("world", { viewUrl: view.url });
  return async () => {
    await view.close();
    await world.stop();
    await gates.close();
    await sts.close();
    await scripted.close();
    await doh.close();
    await dante.stop();
    await catcher.close();
  };
}
