import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  dayStart,
  idFloor,
  quotaReply,
  receivedFields,
  uuidV7,
  withDataUris,
} from "../../../worker/receiving/core/received";
import { bucketOf, foldMetrics, METRICS, validZone } from "../../../worker/metrics/core/metrics";

describe("received mail's fields and ids", () => {
  it("orders UUIDv7 ids by time as text, with the version and variant bits set", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 47 }),
        fc.integer({ min: 1, max: 10 ** 9 }),
        fc.uint8Array({ minLength: 10, maxLength: 10 }),
        fc.uint8Array({ minLength: 10, maxLength: 10 }),
        (t, dt, r1, r2) => {
          const a = uuidV7(t, r1);
          const b = uuidV7(t + dt, r2);
          expect(a < b).toBe(true);
          expect(idFloor(t) <= a).toBe(true);
          expect(a).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
        },
      ),
    );
  });

  it("reads addresses as written, the envelope recipient, repeated headers and the attachments", () => {
    const f = receivedFields(
      {
        headers: [
          { key: "Received", value: "a" },
          { key: "received", value: "b" },
          { key: "Subject", value: "Hi" },
        ],
        from: { name: "Ann", address: "ann@x.example" },
        to: [
          {
            name: "Team",
            group: [
              { name: "", address: "t1@y.example" },
              { name: "T2", address: "t2@y.example" },
            ],
          },
        ],
        subject: "Hi",
        messageId: "<m@x>",
        attachments: [
          { filename: "a.pdf", mimeType: "application/pdf", disposition: "attachment", size: 3 },
          { filename: null, mimeType: "image/png", disposition: "inline", contentId: "<c1>", size: 9 },
        ],
      },
      { from: "bounce@x.example", to: "help@y.example" },
      ["id1", "id2"],
    );
    expect(f).toEqual({
      from: "Ann <ann@x.example>",
      to: ["t1@y.example", "T2 <t2@y.example>"],
      cc: null,
      bcc: null,
      reply_to: null,
      received_for: ["help@y.example"],
      subject: "Hi",
      message_id: "<m@x>",
      headers: { received: "a, b", subject: "Hi" },
      attachments: [
        {
          id: "id1",
          filename: "a.pdf",
          size: 3,
          content_type: "application/pdf",
          content_id: null,
          content_disposition: "attachment",
        },
        {
          id: "id2",
          filename: null,
          size: 9,
          content_type: "image/png",
          content_id: "c1",
          content_disposition: "inline",
        },
      ],
    });
    expect(receivedFields({ headers: [], attachments: [] }, { from: "e@x", to: "r@y" }, [])).toMatchObject({
      from: "e@x",
      to: ["r@y"],
      subject: "",
    });
  });

  it("puts inline images in html as data: URIs only where a cid: reference names them", () => {
    const html = "<img src=\"cid:logo@x\"><img src='cid:other'> cid:logo@xy";
    expect(withDataUris(html, [{ content_id: "logo@x", content_type: "image/png", base64: "AAA" }])).toBe(
      "<img src=\"data:image/png;base64,AAA\"><img src='cid:other'> cid:logo@xy",
    );
  });

  it("starts a quota day at 00:00 UTC and says so when it refuses", () => {
    expect(dayStart(Date.UTC(2026, 4, 3, 23, 59))).toBe(Date.UTC(2026, 4, 3));
    expect(quotaReply(5)).toMatch(/^552 5\.2\.2 .*5 messages a UTC day/);
  });
});

describe("email metrics folding", () => {
  const H = 3_600_000;
  const day = Date.UTC(2026, 0, 5); // a Monday
  const rows = [
    { hour: day + 2 * H, type: "email.sent", domain: "a.example", n: 10 },
    { hour: day + 2 * H, type: "email.delivered", domain: "a.example", n: 8 },
    { hour: day + 30 * H, type: "email.sent", domain: "b.example", n: 5 },
    { hour: day + 30 * H, type: "email.bounced", domain: "b.example", n: 1 },
    { hour: day + 30 * H, type: "received", domain: "a.example", n: 3 },
    { hour: day + 30 * H, type: "email.queued", domain: "a.example", n: 99 },
  ];
  const q = {
    metrics: METRICS,
    byPeriod: false,
    byDomain: false,
    granularity: "daily" as const,
    timezone: "UTC",
    domainIds: new Map([["a.example", "d-a"]]),
  };

  it("totals every metric, rates as fractions, and ignores what is not one", () => {
    const { totals, data } = foldMetrics(rows, q);
    expect(data).toBeUndefined();
    expect(totals).toMatchObject({
      sent: 15,
      delivered: 8,
      bounced: 1,
      received: 3,
      delivery_rate: 0.5333,
      bounce_rate: 0.0667,
      complaint_rate: 0,
      open_rate: 0,
    });
  });

  it("breaks down by day and domain, and the rows add up to the totals", () => {
    const { totals, data } = foldMetrics(rows, { ...q, byPeriod: true, byDomain: true, metrics: ["sent", "received"] });
    expect(data).toEqual([
      { period: new Date(day).toISOString(), domain_id: "d-a", domain_name: "a.example", sent: 10, received: 0 },
      {
        period: new Date(day + 24 * H).toISOString(),
        domain_id: "d-a",
        domain_name: "a.example",
        sent: 0,
        received: 3,
      },
      { period: new Date(day + 24 * H).toISOString(), domain_id: null, domain_name: "b.example", sent: 5, received: 0 },
    ]);
    expect(data!.reduce((n, r) => n + (r.sent ?? 0), 0)).toBe(totals.sent);
  });

  it("starts days, weeks and months in the zone asked for", () => {
    expect(bucketOf(day + 2 * H, "daily", "America/New_York")).toBe(day - 19 * H); // 21:00 Sunday in New York → its midnight
    expect(bucketOf(day + 50 * H, "weekly", "UTC")).toBe(day);
    expect(bucketOf(Date.UTC(2026, 0, 20, 5), "monthly", "UTC")).toBe(Date.UTC(2026, 0, 1));
    expect(validZone("Europe/Paris")).toBe(true);
    expect(validZone("Mars/Base")).toBe(false);
  });
});
