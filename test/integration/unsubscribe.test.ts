/**
 * One-click unsubscribe (RFC 8058) in the Workers runtime: a send request's `unsubscribe` adds
 * List-Unsubscribe (the signed https link; a mailto when there is a return-path domain) and
 * List-Unsubscribe-Post, both under the DKIM signature; GET on the link is a page and changes
 * nothing; POST records the unsubscribe once (email.unsubscribed, a suppression for the tenant,
 * with the topic) that holds back only the tenant's bulk mail (of that topic), never its
 * transactional mail; a forged link is a 404 page; requests it cannot serve are 422.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import worker from "../../worker";
import { feedBodyOf } from "../../worker/db/feed";
import { call, callWithKey, email, eventually, newKey, storedBody } from "./helpers";

let key: string;
beforeAll(async () => {
  key = await newKey("acme");
});

async function send(body: Record<string, unknown>, extraEnv: Record<string, string> = {}): Promise<string> {
  const ctx = createExecutionContext();
  const req = new Request("http://relay.test/emails", {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(email(body)),
  }) as Request<unknown, IncomingRequestCfProperties>;
  const res = await worker.fetch(req, { ...env, ...extraEnv } as Env, ctx);
  await waitOnExecutionContext(ctx);
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json<{ id: string }>()).id;
}

const head = async (id: string) =>
  new TextDecoder()
    .decode(await storedBody(id))
    .split("\r\n\r\n")[0]!
    .replace(/\r\n[ \t]+/g, " ");
const header = (h: string, name: string) => new RegExp(`^${name}: (.*)$`, "im").exec(h)?.[1] ?? null;
/** The email's email.unsubscribed rows, each with its envelope whole (as the feed gives it), or null. */
const events = async (id: string) =>
  Promise.all(
    (
      await env.DB.prepare(
        "SELECT type, event_id FROM event_log WHERE email_id = ? AND type = 'email.unsubscribed' ORDER BY seq",
      )
        .bind(id)
        .all<{ type: string; event_id: string | null }>()
    ).results.map(async (r) => ({
      type: r.type,
      body: r.event_id === null ? null : await feedBodyOf(env.DB, r.event_id),
    })),
  );
const suppression = async (address: string) =>
  (
    await (
      await callWithKey(key, "GET", `/relay/suppressions?address=${encodeURIComponent(address)}`)
    ).json<{ data: { address: string; scope: string; reason: string }[] }>()
  ).data[0];

describe("one-click unsubscribe", () => {
  it("adds List-Unsubscribe (https, and mailto on the return-path domain) and List-Unsubscribe-Post, DKIM-signed", async () => {
    const id = await send(
      { from: "news@signed.test", to: "reader@example.com", unsubscribe: true },
      { BOUNCE_DOMAIN: "bounces.relay.test" },
    );
    const h = await head(id);
    const links = header(h, "List-Unsubscribe")!;
    expect(links).toMatch(
      new RegExp(
        `^<http://relay\\.test/unsubscribe/${id.replace(/-/g, "")}-0-[0-9a-f]{12}>, ` +
          `<mailto:unsubscribe\\+${id.replace(/-/g, "")}-0-[0-9a-f]{12}@bounces\\.relay\\.test>$`,
      ),
    );
    expect(header(h, "List-Unsubscribe-Post")).toBe("List-Unsubscribe=One-Click");
    expect(header(h, "DKIM-Signature")).toMatch(/h=[^;]*list-unsubscribe:list-unsubscribe-post/);
    // No return-path domain: the https link only; PUBLIC_URL names the origin.
    const plain = await send(
      { to: "reader2@example.com", unsubscribe: { topic: "news" } },
      { PUBLIC_URL: "https://relay.example.com/" },
    );
    expect(header(await head(plain), "List-Unsubscribe")).toMatch(
      /^<https:\/\/relay\.example\.com\/unsubscribe\/[0-9a-f]{32}-0-[0-9a-f]{12}>$/,
    );
  });

  it("GET shows a page and changes nothing; POST unsubscribes once, with the event and a suppression naming the topic", async () => {
    const id = await send({ to: "topic@example.com", unsubscribe: { topic: "news" } });
    const path = new URL(/<([^>]+)>/.exec(header(await head(id), "List-Unsubscribe")!)![1]!).pathname;
    const page = await call(path);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    expect(await page.text()).toMatch(/<form method="post">/);
    await new Promise((r) => setTimeout(r, 300));
    expect(await events(id)).toEqual([]);
    expect(await suppression("topic@example.com")).toBeUndefined();

    const post = () =>
      call(path, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "List-Unsubscribe=One-Click",
      });
    const res = await post();
    expect(res.status).toBe(200);
    expect(await res.text()).toMatch(/You are unsubscribed/);
    const [e] = await eventually(
      async () => ((await events(id)).some((x) => x.body !== null) ? events(id) : undefined),
      10_000,
      "email.unsubscribed",
    );
    expect(JSON.parse(e!.body!)).toMatchObject({
      type: "email.unsubscribed",
      data: { email_id: id, recipient: "topic@example.com", unsubscribe: { topic: "news", method: "one-click" } },
    });
    expect(await eventually(() => suppression("topic@example.com"), 10_000, "the suppression")).toMatchObject({
      reason: "unsubscribe:news",
    });
    expect((await post()).status).toBe(200);
    await new Promise((r) => setTimeout(r, 300));
    expect(await events(id)).toHaveLength(1);
    // Later emails: only bulk mail of the topic is held back (the entry's scope is bulk:news);
    // transactional mail, bulk mail of another topic and bulk mail without one still go.
    expect(await suppression("topic@example.com")).toMatchObject({ scope: "bulk:news" });
    const news = await send({ to: "topic@example.com", unsubscribe: { topic: "news" } });
    const others = [
      await send({ to: "topic@example.com" }),
      await send({ to: "topic@example.com", unsubscribe: { topic: "offers" } }),
      await send({ to: "topic@example.com", unsubscribe: true }),
    ];
    const lastEvent = async (id: string) => {
      // The recipient's status once classified: "suppressed", or past "incoming" (no delivery runs here).
      const r = await (await callWithKey(key, "GET", `/emails/${id}`)).json<{ recipients: { status: string }[] }>();
      const status = r.recipients[0]?.status;
      return status === undefined || status === "incoming" ? undefined : status;
    };
    expect(await eventually(() => lastEvent(news), 10_000, "suppressed")).toBe("suppressed");
    const suppressed = await env.DB.prepare(
      "SELECT event_id FROM event_log WHERE email_id = ? AND type = 'email.suppressed'",
    )
      .bind(news)
      .first<{ event_id: string }>();
    expect((await feedBodyOf(env.DB, suppressed!.event_id)) ?? "").toMatch(/unsubscribed from the topic news/);
    for (const id of others) expect(await eventually(() => lastEvent(id), 10_000, "classified")).not.toBe("suppressed");
  }, 30_000);

  it(
    "an unsubscribe without a topic holds back all the tenant's bulk mail, never its " +
      "transactional mail; a bounce or complaint entry holds back both",
    async () => {
      await env.DB.prepare(
        "INSERT INTO suppressions (tenant_id, address, scope, reason, created_at, expires_at) " +
          "VALUES ('acme', 'all-bulk@example.com', 'bulk', 'unsubscribe', ?1, NULL), ('acme', " +
          "'gone@example.com', '', 'complaint', ?1, NULL), ('acme', 'gone@example.com', " +
          "'bulk:news', 'unsubscribe:news', ?1, NULL)",
      )
        .bind(Date.now())
        .run();
      const lastEvent = async (id: string) => {
        // The recipient's status once classified: "suppressed", or past "incoming" (no delivery runs here).
        const r = await (await callWithKey(key, "GET", `/emails/${id}`)).json<{ recipients: { status: string }[] }>();
        const status = r.recipients[0]?.status;
        return status === undefined || status === "incoming" ? undefined : status;
      };
      const cases: [Record<string, unknown>, boolean][] = [
        [{ to: "all-bulk@example.com", unsubscribe: true }, true],
        [{ to: "all-bulk@example.com", unsubscribe: { topic: "news" } }, true],
        [{ to: "all-bulk@example.com" }, false],
        [{ to: "gone@example.com" }, true],
        [{ to: "gone@example.com", unsubscribe: { topic: "offers" } }, true],
      ];
      // One after the other: five at once would exceed a tenant's 3 accept slots (accept-gate.ts).
      const ids: string[] = [];
      for (const [body] of cases) ids.push(await send(body));
      for (const [i, id] of ids.entries()) {
        const last = await eventually(() => lastEvent(id), 10_000, `email ${i} classified`);
        expect(last === "suppressed", `email ${i}: ${last}`).toBe(cases[i]![1]);
      }
      // The list shows one entry per scope; DELETE ?scope= removes one, DELETE without removes the rest.
      const page = await (
        await callWithKey(key, "GET", "/relay/suppressions?address=gone@example.com")
      ).json<{ data: { scope: string; reason: string }[] }>();
      expect(page.data.map((d) => [d.scope, d.reason])).toEqual([
        ["all", "complaint"],
        ["bulk:news", "unsubscribe:news"],
      ]);
      expect(
        await (await callWithKey(key, "DELETE", "/relay/suppressions/gone@example.com?scope=bulk:news")).json(),
      ).toMatchObject({ deleted: true, count: 1 });
      expect(
        await (await callWithKey(key, "DELETE", "/relay/suppressions/gone@example.com?scope=bulk:news")).json(),
      ).toMatchObject({ name: "not_found" });
      expect((await callWithKey(key, "DELETE", "/relay/suppressions/gone@example.com?scope=nope")).status).toBe(422);
      expect(await (await callWithKey(key, "DELETE", "/relay/suppressions/gone@example.com")).json()).toMatchObject({
        deleted: true,
        count: 1,
      });
    },
    30_000,
  );

  it("a link with a forged or altered token is a 404 page, GET and POST alike", async () => {
    const id = await send({ to: "forged@example.com", unsubscribe: true });
    const path = new URL(/<([^>]+)>/.exec(header(await head(id), "List-Unsubscribe")!)![1]!).pathname;
    const forged = path.replace(/-0-[0-9a-f]{12}$/, "-0-000000000000");
    expect((await call(forged)).status).toBe(404);
    expect((await call(forged, { method: "POST", body: "List-Unsubscribe=One-Click" })).status).toBe(404);
    expect((await call(path.replace(/-0-/, "-1-"), { method: "POST", body: "" })).status).toBe(404);
  });

  it("refuses unsubscribe for several recipients, or beside the caller's own List-Unsubscribe", async () => {
    for (const body of [
      { to: ["a@example.com", "b@example.com"], unsubscribe: true },
      { to: "a@example.com", cc: "b@example.com", unsubscribe: true },
      { to: "a@example.com", unsubscribe: true, headers: { "List-Unsubscribe": "<https://example.com/u>" } },
      { to: "a@example.com", unsubscribe: { topic: "has space" } },
    ]) {
      const res = await callWithKey(key, "POST", "/emails", email(body));
      expect(res.status).toBe(422);
      expect(await res.json()).toMatchObject({ name: "validation_error" });
    }
  });

  it("a tenant default (PATCH /relay/settings) covers one-recipient emails that say nothing; false opts out; other tenants are untouched", async () => {
    const other = await newKey("other-tenant");
    expect(await (await callWithKey(key, "GET", "/relay/settings")).json()).toEqual({
      object: "settings",
      unsubscribe: null,
      receiving_daily_quota: null,
      compliance: "warn",
    });
    const set = await callWithKey(key, "PATCH", "/relay/settings", { unsubscribe: { topic: "digest" } });
    expect(set.status).toBe(200);
    expect(await set.json()).toEqual({
      object: "settings",
      unsubscribe: { topic: "digest" },
      receiving_daily_quota: null,
      compliance: "warn",
    });
    expect((await callWithKey(key, "PATCH", "/relay/settings", { unsubscribe: "yes" })).status).toBe(422);

    const one = await send({ to: "default@example.com" });
    expect(header(await head(one), "List-Unsubscribe")).toMatch(/^<http:\/\/relay\.test\/unsubscribe\//);
    const two = await send({ to: ["d1@example.com", "d2@example.com"] });
    expect(header(await head(two), "List-Unsubscribe")).toBeNull();
    const optedOut = await send({ to: "optout@example.com", unsubscribe: false });
    expect(header(await head(optedOut), "List-Unsubscribe")).toBeNull();
    const own = await send({ to: "own@example.com", headers: { "List-Unsubscribe": "<https://example.com/u>" } });
    expect(header(await head(own), "List-Unsubscribe")).toBe("<https://example.com/u>");
    const res = await callWithKey(other, "POST", "/emails", email({ to: "x@example.com" }));
    const otherId = (await res.json<{ id: string }>()).id;
    expect(header(await head(otherId), "List-Unsubscribe")).toBeNull();

    // The default's topic is the one the unsubscribe records.
    const path = new URL(/<([^>]+)>/.exec(header(await head(one), "List-Unsubscribe")!)![1]!).pathname;
    expect((await call(path, { method: "POST", body: "List-Unsubscribe=One-Click" })).status).toBe(200);
    expect(await eventually(() => suppression("default@example.com"), 10_000, "the suppression")).toMatchObject({
      reason: "unsubscribe:digest",
    });
    expect((await callWithKey(key, "PATCH", "/relay/settings", { unsubscribe: null })).status).toBe(200);
    expect(header(await head(await send({ to: "after@example.com" })), "List-Unsubscribe")).toBeNull();
  });
});
