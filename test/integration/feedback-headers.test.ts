/**
 * Complaint routing headers (issue 14 item 4): every email from POST /emails carries Feedback-ID
 * ("<campaign>:<tenant>:<category>:cohort", from its tags), and mail from a domain the tenant
 * verified carries CFBL-Address (RFC 9477) at the domain's return-path host; DKIM signs both, and
 * a request's own headers of those names win. Mail from such a domain also goes out from VERP
 * addresses on that host.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { insertDomain } from "../../worker/db/domains";
import { newDkimKey } from "../../worker/domains/service";
import { outboxOf } from "../../worker/model/ids";
import { callWithKey, email, newKey, storedBody } from "./helpers";

let key: string;
beforeAll(async () => {
  key = await newKey("acme");
  const id = crypto.randomUUID();
  const now = Date.now();
  const dkim = await newDkimKey(env, id, "cohort1", "active", now);
  await insertDomain(
    env.DB,
    {
      id,
      tenant_id: "acme",
      name: "mine.test",
      status: "verified",
      region: "us-east-1",
      return_path: "bounce",
      open_tracking: 0,
      click_tracking: 0,
      tls: "opportunistic",
      records: "[]",
      created_at: now,
      verified_at: now,
    },
    dkim,
  );
});

async function send(body: Record<string, unknown>): Promise<string> {
  const res = await callWithKey(key, "POST", "/emails", email(body));
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json<{ id: string }>()).id;
}

const head = async (id: string) =>
  new TextDecoder()
    .decode(await storedBody(id))
    .split("\r\n\r\n")[0]!
    .replace(/\r\n[ \t]+/g, " ");
const header = (h: string, name: string) => new RegExp(`^${name}: (.*)$`, "im").exec(h)?.[1] ?? null;

describe("complaint routing headers", () => {
  it("Feedback-ID names the campaign and category tags, the tenant and the relay, under the DKIM signature", async () => {
    const h = await head(
      await send({
        from: "news@signed.test",
        tags: [
          { name: "campaign", value: "spring_sale" },
          { name: "category", value: "newsletter" },
        ],
      }),
    );
    expect(header(h, "Feedback-ID")).toBe("spring_sale:acme:newsletter:cohort");
    expect(header(h, "DKIM-Signature")).toMatch(/h=[^;]*feedback-id/);
    expect(header(h, "CFBL-Address")).toBeNull();
    expect(header(await head(await send({})), "Feedback-ID")).toBe("none:acme:transactional:cohort");
  });

  it("a verified domain adds CFBL-Address at its return-path host, signed with the domain's own key", async () => {
    const id = await send({ from: "Mine <hello@mine.test>" });
    const h = await head(id);
    expect(header(h, "CFBL-Address")).toBe("fbl@bounce.mine.test; report=arf");
    expect(await outboxOf(env, id).envelope(id)).toMatchObject({
      mailFrom: "hello@mine.test",
      returnPath: "bounce.mine.test",
    });
    expect(header(h, "DKIM-Signature")).toMatch(/d=mine\.test;.*h=[^;]*cfbl-address:cfbl-address/);
  });

  it("the request's own Feedback-ID and CFBL-Address win", async () => {
    const h = await head(
      await send({ from: "hello@mine.test", headers: { "Feedback-ID": "x:y:z:me", "CFBL-Address": "fbl@mine.test" } }),
    );
    expect(header(h, "Feedback-ID")).toBe("x:y:z:me");
    expect(header(h, "CFBL-Address")).toBe("fbl@mine.test");
  });
});
