/**
 * The admin API under /relay/ in the Workers runtime (DISPATCH manual, so mail stays in the
 * Transport DO's core until a test dispatches it): the operator role, the queue summary,
 * destinations, flush, suspensions, stats and the message search with tenant isolation.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { call, callWithKey, classified, email, eventually, newKey, newOperatorKey, settle } from "./helpers";
import { OPEN_SQL } from "../../worker/db/admin";

let operator: string;
let acme: string;
let globex: string;

async function json<T = Record<string, unknown>>(res: Response): Promise<T> {
  return (await res.json()) as T;
}

async function send(key: string, body: Record<string, unknown>): Promise<string> {
  const res = await callWithKey(key, "POST", "/emails", body);
  expect(res.status).toBe(200);
  const { id } = await json<{ id: string }>(res);
  await classified(key, id);
  return id;
}

/** Waits until the D1 index shows every recipient of `id` past `incoming`. */
function indexed(id: string) {
  return eventually(
    async () => {
      const r = await env.DB.prepare(
        "SELECT count(*) AS n FROM recipients_all WHERE message_id = ? AND status != 'incoming'",
      )
        .bind(id)
        .first<{ n: number }>();
      return (r?.n ?? 0) > 0 ? true : undefined;
    },
    10_000,
    `index of ${id}`,
  );
}

const OPERATOR_ROUTES: [string, string, unknown?][] = [
  ["GET", "/relay/queue"],
  ["GET", "/relay/destinations"],
  ["GET", "/relay/destinations/smtp/a.example"],
  ["POST", "/relay/flush", {}],
  ["POST", "/relay/suspensions", { target: "tenant", name: "acme", ttl_seconds: 60 }],
  ["GET", "/relay/suspensions"],
  ["DELETE", "/relay/suspensions/tenant/acme"],
  ["GET", "/relay/stats"],
];

beforeAll(async () => {
  operator = await newOperatorKey("ops");
  acme = await newKey("acme");
  globex = await newKey("globex");
  await env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('ops', NULL)").run();
});

describe("the operator role", () => {
  it.each(OPERATOR_ROUTES)(
    "answers 401 without a key and 403 restricted_api_key to a tenant key: %s %s",
    async (method, path, body) => {
      expect((await call(path, { method })).status).toBe(401);
      const res = await callWithKey(acme, method, path, body);
      expect(res.status).toBe(403);
      expect(await res.json()).toEqual({
        statusCode: 403,
        name: "restricted_api_key",
        message: expect.stringContaining("operator key"),
      });
    },
  );

  it("lets an operator key in", async () => {
    const res = await callWithKey(operator, "GET", "/relay/queue");
    expect(res.status).toBe(200);
    expect((await json(res)).object).toBe("queue");
  });
});

describe("GET /relay/queue", () => {
  it("shows in-core recipients by destination and age (qshape) and D1 counts by state, transport and destination", async () => {
    const ids = [
      await send(acme, email({ to: ["u1@a.example", "u2@a.example", "u3@b.example"] })),
      await send(globex, email({ to: ["v1@a.example"] })),
    ];
    for (const id of ids) await indexed(id);
    await settle();
    const q = await json<{
      qshape: { transport: string; destination: string; total: number; buckets: number[] }[];
      buckets_min: number[];
      counts: {
        total: number;
        by_state: Record<string, number>;
        by_transport: { transport: string; total: number }[];
        by_destination: { transport: string; destination: string; total: number }[];
      };
      open: { count: number; age_percentiles: { p: number; age_seconds: number }[] };
      transports: { transport: string; in_core: number }[];
    }>(await callWithKey(operator, "GET", "/relay/queue"));
    const [total, ...rows] = q.qshape;
    expect(total!.destination).toBe("TOTAL");
    expect(total!.total).toBe(4);
    expect(rows).toEqual([
      { transport: "smtp", destination: "a.example", total: 3, buckets: [3, 0, 0, 0, 0, 0, 0, 0, 0, 0] },
      { transport: "smtp", destination: "b.example", total: 1, buckets: [1, 0, 0, 0, 0, 0, 0, 0, 0, 0] },
    ]);
    expect(q.buckets_min).toEqual([5, 10, 20, 40, 80, 160, 320, 640, 1280]);
    expect(q.transports.find((t) => t.transport === "smtp")?.in_core).toBe(4);
    // The D1 index agrees: 4 recipients across two tenants, none final.
    const states = (
      await env.DB.prepare("SELECT status, count(*) AS n FROM recipients_all GROUP BY status").all<{
        status: string;
        n: number;
      }>()
    ).results;
    expect(q.counts.by_state).toEqual(Object.fromEntries(states.map((s) => [s.status, s.n])));
    expect(q.counts.total).toBe(4);
    expect(q.counts.by_transport).toEqual([expect.objectContaining({ transport: "smtp", total: 4 })]);
    expect(q.counts.by_destination.map((d) => [d.destination, d.total])).toEqual([
      ["a.example", 3],
      ["b.example", 1],
    ]);
    expect(q.open.count).toBe(4);
    expect(q.open.age_percentiles.map((p) => p.p)).toEqual([50, 90, 95, 99]);
    for (const p of q.open.age_percentiles) expect(p.age_seconds).toBeLessThan(120);

    // Final recipients are not the queue's: kept for the retention, they are neither counted nor
    // read (the counts come from the partial indexes of open recipients).
    await env.DB.prepare(
      "INSERT INTO recipients (message_id, idx, tenant_id, address, status, transport, nexthop, updated_at) VALUES (?, 9, 'acme', 'old@a.example', 'delivered', 'smtp', 'a.example', 1)",
    )
      .bind(ids[0])
      .run();
    const again = await json<{ counts: { total: number; by_state: Record<string, number> } }>(
      await callWithKey(operator, "GET", "/relay/queue"),
    );
    expect([again.counts.total, again.counts.by_state.delivered]).toEqual([4, undefined]);
    const plan = (
      await env.DB.prepare(
        `EXPLAIN QUERY PLAN SELECT status, transport, nexthop, count(*) AS n FROM recipients_open_all WHERE status IN (${OPEN_SQL}) GROUP BY status, transport, nexthop`,
      ).all<{ detail: string }>()
    ).results.map((r) => r.detail);
    expect(plan.join(" / ")).not.toMatch(/SCAN (recipients|messages)\b(?! USING)/);
  });
});

describe("destinations", () => {
  it("lists every destination queue with window, busy, limit and state, and one with its history", async () => {
    const list = await json<{
      data: {
        transport: string;
        queue: string;
        window: number;
        busy: number;
        todo: number;
        limit: number;
        state: string;
      }[];
    }>(await callWithKey(operator, "GET", "/relay/destinations"));
    expect(list.data.find((d) => d.queue === "a.example")).toMatchObject({
      transport: "smtp",
      window: 5,
      busy: 0,
      todo: 2,
      limit: 20,
      state: "ready",
    });
    const one = await callWithKey(operator, "GET", "/relay/destinations/smtp/a.example");
    expect(one.status).toBe(200);
    expect(await json(one)).toMatchObject({ queue: "a.example", window: 5, history: [] });
    expect((await callWithKey(operator, "GET", "/relay/destinations/smtp/nowhere.example")).status).toBe(404);
    const unknown = await callWithKey(operator, "GET", "/relay/destinations/nope/a.example");
    expect(unknown.status).toBe(404);
    expect((await json(unknown)).name).toBe("not_found");
  });

  it("shows a destination killed by site failures as dead with its revival time, and flush revives it", async () => {
    const stub = env.TRANSPORT_QUEUE.getByName("ops");
    for (let i = 0; i < 8; i++)
      await stub.admit({
        id: `dead-${i}`,
        createTime: Math.floor(Date.now() / 1000),
        rcpts: [{ address: `x${i}@dead.example`, transport: "ops", nexthop: "dead.example" }],
      });
    const { entries } = await stub.dispatch(10);
    expect(entries.length).toBeGreaterThan(1);
    for (const e of entries)
      await stub.report(e.entryId, {
        status: "defer",
        siteFailure: { dsnStatus: "4.4.1", reason: "connection refused" },
      });
    const dead = await json<{ state: string; dead_until: string | null; window: number; last_response: string | null }>(
      await callWithKey(operator, "GET", "/relay/destinations/ops/dead.example"),
    );
    expect(dead.state).toBe("dead");
    expect(Date.parse(dead.dead_until!)).toBeGreaterThan(Date.now());
    expect(dead.last_response).toContain("connection refused");

    const res = await callWithKey(operator, "POST", "/relay/flush", { transport: "ops" });
    expect(res.status).toBe(200);
    expect(await json(res)).toEqual({
      object: "flush",
      transports: ["ops"],
      revived: [{ transport: "ops", queue: "dead.example" }],
    });
    const after = await json<{ state: string; dead_until: string | null; window: number }>(
      await callWithKey(operator, "GET", "/relay/destinations/ops/dead.example"),
    );
    expect(after.state).not.toBe("dead");
    expect(after.window).toBeGreaterThan(0);
  });
});

describe("POST /relay/flush", () => {
  it("brings deferred mail back into the active queue at once (postqueue -f)", async () => {
    const stub = env.TRANSPORT_QUEUE.getByName("ops");
    await stub.admit({
      id: "later-1",
      createTime: Math.floor(Date.now() / 1000),
      rcpts: [{ address: "y@later.example", transport: "ops", nexthop: "later.example" }],
    });
    const { entries } = await stub.dispatch(10);
    const mine = entries.filter((e) => e.nexthop === "later.example");
    expect(mine).toHaveLength(1);
    for (const e of entries) await stub.report(e.entryId, { status: "defer" });
    type Q = {
      qshape: { transport: string; destination: string; total: number }[];
      deferred: { transport: string; destination: string; total: number }[];
    };
    const before = await json<Q>(await callWithKey(operator, "GET", "/relay/queue"));
    expect(before.deferred.find((r) => r.destination === "later.example")?.total).toBe(1);
    expect(before.qshape.find((r) => r.destination === "later.example")).toBeUndefined();

    expect((await callWithKey(operator, "POST", "/relay/flush")).status).toBe(200); // no body: every transport
    const after = await json<Q>(await callWithKey(operator, "GET", "/relay/queue"));
    expect(after.deferred.find((r) => r.destination === "later.example")).toBeUndefined();
    expect(after.qshape.find((r) => r.destination === "later.example")?.total).toBe(1);
  });

  it("rejects an unknown transport (404) and a bad body (422)", async () => {
    expect((await callWithKey(operator, "POST", "/relay/flush", { transport: "nope" })).status).toBe(404);
    const bad = await callWithKey(operator, "POST", "/relay/flush", { transport: 7 });
    expect(bad.status).toBe(422);
    expect((await json(bad)).name).toBe("validation_error");
  });
});

describe("suspensions", () => {
  it("suspends a destination for a TTL: nothing to it is dispatched until it is resumed", async () => {
    const stub = env.TRANSPORT_QUEUE.getByName("ops");
    for (const d of ["held.example", "free.example"]) {
      await stub.admit({
        id: `s-${d}`,
        createTime: Math.floor(Date.now() / 1000),
        rcpts: [{ address: `z@${d}`, transport: "ops", nexthop: d }],
      });
    }
    const res = await callWithKey(operator, "POST", "/relay/suspensions", {
      target: "destination",
      transport: "ops",
      name: "held.example",
      ttl_seconds: 3600,
    });
    expect(res.status).toBe(201);
    const s = await json<{ key: string; until: string; transports: string[] }>(res);
    expect(s).toMatchObject({ key: "dest:ops/held.example", transports: ["ops"] });
    expect(Date.parse(s.until) - Date.now()).toBeGreaterThan(3500_000);

    const list = await json<{ data: { key: string; target: string; name: string }[] }>(
      await callWithKey(operator, "GET", "/relay/suspensions"),
    );
    expect(list.data).toContainEqual(
      expect.objectContaining({ key: "dest:ops/held.example", target: "destination", name: "held.example" }),
    );

    const first = await stub.dispatch(100);
    expect(first.entries.map((e) => e.nexthop)).toContain("free.example");
    expect(first.entries.map((e) => e.nexthop)).not.toContain("held.example");
    for (const e of first.entries) await stub.report(e.entryId, { status: "ok" });

    const resumed = await callWithKey(operator, "DELETE", "/relay/suspensions/destination/held.example?transport=ops");
    expect(resumed.status).toBe(200);
    expect(await json(resumed)).toMatchObject({ deleted: true, key: "dest:ops/held.example" });
    // Resuming must make the queue selectable at once, not only when the suspension's timer fires.
    const second = await stub.dispatch(100);
    expect(second.entries.map((e) => e.nexthop)).toContain("held.example");
    for (const e of second.entries) await stub.report(e.entryId, { status: "ok" });
    expect((await json<{ data: unknown[] }>(await callWithKey(operator, "GET", "/relay/suspensions"))).data).toEqual(
      [],
    );
  });

  it("suspends a tenant in every transport and keeps the key's other policy fields on resume", async () => {
    const stub = env.TRANSPORT_QUEUE.getByName("ops");
    await stub.setPolicy("tenant:zeta", { concurrency: 3 });
    const res = await callWithKey(operator, "POST", "/relay/suspensions", {
      target: "tenant",
      name: "zeta",
      ttl_seconds: 600,
    });
    expect(res.status).toBe(201);
    expect((await json<{ transports: string[] }>(res)).transports).toEqual(["ops", "smtp"]);
    const inspect = await stub.inspect();
    expect(inspect.policies.find((p) => p.key === "tenant:zeta")?.rule).toMatchObject({
      concurrency: 3,
      suspendedUntil: expect.any(Number),
    });
    expect((await callWithKey(operator, "DELETE", "/relay/suspensions/tenant/zeta")).status).toBe(200);
    expect((await stub.inspect()).policies.find((p) => p.key === "tenant:zeta")?.rule).toEqual({ concurrency: 3 });
    const smtp = await env.TRANSPORT_QUEUE.getByName("smtp").inspect();
    expect(smtp.policies.find((p) => p.key === "tenant:zeta")).toBeUndefined();
  });

  it("suspends a site in every transport (what a reply rule suspends), lists it with who set it, and resumes it", async () => {
    const stub = env.TRANSPORT_QUEUE.getByName("ops");
    await stub.setPolicy("site:yahoodns.net", {
      suspendedUntil: Math.floor(Date.now() / 1000) + 3600,
      label: "reply_rule:yahoo-tss04",
    });
    const list = await json<{ data: { target: string; name: string; key: string; set_by: string | null }[] }>(
      await callWithKey(operator, "GET", "/relay/suspensions"),
    );
    expect(list.data.find((s) => s.key === "site:yahoodns.net")).toMatchObject({
      target: "site",
      name: "yahoodns.net",
      set_by: "reply_rule:yahoo-tss04",
    });
    expect((await callWithKey(operator, "DELETE", "/relay/suspensions/site/yahoodns.net")).status).toBe(200);
    expect((await stub.inspect()).policies.find((p) => p.key === "site:yahoodns.net")).toBeUndefined();
    const res = await callWithKey(operator, "POST", "/relay/suspensions", {
      target: "egress",
      name: "eu-1",
      ttl_seconds: 60,
    });
    expect(res.status).toBe(201);
    expect(await json(res)).toMatchObject({
      target: "egress",
      transport: null,
      key: "egress:eu-1",
      transports: ["ops", "smtp"],
    });
    expect((await callWithKey(operator, "DELETE", "/relay/suspensions/egress/eu-1")).status).toBe(200);
  });

  it("validates input (422), knows its transports (404) and answers 404 to resuming what is not suspended", async () => {
    const cases: [unknown, number][] = [
      [{ target: "planet", name: "x", ttl_seconds: 60 }, 422],
      [{ target: "tenant", name: "x", ttl_seconds: 0 }, 422],
      [{ target: "tenant", name: "x" }, 422],
      [{ target: "transport", name: "nope", ttl_seconds: 60 }, 404],
      [{ target: "destination", transport: "nope", name: "a.example", ttl_seconds: 60 }, 404],
    ];
    for (const [body, status] of cases) {
      const res = await callWithKey(operator, "POST", "/relay/suspensions", body);
      expect({ body, status: res.status }).toEqual({ body, status });
    }
    expect((await callWithKey(operator, "POST", "/relay/suspensions", "{nope")).status).toBe(400);
    expect((await callWithKey(operator, "DELETE", "/relay/suspensions/tenant/nobody")).status).toBe(404);
    expect((await callWithKey(operator, "DELETE", "/relay/suspensions/planet/x")).status).toBe(422);
  });
});

describe("GET /relay/stats", () => {
  it("counts delivered, bounced and deferred per minute over the window, zero-filled", async () => {
    const now = Date.now();
    const minute = Math.floor(now / 60_000) * 60_000;
    const rows: [string, number][] = [
      ["email.delivered", now],
      ["email.delivered", now],
      ["email.bounced", minute - 60_000],
      ["email.delivery_delayed", minute - 60_000],
      ["email.delivered", now - 3 * 3600_000],
    ];
    for (const [i, [type, at]] of rows.entries()) {
      await env.DB.prepare(
        "INSERT INTO event_runs (tenant_id, seq, email_id, source_seq, type, recipient, created_at, data) VALUES ('stats', ?, 'm', ?, ?, 'r@x', ?, '{}')",
      )
        .bind(at * 1000 + i, i, type, at)
        .run();
    }
    const s = await json<{
      window_minutes: number;
      series: { at: string; delivered: number; bounced: number; deferred: number }[];
      totals: Record<string, number>;
    }>(await callWithKey(operator, "GET", "/relay/stats?window=10"));
    expect(s.window_minutes).toBe(10);
    expect(s.series).toHaveLength(10);
    expect(s.totals).toEqual({ delivered: 2, bounced: 1, deferred: 1, failed: 0 });
    expect(s.series.at(-1)).toMatchObject({ at: new Date(minute).toISOString(), delivered: 2 });
    expect(s.series.at(-2)).toMatchObject({ bounced: 1, deferred: 1 });
    expect((await callWithKey(operator, "GET", "/relay/stats?window=0")).status).toBe(422);
  });
});

describe("GET /relay/messages (search)", () => {
  let acmeId: string;
  let globexId: string;

  beforeAll(async () => {
    acmeId = await send(acme, email({ to: ["shared@c.example"], tags: [{ name: "campaign", value: "spring" }] }));
    globexId = await send(globex, email({ to: ["shared@c.example"], tags: [{ name: "campaign", value: "autumn" }] }));
    await indexed(acmeId);
    await indexed(globexId);
    await settle();
  });

  type Page = {
    has_more: boolean;
    data: { id: string; tenant: string; recipients: { email: string; status: string }[] }[];
  };
  const search = async (key: string, qs: string) => json<Page>(await callWithKey(key, "GET", `/relay/messages?${qs}`));

  it("keeps a tenant key to its own tenant's mail", async () => {
    expect((await search(acme, "address=shared@c.example")).data.map((m) => m.id)).toEqual([acmeId]);
    expect((await search(globex, "address=SHARED@c.example")).data.map((m) => m.id)).toEqual([globexId]);
    const other = await callWithKey(acme, "GET", "/relay/messages?tenant=globex");
    expect(other.status).toBe(422);
    expect((await callWithKey(acme, "GET", `/relay/messages/${globexId}`)).status).toBe(404);
    expect((await callWithKey(acme, "GET", `/relay/messages/${globexId}/events`)).status).toBe(404);
  });

  it("lets an operator search every tenant, by address, tag, state and id, page by page", async () => {
    expect((await search(operator, "address=shared@c.example")).data.map((m) => m.id).sort()).toEqual(
      [acmeId, globexId].sort(),
    );
    expect((await search(operator, "address=shared@c.example&tenant=globex")).data.map((m) => m.id)).toEqual([
      globexId,
    ]);
    expect((await search(operator, "tag=campaign:spring")).data.map((m) => m.id)).toEqual([acmeId]);
    expect((await search(operator, "tag=campaign")).data.map((m) => m.id).sort()).toEqual([acmeId, globexId].sort());
    expect((await search(operator, `id=${acmeId}`)).data).toEqual([
      expect.objectContaining({
        id: acmeId,
        tenant: "acme",
        recipients: [expect.objectContaining({ email: "shared@c.example" })],
      }),
    ]);
    const state = (await search(operator, "address=shared@c.example")).data[0]!.recipients[0]!.status;
    expect((await search(operator, `address=shared@c.example&state=${state}`)).data).toHaveLength(2);
    expect((await search(operator, "address=shared@c.example&state=bounced")).data).toEqual([]);
    const first = await search(operator, "limit=1");
    expect(first.has_more).toBe(true);
    const second = await search(operator, `limit=1&after=${first.data[0]!.id}`);
    expect(second.data[0]!.id).not.toBe(first.data[0]!.id);
  });

  it("rejects bad parameters with 422 and an unknown cursor with 404", async () => {
    for (const qs of ["state=lost", "limit=0", "limit=101", "tag=has space", "address=x"]) {
      const res = await callWithKey(operator, "GET", `/relay/messages?${encodeURI(qs)}`);
      expect({ qs, status: res.status }).toEqual({ qs, status: 422 });
    }
    expect((await callWithKey(operator, "GET", "/relay/messages?after=nope")).status).toBe(404);
  });

  it("shows a message with its recipients and event timeline (operator: any tenant's)", async () => {
    const res = await callWithKey(operator, "GET", `/relay/messages/${globexId}`);
    expect(res.status).toBe(200);
    const m = await json<{
      id: string;
      tenant: string;
      recipients: { email: string; blocked_by: string | null }[];
      events: { type: string; created_at: string }[];
    }>(res);
    expect(m).toMatchObject({
      id: globexId,
      tenant: "globex",
      recipients: [{ email: "shared@c.example", blocked_by: null }],
    });
    expect(m.events.map((e) => e.type)).toEqual(expect.arrayContaining(["email.accepted", "email.queued"]));
    const own = await json<{ data: { type: string }[] }>(
      await callWithKey(acme, "GET", `/relay/messages/${acmeId}/events`),
    );
    expect(own.data.map((e) => e.type)).toContain("email.accepted");
    // email.accepted has no event row: the timeline takes it from the message row, first.
    expect(m.events[0]).toMatchObject({ type: "email.accepted" });
    expect(
      (
        await env.DB.prepare("SELECT count(*) AS n FROM event_log WHERE email_id = ? AND type = 'email.accepted'")
          .bind(globexId)
          .first<{ n: number }>()
      )?.n,
    ).toBe(0);
    expect((await callWithKey(operator, "GET", "/relay/messages/nope")).status).toBe(404);
  });
});
