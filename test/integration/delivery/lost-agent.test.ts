/**
 * An entry its delivery agent lost (DELIVERY = "agents"): agents keep nothing, so an agent that
 * restarts in the middle of its sessions, or a hand-off whose answer never arrives, leaves
 * entries that nobody will report. Their leases run 15 min (DELIVERY_LEASE_SECONDS), and while
 * they last they fill the destination's window. The Transport DO asks the agents about entries
 * leased for AGENT_CHECK_SECONDS (2 s here) and retries those no agent holds: the mail goes out
 * within seconds; entries their agent still holds are left to it. Sinks taking 1.5 s and 8 s per
 * message keep the sessions open when a test restarts the agent or the Transport DO.
 */
import { env, runInDurableObject } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { agentName, agentPool } from "../../../worker/model/delivery";
import { callWithKey, email, eventually, getEmail, newKey, settle } from "../helpers";
import { leasesIn } from "../leases-probe";

const scripted = inject("scripted");
const NEXTHOP = `[127.0.0.1]:${scripted.ports.held}`;
const LONG = `[127.0.0.1]:${scripted.ports.heldLong}`;
const MESSAGES = 3;

type Stats = { messages: { rcptTo: string[] }[] };
const arrived = async (sink = "held"): Promise<string[]> =>
  (await (await fetch(`${scripted.statsUrl}/${sink}`)).json<Stats>()).messages.flatMap((m) => m.rcptTo);

describe.runIf(env.DELIVERY === "agents")("an agent that restarts with entries in its sessions", () => {
  let key: string;

  beforeAll(async () => {
    key = await newKey("acme");
    await env.DB.batch([
      env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('lost', ?)").bind(NEXTHOP),
      env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'lost.test', 'lost')"),
      env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('lostlong', ?)").bind(LONG),
      env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'lostlong.test', 'lostlong')"),
    ]);
  });

  /** Sends `MESSAGES` messages to l<tag><i>@<transport>.test; waits until the agent of slot 0 holds them all. */
  async function inSessions(
    tag: string,
    transport = "lost",
    nexthop = NEXTHOP,
  ): Promise<{ rcpts: string[]; ids: string[]; leased: { entry_id: number; until: number }[] }> {
    const rcpts = Array.from({ length: MESSAGES }, (_, i) => `l${tag}${i}@${transport}.test`);
    const res = await callWithKey(
      key,
      "POST",
      "/emails/batch",
      rcpts.map((to) => email({ to: [to] })),
    );
    expect(res.status).toBe(200);
    const ids = (await res.json<{ data: { id: string }[] }>()).data.map((d) => d.id);
    const leased = await eventually(
      async () => {
        const l = await leasesIn(env.TRANSPORT_QUEUE.getByName(transport));
        const held = await env.DELIVERY_AGENT.getByName(agentName(transport, nexthop, 0, agentPool(100))).holding(
          l.map((x) => x.entry_id),
        );
        return l.length === MESSAGES && held.length === MESSAGES ? l : undefined;
      },
      10_000,
      "the entries in the agent's sessions",
    );
    return { rcpts, ids, leased };
  }

  async function allDelivered(ids: string[]): Promise<void> {
    for (const id of ids) {
      await eventually(
        async () => ((await getEmail(key, id)).body.recipients[0]!.status === "delivered" ? true : undefined),
        25_000,
        `delivered state of ${id}`,
      );
    }
  }

  const abort = (stub: DurableObjectStub, why: string) =>
    expect(runInDurableObject(stub, (_o, state) => state.abort(why))).rejects.toThrow(why);

  it(
    `gets its ${MESSAGES} entries retried within seconds, long before their leases end`,
    { timeout: 40_000 },
    async () => {
      const { rcpts, ids, leased } = await inSessions("a");
      expect(Math.min(...leased.map((l) => l.until))).toBeGreaterThan(Date.now() / 1000 + 600); // a lease would hold them for minutes
      await abort(
        env.DELIVERY_AGENT.getByName(agentName("lost", NEXTHOP, 0, agentPool(100))),
        "agent restarted by the test",
      );
      // The restarted agent holds nothing (the old stub is broken); the Transport DO finds that out and retries the three.
      expect(
        await env.DELIVERY_AGENT.getByName(agentName("lost", NEXTHOP, 0, agentPool(100))).holding(
          leased.map((l) => l.entry_id),
        ),
      ).toEqual([]);
      await allDelivered(ids);
      const got = (await arrived()).filter((r) => r.startsWith("la"));
      expect(new Set(got)).toEqual(new Set(rcpts));
      console.log(`lost agent: ${MESSAGES} entries retried after the restart; ${got.length} copies at the sink`);
    },
  );

  it(
    "after the Transport DO restarts too, finds among its destination's agents that nobody holds them (the agents were unknown)",
    { timeout: 40_000 },
    async () => {
      const { rcpts, ids } = await inSessions("b");
      await abort(
        env.DELIVERY_AGENT.getByName(agentName("lost", NEXTHOP, 0, agentPool(100))),
        "agent restarted by the test",
      );
      await abort(env.TRANSPORT_QUEUE.getByName("lost"), "transport restarted by the test");
      await allDelivered(ids);
      const got = (await arrived()).filter((r) => r.startsWith("lb"));
      expect(new Set(got)).toEqual(new Set(rcpts));
    },
  );

  it(
    "asks about them even when the Transport DO restarts more often than AGENT_CHECK_SECONDS: a start does not postpone the check",
    { timeout: 40_000 },
    async () => {
      const { rcpts, ids, leased } = await inSessions("e");
      const transport = () => env.TRANSPORT_QUEUE.getByName("lost"); // a stub breaks with its object
      await abort(
        env.DELIVERY_AGENT.getByName(agentName("lost", NEXTHOP, 0, agentPool(100))),
        "agent restarted by the test",
      );
      // A start every 0.6 s (a probe starts it again), as an object evicted between a lone
      // email's alarms is: each restores the three leases, and the check must still come.
      const lost = new Set(leased.map((l) => l.entry_id));
      let asked = false;
      for (const end = Date.now() + 8_000; !asked && Date.now() < end;) {
        await abort(transport(), "transport restarted by the test");
        await new Promise((r) => setTimeout(r, 600));
        asked = (await leasesIn(transport())).every((l) => !lost.has(l.entry_id));
      }
      expect(asked, "the lost entries are retried while the restarts go on").toBe(true);
      await allDelivered(ids);
      expect(new Set((await arrived()).filter((r) => r.startsWith("le")))).toEqual(new Set(rcpts));
    },
  );

  it(
    "after only the Transport DO restarts, finds them held by their agent: they are reported once, not sent again",
    { timeout: 40_000 },
    async () => {
      const { rcpts, ids } = await inSessions("c", "lostlong", LONG); // 8 s sessions
      const restartedAt = Date.now();
      await abort(env.TRANSPORT_QUEUE.getByName("lostlong"), "transport restarted by the test");
      // The restarted Transport DO asks the destination's agents at its first check, within 2 s of its
      // start, and every 2 s after: the agent of slot 0 holds them (their sessions wait for the
      // sink's reply), so their leases are confirmed.
      await eventually(
        async () => {
          const l = await leasesIn(env.TRANSPORT_QUEUE.getByName("lostlong"));
          return l.length === MESSAGES && l.every((x) => x.checked > restartedAt + 1_000) ? true : undefined;
        },
        10_000,
        "the restored leases confirmed by their agent",
      );
      await allDelivered(ids);
      await new Promise((r) => setTimeout(r, 3_000)); // a wrongful retry would have sent them again by now
      expect((await arrived("heldLong")).sort()).toEqual([...rcpts].sort());
    },
  );

  it(
    "asks an agent that does not answer again a period later, not in a loop; its entry stays leased",
    { timeout: 40_000 },
    async () => {
      const { ids, leased } = await inSessions("d", "lostlong", LONG); // 8 s sessions
      const agent = env.DELIVERY_AGENT.getByName(agentName("lostlong", LONG, 0, agentPool(100)));
      // The agent's work (worker/delivery/agent-work.ts) fails every question from now on.
      type Patched = { work: { holding: (ids: number[]) => number[]; asked?: number } };
      await runInDurableObject(agent, (o) => {
        const w = (o as unknown as Patched).work;
        w.asked = 0;
        w.holding = () => {
          w.asked! += 1;
          throw new Error("too busy to answer");
        };
      });
      await new Promise((r) => setTimeout(r, 6_000)); // three periods of AGENT_CHECK_SECONDS
      const asked = await runInDurableObject(agent, (o) => (o as unknown as Patched).work.asked!);
      expect(asked).toBeGreaterThanOrEqual(1);
      expect(asked).toBeLessThanOrEqual(4);
      expect((await leasesIn(env.TRANSPORT_QUEUE.getByName("lostlong"))).map((l) => l.entry_id)).toEqual(
        leased.map((l) => l.entry_id),
      );
      await runInDurableObject(agent, (o) => {
        delete (o as unknown as { work: Partial<Patched["work"]> }).work.holding;
      });
      await allDelivered(ids);
    },
  );

  it("lets the queues settle", async () => {
    await settle();
  });
});
