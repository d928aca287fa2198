/**
 * The two mail systems bench:mix feeds the same world: the relay under `wrangler dev` and a
 * private Postfix, each behind one interface.
 *
 * DESCRIPTION
 *   startRelaySide(o)           a private wrangler dev (frozen bundle) whose default transport
 *       delivers to each domain's MX: EGRESS "direct", MX_PORT the sink's port, DOH_RESOLVER_URL
 *       the world's resolver; `vars` add to or override that. send() makes one API request per
 *       arrival (POST /emails, or /emails/batch for a batch); a 429 is counted and the request sent
 *       again after its Retry-After, as a client that retries would.
 *   startPostfixSide(world, o)  a private Postfix (test/e2e/postfix/harness.ts) with every domain
 *       as its own nexthop (transport_maps texthash: <domain> smtp:[address]:port) and the
 *       sender's domain discarded (bounces for unknown users are made, then dropped; the relay
 *       sends none, DSN_NOTICES being off). send() submits each message over SMTP through a pool
 *       of `connections` connections.
 *   Both: the same back-off (minimal/maximal_backoff_time, Postfix's queue_run_delay 1 s) and the
 *   same SMTP client timeouts (connect, greeting) so that a silent host holds either for as long;
 *   everything else is each side's default. cpu() reads the side's own processes (cpu.ts):
 *   wrangler's process group, or the Postfix master's session.
 *   MIX_FROM is the envelope sender of every message.
 *
 * ERRORS
 *   send() rejects when a request or submission fails for good (not for a 429 that is sent again).
 */
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { devFetch, startDevServer, type DevServer } from "../../scripts/lib/dev-server";
import { startRelayingPostfix, type PostfixInstance } from "../../test/e2e/postfix/harness";
import type { Arrival, MixMessage } from "./arrivals";
import { bySession, byGroup, cpuSample, type CpuSample } from "./cpu";
import { createSubmitter, mixBody, type Submitter } from "./submit";
import type { World } from "./world";

/** The envelope sender of the mix. */
export const MIX_FROM = "sender@bounces.cohort.test";

/** Retry timers and client timeouts both sides use, seconds. */
export interface Timers {
  minimalBackoff: number;
  maximalBackoff: number;
  connectTimeout: number;
  heloTimeout: number;
}

/** What every side offers the runner. */
export interface MixSide {
  readonly name: string;
  send(a: Arrival): Promise<void>;
  cpu(): CpuSample;
  /** Requests answered 429 (relay) since the start. */
  refused(): number;
  stop(): Promise<void>;
}

const subjectOf = (m: MixMessage) => `mix ${m.id}`;
const TEXT = "The quick brown fox jumps over the lazy dog, again and again, for a kilobyte of text.\n".repeat(12);

/** The API body of one message. */
function apiEmail(m: MixMessage) {
  return { from: `Mix <${MIX_FROM}>`, to: m.to, subject: subjectOf(m), text: TEXT, headers: { "X-Mix-Id": m.id } };
}

/**
 * send() and refused() of a side that takes the relay's API at `url`: one request per arrival
 * (POST /emails, or /emails/batch), a 429 sent again after its Retry-After and counted.
 */
export function apiSender(
  name: string,
  url: string,
  headers: Record<string, string>,
): Pick<MixSide, "send" | "refused"> {
  let refused = 0;
  const post = async (path: string, body: unknown) => {
    const res = await devFetch(
      `${url}${path}`,
      () => ({
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: JSON.stringify(body),
      }),
      undefined,
      true,
      () => void refused++,
    );
    if (!res.ok) throw new Error(`${name} ${path}: ${res.status} ${(await res.text()).slice(0, 200)}`);
    await res.arrayBuffer();
  };
  return {
    send: (a) =>
      a.kind === "batch" ? post("/emails/batch", a.messages.map(apiEmail)) : post("/emails", apiEmail(a.messages[0]!)),
    refused: () => refused,
  };
}

/** The relay under wrangler dev (see the header). */
export async function startRelaySide(o: {
  sinkPort: number;
  dohUrl: string;
  timers: Timers;
  vars?: Record<string, string>;
  meter?: boolean;
}): Promise<MixSide & { server: DevServer }> {
  const t = o.timers;
  const server = await startDevServer({
    tenant: "bench-mix",
    frozen: true,
    meter: o.meter === true,
    role: o.meter ? "operator" : undefined,
    vars: {
      SMARTHOST: "",
      DEFAULT_TRANSPORT: "smtp",
      EGRESS: "direct",
      MX_PORT: String(o.sinkPort),
      DOH_RESOLVER_URL: o.dohUrl,
      SCHEDULER_CONFIG: JSON.stringify({
        minimal_backoff_time: t.minimalBackoff,
        maximal_backoff_time: t.maximalBackoff,
      }),
      SMTP_TIMEOUTS: JSON.stringify({ smtp_connect_timeout: t.connectTimeout, smtp_helo_timeout: t.heloTimeout }),
      ...o.vars,
    },
  });
  const api = apiSender("relay", server.url, { authorization: `Bearer ${server.key}` });
  return {
    name: "relay",
    server,
    ...api,
    cpu: () => cpuSample(byGroup(server.pid)),
    stop: () => server.stop(),
  };
}

/** Reads the master's pid of a Postfix instance. */
async function masterPid(p: PostfixInstance): Promise<number> {
  const { readFile } = await import("node:fs/promises");
  return Number((await readFile(join(p.queueDirectory, "pid", "master.pid"), "utf8")).trim());
}

/** A private Postfix for the world (see the header). */
export async function startPostfixSide(
  world: World,
  o: { sinkPort: number; timers: Timers; connections: number },
): Promise<MixSide & { postfix: PostfixInstance }> {
  const t = o.timers;
  const dir = await mkdtemp(join(tmpdir(), "cohort-mix-transport-"));
  const map = join(dir, "transport");
  const lines = world.domains.map((d) => `${d.name} smtp:[${d.address}]:${o.sinkPort}`);
  lines.push(`${MIX_FROM.split("@")[1]} discard:`);
  await writeFile(map, `${lines.join("\n")}\n`, { mode: 0o644 });
  await chmod(dir, 0o755);
  let postfix: PostfixInstance;
  try {
    postfix = await startRelayingPostfix({
      relayhost: { host: "127.0.0.1", port: o.sinkPort },
      mainCf: {
        transport_maps: `texthash:${map}`,
        minimal_backoff_time: `${t.minimalBackoff}s`,
        maximal_backoff_time: `${t.maximalBackoff}s`,
        queue_run_delay: "1s",
        smtp_connect_timeout: `${t.connectTimeout}s`,
        smtp_helo_timeout: `${t.heloTimeout}s`,
      },
    });
  } catch (e) {
    await rm(dir, { recursive: true, force: true });
    throw e;
  }
  const sid = await masterPid(postfix);
  const submitter: Submitter = createSubmitter({ host: postfix.host, port: postfix.port, connections: o.connections });
  const one = (m: MixMessage) =>
    submitter.submit({
      from: MIX_FROM,
      to: m.to,
      data: mixBody({ from: MIX_FROM, to: m.to, subject: subjectOf(m), id: m.id }),
    });
  return {
    name: "postfix",
    postfix,
    send: async (a) => {
      await Promise.all(a.messages.map(one));
    },
    cpu: () => cpuSample(bySession(sid)),
    refused: () => 0,
    stop: async () => {
      await submitter.close().catch(() => undefined);
      await postfix.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
