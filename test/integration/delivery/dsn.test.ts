/**
 * Delivery status notices (DSN_NOTICES = "on" in this project): a bounce produces an RFC 3464
 * multipart/report to the envelope sender, sent with the null sender through the same queue;
 * a notice that itself bounces produces nothing more (never bounce a bounce).
 */
import { env } from "cloudflare:test";
import PostalMime from "postal-mime";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { callWithKey, email, eventually, newKey } from "../helpers";
import { caught, recipientsWhen } from "./observe";

const sink = inject("sink");
let key: string;

beforeAll(async () => {
  key = await newKey("acme");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('dsnsink', ?)").bind(`[127.0.0.1]:${sink.smtpPort}`),
    env.DB.prepare(
      "INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'dsn-rcpt.test', 'dsnsink'), (NULL, 'dsn-sender.test', 'dsnsink')",
    ),
  ]);
});

async function send(from: string, to: string[], subject: string): Promise<string> {
  const res = await callWithKey(key, "POST", "/emails", email({ from, to, subject, text: "original body" }));
  expect(res.status).toBe(200);
  return (await res.json<{ id: string }>()).id;
}

const decode = (b64: string) => Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));

describe("bounce notices", () => {
  it("a 5xx bounce sends a multipart/report DSN with the null sender to the envelope sender", async () => {
    const id = await send(
      "Sender <owner@dsn-sender.test>",
      ["reject-ann@dsn-rcpt.test", "bob@dsn-rcpt.test"],
      "Original subject",
    );
    await recipientsWhen(key, id, (r) => r.status === "bounced" || r.status === "delivered", "final");
    const notice = await eventually(
      async () => (await caught(sink.httpPort)).find((m) => m.rcptTo.includes("owner@dsn-sender.test")),
      15_000,
      "the DSN at the sink",
    );
    expect(notice.mailFrom).toBe("");
    const raw = new TextDecoder().decode(decode(notice.body));
    expect(raw).toMatch(/^Content-Type: multipart\/report;[\s\S]*report-type=delivery-status/im);
    expect(raw).toMatch(/^Auto-Submitted: auto-replied/im);
    const parsed = await PostalMime.parse(decode(notice.body));
    expect(parsed.subject).toBe("Undelivered Mail Returned to Sender");
    expect(raw).toMatch(/Final-Recipient: rfc822; ?reject-ann@dsn-rcpt\.test/i);
    expect(raw).toMatch(/Action: failed/);
    expect(raw).toMatch(/Status: 5\.1\.1/);
    expect(raw).toMatch(/Diagnostic-Code: smtp; ?550/);
    expect(raw).toMatch(new RegExp(`Original-Envelope-Id: ${id}`, "i"));
    expect(raw).toContain("Subject: Original subject"); // the original headers are quoted
    // Only the bounced recipient is reported.
    expect(raw).not.toMatch(/Final-Recipient: rfc822; ?bob@/i);
  });

  it("a notice that bounces is not bounced again", async () => {
    const id = await send("reject-owner@dsn-sender.test", ["reject-x@dsn-rcpt.test"], "Bounce loop");
    await recipientsWhen(key, id, (r) => r.status === "bounced", "bounced");
    // The notice goes to reject-owner@…, which bounces it; a notice has the null sender, so nothing follows.
    await eventually(
      async () => {
        const row = await env.DB.prepare(
          "SELECT count(*) AS n FROM messages WHERE from_addr LIKE 'MAILER-DAEMON@%' AND to_json LIKE '%reject-owner@dsn-sender.test%'",
        ).first<{ n: number }>();
        return (row?.n ?? 0) >= 1 ? true : undefined;
      },
      15_000,
      "the notice in the index",
    );
    const noticeId = (await env.DB.prepare(
      "SELECT id FROM messages WHERE to_json LIKE '%reject-owner@dsn-sender.test%'",
    ).first<{ id: string }>())!.id;
    await recipientsWhen(key, noticeId, (r) => r.status === "bounced", "the notice bounced");
    await new Promise((r) => setTimeout(r, 1500));
    const mine = await env.DB.prepare(
      "SELECT count(*) AS n FROM messages WHERE from_addr LIKE 'MAILER-DAEMON@%' AND to_json LIKE '%reject-owner@%'",
    ).first<{ n: number }>();
    // Exactly one notice for the original, none for the notice that bounced.
    expect(mine?.n).toBe(1);
  });
});
