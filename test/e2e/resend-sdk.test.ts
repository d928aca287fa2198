/**
 * Issue 38: the official `resend` SDK (6.38.0) drives every resource Cohort added for it, against
 * `wrangler dev`, following the SDK's own examples: send by template, publish a new version, send
 * again; a topic opt-out (and the topic email's one-click link) holds back the next `topicId`
 * send; suppressions add, list and remove; an inbound message (through wrangler's
 * /cdn-cgi/handler/email, as Email Routing hands it over) is received, listed, read with its
 * attachment, published as email.received and forwarded; a sent email's attachments; metrics
 * after a mixed run; key rename; domains.update. Mail goes to a scripted smtp-server sink
 * (`reject-…` is refused 550), webhooks to a real receiver, DNS answers from a DoH fixture.
 */
import PostalMime from "postal-mime";
import { Resend } from "resend";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devFetch, startDevServer, type DevServer } from "../../scripts/lib/dev-server";
import { startCatcher, type Catcher } from "../../scripts/lib/smtp-catcher";
import { startDohZone, type DohZone } from "../../scripts/lib/doh-zone";
import { startReceiver, type Receiver } from "../integration/webhooks/receiver";

const DOMAIN = "sdk-recv.test";
const FROM = `Store <store@${DOMAIN}>`;
let server: DevServer;
let catcher: Catcher;
let doh: DohZone;
let receiver: Receiver;
let resend: Resend;

beforeAll(async () => {
  doh = await startDohZone();
  catcher = await startCatcher({ scripted: true });
  receiver = await startReceiver();
  server = await startDevServer({
    tenant: "sdk38",
    vars: { DOH_RESOLVER_URL: doh.url, SMARTHOST: `[127.0.0.1]:${catcher.smtpPort}`, RELAY_TLS: "off" },
  });
  resend = new Resend(server.key, { baseUrl: server.url } as never);
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await catcher?.close();
  await receiver?.close();
  await doh?.close();
});

async function until<T>(probe: () => Promise<T | undefined | null | false>, what: string, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The parsed message the sink caught for `rcpt` (the newest). */
async function caught(rcpt: string, since = 0) {
  const m = await until(
    async () => [...catcher.messages].reverse().find((x) => x.rcptTo.includes(rcpt) && x.receivedAt >= since),
    `mail for ${rcpt}`,
  );
  const raw = Buffer.from(m.body, "base64");
  return { raw: raw.toString("latin1"), parsed: await PostalMime.parse(raw) };
}

const lastEvent = async (id: string) => (await resend.emails.get(id)).data?.last_event;

describe("the resend SDK against the relay (issue 38)", () => {
  let domainId = "";

  it("domains: created with receiving, verified, and updated with every field the SDK sends", async () => {
    const created = await resend.domains.create({ name: DOMAIN, capabilities: { receiving: "enabled" } });
    expect(created.error).toBeNull();
    expect(created.data!.capabilities).toEqual({ sending: "enabled", receiving: "enabled" });
    domainId = created.data!.id;
    doh.publish(DOMAIN, created.data!.records);
    await resend.domains.verify(domainId);
    expect((await resend.domains.get(domainId)).data!.status).toBe("verified");
    const refused = await resend.domains.update({ id: domainId, clickTracking: true });
    expect(refused.error).toMatchObject({
      statusCode: 422,
      name: "validation_error",
      message: expect.stringContaining("click_tracking"),
    });
    const updated = await resend.domains.update({
      id: domainId,
      openTracking: false,
      clickTracking: false,
      tls: "opportunistic",
      capabilities: { sending: "enabled", receiving: "enabled" },
    });
    expect(updated).toMatchObject({ data: { object: "domain", id: domainId }, error: null });
  });

  it("templates: send by template, publish a new version, send again", async () => {
    const created = await resend.templates
      .create({
        name: "order-confirmation",
        from: FROM,
        subject: "Thanks for your order!",
        html: "<p>Name: {{{PRODUCT}}}</p><p>Total: {{{PRICE}}}</p>",
        variables: [
          { key: "PRODUCT", type: "string", fallbackValue: "item" },
          { key: "PRICE", type: "number", fallbackValue: 25 },
        ],
      })
      .publish();
    expect(created.error).toBeNull();
    const id = created.data!.id;
    expect((await resend.templates.get(id)).data).toMatchObject({
      status: "published",
      has_unpublished_versions: false,
    });

    const t0 = Date.now();
    const first = await resend.emails.send({
      from: FROM,
      to: "buyer@example.com",
      template: { id, variables: { PRODUCT: "Vintage <Macintosh>", PRICE: 499 } },
    });
    expect(first.error).toBeNull();
    const m1 = await caught("buyer@example.com", t0);
    expect(m1.parsed.subject).toBe("Thanks for your order!");
    expect(m1.parsed.html).toContain("<p>Name: Vintage &lt;Macintosh&gt;</p><p>Total: 499</p>");

    expect((await resend.templates.update(id, { html: "<p>New look for {{{PRODUCT}}}</p>" })).error).toBeNull();
    const t1 = Date.now();
    await resend.emails.send({ from: FROM, to: "buyer2@example.com", template: { id, variables: { PRODUCT: "Mac" } } });
    expect((await caught("buyer2@example.com", t1)).parsed.html).toContain("<p>Name: Mac</p><p>Total: 25</p>");
    expect((await resend.templates.publish(id)).data).toEqual({ id, object: "template" });
    const t2 = Date.now();
    await resend.emails.send({ from: FROM, to: "buyer3@example.com", template: { id, variables: { PRODUCT: "Mac" } } });
    expect((await caught("buyer3@example.com", t2)).parsed.html).toContain("<p>New look for Mac</p>");

    const strict = await resend.templates
      .create({
        name: "otp",
        from: FROM,
        subject: "Code",
        html: "<p>{{{CODE}}}</p>",
        variables: [{ key: "CODE", type: "string" }],
      })
      .publish();
    const missing = await resend.emails.send({ to: "buyer@example.com", template: { id: strict.data!.id } } as never);
    expect(missing.error).toMatchObject({
      statusCode: 422,
      name: "missing_required_field",
      message: expect.stringContaining("CODE"),
    });
    const dup = await resend.templates.duplicate(id);
    expect((await resend.templates.list()).data!.data.map((t) => t.id)).toEqual(
      expect.arrayContaining([id, dup.data!.id]),
    );
    expect((await resend.templates.remove(dup.data!.id)).data).toMatchObject({ deleted: true });
  });

  it("topics: an opt-out holds back the next topicId send, and the topic email's one-click link opts its reader out", async () => {
    const topic = await resend.topics.create({ name: "Product updates", defaultSubscription: "opt_in" });
    expect(topic.error).toBeNull();
    const topicId = topic.data!.id;
    expect((await resend.topics.get(topicId)).data).toMatchObject({
      name: "Product updates",
      default_subscription: "opt_in",
    });

    const t0 = Date.now();
    await resend.emails.send({ from: FROM, to: "fan@example.com", subject: "What's new", text: "News", topicId });
    const fanMail = await caught("fan@example.com", t0);
    expect(
      (
        await resend.contacts.topics.update({
          email: "reader@example.com",
          topics: [{ id: topicId, subscription: "opt_out" }],
        })
      ).error,
    ).toBeNull();
    expect((await resend.contacts.topics.list({ email: "reader@example.com" })).data!.data).toMatchObject([
      { id: topicId, subscription: "opt_out" },
    ]);
    const held = await resend.emails.send({
      from: FROM,
      to: "reader@example.com",
      subject: "What's new",
      text: "News",
      topicId,
    });
    expect(
      await until(async () => (await lastEvent(held.data!.id)) === "suppressed", "the held-back topic email"),
    ).toBe(true);
    // Mail without the topic still reaches the reader.
    const t1 = Date.now();
    await resend.emails.send({ from: FROM, to: "reader@example.com", subject: "Your receipt", text: "Receipt" });
    await caught("reader@example.com", t1);

    const link = /<(https?:\/\/[^>]+\/unsubscribe\/[^>]+)>/.exec(fanMail.raw.replace(/\r\n[ \t]+/g, " "))![1]!;
    const clicked = await devFetch(link, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "List-Unsubscribe=One-Click",
    });
    expect(clicked.status).toBe(200);
    await until(
      async () =>
        (await resend.contacts.topics.list({ email: "fan@example.com" })).data!.data[0]?.subscription === "opt_out",
      "the fan's opt-out",
    );
    const again = await resend.emails.send({
      from: FROM,
      to: "fan@example.com",
      subject: "More news",
      text: "News",
      topicId,
    });
    expect(
      await until(
        async () => (await lastEvent(again.data!.id)) === "suppressed",
        "the fan's next topic email held back",
      ),
    ).toBe(true);
  });

  it("suppressions: add, list and remove, single and in batches", async () => {
    const added = await resend.suppressions.add({ email: "blocked@example.com" });
    expect(added.data).toMatchObject({ object: "suppression" });
    expect((await resend.suppressions.list()).data!.data.map((s) => s.email)).toContain("blocked@example.com");
    expect((await resend.suppressions.get("blocked@example.com")).data).toMatchObject({
      id: added.data!.id,
      email: "blocked@example.com",
      origin: "manual",
    });
    const sent = await resend.emails.send({ from: FROM, to: "blocked@example.com", subject: "hi", text: "hi" });
    expect(await until(async () => (await lastEvent(sent.data!.id)) === "suppressed", "the suppressed email")).toBe(
      true,
    );
    expect((await resend.suppressions.remove(added.data!.id)).data).toEqual({
      object: "suppression",
      id: added.data!.id,
      deleted: true,
    });
    expect((await resend.suppressions.get("blocked@example.com")).error).toMatchObject({
      statusCode: 404,
      name: "not_found",
    });
    expect(
      (await resend.suppressions.batch.add({ emails: ["b1@example.com", "b2@example.com"] })).data!.data,
    ).toHaveLength(2);
    expect(
      (await resend.suppressions.batch.remove({ emails: ["b1@example.com", "b2@example.com"] })).data!.data.map(
        (d) => d.deleted,
      ),
    ).toEqual([true, true]);
  });

  it("received mail: an inbound message is received, listed, read with its attachment, published and forwarded", async () => {
    const hook = await resend.webhooks.create({
      endpoint: `http://127.0.0.1:${receiver.port}/hook`,
      events: ["email.received"],
    });
    expect(hook.error).toBeNull();
    const mime = [
      "From: Ann <ann@outside.example>",
      `To: support@${DOMAIN}`,
      "Subject: My order",
      "Message-ID: <in-1@outside.example>",
      "MIME-Version: 1.0",
      'Content-Type: multipart/mixed; boundary="b"',
      "",
      "--b",
      "Content-Type: text/plain; charset=utf-8",
      "",
      "It did not arrive.",
      "--b",
      'Content-Type: application/pdf; name="order.pdf"',
      "Content-Transfer-Encoding: base64",
      'Content-Disposition: attachment; filename="order.pdf"',
      "",
      Buffer.from("%PDF-1.4 order 42").toString("base64"),
      "--b--",
      "",
    ].join("\r\n");
    const url = new URL("/cdn-cgi/handler/email", server.url);
    url.searchParams.set("from", "ann@outside.example");
    url.searchParams.set("to", `support@${DOMAIN}`);
    expect((await devFetch(url.toString(), { method: "POST", body: mime })).status).toBe(200);

    const list = await resend.emails.receiving.list();
    expect(list.error).toBeNull();
    const item = list.data!.data[0]!;
    expect(item).toMatchObject({
      from: "Ann <ann@outside.example>",
      subject: "My order",
      received_for: [`support@${DOMAIN}`],
    });
    const email = (await resend.emails.receiving.get(item.id)).data!;
    expect(email.text).toContain("It did not arrive.");
    const atts = (await resend.emails.receiving.attachments.list({ emailId: item.id })).data!.data;
    expect(atts.map((a) => [a.filename, a.content_type])).toEqual([["order.pdf", "application/pdf"]]);
    const one = (await resend.emails.receiving.attachments.get({ emailId: item.id, id: atts[0]!.id })).data!;
    expect(Buffer.from(await (await fetch(one.download_url)).arrayBuffer()).toString()).toBe("%PDF-1.4 order 42");

    const pushed = await until(
      async () => receiver.log.find((d) => d.body.includes("email.received")),
      "the email.received webhook",
    );
    const verified = resend.webhooks.verify({
      payload: pushed.body,
      headers: {
        id: pushed.headers["webhook-id"]!,
        timestamp: pushed.headers["webhook-timestamp"]!,
        signature: pushed.headers["webhook-signature"]!,
      },
      webhookSecret: hook.data!.signing_secret,
    });
    expect(verified).toMatchObject({ type: "email.received", data: { email_id: item.id, subject: "My order" } });

    const t0 = Date.now();
    const fwd = await resend.emails.receiving.forward({
      emailId: item.id,
      to: "agent@example.com",
      from: `Support <support@${DOMAIN}>`,
    });
    expect(fwd.error).toBeNull();
    const out = await caught("agent@example.com", t0);
    expect(out.parsed.subject).toBe("My order");
    expect(out.parsed.attachments.map((a) => a.filename)).toEqual(["order.pdf"]);
  });

  it("a sent email's attachments are listed and downloaded", async () => {
    const sent = await resend.emails.send({
      from: FROM,
      to: "files@example.com",
      subject: "Invoice",
      text: "Attached.",
      attachments: [{ filename: "invoice.txt", content: Buffer.from("total 42") }],
    });
    const list = await resend.emails.attachments.list({ emailId: sent.data!.id });
    expect(list.data!.data).toMatchObject([{ filename: "invoice.txt", size: 8, content_disposition: "attachment" }]);
    const one = await resend.emails.attachments.get({ emailId: sent.data!.id, id: list.data!.data[0]!.id });
    expect(await (await fetch(one.data!.download_url)).text()).toBe("total 42");
  });

  it("metrics after a mixed run: delivered, bounced, complained, unsubscribed, suppressed and received, with their rates", async () => {
    const bounced = await resend.emails.send({
      from: FROM,
      to: "reject-nobody@example.com",
      subject: "hi",
      text: "hi",
    });
    const t0 = Date.now();
    const complainedId = (await resend.emails.send({ from: FROM, to: "angry@example.com", subject: "hi", text: "hi" }))
      .data!.id;
    await caught("angry@example.com", t0);
    await until(async () => (await lastEvent(complainedId)) === "delivered", "delivery");
    const res = await devFetch(`${server.url}/relay/messages/${complainedId}/complaint`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.key}`, "content-type": "application/json" },
      body: JSON.stringify({ recipient: "angry@example.com" }),
    });
    expect(res.status).toBe(200);
    await until(async () => (await lastEvent(bounced.data!.id)) === "bounced", "the bounce");
    const m = await until(async () => {
      const r = await resend.emails.metrics({ dimensions: ["domain"] });
      const t = r.data?.totals;
      return t &&
        (t.complained ?? 0) >= 1 &&
        (t.bounced ?? 0) >= 1 &&
        (t.unsubscribed ?? 0) >= 1 &&
        (t.delivered ?? 0) >= 8
        ? r.data
        : undefined;
    }, "the metrics of the run");
    const t = m.totals;
    expect(t).toMatchObject({ received: 1, bounced: 1, complained: 1, unsubscribed: 1 });
    expect(t.suppressed).toBeGreaterThanOrEqual(3);
    expect(t.delivery_rate).toBeCloseTo(t.delivered! / t.sent!, 3);
    expect(t.complaint_rate).toBeCloseTo(1 / t.delivered!, 3);
    expect(m.data!.find((r) => r.domain_name === DOMAIN)).toMatchObject({ domain_id: domainId, received: 1 });
  });

  it("apiKeys.update renames a key", async () => {
    const key = await resend.apiKeys.create({ name: "ci" });
    expect((await resend.apiKeys.update(key.data!.id, { name: "ci-renamed" })).data).toEqual({
      object: "api_key",
      id: key.data!.id,
    });
    expect((await resend.apiKeys.list()).data!.data.find((k) => k.id === key.data!.id)?.name).toBe("ci-renamed");
  });
});
