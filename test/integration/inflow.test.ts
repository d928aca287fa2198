/**
 * Inflow control (Postfix's in_flow_delay): while recipients arrive at an Outbox shard faster
 * than their outcomes come back (core/flow.ts), its accept answers ask for a pause, and the route
 * holds the answer back that long, the message already stored. This project runs with
 * IN_FLOW_DELAY_MS "0" (tests send bursts on purpose); these tests give the Outboxes an env with
 * 400 ms.
 */
import { env, runInDurableObject } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { FlowMeter } from "../../durable-objects/core";
import { outboxName } from "../../worker/model/ids";
import { callWithKey, email, getEmail, newKey } from "./helpers";
import { settingsOf } from "../../worker/settings/settings";

const DELAY_MS = 400;
let key: string;

/** Gives every shard's Outbox IN_FLOW_DELAY_MS = DELAY_MS and `arrived` recipients just now (0: a fresh meter). */
async function everyShard(arrived: number): Promise<void> {
  for (let s = 0; s < settingsOf(env).outboxShards; s++) {
    await runInDurableObject(env.OUTBOX.getByName(outboxName(s)), (instance) => {
      const o = instance as unknown as { env: Env; intake: { flow: FlowMeter } };
      o.env = { ...o.env, IN_FLOW_DELAY_MS: String(DELAY_MS) };
      o.intake.flow = new FlowMeter();
      if (arrived > 0) o.intake.flow.arrive(arrived, Math.floor(Date.now() / 1000));
    });
  }
}

/** An accept straight to the Outbox of `shard` of one message with `n` recipients: its answer. */
function acceptIn(shard: number, n: number, scheduledAt: number | null = null) {
  const id = `${shard.toString(16).padStart(2, "0")}${crypto.randomUUID().slice(2)}`;
  const rcptTo = Array.from({ length: n }, (_, i) => `r${i}@example.com`);
  return env.OUTBOX.getByName(outboxName(shard)).accept({
    tenant: "inflow",
    idempotency: null,
    response: { status: 200, body: "{}" },
    messages: [
      {
        id,
        createdAt: Date.now(),
        scheduledAt,
        mailFrom: "a@acme.test",
        rcptTo,
        size: 10,
        summary: {
          from: "a@acme.test",
          to: rcptTo,
          cc: null,
          bcc: null,
          reply_to: null,
          subject: "s",
          html: null,
          text: "t",
          tags: null,
          message_id: `<${id}@acme.test>`,
        },
      },
    ],
  });
}

beforeAll(async () => {
  key = await newKey("inflow");
});

describe("inflow control", () => {
  it("holds back an accept's answer IN_FLOW_DELAY_MS while the inflow is over; the message is stored before", async () => {
    await everyShard(5000);
    const t0 = Date.now();
    const res = await callWithKey(key, "POST", "/emails", email({ to: ["held@example.com"] }));
    expect(res.status).toBe(200);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(DELAY_MS);
    const { id } = await res.json<{ id: string }>();
    expect((await getEmail(key, id)).status).toBe(200);
  });

  it("counts what a shard accepts: up to 2,000 recipients waiting is no reason to pause, 2,001 is", async () => {
    await everyShard(0);
    expect(await acceptIn(1, 1000)).toMatchObject({ kind: "accepted", pauseMs: 0 });
    expect(await acceptIn(1, 1000)).toMatchObject({ kind: "accepted", pauseMs: 0 });
    expect(await acceptIn(1, 1)).toMatchObject({ kind: "accepted", pauseMs: DELAY_MS });
    expect(await acceptIn(2, 1)).toMatchObject({ kind: "accepted", pauseMs: 0 }); // another shard's own count
    // Scheduled mail is not due: it does not count.
    expect(await acceptIn(3, 5000, Date.now() + 3_600_000)).toMatchObject({ kind: "accepted", pauseMs: 0 });
    expect(await acceptIn(3, 1)).toMatchObject({ kind: "accepted", pauseMs: 0 });
  });
});
