/**
 * Resend's emails.attachments (a sent email's attachments, downloaded through signed links from
 * the copy kept at accept) and emails.metrics (counts and rates from the event log by period and
 * domain).
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { insertDomain } from "../../../worker/db/domains";
import { newDkimKey } from "../../../worker/domains/service";
import { call, callWithKey, email, newKey } from "../helpers";

type Json = Record<string, unknown>;
const json = async (r: Response) => (await r.json()) as Json;
const b64 = (s: string) => btoa(s);

describe("a sent email's attachments", () => {
  it("are listed in the message's order and downloaded with their bytes", async () => {
    const key = await newKey("att-a");
    const sent = await callWithKey(
      key,
      "POST",
      "/emails",
      email({
        html: '<p>see <img src="cid:logo"></p>',
        attachments: [
          { filename: "invoice.pdf", content: b64("%PDF-1.7 invoice") },
          { filename: "logo.png", content: b64("PNGDATA"), content_id: "logo" },
        ],
      }),
    );
    const { id } = (await json(sent)) as { id: string };
    const list = await json(await callWithKey(key, "GET", `/emails/${id}/attachments`));
    const data = list.data as Json[];
    expect(data.map((a) => [a.filename, a.size, a.content_type, a.content_disposition])).toEqual([
      ["logo.png", 7, "image/png", "inline"],
      ["invoice.pdf", 16, "application/pdf", "attachment"],
    ]);
    for (const [i, want] of [
      [0, "PNGDATA"],
      [1, "%PDF-1.7 invoice"],
    ] as const) {
      const one = await json(await callWithKey(key, "GET", `/emails/${id}/attachments/${data[i]!.id as string}`));
      expect(one).toMatchObject({ object: "attachment", id: data[i]!.id, expires_at: expect.any(String) });
      expect(
        new TextDecoder().decode(await (await call(new URL(one.download_url as string).pathname)).arrayBuffer()),
      ).toBe(want);
    }
    const page = await json(await callWithKey(key, "GET", `/emails/${id}/attachments?limit=1`));
    expect(page).toMatchObject({ has_more: true, data: [{ filename: "logo.png" }] });
    expect((await callWithKey(await newKey("att-b"), "GET", `/emails/${id}/attachments`)).status).toBe(404);
    // An email without attachments has none, and keeps no copy.
    const plain = (await json(await callWithKey(key, "POST", "/emails", email()))).id as string;
    expect(await json(await callWithKey(key, "GET", `/emails/${plain}/attachments`))).toEqual({
      object: "list",
      has_more: false,
      data: [],
    });
    expect((await env.BODIES.list({ prefix: "sent/" })).objects.filter((o) => o.key.endsWith(plain))).toEqual([]);
  });
});

describe("email metrics", () => {
  it("count and rate a mixed run by period and by domain, from the event log", async () => {
    const key = await newKey("met-a");
    const now = Date.now();
    const dom = crypto.randomUUID();
    await insertDomain(
      env.DB,
      {
        id: dom,
        tenant_id: "met-a",
        name: "metrics.example",
        status: "verified",
        region: "us-east-1",
        return_path: "send",
        open_tracking: 0,
        click_tracking: 0,
        tls: "opportunistic",
        records: "[]",
        created_at: now,
        verified_at: now,
      },
      await newDkimKey(env, dom, "cohort1", "active", now),
    );
    // Four emails from metrics.example and one from elsewhere: 5 sent, 3 delivered, 1 bounced, 1 complained, 1 unsubscribed.
    const events: [string, string, string][] = [
      ["m1", "a@metrics.example", "email.sent"],
      ["m1", "a@metrics.example", "email.delivered"],
      ["m1", "a@metrics.example", "email.complained"],
      ["m2", "a@metrics.example", "email.sent"],
      ["m2", "a@metrics.example", "email.delivered"],
      ["m2", "a@metrics.example", "email.unsubscribed"],
      ["m3", "a@metrics.example", "email.sent"],
      ["m3", "a@metrics.example", "email.bounced"],
      ["m4", "a@metrics.example", "email.sent"],
      ["m5", "Other <b@other.example>", "email.sent"],
      ["m5", "Other <b@other.example>", "email.delivered"],
    ];
    const stmts = [...new Set(events.map((e) => e[0]))].map((m) =>
      env.DB.prepare(
        "INSERT INTO messages (id, tenant_id, created_at, from_addr, to_json, last_event, updated_at) VALUES (?, 'met-a', ?, ?, '[]', 'sent', ?)",
      ).bind(`met-${m}`, now, events.find((e) => e[0] === m)![1], now),
    );
    events.forEach(([m, , type], i) =>
      stmts.push(
        env.DB.prepare(
          "INSERT INTO event_runs (tenant_id, seq, email_id, source_seq, part, type, created_at, " +
            "event_id, event_type, body) VALUES ('met-a', ?, ?, ?, 0, ?, ?, ?, ?, '{}')",
        ).bind((now - 60_000) * 1000 + i, `met-${m}`, i, type, now - 60_000, `evt_met-${m}_${i}`, type),
      ),
    );
    await env.DB.batch(stmts);

    const all = await json(await callWithKey(key, "GET", "/emails/metrics"));
    expect(all).toMatchObject({ object: "metrics", dimensions: [], granularity: "daily" });
    expect(all.data).toBeUndefined();
    expect(all.totals).toMatchObject({
      sent: 5,
      delivered: 3,
      bounced: 1,
      bounced_permanent: 1,
      complained: 1,
      unsubscribed: 1,
      delivery_rate: 0.6,
      bounce_rate: 0.2,
      complaint_rate: 0.3333,
      unsubscribe_rate: 0.3333,
      opened: 0,
    });

    const by = await json(
      await callWithKey(key, "GET", "/emails/metrics?dimensions=period,domain&metrics=sent,delivered,delivery_rate"),
    );
    expect(by.metrics).toEqual(["sent", "delivered", "delivery_rate"]);
    const rows = by.data as Json[];
    expect(rows).toHaveLength(2);
    expect(rows.find((r) => r.domain_name === "metrics.example")).toEqual({
      period: expect.stringMatching(/T00:00:00\.000Z$/),
      domain_id: dom,
      domain_name: "metrics.example",
      sent: 4,
      delivered: 2,
      delivery_rate: 0.5,
    });
    expect(rows.find((r) => r.domain_name === "other.example")).toMatchObject({
      domain_id: null,
      sent: 1,
      delivered: 1,
    });
    const one = await json(await callWithKey(key, "GET", `/emails/metrics?domain_id=${dom}&metrics=sent`));
    expect(one.totals).toEqual({ sent: 4 });
    const hourly = await json(
      await callWithKey(
        key,
        "GET",
        "/emails/metrics?dimensions=period&granularity=hourly&timezone=America/New_York&metrics=sent",
      ),
    );
    expect((hourly.data as Json[]).reduce((n, r) => n + (r.sent as number), 0)).toBe(5);

    for (const q of [
      "dimensions=broadcast",
      "email_id=x",
      "timezone=Mars/Base",
      "granularity=yearly",
      "start_date=soon",
      "metrics=sent,nope",
    ]) {
      const res = await callWithKey(key, "GET", `/emails/metrics?${q}`);
      expect(res.status, q).toBe(422);
    }
    // Another tenant's events are not counted.
    expect((await json(await callWithKey(await newKey("met-b"), "GET", "/emails/metrics"))).totals).toMatchObject({
      sent: 0,
    });
  });
});
