/**
 * A receiver outage in the middle of traffic: the receiver stops listening (connection
 * refused) while mail keeps flowing, then comes back. Every event still arrives, none is lost,
 * a duplicate always carries the same webhook-id and the same body, and the endpoint was backed
 * off as a whole meanwhile.
 */
import { env } from "cloudflare:test";
import { expect, it, vi } from "vitest";
import { eventually, newKey } from "../helpers";
import { createEndpoint, deliveredIds, logWhen, newReceiver, readFeed, send } from "./hooks";

const sendMany = (key: string, from: number, n: number) =>
  Promise.all(Array.from({ length: n }, (_, i) => send(key, { to: `user${from + i}@sink.test` })));

it("delivers every event after an outage, duplicates under the same webhook-id", async () => {
  // What the relay itself logs meanwhile: one structured line per failed attempt, no stack trace.
  const lines: string[] = [];
  const spies = (["log", "warn", "error"] as const).map((level) =>
    vi.spyOn(console, level).mockImplementation((...a: unknown[]) => {
      lines.push(a.map(String).join(" "));
    }),
  );
  const key = await newKey("outage");
  const receiver = await newReceiver();
  const ep = await createEndpoint(key, receiver.url);
  await sendMany(key, 0, 5);
  await logWhen(receiver, (l) => deliveredIds(l).size >= 10, "the events before the outage");

  await receiver.down();
  await sendMany(key, 5, 10);
  // The endpoint is backed off as a whole while it refuses connections.
  const dead = await eventually(
    async () => {
      const row = await env.DB.prepare("SELECT state FROM webhook_endpoint_health WHERE endpoint_id = ?")
        .bind(ep.id)
        .first<{ state: string }>();
      const state = row ? (JSON.parse(row.state) as { dead: boolean; blockedUntilMs: number | null }) : null;
      return state?.dead ? state : undefined;
    },
    15_000,
    "the endpoint to be backed off",
  );
  expect(dead.blockedUntilMs).not.toBeNull();
  await new Promise((r) => setTimeout(r, 2000));
  await receiver.up();
  await sendMany(key, 15, 5);

  const expected = 20 * 2; // email.sent and email.delivered per message
  const log = await logWhen(receiver, (l) => deliveredIds(l).size >= expected, "every event after the outage", 45_000);
  const feed = await readFeed(key);
  expect(feed).toHaveLength(expected);
  expect([...deliveredIds(log)].sort()).toEqual(feed.map((f) => f.id).sort());
  const bodies = new Map<string, string>();
  for (const d of log) {
    const id = d.headers["webhook-id"]!;
    expect(bodies.get(id) ?? d.body).toBe(d.body);
    bodies.set(id, d.body);
  }
  const dl = await env.DB.prepare("SELECT count(*) AS n FROM webhook_dead_letters WHERE endpoint_id = ?")
    .bind(ep.id)
    .first<{ n: number }>();
  expect(dl!.n).toBe(0);
  for (const s of spies) s.mockRestore();
  const failed = lines
    .filter((l) => l.includes("webhooks: attempt failed"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  expect(failed.length).toBeGreaterThan(0);
  for (const f of failed)
    expect(f).toMatchObject({
      endpoint: ep.id,
      event: expect.stringMatching(/^evt_/),
      attempt: expect.any(Number),
      error: "network",
    });
  expect(lines.filter((l) => /\n\s+at |Error: .*\n/.test(l))).toEqual([]); // no stack trace
});
