/**
 * The Transport DO's delivery bookkeeping across failures: an entry whose queue message is
 * lost (no report) is retried when its lease runs out, as a new attempt; an eviction between
 * attempts loses nothing.
 */
import { env, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { beforeAll, beforeEach, describe, expect, inject, it } from "vitest";
import { callWithKey, email, eventually, getEmail, newKey, settle } from "../helpers";
import { outboxName, shardOf } from "../../../worker/model/ids";
import { expireLeases, leasesIn } from "../leases-probe";
import { mxCache } from "../../../worker/delivery/mx-cache";

const sink = inject("sink");
let key: string;

beforeAll(async () => {
  key = await newKey("acme");
  await env.DB.batch([
    // `lapse.test` is a domain nexthop (the mx kind) that the fixture resolver answers only after
    // a while (doh-server.ts): its entries stay leased and unreported meanwhile; `dies.test`
    // takes longer still.
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('sink', ?), ('lapse', NULL)").bind(
      `[127.0.0.1]:${sink.smtpPort}`,
    ),
    env.DB.prepare(
      "INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'sink.test', 'sink'), (NULL, 'lapse.test', 'lapse'), (NULL, 'dies.test', 'lapse')",
    ),
  ]);
});

// Each test needs the resolver's slow answer, not the isolate's cached one (an NXDOMAIN is kept
// at least a minute, worker/delivery/mx-cache.ts): the test and the objects share the isolate.
beforeEach(() => mxCache.clear());

async function send(to: string[]): Promise<string> {
  const res = await callWithKey(key, "POST", "/emails", email({ to }));
  expect(res.status).toBe(200);
  return (await res.json<{ id: string }>()).id;
}

function leasesOf(transport: string): Promise<{ entry_id: number; core_id: string; until: number }[]> {
  return leasesIn(env.TRANSPORT_QUEUE.getByName(transport));
}

describe("leases", () => {
  it("an entry nobody reports is treated as crashed when its lease runs out, and retried as a new attempt", async () => {
    const id = await send(["gone@lapse.test"]);
    const first = await eventually(
      async () => (await leasesOf("lapse")).find((l) => l.core_id === id),
      10_000,
      "the first lease",
    );
    expect(first.until).toBeGreaterThan(Date.now() / 1000 + 60); // DELIVERY_LEASE_SECONDS: 900
    const stub = env.TRANSPORT_QUEUE.getByName("lapse");
    await expireLeases(stub);
    await runDurableObjectAlarm(stub);
    expect((await leasesOf("lapse")).some((l) => l.core_id === id)).toBe(false);
    // Deferred by the crash, retried after the back-off (1–2 s here) as core message `<id>#2`.
    const second = await eventually(
      async () => (await leasesOf("lapse")).find((l) => l.core_id === `${id}#2`),
      10_000,
      "the second attempt's lease",
    );
    expect(second.entry_id).not.toBe(first.entry_id);
  });
});

describe("expiry", () => {
  it("an attempt older than maximal_queue_lifetime expires: its open recipients end `expired` in the Outbox", async () => {
    const id = await send(["late@lapse.test"]);
    await eventually(
      async () => ((await getEmail(key, id)).body.recipients[0]!.status === "ready" ? true : undefined),
      10_000,
      "classification",
    );
    // The same message admitted to another transport as if it had arrived in 1970.
    const stub = env.TRANSPORT_QUEUE.getByName("ancient");
    await stub.admit({
      id,
      createTime: 1,
      rcpts: [{ address: "late@lapse.test", transport: "ancient", nexthop: "lapse.test" }],
    });
    await eventually(async () => ((await leasesOf("ancient")).length > 0 ? true : undefined), 10_000, "dispatch");
    await expireLeases(stub);
    await runDurableObjectAlarm(stub);
    const r = await eventually(
      async () => {
        const rcpt = (await getEmail(key, id)).body.recipients[0] as unknown as {
          status: string;
          last_response: { text?: string } | null;
        };
        return rcpt.status === "expired" ? rcpt : undefined;
      },
      5000,
      "expiry",
    );
    expect(r.last_response?.text).toContain("maximal_queue_lifetime");
  });
});

describe("a destination that dies", () => {
  it("defers its waiting recipients without an attempt, shown as blocked_by destination_dead", async () => {
    // Six one-recipient messages for one destination: the initial window of 5 sends five, one waits.
    // Their route goes to dies.test, whose resolver answers (NXDOMAIN, a bounce) only after
    // LONG_SLOW_MS: the steps below must be done before, also on a busy machine.
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push(await send([`w${i}@dies.test`]));
    for (const id of ids)
      await eventually(
        async () => ((await getEmail(key, id)).body.recipients[0]!.status === "ready" ? true : undefined),
        10_000,
        "classification",
      );
    const stub = env.TRANSPORT_QUEUE.getByName("doomed");
    for (const id of ids)
      await stub.admit({
        id,
        createTime: Math.floor(Date.now() / 1000),
        rcpts: [{ address: `w${ids.indexOf(id)}@dies.test`, transport: "doomed", nexthop: "dies.test" }],
      });
    const leased = await leasesOf("doomed");
    expect(leased).toHaveLength(5);
    const fail = { dsnStatus: "4.4.1", reason: "connect to dies.test: connection refused" };
    for (const l of leased) await stub.report(l.entry_id, { status: "defer", siteFailure: fail });
    const waiting = ids.find((id) => !leased.some((l) => l.core_id === id))!;
    // The Outbox recorded why, read at once: its next outcome comes only after the retry (1–2 s).
    const recorded = await env.OUTBOX.getByName(outboxName(shardOf(waiting))).view(waiting, "acme");
    expect(recorded!.recipients[0]).toMatchObject({ status: "deferred", blocked_by: "destination_dead" });
    const r = (await getEmail(key, waiting)).body.recipients[0] as unknown as {
      status: string;
      blocked_by: string | null;
      next_attempt_at: string | null;
      last_response: { text?: string } | null;
    };
    expect(r).toMatchObject({ status: "deferred", last_response: { text: fail.reason } });
    expect(r.next_attempt_at).not.toBeNull();
    // GET /emails/:id shows the recorded reason until the retry is in core, then the core's live one.
    expect(["destination_dead", "in_flight", "window_full", "queued"]).toContain(r.blocked_by);
  });
});

describe("eviction", () => {
  it("a Transport DO evicted while a message waits for its retry still delivers it", async () => {
    // Three 451s: the recipient stays deferred over several retries (backoff 1–2 s here, in
    // whole seconds), so the poll below cannot miss the deferral the way it can miss a single one.
    const id = await send(["tempfail3-evicted@sink.test"]);
    await eventually(
      async () => ((await getEmail(key, id)).body.recipients[0]!.status === "deferred" ? true : undefined),
      10_000,
      "the deferral",
    );
    const stub = env.TRANSPORT_QUEUE.getByName("sink");
    await expect(runInDurableObject(stub, (_o, state) => state.abort("evict for test"))).rejects.toThrow(
      "evict for test",
    );
    const rcpt = await eventually(
      async () => {
        const r = (await getEmail(key, id)).body.recipients[0] as unknown as { status: string; attempts: number };
        return r.status === "delivered" ? r : undefined;
      },
      15_000,
      "delivery after the eviction",
    );
    expect(rcpt.attempts).toBe(4);
  });

  it("lets the queues settle", async () => {
    await settle();
  });
});
