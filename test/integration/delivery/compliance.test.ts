/**
 * The compliance check at send time (worker/compliance/): every rule warns in the send response
 * and in GET /emails/:id, and refuses with 422 compliance_error naming the rule once the tenant
 * sets `compliance: "strict"`. The DMARC facts come from POST /domains/:id/verify, which walks the
 * DNS tree over the fixture resolver (sts-world.ts publishes the records); a send makes no query.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { forgetProviderRules } from "../../../worker/db/providers";
import { callWithKey, email, getEmail, newKey, settle } from "../helpers";

const doh = inject("doh");
let key: string;
const ids: Record<string, string> = {};

type Warning = { rule: string; code: number; enhanced: string; message: string };

beforeAll(async () => {
  key = await newKey("compliance");
  for (const name of ["comp-dmarc.test", "comp-nodmarc.test"]) {
    const res = await callWithKey(key, "POST", "/domains", { name });
    expect(res.status).toBe(201);
    ids[name] = (await res.json<{ id: string }>()).id;
    expect((await callWithKey(key, "POST", `/domains/${ids[name]}/verify`)).status).toBe(200);
    // The fixture resolver publishes no DKIM or SPF records for them: verified by hand.
    await env.DB.prepare("UPDATE domains SET status = 'verified' WHERE id = ?").bind(ids[name]).run();
  }
  await env.DB.prepare("INSERT OR REPLACE INTO provider_rules (name, rule, updated_at) VALUES ('tiny', ?, 1)")
    .bind(
      JSON.stringify({
        name: "tiny",
        mx: [".tiny.test"],
        domains: ["tiny.test"],
        max_message_bytes: 2048,
        max_recipients: 1,
      }),
    )
    .run();
  forgetProviderRules();
});

const queries = async () => (await fetch(doh.url.replace("/dns-query", "/queries"))).json<Record<string, number>>();

/** One case per rule: how to send a message that breaks it. */
const CASES: { rule: string; reply: string; send: () => Promise<Response> }[] = [
  {
    rule: "auth.domain_not_verified",
    reply: "550 5.7.26",
    send: () => callWithKey(key, "POST", "/emails", email({ from: "a@unverified-comp.test", to: ["x@mx-one.test"] })),
  },
  {
    rule: "auth.dkim_not_aligned",
    reply: "550 5.7.30",
    send: () => callWithKey(key, "POST", "/emails", email({ from: "a@unverified-comp.test", to: ["x@mx-one.test"] })),
  },
  {
    rule: "auth.dmarc_missing",
    reply: "550 5.7.40",
    send: () => callWithKey(key, "POST", "/emails", email({ from: "a@comp-nodmarc.test", to: ["x@mx-one.test"] })),
  },
  {
    rule: "auth.spf_not_aligned",
    reply: "550 5.7.32",
    send: () => callWithKey(key, "POST", "/emails", email({ from: "a@comp-dmarc.test", to: ["x@mx-one.test"] })),
  },
  {
    rule: "bulk.one_click_missing",
    reply: "550 5.7.1",
    send: () =>
      callWithKey(
        key,
        "POST",
        "/emails",
        email({
          from: "a@comp-nodmarc.test",
          to: ["x@mx-one.test"],
          headers: { "List-Unsubscribe": "<mailto:leave@comp-nodmarc.test>" },
        }),
      ),
  },
  {
    rule: "headers.message_id",
    reply: "550 5.7.1",
    send: () =>
      callWithKey(key, "POST", "/relay/messages/raw", {
        mail_from: "a@comp-nodmarc.test",
        rcpt_to: ["x@mx-one.test"],
        message:
          "From: a@comp-nodmarc.test\r\nTo: x@mx-one.test\r\nMessage-ID: not-an-id\r\nDate: Thu, 26 Nov 2026 20:00:00 +0000\r\nSubject: hi\r\n\r\nhi\r\n",
      }),
  },
  {
    rule: "headers.date",
    reply: "550 5.7.1",
    send: () =>
      callWithKey(key, "POST", "/relay/messages/raw", {
        mail_from: "a@comp-nodmarc.test",
        rcpt_to: ["x@mx-one.test"],
        message:
          "From: a@comp-nodmarc.test\r\nTo: x@mx-one.test\r\nDate: yesterday at noon\r\nSubject: hi\r\n\r\nhi\r\n",
      }),
  },
  {
    rule: "provider.size",
    reply: "552 5.3.4",
    send: () =>
      callWithKey(
        key,
        "POST",
        "/emails",
        email({ from: "a@comp-nodmarc.test", to: ["x@tiny.test"], text: "x".repeat(4000) }),
      ),
  },
  {
    rule: "provider.recipients",
    reply: "452 4.5.3",
    send: () =>
      callWithKey(key, "POST", "/emails", email({ from: "a@comp-nodmarc.test", to: ["x@tiny.test", "y@tiny.test"] })),
  },
];

describe("GET /domains/:id", () => {
  it("shows the DMARC policy found by the tree walk, the alignment and BIMI readiness", async () => {
    const d = await (await callWithKey(key, "GET", `/domains/${ids["comp-dmarc.test"]}`)).json<{ dmarc: unknown }>();
    expect(d.dmarc).toMatchObject({
      policy: "reject",
      record_found_at: "comp-dmarc.test",
      organizational_domain: "comp-dmarc.test",
      alignment: {
        dkim: "relaxed",
        spf: "strict",
        dkim_aligned: true,
        spf_aligned: false,
        return_path: "send.comp-dmarc.test",
      },
      bimi: { record: true, enforcement: true, ready: true },
    });
    const none = await (
      await callWithKey(key, "GET", `/domains/${ids["comp-nodmarc.test"]}`)
    ).json<{ dmarc: unknown }>();
    expect(none.dmarc).toMatchObject({
      policy: null,
      record_found_at: null,
      bimi: { record: false, enforcement: false, ready: false },
    });
  });
});

describe("compliance: warn (the default)", () => {
  it.each(CASES)(
    "$rule: the send is accepted with a warning giving the receiver's reply, also in GET /emails/:id",
    async ({ rule, reply, send }) => {
      const res = await send();
      expect(res.status).toBe(200);
      const body = await res.json<{ id: string; warnings?: Warning[] }>();
      const w = body.warnings?.find((x) => x.rule === rule);
      expect(w, JSON.stringify(body.warnings)).toBeDefined();
      expect(`${w!.code} ${w!.enhanced}`).toBe(reply);
      const view = await getEmail(key, body.id);
      expect(view.body.warnings).toEqual(body.warnings);
    },
  );

  const ownKeyTitle =
    "a verified domain's one-click unsubscribe is signed by its own key (only the test's " +
    "http origin is warned of), and the check asks DNS nothing";
  it(ownKeyTitle, async () => {
    const before = await queries();
    const res = await callWithKey(
      key,
      "POST",
      "/emails",
      email({ from: "a@comp-nodmarc.test", to: ["x@mx-one.test"], unsubscribe: true }),
    );
    const body = await res.json<{ warnings?: Warning[] }>();
    expect((body.warnings ?? []).map((w) => w.rule)).toEqual(["auth.dmarc_missing", "bulk.one_click_missing"]);
    expect(body.warnings![1]!.message).toMatch(/missing List-Unsubscribe with an https URL\. /);
    const after = await queries();
    expect(Object.keys(after).filter((k) => k.includes("comp-") && after[k] !== before[k])).toEqual([]);
  });
});

describe("compliance: strict", () => {
  beforeAll(async () => {
    const res = await callWithKey(key, "PATCH", "/relay/settings", { compliance: "strict" });
    expect(await res.json()).toMatchObject({ object: "settings", compliance: "strict" });
  });

  it.each(CASES)(
    "$rule: the send is refused with 422 compliance_error naming the rule",
    async ({ rule, reply, send }) => {
      const res = await send();
      expect(res.status).toBe(422);
      const err = await res.json<{ statusCode: number; name: string; message: string }>();
      expect(err).toMatchObject({ statusCode: 422, name: "compliance_error" });
      expect(err.message).toContain(`${rule} (a receiver would answer ${reply})`);
    },
  );
});

describe("teardown", () => {
  it("lets the queues settle", async () => {
    await settle();
  });
});
