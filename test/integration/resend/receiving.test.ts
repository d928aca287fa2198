/**
 * Received mail (Resend's emails.receiving) through the email() handler: kept for a verified
 * domain with receiving enabled (raw in R2, fields in D1, email.received in the event log),
 * listed and read with its attachment through signed links, refused beyond the tenant's quota
 * and for a domain that does not receive, reports told apart, and retention.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { insertDomain, updateDomain } from "../../../worker/db/domains";
import { newDkimKey } from "../../../worker/domains/service";
import { handleInbound } from "../../../worker/inbound/email";
import { purgeKept } from "../../../worker/receiving/retention";
import { receiveMail } from "../../../worker/receiving/receive";
import { call, callWithKey, newKey } from "../helpers";

type Json = Record<string, unknown>;
const json = async (r: Response) => (await r.json()) as Json;

async function domain(tenant: string, name: string, receiving: boolean, status = "verified"): Promise<string> {
  const id = crypto.randomUUID();
  const now = Date.now();
  await insertDomain(
    env.DB,
    {
      id,
      tenant_id: tenant,
      name,
      status: status as "verified",
      region: "us-east-1",
      return_path: "send",
      open_tracking: 0,
      click_tracking: 0,
      tls: "opportunistic",
      records: "[]",
      created_at: now,
      verified_at: now,
    },
    await newDkimKey(env, id, "cohort1", "active", now),
  );
  if (receiving) await updateDomain(env.DB, tenant, id, { receiving: true });
  return id;
}

/** A multipart message with text, html (an inline cid image) and a PDF attachment. */
function mime(to: string, subject: string): string {
  const pdf = btoa("%PDF-1.4 receipt");
  const png = btoa("\x89PNG fake");
  return [
    "From: Ann Sender <ann@outside.example>",
    `To: Support <${to}>`,
    "Cc: cc@outside.example",
    "Reply-To: replies@outside.example",
    `Subject: ${subject}`,
    "Message-ID: <m1@outside.example>",
    "MIME-Version: 1.0",
    'Content-Type: multipart/mixed; boundary="b1"',
    "",
    "--b1",
    'Content-Type: multipart/related; boundary="b2"',
    "",
    "--b2",
    "Content-Type: text/html; charset=utf-8",
    "",
    '<p>Hello <img src="cid:logo@x"></p>',
    "--b2",
    "Content-Type: image/png",
    "Content-Transfer-Encoding: base64",
    "Content-ID: <logo@x>",
    'Content-Disposition: inline; filename="logo.png"',
    "",
    png,
    "--b2--",
    "--b1",
    'Content-Type: application/pdf; name="receipt.pdf"',
    "Content-Transfer-Encoding: base64",
    'Content-Disposition: attachment; filename="receipt.pdf"',
    "",
    pdf,
    "--b1--",
    "",
  ].join("\r\n");
}

async function deliver(from: string, to: string, text: string): Promise<{ kind: string; rejected: string | null }> {
  const bytes = new TextEncoder().encode(text);
  let rejected: string | null = null;
  const kind = await handleInbound(
    {
      from,
      to,
      raw: new Response(bytes).body!,
      rawSize: bytes.length,
      setReject: (r) => {
        rejected = r;
      },
    },
    env,
  );
  return { kind, rejected };
}

/** The receiving stage alone, at another time than now (the handler reads the clock). */
async function receiveAt(to: string, text: string, nowMs: number): Promise<string | null> {
  return receiveMail(
    env,
    { from: "a@o.example", to, setReject: () => undefined },
    new TextEncoder().encode(text),
    nowMs,
  );
}

let key: string;
beforeAll(async () => {
  key = await newKey("recv");
  await domain("recv", "inbox.example", true);
  await domain("recv", "quiet.example", false);
  await domain("recv", "unverified.example", true, "pending");
});

describe("receiving", () => {
  it("keeps mail to a receiving domain: listed, read with html, headers, attachments and raw, and published as email.received", async () => {
    expect(
      await deliver("ann@outside.example", "help@inbox.example", mime("help@inbox.example", "Where is my order?")),
    ).toEqual({ kind: "received", rejected: null });
    const list = await json(await callWithKey(key, "GET", "/emails/receiving"));
    expect(list).toMatchObject({ object: "list", has_more: false });
    const item = (list.data as Json[])[0]!;
    expect(item).toMatchObject({
      from: "Ann Sender <ann@outside.example>",
      to: ["Support <help@inbox.example>"],
      cc: ["cc@outside.example"],
      reply_to: ["replies@outside.example"],
      received_for: ["help@inbox.example"],
      subject: "Where is my order?",
      message_id: "<m1@outside.example>",
    });
    const id = item.id as string;
    const got = await json(await callWithKey(key, "GET", `/emails/receiving/${id}`));
    expect(got).toMatchObject({ object: "email", id, headers: { subject: "Where is my order?" } });
    expect(got.html).toContain('src="data:image/png;base64,');
    expect((await json(await callWithKey(key, "GET", `/emails/receiving/${id}?html_format=cid`))).html).toContain(
      "cid:logo@x",
    );
    const atts = got.attachments as Json[];
    expect(atts.map((a) => [a.filename, a.content_type, a.content_disposition, a.content_id])).toEqual([
      ["logo.png", "image/png", "inline", "logo@x"],
      ["receipt.pdf", "application/pdf", "attachment", null],
    ]);

    const listed = await json(await callWithKey(key, "GET", `/emails/receiving/${id}/attachments`));
    const pdf = (listed.data as Json[]).find((a) => a.filename === "receipt.pdf")!;
    expect(pdf).toMatchObject({
      size: 16,
      content_disposition: "attachment",
      download_url: expect.stringMatching(/^http:\/\/relay\.test\/files\//),
    });
    const one = await json(await callWithKey(key, "GET", `/emails/receiving/${id}/attachments/${pdf.id as string}`));
    expect(one).toMatchObject({ object: "attachment", id: pdf.id, filename: "receipt.pdf" });
    const file = await call(new URL(one.download_url as string).pathname);
    expect(file.headers.get("content-type")).toBe("application/pdf");
    expect(new TextDecoder().decode(await file.arrayBuffer())).toBe("%PDF-1.4 receipt");
    const raw = await call(new URL((got.raw as Json).download_url as string).pathname);
    expect(await raw.text()).toContain("Subject: Where is my order?");

    const ev = await env.DB.prepare("SELECT event_type, body FROM event_log WHERE email_id = ?")
      .bind(id)
      .first<{ event_type: string; body: string }>();
    expect(ev?.event_type).toBe("email.received");
    expect(JSON.parse(ev!.body)).toMatchObject({
      type: "email.received",
      data: {
        email_id: id,
        subject: "Where is my order?",
        received_for: ["help@inbox.example"],
        attachments: [{ filename: "logo.png" }, { filename: "receipt.pdf" }],
      },
    });
    // Another tenant sees none of it; a forged or altered link finds nothing.
    const other = await newKey("recv-other");
    expect((await callWithKey(other, "GET", `/emails/receiving/${id}`)).status).toBe(404);
    const token = new URL(one.download_url as string).pathname.split("/")[2]!;
    expect((await call(`/files/${token.slice(0, -2)}AA`)).status).toBe(404);
  });

  it("refuses mail to a domain that does not receive, or is not verified, as before", async () => {
    for (const to of ["a@quiet.example", "a@unverified.example", "a@nobody.example"]) {
      const r = await deliver("x@outside.example", to, mime(to, "hi"));
      expect(r.kind).toBe("rejected");
      expect(r.rejected).toMatch(/^550 5\.1\.1/);
    }
  });

  it("tells a report apart: an out-of-office reply or an unmatched bounce to a receiving domain is not stored", async () => {
    const before = (await env.DB.prepare(
      "SELECT count(*) AS n FROM received_emails WHERE tenant_id = 'recv'",
    ).first<number>("n"))!;
    const ooo =
      "From: boss@outside.example\r\nTo: help@inbox.example\r\nSubject: Automatic reply: away\r\nAuto-Submitted: auto-replied\r\n\r\nAway.\r\n";
    expect((await deliver("boss@outside.example", "help@inbox.example", ooo)).kind).toBe("auto_reply");
    const dsn = [
      "From: MAILER-DAEMON@outside.example",
      "To: help@inbox.example",
      "Subject: Undelivered Mail Returned to Sender",
      "MIME-Version: 1.0",
      'Content-Type: multipart/report; report-type=delivery-status; boundary="r"',
      "",
      "--r",
      "Content-Type: text/plain",
      "",
      "failed",
      "--r",
      "Content-Type: message/delivery-status",
      "",
      "Reporting-MTA: dns; outside.example",
      "",
      "Final-Recipient: rfc822; gone@elsewhere.example",
      "Action: failed",
      "Status: 5.1.1",
      "--r--",
      "",
    ].join("\r\n");
    // A report is never refused (issue 37): one that names no mail of this relay is kept for the operator.
    expect((await deliver("", "help@inbox.example", dsn)).kind).toBe("bounce_unmatched");
    expect(
      await env.DB.prepare("SELECT count(*) AS n FROM received_emails WHERE tenant_id = 'recv'").first<number>("n"),
    ).toBe(before);
  });

  it("refuses mail beyond the tenant's daily quota with a clear SMTP reply", async () => {
    const k = await newKey("recv-quota");
    await domain("recv-quota", "quota.example", true);
    await callWithKey(k, "PATCH", "/relay/settings", { unsubscribe: null, receiving_daily_quota: 2 });
    expect((await deliver("a@o.example", "x@quota.example", mime("x@quota.example", "1"))).kind).toBe("received");
    expect((await deliver("a@o.example", "x@quota.example", mime("x@quota.example", "2"))).kind).toBe("received");
    const third = await deliver("a@o.example", "x@quota.example", mime("x@quota.example", "3"));
    expect(third.kind).toBe("receiving_refused");
    expect(third.rejected).toMatch(/^552 5\.2\.2 .*quota.*2 messages a UTC day/);
    // The next UTC day counts afresh.
    expect(await receiveAt("x@quota.example", mime("x@quota.example", "4"), Date.now() + 86_400_000)).toBe("received");
  });

  it("deletes received mail past retention: its row, its event and its raw bytes", async () => {
    await newKey("recv-old");
    await domain("recv-old", "old.example", true);
    const long = Date.now() - 40 * 86_400_000;
    expect(await receiveAt("x@old.example", mime("x@old.example", "old"), long)).toBe("received");
    const row = await env.DB.prepare("SELECT id, raw_key FROM received_emails WHERE tenant_id = 'recv-old'").first<{
      id: string;
      raw_key: string;
    }>();
    expect(await env.BODIES.head(row!.raw_key)).not.toBeNull();
    const report = await purgeKept(env, Date.now(), 30 * 86_400_000);
    expect(report.rows).toBeGreaterThanOrEqual(2);
    expect(
      await env.DB.prepare("SELECT count(*) AS n FROM received_emails WHERE tenant_id = 'recv-old'").first<number>("n"),
    ).toBe(0);
    expect(
      await env.DB.prepare("SELECT count(*) AS n FROM event_log WHERE email_id = ?").bind(row!.id).first<number>("n"),
    ).toBe(0);
    expect(await env.BODIES.head(row!.raw_key)).toBeNull();
    // The copies kept for sent mail's attachment links go the same way; a young one stays.
    await env.BODIES.put(`sent/${String(long).padStart(13, "0")}/old-copy`, "x");
    await env.BODIES.put(`sent/${String(Date.now()).padStart(13, "0")}/new-copy`, "x");
    await purgeKept(env, Date.now(), 30 * 86_400_000);
    expect((await env.BODIES.list({ prefix: "sent/" })).objects.map((o) => o.key.split("/")[2])).toEqual(
      expect.arrayContaining(["new-copy"]),
    );
    expect((await env.BODIES.list({ prefix: "sent/" })).objects.map((o) => o.key.split("/")[2])).not.toContain(
      "old-copy",
    );
    // Younger mail stays.
    expect(
      await env.DB.prepare("SELECT count(*) AS n FROM received_emails WHERE tenant_id = 'recv'").first<number>("n"),
    ).toBeGreaterThan(0);
  });
});
