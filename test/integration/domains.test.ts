/**
 * Sending domains and API keys in Resend's shape (issue 12): a tenant sends only from domains it
 * verified (production), signs with its own key, cannot claim or use another tenant's domain;
 * sending_access keys only send, from their domain; a revoked key is refused on its next request.
 * Verification against DNS and the official SDK run against wrangler dev (test/e2e/domains-sdk.test.ts).
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { hashApiKey } from "../../worker/db/api-keys";
import { setKeyRole } from "../../worker/db/admin";
import worker from "../../worker";
import { email, newKey, storedBody } from "./helpers";

const secretsKey = btoa(String.fromCharCode(...Array.from({ length: 32 }, (_, i) => (i * 11) % 256)));
const production = { ...env, COHORT_ENV: "production", WEBHOOK_SECRETS_KEY: secretsKey } as Env;
const development = { ...env, COHORT_ENV: "development", WEBHOOK_SECRETS_KEY: secretsKey } as Env;

async function api(key: string, method: string, path: string, body?: unknown, e: Env = production): Promise<Response> {
  const ctx = createExecutionContext();
  const init: RequestInit = {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
  };
  if (body !== undefined) init.body = JSON.stringify(body);
  const res = await worker.fetch(
    new Request(`http://relay.test${path}`, init) as Request<unknown, IncomingRequestCfProperties>,
    e,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return res;
}

/** What POST /domains/:id/verify records once the records resolve (test/integration/domain-claims.test.ts drives it through DNS). */
const markVerified = (id: string) =>
  env.DB.prepare("UPDATE domains SET status = 'verified', verified_at = created_at WHERE id = ?").bind(id).run();

let a: string;
let b: string;
let domainA: { id: string; records: { record: string; name: string; type: string; value: string; status: string }[] };
beforeAll(async () => {
  a = await newKey("tenant-a");
  b = await newKey("tenant-b");
  const res = await api(a, "POST", "/domains", { name: "Mail.Acme-A.test" });
  expect(res.status).toBe(201);
  domainA = await res.json();
});

describe("POST /domains and friends", () => {
  it("answers with the domain's own DKIM key and the records to publish, in Resend's shape", async () => {
    expect(domainA).toMatchObject({
      name: "mail.acme-a.test",
      status: "not_started",
      region: "us-east-1",
      capabilities: { sending: "enabled" },
    });
    const byName = Object.fromEntries(domainA.records.map((r) => [`${r.record} ${r.type} ${r.name}`, r]));
    expect(byName["DKIM TXT cohort1._domainkey"]!.value).toMatch(/^v=DKIM1; k=rsa; p=[A-Za-z0-9+/]{300,}={0,2}$/);
    expect(byName["SPF MX send"]).toMatchObject({ status: "not_started", priority: 10 });
    expect(byName["SPF TXT send"]!.value).toMatch(/^v=spf1 /);
    expect(byName["DMARC TXT _dmarc"]!.value).toMatch(/^v=DMARC1;/);
    const got = await (await api(a, "GET", `/domains/${domainA.id}`)).json();
    expect(got).toMatchObject({ object: "domain", id: domainA.id, records: domainA.records });
    expect(JSON.stringify(got)).not.toMatch(/PRIVATE|sealed/i);
    const list = await (await api(a, "GET", "/domains")).json<{ data: { id: string }[] }>();
    expect(list.data.map((d) => d.id)).toContain(domainA.id);
  });

  it("keeps tenants apart: another tenant's id is not found; a tenant claims a name once (other tenants' claims: domain-claims.test.ts)", async () => {
    expect((await api(b, "GET", `/domains/${domainA.id}`)).status).toBe(404);
    expect((await api(b, "DELETE", `/domains/${domainA.id}`)).status).toBe(404);
    const again = await api(a, "POST", "/domains", { name: "mail.acme-a.test." });
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({
      name: "validation_error",
      message: expect.stringMatching(/already registered to this account/),
    });
    expect((await api(a, "POST", "/domains", { name: "not a domain" })).status).toBe(422);
  });

  it("PATCH and DELETE", async () => {
    const d = await (await api(a, "POST", "/domains", { name: "gone.acme-a.test" })).json<{ id: string }>();
    expect(
      await (
        await api(a, "PATCH", `/domains/${d.id}`, {
          click_tracking: false,
          tls: "opportunistic",
          capabilities: { receiving: "enabled" },
        })
      ).json(),
    ).toEqual({ object: "domain", id: d.id });
    expect(await (await api(a, "GET", `/domains/${d.id}`)).json()).toMatchObject({
      click_tracking: false,
      capabilities: { receiving: "enabled" },
    });
    expect(await (await api(a, "DELETE", `/domains/${d.id}`)).json()).toEqual({
      object: "domain",
      id: d.id,
      deleted: true,
    });
    expect((await api(a, "GET", `/domains/${d.id}`)).status).toBe(404);
    const keys = await env.DB.prepare("SELECT count(*) AS n FROM domain_keys WHERE domain_id = ?")
      .bind(d.id)
      .first<{ n: number }>("n");
    expect(keys).toBe(0);
  });
});

describe("sending only from verified domains (production)", () => {
  it("refuses an unverified domain with Resend's 403, for /emails, batch and raw", async () => {
    const res = await api(a, "POST", "/emails", email({ from: "Ann <ann@mail.acme-a.test>" }));
    expect(res.status).toBe(403);
    expect(await res.json()).toMatchObject({
      name: "validation_error",
      message: expect.stringMatching(/The mail\.acme-a\.test domain is not verified/),
    });
    expect((await api(a, "POST", "/emails/batch", [email({ from: "ann@mail.acme-a.test" })])).status).toBe(403);
    const raw = await api(a, "POST", "/relay/messages/raw", {
      mail_from: "ann@mail.acme-a.test",
      rcpt_to: "x@example.com",
      message: "From: ann@mail.acme-a.test\r\n\r\nhi",
    });
    expect(raw.status).toBe(403);
  });

  it("once verified, the tenant sends and its mail is signed with the domain's own key", async () => {
    await markVerified(domainA.id);
    const res = await api(a, "POST", "/emails", email({ from: "Ann <ann@mail.acme-a.test>" }));
    expect(res.status).toBe(200);
    expect(res.headers.get("cohort-unverified-domains")).toBeNull();
    const { id } = await res.json<{ id: string }>();
    const text = new TextDecoder().decode(await storedBody(id));
    const header = /^DKIM-Signature: [^]*?(?=\r\n[^ \t])/m.exec(text)![0];
    expect(header).toMatch(/a=rsa-sha256;/);
    expect(header).toMatch(/\bd=mail\.acme-a\.test;/);
    expect(header).toMatch(/\bs=cohort1;/);
  });

  it("another tenant can never send as that domain, verified or not, nor with a raw envelope sender of it", async () => {
    const res = await api(b, "POST", "/emails", email({ from: "ceo@mail.acme-a.test" }));
    expect(res.status).toBe(403);
    const raw = await api(b, "POST", "/relay/messages/raw", {
      mail_from: "ceo@mail.acme-a.test",
      rcpt_to: "x@example.com",
      message: "From: ceo@mail.acme-a.test\r\n\r\nhi",
    });
    expect(raw.status).toBe(403);
  });

  it("a raw message names one author, and every mailbox of From, Sender, Resent-From and Resent-Sender must be the tenant's to use", async () => {
    const own = await (await api(b, "POST", "/domains", { name: "own-b.test" })).json<{ id: string }>();
    await markVerified(own.id);
    const raw = (head: string) =>
      api(b, "POST", "/relay/messages/raw", {
        mail_from: "x@own-b.test",
        rcpt_to: "x@example.com",
        message: `${head}\r\nSubject: s\r\n\r\nhi`,
      });
    const two = await raw("From: x@own-b.test, ceo@mail.acme-a.test");
    expect(two.status).toBe(422);
    expect(await two.json()).toMatchObject({
      name: "validation_error",
      message: expect.stringMatching(/From field with more than one mailbox/),
    });
    for (const field of ["Sender", "Resent-From", "Resent-Sender"]) {
      const res = await raw(`From: x@own-b.test\r\n${field}: "CEO" <ceo@mail.acme-a.test>`);
      expect(res.status, field).toBe(403);
      expect(await res.json()).toMatchObject({
        message: expect.stringMatching(/The mail\.acme-a\.test domain is not verified/),
      });
    }
    expect((await raw("From: x@own-b.test\r\nResent-From: Team: a@own-b.test, ceo@mail.acme-a.test;")).status).toBe(
      403,
    );
    expect(
      (await raw("From: x@own-b.test\r\nSender: y@own-b.test\r\nResent-From: z@own-b.test, w@own-b.test")).status,
    ).toBe(200);
  });

  it("the operator's DKIM_KEYS domains are the operator's only: a tenant key is refused, an operator key sends", async () => {
    expect((await api(b, "POST", "/emails", email({ from: "x@signed.test" }))).status).toBe(403);
    const op = await newKey("operator-x");
    await setKeyRole(env.DB, await hashApiKey(op), "operator");
    expect((await api(op, "POST", "/emails", email({ from: "x@signed.test" }))).status).toBe(200);
  });

  it("a domain another tenant verified is never sent through a fallback: not in development, not with the operator's DKIM_KEYS", async () => {
    // Tenant A verified mail.acme-a.test above: development lets unverified domains through, not A's.
    const dev = await api(b, "POST", "/emails", email({ from: "ceo@mail.acme-a.test" }), development);
    expect(dev.status).toBe(403);
    expect(await dev.json()).toMatchObject({
      name: "validation_error",
      message: expect.stringMatching(/The mail\.acme-a\.test domain is not verified/),
    });
    const devRaw = await api(
      b,
      "POST",
      "/relay/messages/raw",
      { mail_from: "ceo@mail.acme-a.test", rcpt_to: "x@example.com", message: "From: b@b.test\r\n\r\nhi" },
      development,
    );
    expect(devRaw.status).toBe(403);
    // A tenant verified signed.test (a DKIM_KEYS domain): the operator's key no longer covers it,
    // and the tenant's mail is signed with the tenant's own key, not the operator's.
    const claimed = await (await api(a, "POST", "/domains", { name: "signed.test" })).json<{ id: string }>();
    await markVerified(claimed.id);
    const op = await newKey("operator-y");
    await setKeyRole(env.DB, await hashApiKey(op), "operator");
    expect((await api(op, "POST", "/emails", email({ from: "x@signed.test" }))).status).toBe(403);
    expect((await api(op, "POST", "/emails", email({ from: "x@signed.test" }), development)).status).toBe(403);
    const own = await api(a, "POST", "/emails", email({ from: "x@signed.test" }));
    expect(own.status).toBe(200);
    const text = new TextDecoder().decode(await storedBody((await own.json<{ id: string }>()).id));
    const signatures = text.match(/^DKIM-Signature: [^]*?(?=\r\n[^ \t])/gm)!;
    expect(signatures).toHaveLength(1);
    expect(signatures[0]).toMatch(/\bd=signed\.test;/);
    expect(signatures[0]).toMatch(/\bs=cohort1;/);
  });

  it("a deleted domain stops sending and signing on the next request", async () => {
    const d = await (await api(a, "POST", "/domains", { name: "brief.acme-a.test" })).json<{ id: string }>();
    await markVerified(d.id);
    expect((await api(a, "POST", "/emails", email({ from: "x@brief.acme-a.test" }))).status).toBe(200);
    await api(a, "DELETE", `/domains/${d.id}`);
    expect((await api(a, "POST", "/emails", email({ from: "x@brief.acme-a.test" }))).status).toBe(403);
  });

  it("in development an unverified domain may send, and the response says so", async () => {
    const res = await api(b, "POST", "/emails", email({ from: "dev@unverified.test" }), development);
    expect(res.status).toBe(200);
    expect(res.headers.get("cohort-unverified-domains")).toBe("unverified.test");
  });
});

describe("POST /api-keys, GET, DELETE", () => {
  it("creates a full_access key, shown once; lists keys without tokens; revocation refuses its very next request", async () => {
    const created = await api(a, "POST", "/api-keys", { name: "ci" });
    expect(created.status).toBe(201);
    const { id, token } = await created.json<{ id: string; token: string }>();
    expect(token).toMatch(/^co_/);
    expect((await api(token, "GET", "/emails")).status).toBe(200);
    const list = await (await api(a, "GET", "/api-keys")).json<{ data: Record<string, unknown>[] }>();
    expect(list.data.find((k) => k.id === id)).toEqual({
      id,
      name: "ci",
      created_at: expect.any(String),
      last_used_at: null,
    });
    expect(JSON.stringify(list)).not.toContain(token);
    expect((await api(b, "DELETE", `/api-keys/${id}`)).status).toBe(404); // another tenant's
    expect(await (await api(a, "DELETE", `/api-keys/${id}`)).json()).toEqual({ object: "api_key", id, deleted: true });
    const refused = await api(token, "GET", "/emails");
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ name: "invalid_api_key" });
  });

  it("a sending_access key only sends, and only from its domain when it has one", async () => {
    const { token } = await (
      await api(a, "POST", "/api-keys", { name: "sender", permission: "sending_access", domain_id: domainA.id })
    ).json<{ token: string }>();
    expect((await api(token, "POST", "/emails", email({ from: "ann@mail.acme-a.test" }))).status).toBe(200);
    for (const [method, path] of [
      ["GET", "/emails"],
      ["GET", "/domains"],
      ["POST", "/api-keys"],
      ["GET", "/relay/suppressions"],
    ] as const) {
      const res = await api(token, method, path, method === "POST" ? { name: "x" } : undefined);
      expect(res.status, `${method} ${path}`).toBe(401);
      expect(await res.json()).toMatchObject({ name: "restricted_api_key" });
    }
    const other = await api(token, "POST", "/emails", email({ from: "x@signed.test" }));
    expect(other.status).toBe(401);
    expect(await other.json()).toMatchObject({ name: "restricted_api_key" });
  });

  it("refuses a domain_id that is not the tenant's, and a domain restriction on a full_access key", async () => {
    expect(
      (await api(b, "POST", "/api-keys", { name: "x", permission: "sending_access", domain_id: domainA.id })).status,
    ).toBe(422);
    expect((await api(a, "POST", "/api-keys", { name: "x", domain_id: domainA.id })).status).toBe(422);
    expect((await api(a, "POST", "/api-keys", { name: "x", permission: "admin" })).status).toBe(422);
  });
});
