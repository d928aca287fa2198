/** GET /emails pagination, scheduled sending, PATCH (reschedule) and cancel. */
import { env, runDurableObjectAlarm } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { outboxName, shardOf } from "../../worker/model/ids";
import { listEvents } from "../../worker/db/events";
import { callWithKey, classified, email, eventually, getEmail, newKey, settle } from "./helpers";

let key: string;
beforeAll(async () => {
  key = await newKey("lister");
});
afterAll(() => settle());

type ListBody = {
  object: string;
  has_more: boolean;
  data: { id: string; subject: string; last_event: string; to: string[]; scheduled_at: string | null }[];
};

async function send(body: Record<string, unknown>, k = key): Promise<string> {
  const res = await callWithKey(k, "POST", "/emails", body);
  expect(res.status).toBe(200);
  return (await res.json<{ id: string }>()).id;
}

async function list(query: string, k = key): Promise<{ status: number; body: ListBody }> {
  const res = await callWithKey(k, "GET", `/emails${query}`);
  return { status: res.status, body: await res.json() };
}

describe("GET /emails", () => {
  const ids: string[] = [];
  beforeAll(async () => {
    for (let i = 0; i < 5; i++) {
      ids.push(await send(email({ subject: `list-${i}` })));
      await new Promise((r) => setTimeout(r, 3)); // distinct created_at
    }
    await settle();
  });

  it("lists the tenant's emails newest first with Resend's list envelope", async () => {
    const { status, body } = await list("?limit=2");
    expect(status).toBe(200);
    expect(body.object).toBe("list");
    expect(body.has_more).toBe(true);
    expect(body.data.map((d) => d.id)).toEqual([ids[4], ids[3]]);
    expect(body.data[0]).toMatchObject({
      subject: "list-4",
      to: ["ann@example.com"],
      last_event: "queued",
      scheduled_at: null,
    });
  });

  it("pages with after (older) and before (newer)", async () => {
    const older = await list(`?limit=2&after=${ids[3]}`);
    expect(older.body.data.map((d) => d.id)).toEqual([ids[2], ids[1]]);
    expect(older.body.has_more).toBe(true);
    const last = await list(`?limit=2&after=${ids[1]}`);
    expect(last.body.data.map((d) => d.id)).toEqual([ids[0]]);
    expect(last.body.has_more).toBe(false);
    const newer = await list(`?limit=2&before=${ids[1]}`);
    expect(newer.body.data.map((d) => d.id)).toEqual([ids[3], ids[2]]);
    expect(newer.body.has_more).toBe(true);
  });

  it("never lists another tenant's emails, and rejects their ids as cursors", async () => {
    const other = await newKey("outsider");
    expect((await list("", other)).body.data).toEqual([]);
    const res = await list(`?after=${ids[0]}`, other);
    expect(res.status).toBe(422);
  });

  it.each([{ q: "?limit=0" }, { q: "?limit=101" }, { q: "?limit=ten" }, { q: `?after=x&before=y` }])(
    "rejects $q with 422 validation_error",
    async ({ q }) => {
      const res = await list(q);
      expect(res.status).toBe(422);
      expect(res.body).toMatchObject({ statusCode: 422, name: "validation_error" });
    },
  );
});

describe("scheduled sending", () => {
  it("keeps a scheduled message's recipients incoming, blocked by 'scheduled'", async () => {
    const id = await send(email({ scheduled_at: "in 1 hour" }));
    const { body } = await getEmail(key, id);
    expect(body.last_event).toBe("scheduled");
    expect(body.recipients).toEqual([expect.objectContaining({ status: "incoming", blocked_by: "scheduled" })]);
    expect(Date.parse(body.scheduled_at as string)).toBeGreaterThan(Date.now() + 3_500_000);
  });

  it("sends a scheduled message when it is due (the Outbox alarm triggers classification)", async () => {
    const at = new Date(Date.now() + 1200).toISOString();
    const id = await send(email({ scheduled_at: at }));
    expect((await getEmail(key, id)).body.recipients[0]!.status).toBe("incoming");
    await new Promise((r) => setTimeout(r, 1300));
    await runDurableObjectAlarm(env.OUTBOX.getByName(outboxName(shardOf(id))));
    const body = await classified(key, id);
    expect(body.recipients[0]!.status).toBe("ready");
    expect(body.scheduled_at).toBe(at);
  });

  it("reschedules with PATCH, refuses a time in the past, and sends at once when rescheduled to now", async () => {
    const id = await send(email({ scheduled_at: "in 1 hour" }));
    const later = new Date(Date.now() + 2 * 3600_000).toISOString();
    const res = await callWithKey(key, "PATCH", `/emails/${id}`, { scheduled_at: later });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ object: "email", id });
    expect((await getEmail(key, id)).body.scheduled_at).toBe(later);
    const past = await callWithKey(key, "PATCH", `/emails/${id}`, {
      scheduled_at: new Date(Date.now() - 3_600_000).toISOString(),
    });
    expect(past.status).toBe(422);
    expect(await past.json()).toMatchObject({
      name: "validation_error",
      message: expect.stringMatching(/is in the past; omit it \(or say "now"\)/),
    });
    expect(
      (await callWithKey(key, "PATCH", `/emails/${id}`, { scheduled_at: new Date(Date.now() - 5_000).toISOString() }))
        .status,
    ).toBe(200);
    expect((await classified(key, id)).recipients[0]!.status).toBe("ready");
    // The event log carries times as ISO 8601, as everything else does (issue 12: epoch ms here).
    await settle();
    const scheduled = (await listEvents(env.DB, "lister", 0, 10_000)).filter(
      (e) => e.email_id === id && e.type === "email.scheduled",
    );
    expect(scheduled.map((e) => (JSON.parse(e.data) as { scheduled_at: unknown }).scheduled_at)).toEqual([
      expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      later,
      expect.stringMatching(/Z$/),
    ]);
  });

  it("rejects PATCH of a message that is not scheduled, and bad PATCH bodies", async () => {
    const id = await send(email());
    const res = await callWithKey(key, "PATCH", `/emails/${id}`, { scheduled_at: "in 1 hour" });
    expect(res.status).toBe(422);
    expect(await res.json()).toMatchObject({ name: "validation_error", message: expect.stringMatching(/scheduled/) });
    expect((await callWithKey(key, "PATCH", `/emails/${id}`, {})).status).toBe(422);
    expect((await callWithKey(key, "PATCH", `/emails/${id}`, "{")).status).toBe(400);
  });

  it("cancels a scheduled message: recipients cancelled, body deleted, listed as canceled", async () => {
    const id = await send(email({ scheduled_at: "in 1 hour", subject: "to-cancel" }));
    const res = await callWithKey(key, "POST", `/emails/${id}/cancel`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ object: "email", id });
    const { body } = await getEmail(key, id);
    expect(body.last_event).toBe("canceled");
    expect(body.recipients[0]!.status).toBe("cancelled");
    expect(await env.BODIES.head(`mess/${id}`)).toBeNull();
    await eventually(async () =>
      (await list("?limit=100")).body.data.find((d) => d.id === id)?.last_event === "canceled" ? true : undefined,
    );
    const again = await callWithKey(key, "POST", `/emails/${id}/cancel`);
    expect(again.status).toBe(422);
  });

  it("refuses to cancel a message that is already being sent", async () => {
    const id = await send(email());
    const res = await callWithKey(key, "POST", `/emails/${id}/cancel`);
    expect(res.status).toBe(422);
    expect(await res.json()).toMatchObject({ statusCode: 422, name: "validation_error" });
  });
});
