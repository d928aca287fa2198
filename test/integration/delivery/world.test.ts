/**
 * Delivery into the mail world (bench/world/, the small world of world.ts: each domain's MX on
 * its own 127.78.x.y, answered by the fixture resolver, served by the world sink on MX_PORT) in
 * the Workers runtime: what the server sees of the relay's retries and of its DNS look-ups.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { callWithKey, email, newKey } from "../helpers";
import { recipientsWhen } from "./observe";
import { TEST_WORLD } from "./world";
import type { GreylistRecord } from "../../../bench/world/sink";

const world = inject("world");
const doh = inject("doh");
let key: string;
/** This project's recipients are its own (both delivery projects share one world). */
const run = `${env.DELIVERY}-${Date.now().toString(36)}`;

beforeAll(async () => {
  key = await newKey("world");
  await env.DB.batch([
    env.DB.prepare("INSERT OR IGNORE INTO transports (name, nexthop) VALUES ('world', NULL)"),
    env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, ?, 'world')").bind(
      `*.${TEST_WORLD.config.suffix}`,
    ),
  ]);
});

async function send(to: string[]): Promise<string> {
  const res = await callWithKey(key, "POST", "/emails", email({ to }));
  expect(res.status).toBe(200);
  return (await res.json<{ id: string }>()).id;
}

async function recipient(address: string): Promise<{ delivered: number[]; greylist: GreylistRecord | null }> {
  return (await fetch(`${world.viewUrl}/recipient?address=${encodeURIComponent(address)}`)).json();
}

describe("delivery into the mail world", () => {
  it("retries a greylisted recipient no sooner than the back-off after its attempt, so the greylist refuses it only once", async () => {
    const greylisting = TEST_WORLD.domains.filter((d) => d.kind === "greylist").slice(0, 6);
    expect(greylisting.length).toBeGreaterThanOrEqual(4);
    const to = greylisting.map((d, i) => `grey-${run}-${i}@${d.name}`);
    const ids = await Promise.all(to.map((t) => send([t])));
    for (const id of ids)
      await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered after the greylist", 20_000);
    for (const address of to) {
      const { delivered, greylist } = await recipient(address);
      expect(delivered).toHaveLength(1);
      // The greylist accepts an attempt 1 s (the back-off here) after the first: a retry that
      // came early would be refused again.
      expect(greylist).toMatchObject({ refusals: 1 });
      expect(greylist!.attempts).toHaveLength(2);
      expect(greylist!.attempts[1]! - greylist!.attempts[0]!).toBeGreaterThanOrEqual(1000);
    }
  });

  it("asks DNS once per domain while the answer's TTL lasts, across deliveries in different invocations", async () => {
    const normal = TEST_WORLD.domains.filter((d) => d.kind === "normal");
    const d = normal[env.DELIVERY === "agents" ? 2 : 3]!;
    const first = await send([`dns-a-${run}@${d.name}`]);
    await recipientsWhen(key, first, (r) => r.status === "delivered", "delivered");
    const second = await send([`dns-b-${run}@${d.name}`]);
    await recipientsWhen(key, second, (r) => r.status === "delivered", "delivered");
    const counts = await (await fetch(new URL("/queries", doh.url))).json<Record<string, number>>();
    expect(counts[`${d.name}/MX`]).toBe(1);
  });
});
