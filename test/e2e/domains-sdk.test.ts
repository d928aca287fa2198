/**
 * The official `resend` SDK (6.38.0) drives Cohort's sending domains and API keys unchanged,
 * against `wrangler dev` (issue 12): domains.create/list/get/verify/remove and
 * apiKeys.create/list/remove. A DNS-over-HTTPS fixture answers nothing at first (verify: failed),
 * then the records the relay asked to publish (verify: verified); mail from the domain then
 * arrives signed with the domain's own key, and mailauth verifies the signature against the
 * published record. An attachment by path reaches the file server the test declares in
 * DEV_PATH_ORIGINS, and no other loopback port (the SMTP catcher's listing is refused).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { dkimVerify } from "mailauth/lib/dkim/verify.js";
import { Resend } from "resend";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevServer, type DevServer } from "../../scripts/lib/dev-server";
import { startCatcher, type Catcher } from "../../scripts/lib/smtp-catcher";

/** name → TXT strings / MX hosts the fixture answers; everything else NXDOMAIN. */
const zone = new Map<string, { TXT?: string[]; MX?: string[] }>();
/** While set, the fixture answers SERVFAIL to everything (a resolver outage). */
let servfail = false;
let doh: Server;
let dohUrl: string;
let server: DevServer;
let catcher: Catcher;
let resend: Resend;
let files: Server;
let filesBase: string;
const PDF = Buffer.from("%PDF-1.4 fixture bytes\n");

beforeAll(async () => {
  files = createServer((req, res) => {
    if (req.url === "/files/invoice.pdf") res.writeHead(200, { "content-type": "application/pdf" }).end(PDF);
    else res.writeHead(404).end();
  });
  await new Promise<void>((r) => files.listen(0, "127.0.0.1", r));
  filesBase = `http://127.0.0.1:${(files.address() as AddressInfo).port}`;
  doh = createServer((req, res) => {
    const u = new URL(req.url ?? "/", "http://x");
    const name = (u.searchParams.get("name") ?? "").replace(/\.$/, "").toLowerCase();
    const type = u.searchParams.get("type") as "TXT" | "MX";
    const data = zone.get(name)?.[type];
    const body = servfail
      ? { Status: 2 }
      : data === undefined
        ? { Status: 3 }
        : {
            Status: 0,
            Answer: data.map((d) => ({
              name: `${name}.`,
              type: type === "TXT" ? 16 : 15,
              TTL: 60,
              data: type === "TXT" ? `"${d}"` : `10 ${d}.`,
            })),
          };
    res.writeHead(200, { "content-type": "application/dns-json" }).end(JSON.stringify(body));
  });
  await new Promise<void>((r) => doh.listen(0, "127.0.0.1", r));
  dohUrl = `http://127.0.0.1:${(doh.address() as AddressInfo).port}/dns-query`;
  catcher = await startCatcher();
  server = await startDevServer({
    tenant: "sdk",
    role: "operator",
    vars: {
      DOH_RESOLVER_URL: dohUrl,
      SMARTHOST: `[127.0.0.1]:${catcher.smtpPort}`,
      RELAY_TLS: "off",
      DEV_PATH_ORIGINS: filesBase,
    },
  });
  resend = new Resend(server.key, { baseUrl: server.url } as never);
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await catcher?.close();
  await new Promise<void>((r) => (doh ? doh.close(() => r()) : r()));
  await new Promise<void>((r) => (files ? files.close(() => r()) : r()));
});

describe("the resend SDK against the relay", () => {
  let domainId = "";
  let records: { record: string; name: string; type: string; value: string; status: string }[] = [];

  it("domains.create answers with the records to publish", async () => {
    const { data, error } = await resend.domains.create({ name: "sdk-mail.test", customReturnPath: "bounce" });
    expect(error).toBeNull();
    expect(data).toMatchObject({ name: "sdk-mail.test", status: "not_started" });
    domainId = data!.id;
    records = data!.records as typeof records;
    expect(records.map((r) => `${r.record}/${r.type}/${r.name}`).sort()).toEqual([
      "DKIM/TXT/cohort1._domainkey",
      "DMARC/TXT/_dmarc",
      "SPF/MX/bounce",
      "SPF/TXT/bounce",
    ]);
  });

  it("domains.list and domains.get", async () => {
    const list = await resend.domains.list();
    expect(list.error).toBeNull();
    expect(list.data!.data.map((d) => d.id)).toContain(domainId);
    const got = await resend.domains.get(domainId);
    expect(got.data).toMatchObject({ object: "domain", id: domainId, name: "sdk-mail.test" });
  });

  it("domains.verify: nothing published yet → failed; records published → verified", async () => {
    expect((await resend.domains.verify(domainId)).data).toEqual({ object: "domain", id: domainId });
    expect((await resend.domains.get(domainId)).data!.status).toBe("failed");
    for (const r of records) {
      const name = `${r.name}.sdk-mail.test`;
      zone.set(name, { ...zone.get(name), [r.type]: [r.value] });
    }
    await resend.domains.verify(domainId);
    const got = (await resend.domains.get(domainId)).data!;
    expect(got.status).toBe("verified");
    expect(got.records.map((r) => r.status)).toEqual(["verified", "verified", "verified", "verified"]);
  });

  it("mail from the verified domain is signed with its own key, and the signature verifies against the published record", async () => {
    const sent = await resend.emails.send({
      from: "Team <team@sdk-mail.test>",
      to: ["reader@example.com"],
      subject: "signed",
      text: "hello",
    });
    expect(sent.error).toBeNull();
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && !catcher.messages.some((m) => m.rcptTo.includes("reader@example.com")))
      await new Promise((r) => setTimeout(r, 200));
    const msg = catcher.messages.find((m) => m.rcptTo.includes("reader@example.com"));
    expect(msg).toBeDefined();
    const resolver = async (name: string, type: string) => {
      const txt = zone.get(name.toLowerCase())?.TXT;
      if (type === "TXT" && txt) return [txt];
      throw Object.assign(new Error(`NXDOMAIN ${name}`), { code: "ENOTFOUND" });
    };
    const result = await dkimVerify(Buffer.from(msg!.body, "base64"), { resolver: resolver as never });
    expect(result.results.map((r) => ({ result: r.status.result, domain: r.signingDomain }))).toEqual([
      { result: "pass", domain: "sdk-mail.test" },
    ]);
  });

  it("a resolver outage during verify leaves a verified domain verified (the records say temporary_failure)", async () => {
    servfail = true;
    try {
      await resend.domains.verify(domainId);
    } finally {
      servfail = false;
    }
    const got = (await resend.domains.get(domainId)).data!;
    expect(got.status).toBe("verified");
    expect(got.records.map((r) => r.status)).toEqual([
      "temporary_failure",
      "temporary_failure",
      "temporary_failure",
      "temporary_failure",
    ]);
  });

  it("rotates the DKIM key: a second selector to publish, signing with it once verified, the old record retired", async () => {
    const res = await fetch(`${server.url}/relay/domains/${domainId}/rotate-dkim`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.key}` },
    });
    expect(res.status).toBe(201);
    const { selector, record } = (await res.json()) as { selector: string; record: { name: string; value: string } };
    expect(selector).toBe("cohort2");
    // Until the new record is published and verified, the old key keeps signing, and the domain
    // stays verified (its sending does not stop while the new record propagates).
    await resend.domains.verify(domainId);
    const waiting = (await resend.domains.get(domainId)).data!;
    expect(waiting.records.map((r) => r.name)).toContain("cohort2._domainkey");
    expect(waiting.status).toBe("verified");
    zone.set(`${record.name}.sdk-mail.test`, { TXT: [record.value] });
    await resend.domains.verify(domainId);
    const names = (await resend.domains.get(domainId)).data!.records.map((r) => r.name);
    expect(names).toContain("cohort2._domainkey");
    expect(names).not.toContain("cohort1._domainkey");
    catcher.messages.length = 0;
    await resend.emails.send({
      from: "team@sdk-mail.test",
      to: ["rotated@example.com"],
      subject: "rotated",
      text: "hi",
    });
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && !catcher.messages.some((m) => m.rcptTo.includes("rotated@example.com")))
      await new Promise((r) => setTimeout(r, 200));
    const text = Buffer.from(
      catcher.messages.find((m) => m.rcptTo.includes("rotated@example.com"))!.body,
      "base64",
    ).toString("latin1");
    expect(text).toMatch(/\bs=cohort2;/);
  });

  it("apiKeys.create / list / remove: a removed key is refused on its next request", async () => {
    const created = await resend.apiKeys.create({
      name: "from-sdk",
      permission: "sending_access",
      domain_id: domainId,
    });
    expect(created.error).toBeNull();
    const { id, token } = created.data!;
    const listed = await resend.apiKeys.list();
    expect(listed.data!.data.map((k) => k.id)).toContain(id);
    const restricted = new Resend(token, { baseUrl: server.url } as never);
    expect(
      (await restricted.emails.send({ from: "a@sdk-mail.test", to: ["x@example.com"], subject: "s", text: "t" })).error,
    ).toBeNull();
    expect((await restricted.domains.list()).error).toMatchObject({ name: "restricted_api_key" });
    expect((await resend.apiKeys.remove(id)).data).toEqual({ object: "api_key", id, deleted: true });
    expect(
      (await restricted.emails.send({ from: "a@sdk-mail.test", to: ["x@example.com"], subject: "s", text: "t" })).error,
    ).toMatchObject({ name: "invalid_api_key" });
  });

  it("emails.send with an attachment by path: the relay fetches it from an origin the local stack declares, and from no other loopback port", async () => {
    catcher.messages.length = 0;
    const sent = await resend.emails.send({
      from: "team@sdk-mail.test",
      to: ["invoice@example.com"],
      subject: "invoice",
      text: "attached",
      attachments: [{ path: `${filesBase}/files/invoice.pdf` }],
    });
    expect(sent.error).toBeNull();
    const missing = await resend.emails.send({
      from: "team@sdk-mail.test",
      to: ["x@example.com"],
      subject: "s",
      text: "t",
      attachments: [{ path: `${filesBase}/nope.pdf` }],
    });
    expect(missing.error).toMatchObject({ name: "invalid_attachment", message: expect.stringMatching(/HTTP 404/) });
    const listing = await resend.emails.send({
      from: "team@sdk-mail.test",
      to: ["x@example.com"],
      subject: "s",
      text: "t",
      attachments: [{ path: `http://127.0.0.1:${catcher.httpPort}/messages` }],
    });
    expect(listing.error).toMatchObject({
      name: "invalid_attachment",
      message: expect.stringMatching(/is refused: .*only the origins in DEV_PATH_ORIGINS/),
    });
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline && !catcher.messages.some((m) => m.rcptTo.includes("invoice@example.com")))
      await new Promise((r) => setTimeout(r, 200));
    const raw = Buffer.from(catcher.messages.find((m) => m.rcptTo.includes("invoice@example.com"))!.body, "base64");
    const { default: PostalMime } = await import("postal-mime");
    const parsed = await PostalMime.parse(raw);
    expect(parsed.attachments.map((a) => ({ filename: a.filename, mimeType: a.mimeType }))).toEqual([
      { filename: "invoice.pdf", mimeType: "application/pdf" },
    ]);
    expect(Buffer.from(parsed.attachments[0]!.content as ArrayBuffer)).toEqual(PDF);
  });

  it("domains.remove", async () => {
    expect((await resend.domains.remove(domainId)).data).toEqual({ object: "domain", id: domainId, deleted: true });
    expect((await resend.domains.get(domainId)).error).toMatchObject({ name: "not_found" });
  });
});
