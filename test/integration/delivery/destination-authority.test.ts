/**
 * The Destination DO in the delivery path: from a destination's first site failure on, its
 * applied reports reach its DO (`<transport>/<queue>`), which runs the feedback and dead
 * detection (a destination that only succeeds gets no DO: feedback-gate.ts); the Transport DO
 * applies its dead verdicts (its live window only for a site's DO, DESTINATION_GROUPING = "site": a
 * queue's own DO gets each agent's reports in another order than the Transport DO applied
 * them). Also the operator RPCs the admin API builds on: inspect, flush, setPolicy (suspension
 * with an expiry).
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { destinationName } from "../../../worker/model/delivery";
import { callWithKey, email, eventually, getEmail, newKey } from "../helpers";
import { caught as sinkMessages, recipientsWhen } from "./observe";

const sink = inject("sink");
let key: string;

beforeAll(async () => {
  key = await newKey("acme");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('dsink', ?), ('drefused', ?)").bind(
      `[127.0.0.1]:${sink.smtpPort}`,
      `[127.0.0.1]:${sink.closedPort}`,
    ),
    env.DB.prepare(
      "INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'dsink.test', 'dsink'), (NULL, 'drefused.test', 'drefused')",
    ),
  ]);
});

async function send(to: string[], subject = "authority"): Promise<string> {
  const res = await callWithKey(key, "POST", "/emails", email({ to, subject }));
  expect(res.status).toBe(200);
  return (await res.json<{ id: string }>()).id;
}

describe("the Destination DO is the authority on the window and dead state", () => {
  it("a destination that only succeeds gets no DO record: its window lives in the Transport DO", async () => {
    const ids = await Promise.all([1, 2, 3].map((n) => send([`a${n}@dsink.test`])));
    for (const id of ids) await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered");
    const queue = `[127.0.0.1]:${sink.smtpPort}`;
    await new Promise((done) => setTimeout(done, 1500)); // past the agent's feedback stage (AGENT_STAGE_MS)
    expect(await env.DESTINATION_QUEUE.getByName(destinationName("dsink", queue)).get()).toEqual({
      record: null,
      history: [],
    });
    const view = await env.TRANSPORT_QUEUE.getByName("dsink").inspect();
    const d = view.destinations.find((x) => x.queue === queue);
    expect(d?.state).toBe("idle"); // remembered for destination_idle_memory, at its learned window
    expect(d!.window).toBeGreaterThan(0);
  });

  it("site failures kill the destination in its DO, and the Transport DO shows the same dead-until", async () => {
    const ids = await Promise.all(["f", "g", "h"].map((n) => send([`${n}@drefused.test`])));
    // Generous waits: under a full CI run's load the deliver queue can lag by seconds.
    for (const id of ids) await recipientsWhen(key, id, (r) => r.status === "deferred", "deferred", 30_000);
    const queue = `[127.0.0.1]:${sink.closedPort}`;
    const stub = env.DESTINATION_QUEUE.getByName(destinationName("drefused", queue));
    const dead = await eventually(
      async () => {
        const g = await stub.get();
        return g.record && g.record.deadUntil > 0 ? g : undefined;
      },
      30_000,
      "the destination's DO to declare it dead",
    );
    expect(dead.history.some((e) => e.kind === "site_failure" && e.outcome === "died")).toBe(true);
    const view = await env.TRANSPORT_QUEUE.getByName("drefused").inspect();
    const d = view.destinations.find((x) => x.queue === queue);
    // Either still dead until the DO's time, or already revived (back-off is 1 s here), but not
    // before that time (whole seconds on both sides).
    if (d?.state === "dead") expect(d.until).toBe(dead.record!.deadUntil);
    else expect(Math.ceil(Date.now() / 1000)).toBeGreaterThanOrEqual(dead.record!.deadUntil);
  }, 90_000);

  it("a dead verdict from the DO stops dispatch to a destination the core itself thinks alive, until the DO's time", async () => {
    const queue = `[127.0.0.1]:${sink.smtpPort}`;
    const t = env.TRANSPORT_QUEUE.getByName("dsink");
    // Make the queue exist in core (a message in flight keeps it), then declare it dead from outside
    // (its report goes to no DO: the destination never failed, so no answer can undo ours).
    const first = await send(["v1@dsink.test"]);
    await recipientsWhen(key, first, (r) => r.status === "delivered", "delivered", 30_000);
    const until = Math.floor(Date.now() / 1000) + 3;
    const applied = await t.verdict(queue, { window: 0, deadUntil: until, reason: "4.4.1 test verdict" });
    expect(applied).toBe(true);
    const id = await send(["v2@dsink.test"]);
    const waiting = await recipientsWhen(key, id, (r) => r.status === "deferred", "deferred while dead", 30_000);
    expect(waiting[0]!.status).toBe("deferred");
    await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered after the DO's revival time", 30_000);
    expect(Date.now() / 1000).toBeGreaterThanOrEqual(until);
  }, 90_000);
});

describe("operator RPCs of the Transport DO", () => {
  it("inspect shows qshape and policies; setPolicy suspends a destination until a time; flush retries now", async () => {
    const queue = `[127.0.0.1]:${sink.smtpPort}`;
    const t = env.TRANSPORT_QUEUE.getByName("dsink");
    const until = Math.floor(Date.now() / 1000) + 600;
    await t.setPolicy(`dest:dsink/${queue}`, { suspendedUntil: until });
    const id = await send(["s1@dsink.test", "s2@dsink.test"]);
    const view = await eventually(
      async () => {
        const v = await t.inspect();
        return v.qshape[0]!.total >= 2 ? v : undefined;
      },
      5000,
      "the recipients in core",
    );
    expect(view.transport).toBe("dsink");
    expect(view.policies).toContainEqual({ key: `dest:dsink/${queue}`, rule: { suspendedUntil: until } });
    expect(view.qshape.find((r) => r.destination === queue)?.total).toBe(2);
    // GET /emails/:id explains the wait, with the suspension's end.
    const shown = (await getEmail(key, id)).body.recipients as unknown as {
      blocked_by: string;
      blocked_until: string | null;
    }[];
    expect(shown.map((r) => r.blocked_by)).toEqual(["suspended", "suspended"]);
    expect(shown[0]!.blocked_until).toBe(new Date(until * 1000).toISOString());
    const before = (await sinkMessages(sink.httpPort)).length;
    await t.setPolicy(`dest:dsink/${queue}`, null);
    await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered after resume");
    expect((await sinkMessages(sink.httpPort)).length).toBeGreaterThan(before);
    await t.flush();
    expect((await t.inspect()).deferred[0]).toMatchObject({ destination: "TOTAL", total: 0 });
  });
});
