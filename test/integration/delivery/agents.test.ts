/**
 * The DeliveryAgent objects (DELIVERY = "agents", the delivery-agents project): each selected
 * entry starts its SMTP session at once, and a session that finished waits 2 s for the next entry
 * (Postfix's connection cache), so waves of mail to one smarthost reuse the same connections.
 * Against the queue consumer (the delivery project), every batch opens and QUITs its own.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { agentName, agentPool } from "../../../worker/model/delivery";
import { callWithKey, email, eventually, getEmail, newKey, settle } from "../helpers";

const scripted = inject("scripted");
const NEXTHOP = `[127.0.0.1]:${scripted.ports.cached}`;
const WAVES = 5;
const PER_WAVE = 8;

type Stats = {
  connections: number;
  sessions: number;
  maxConcurrent: number;
  refused: number;
  messages: { rcptTo: string[] }[];
};
const stats = async (): Promise<Stats> => (await fetch(`${scripted.statsUrl}/cached`)).json<Stats>();
/** Until the sink has a message to `to`. */
const at = async (to: string) =>
  eventually(async () => ((await stats()).messages.some((m) => m.rcptTo.includes(to)) ? true : undefined), 10_000, to);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.runIf(env.DELIVERY === "agents")("delivery agents", () => {
  let key: string;

  beforeAll(async () => {
    key = await newKey("acme");
    await env.DB.batch([
      env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('cached', ?)").bind(NEXTHOP),
      env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'cached.test', 'cached')"),
    ]);
  });

  it(
    `${WAVES} waves of ${PER_WAVE} messages, 300 ms apart, are each delivered once over connections kept open between the waves`,
    { timeout: 60_000 },
    async () => {
      const ids: string[] = [];
      for (let w = 0; w < WAVES; w++) {
        const batch = Array.from({ length: PER_WAVE }, (_, i) =>
          email({ to: [`w${w}m${i}@cached.test`], subject: `wave ${w}` }),
        );
        const res = await callWithKey(key, "POST", "/emails/batch", batch);
        expect(res.status).toBe(200);
        ids.push(...(await res.json<{ data: { id: string }[] }>()).data.map((d) => d.id));
        const want = (w + 1) * PER_WAVE;
        await eventually(
          async () => ((await stats()).messages.length >= want ? true : undefined),
          20_000,
          `wave ${w} at the sink`,
        );
        await sleep(300);
      }
      const s = await stats();
      expect(s.messages.flatMap((m) => m.rcptTo).sort()).toEqual(
        Array.from(
          { length: WAVES * PER_WAVE },
          (_, i) => `w${Math.floor(i / PER_WAVE)}m${i % PER_WAVE}@cached.test`,
        ).sort(),
      );
      console.log(
        `cached sink: ${WAVES * PER_WAVE} messages in ${WAVES} waves over ${s.connections} connections, at most ${s.maxConcurrent} at once`,
      );
      // Each agent opens a connection only when all of its cached ones are busy: the later waves
      // found the first waves' connections idle and used them again.
      expect(s.connections).toBeLessThanOrEqual(2 * s.maxConcurrent);
      expect(s.connections).toBeLessThan(WAVES * 2);
      for (const id of ids) {
        await eventually(
          async () => ((await getEmail(key, id)).body.recipients[0]!.status === "delivered" ? true : undefined),
          10_000,
          `delivered state of ${id}`,
        );
      }
      // The Transport DO timed every entry from its dispatch to its report (GET /relay/queue's in_flight_ms).
      const times = (await env.TRANSPORT_QUEUE.getByName("cached").inspect()).inFlightTimes;
      expect(times?.reports).toBeGreaterThanOrEqual(WAVES * PER_WAVE);
      expect(times!.p50_ms).toBeLessThanOrEqual(times!.p99_ms);
      expect(times!.p99_ms).toBeLessThanOrEqual(times!.max_ms);
      expect(times!.max_ms).toBeLessThan(20_000);
    },
  );

  it(
    "while mail to its host flows, an idle connection waits 2 s in its agent (smtp_connection_cache_time_limit), then is closed",
    { timeout: 20_000 },
    async () => {
      const agent = env.DELIVERY_AGENT.getByName(agentName("cached", NEXTHOP, 0, agentPool(100)));
      for (const to of ["late1@cached.test", "late2@cached.test"]) {
        expect((await callWithKey(key, "POST", "/emails", email({ to: [to] }))).status).toBe(200);
        await at(to);
      }
      await eventually(
        async () => ((await agent.idleSessions()) >= 1 ? true : undefined),
        2_000,
        "an idle cached session",
      );
      await eventually(
        async () => ((await agent.idleSessions()) === 0 ? true : undefined),
        5_000,
        "the idle session closed",
      );
    },
  );

  it("closes a lone message's connection at once: nothing keeps its agent awake", { timeout: 20_000 }, async () => {
    const agent = env.DELIVERY_AGENT.getByName(agentName("cached", NEXTHOP, 0, agentPool(100)));
    await eventually(
      async () => ((await agent.idleSessions()) === 0 ? true : undefined),
      5_000,
      "no idle session left",
    );
    await sleep(2_100); // the host's last transaction more than SESSION_IDLE_MS ago: the next message is alone
    expect((await callWithKey(key, "POST", "/emails", email({ to: ["alone@cached.test"] }))).status).toBe(200);
    await at("alone@cached.test");
    expect(await agent.idleSessions()).toBe(0);
  });

  it("lets the queues settle", async () => {
    await settle();
  });
});
