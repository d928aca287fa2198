/**
 * Webhooks end to end: mail to the SMTP sink (delivered, bounced, deferred then delivered)
 * produces one event per recipient per outcome, POSTed to a real HTTP receiver, signed the
 * Standard Webhooks way (verified with the `standardwebhooks` package, also through the svix-*
 * header names and with both secrets during a rotation), and the pull feed returns exactly the
 * pushed envelopes.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { Webhook } from "standardwebhooks";
import { call, callWithKey, newKey } from "../helpers";
import {
  createEndpoint,
  deliveredIds,
  envelopeOf,
  logWhen,
  newReceiver,
  readFeed,
  send,
  type Delivery,
  type TestReceiver,
} from "./hooks";

let key: string;
let receiver: TestReceiver;
let endpoint: { id: string; secret: string };
let log: Delivery[];
let emailId: string;

const EXPECTED = [
  ["ann@sink.test", "email.sent"],
  ["ann@sink.test", "email.delivered"],
  ["reject-bob@sink.test", "email.sent"],
  ["reject-bob@sink.test", "email.bounced"],
  ["tempfail-cy@sink.test", "email.sent"],
  ["tempfail-cy@sink.test", "email.delivery_delayed"],
  ["tempfail-cy@sink.test", "email.delivered"],
]
  .map(([r, t]) => `${r} ${t}`)
  .sort();

function verifyWith(secret: string, d: Delivery, names: "webhook" | "svix"): unknown {
  const h = d.headers;
  return new Webhook(secret).verify(d.body, {
    "webhook-id": h[`${names}-id`]!,
    "webhook-timestamp": h[`${names}-timestamp`]!,
    "webhook-signature": h[`${names}-signature`]!,
  });
}

beforeAll(async () => {
  key = await newKey("acme");
  receiver = await newReceiver();
  endpoint = await createEndpoint(key, receiver.url);
  emailId = await send(key, {
    to: ["ann@sink.test", "reject-bob@sink.test", "tempfail-cy@sink.test"],
    subject: "Events",
    tags: [{ name: "kind", value: "test" }],
  });
  log = await logWhen(receiver, (l) => deliveredIds(l).size >= EXPECTED.length, "every event of the message");
});

describe("webhook deliveries", () => {
  it("push one event per recipient per outcome, in Resend's envelope with the relay's fields", () => {
    const seen = [...new Map(log.map((d) => [d.headers["webhook-id"], envelopeOf(d)])).values()];
    expect(seen.map((e) => `${e.data.recipient} ${e.type}`).sort()).toEqual(EXPECTED);
    for (const e of seen) {
      expect(e.data).toMatchObject({
        email_id: emailId,
        from: "Acme <no-reply@acme.test>",
        to: ["ann@sink.test", "reject-bob@sink.test", "tempfail-cy@sink.test"],
        subject: "Events",
        tags: { kind: "test" },
      });
    }
    const bounced = seen.find((e) => e.type === "email.bounced")!;
    expect(bounced.data).toMatchObject({
      terminal: true,
      classification: "invalid_recipient",
      delivery: { smtp_code: 550, enhanced_code: "5.1.1" },
      bounce: { type: "Permanent", subType: "invalid_recipient" },
    });
    const delayed = seen.find((e) => e.type === "email.delivery_delayed")!;
    expect(delayed.data).toMatchObject({ terminal: false, attempt: 1, delivery: { smtp_code: 451 } });
  });

  it("sign every delivery so standardwebhooks verifies it, under the webhook-* and the svix-* names", () => {
    expect(log.length).toBeGreaterThanOrEqual(EXPECTED.length);
    for (const d of log) {
      expect(d.headers["content-type"]).toBe("application/json");
      expect(verifyWith(endpoint.secret, d, "webhook")).toEqual(JSON.parse(d.body));
      expect(verifyWith(endpoint.secret, d, "svix")).toEqual(JSON.parse(d.body));
      expect(d.headers["svix-id"]).toBe(d.headers["webhook-id"]);
      expect(() => verifyWith("whsec_" + btoa("x".repeat(32)), d, "webhook")).toThrow();
    }
  });

  it("sign with both secrets while a rotation overlaps", async () => {
    const rotated = await (
      await callWithKey(key, "POST", `/webhooks/${endpoint.id}/signing-secret/rotate`)
    ).json<{ signing_secret: string }>();
    const before = log.length;
    await send(key, { to: "rotation@sink.test" });
    const after = await logWhen(
      receiver,
      (l) => l.slice(before).some((d) => envelopeOf(d).type === "email.delivered"),
      "a delivery after the rotation",
    );
    for (const d of after.slice(before)) {
      expect(d.headers["webhook-signature"]!.split(" ")).toHaveLength(2);
      expect(verifyWith(rotated.signing_secret, d, "webhook")).toBeTruthy();
      expect(verifyWith(endpoint.secret, d, "svix")).toBeTruthy();
    }
  });
});

describe("GET /relay/events", () => {
  it("returns exactly the pushed envelopes, id = webhook-id, byte for byte", async () => {
    const current = await receiver.log();
    const pushed = new Map(current.map((d) => [d.headers["webhook-id"]!, d.body]));
    const feed = await readFeed(key);
    expect(feed.map((f) => f.id).sort()).toEqual([...pushed.keys()].sort());
    for (const item of feed) {
      const { id, ...envelope } = item;
      expect(JSON.stringify(envelope)).toBe(pushed.get(id));
    }
  });

  it("pages with after and limit, filters by type, and keeps tenants apart", async () => {
    const all = await readFeed(key);
    const first = await (
      await callWithKey(key, "GET", "/relay/events?limit=2")
    ).json<{ has_more: boolean; data: { id: string }[] }>();
    expect(first.has_more).toBe(true);
    expect(first.data.map((d) => d.id)).toEqual(all.slice(0, 2).map((d) => d.id));
    const next = await (
      await callWithKey(key, "GET", `/relay/events?limit=2&after=${first.data[1]!.id}`)
    ).json<{ data: { id: string }[] }>();
    expect(next.data.map((d) => d.id)).toEqual(all.slice(2, 4).map((d) => d.id));
    const bounced = await readFeed(key, "&type=email.bounced,email.delivery_delayed");
    expect(bounced.map((d) => d.type).sort()).toEqual(["email.bounced", "email.delivery_delayed"]);
    expect(await readFeed(await newKey("other-tenant"))).toEqual([]);
    const foreign = await callWithKey(await newKey("other-tenant"), "GET", `/relay/events?after=${all[0]!.id}`);
    expect(foreign.status).toBe(422);
  });

  it.each([
    { name: "limit 0", query: "limit=0" },
    { name: "limit above 100", query: "limit=101" },
    { name: "malformed after", query: "after=nope" },
    { name: "unknown type", query: "type=email.opened" },
  ])("answers 422 in Resend's error shape for $name", async ({ query }) => {
    const res = await callWithKey(key, "GET", `/relay/events?${query}`);
    expect(res.status).toBe(422);
    expect(await res.json()).toMatchObject({ statusCode: 422, name: "validation_error" });
  });

  it("needs an API key", async () => {
    expect((await call("/relay/events")).status).toBe(401);
    expect((await callWithKey("re_not_a_key", "GET", "/relay/events")).status).toBe(403);
  });
});
