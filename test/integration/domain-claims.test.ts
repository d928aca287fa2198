/**
 * Who may have a domain name (issue 37, item 2), through the real routes: claims coexist, and
 * verification is exclusive, as Resend does it. Several tenants claim one name; the first to
 * verify it (its records published, looked up over DoH) owns it and the others' claims lapse; an
 * unverified claim lapses after DOMAIN_CLAIM_TTL_HOURS (the cron deletes it, verify answers 404);
 * a subdomain of a domain another tenant verified (mail., send.) is refused at claim and at
 * verify; a public suffix is refused; a name is normalised one way (case, trailing dot, IDN to
 * A-labels) for claiming and for sending. The DoH resolver is a fixture answering from `zone`.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import worker from "../../worker";
import { email, newKey } from "./helpers";

const secretsKey = btoa(String.fromCharCode(...Array.from({ length: 32 }, (_, i) => (i * 13) % 256)));
const production = {
  ...env,
  COHORT_ENV: "production",
  WEBHOOK_SECRETS_KEY: secretsKey,
  DOH_RESOLVER_URL: "https://doh.test/dns-query",
} as Env;

/** name → TXT texts / MX data the fixture resolver answers; anything else NXDOMAIN. */
const zone = new Map<string, { TXT?: string[]; MX?: string[] }>();
const realFetch = globalThis.fetch;

beforeAll(() => {
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (url.hostname !== "doh.test") return realFetch(input, init);
    const name = (url.searchParams.get("name") ?? "").toLowerCase().replace(/\.$/, "");
    const type = url.searchParams.get("type") as "TXT" | "MX";
    const data = zone.get(name)?.[type];
    return Response.json(
      data === undefined
        ? { Status: 3 }
        : {
            Status: 0,
            Answer: data.map((d) => ({
              name: `${name}.`,
              type: type === "TXT" ? 16 : 15,
              TTL: 60,
              data: type === "TXT" ? `"${d}"` : d,
            })),
          },
    );
  });
});
afterAll(() => vi.restoreAllMocks());

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

type Domain = {
  id: string;
  name: string;
  status: string;
  records: { record: string; name: string; type: string; value: string; priority?: number }[];
};

async function claim(key: string, name: string, e: Env = production): Promise<Domain> {
  const res = await api(key, "POST", "/domains", { name }, e);
  expect(res.status, await res.clone().text()).toBe(201);
  return res.json<Domain>();
}

/** Publishes a claim's records, as its owner would in its DNS. */
function publish(d: Domain): void {
  for (const r of d.records) {
    const name = r.name === "@" ? d.name : `${r.name}.${d.name}`;
    zone.set(name, { ...zone.get(name), [r.type]: [r.type === "MX" ? `${r.priority ?? 10} ${r.value}.` : r.value] });
  }
}

const verify = (key: string, d: Domain, e: Env = production) =>
  api(key, "POST", `/domains/${d.id}/verify`, undefined, e);
const statusOf = async (key: string, d: Domain) =>
  (await (await api(key, "GET", `/domains/${d.id}`)).json<{ status?: string }>()).status;

let a: string;
let b: string;
beforeAll(async () => {
  a = await newKey("claims-a");
  b = await newKey("claims-b");
});

describe("claims coexist, verification is exclusive", () => {
  it("two tenants claim one name; the first to verify owns it and the other's claim lapses", async () => {
    const mine = await claim(a, "shared.test");
    const theirs = await claim(b, "Shared.Test.");
    expect(theirs.name).toBe("shared.test");
    expect((await verify(b, theirs)).status).toBe(200);
    expect(await statusOf(b, theirs)).not.toBe("verified");
    publish(mine);
    expect((await verify(a, mine)).status).toBe(200);
    expect(await statusOf(a, mine)).toBe("verified");
    expect((await api(b, "GET", `/domains/${theirs.id}`)).status).toBe(404);
    expect(await (await api(b, "GET", "/domains")).json()).toMatchObject({ data: [] });
    const again = await api(b, "POST", "/domains", { name: "shared.test" });
    expect(again.status).toBe(409);
    expect(await again.json()).toMatchObject({
      name: "validation_error",
      message: "The domain shared.test is verified by another account.",
    });
    expect((await api(a, "POST", "/emails", email({ from: "x@shared.test" }))).status).toBe(200);
    expect((await api(b, "POST", "/emails", email({ from: "x@shared.test" }))).status).toBe(403);
  });

  it("a subdomain of another tenant's verified domain (mail., send. its return-path host) is refused; its owner's are not", async () => {
    for (const name of ["mail.shared.test", "send.shared.test", "a.b.shared.test"]) {
      const res = await api(b, "POST", "/domains", { name });
      expect(res.status, name).toBe(409);
      expect(await res.json()).toMatchObject({
        message: `The domain ${name} is under shared.test, which another account verified.`,
      });
    }
    expect((await claim(a, "mail.shared.test")).name).toBe("mail.shared.test");
  });

  it("a claim made before a parent was verified by another tenant cannot verify afterwards", async () => {
    const early = await claim(b, "news.parent.test");
    publish(early);
    const parent = await claim(a, "parent.test");
    publish(parent);
    expect((await verify(a, parent)).status).toBe(200);
    const late = await verify(b, early);
    expect(late.status).toBe(409);
    expect(await late.json()).toMatchObject({
      message: "The domain news.parent.test is under parent.test, which another account verified.",
    });
    expect(await statusOf(b, early)).not.toBe("verified");
  });
});

describe("unverified claims lapse", () => {
  const short = { ...production, DOMAIN_CLAIM_TTL_HOURS: "0.0001" } as Env; // 0.36 s
  it("after DOMAIN_CLAIM_TTL_HOURS: verify answers 404, and the cron deletes the rest with their keys", async () => {
    const one = await claim(b, "lapse-one.test", short);
    const two = await claim(b, "lapse-two.test", short);
    const kept = await claim(a, "kept.test", short);
    publish(kept);
    expect((await verify(a, kept, short)).status).toBe(200);
    await new Promise((r) => setTimeout(r, 600));
    const lapsed = await verify(b, one, short);
    expect(lapsed.status).toBe(404);
    expect(await lapsed.json()).toMatchObject({
      name: "not_found",
      message: expect.stringMatching(/lapsed unverified/),
    });
    const ctx = createExecutionContext();
    await worker.scheduled(
      { scheduledTime: Date.now(), cron: "*/10 * * * *", noRetry: () => undefined } as ScheduledController,
      short,
      ctx,
    );
    await waitOnExecutionContext(ctx);
    expect((await api(b, "GET", `/domains/${two.id}`)).status).toBe(404);
    expect(
      await env.DB.prepare("SELECT count(*) AS n FROM domain_keys WHERE domain_id IN (?, ?)")
        .bind(one.id, two.id)
        .first("n"),
    ).toBe(0);
    expect(await statusOf(a, kept)).toBe("verified");
  });
});

describe("names", () => {
  it.each(["co.uk", "github.io", "CO.UK.", "ac.jp", "pages.dev"])("refuses the public suffix %s", async (name) => {
    const res = await api(a, "POST", "/domains", { name });
    expect(res.status).toBe(422);
    expect(await res.json()).toMatchObject({
      name: "validation_error",
      message: expect.stringMatching(/is a public suffix/),
    });
  });

  it("refuses a top-level domain alone", async () => {
    expect((await api(a, "POST", "/domains", { name: "com." })).status).toBe(422);
  });

  it("takes a name under a private suffix, which is its owner's own (user.github.io)", async () => {
    expect((await claim(a, "user.github.io")).name).toBe("user.github.io");
  });

  it("normalises case, a trailing dot and an IDN to its A-label, the same way as a From address", async () => {
    const d = await claim(a, "Bücher.Example.");
    expect(d.name).toBe("xn--bcher-kva.example");
    expect((await api(a, "POST", "/domains", { name: "xn--BCHER-kva.example" })).status).toBe(409);
    publish(d);
    expect((await verify(a, d)).status).toBe(200);
    expect((await api(a, "POST", "/emails", email({ from: "Info <info@BÜCHER.example>" }))).status).toBe(200);
    expect((await api(b, "POST", "/domains", { name: "bücher.example" })).status).toBe(409);
  });
});
