import { randomBytes } from "node:crypto";
import { Webhook, WebhookVerificationError } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import {
  decodeWebhookSecret,
  generateWebhookSecret,
  signWebhook,
  WebhookSigningError,
  type WebhookHeaders,
} from "../../../worker/webhooks/sign";

// The library checks the timestamp against its own clock (±5 min), so signing uses the real time.
const nowSec = () => Math.floor(Date.now() / 1000);
const secretA = generateWebhookSecret((n) => new Uint8Array(randomBytes(n)));
const secretB = generateWebhookSecret((n) => new Uint8Array(randomBytes(n)), 48);
const BODY = JSON.stringify({
  type: "email.delivered",
  created_at: "2026-11-22T11:40:00.000Z",
  data: { email_id: "e1", to: ["ü@example.net"] },
});

/** The svix-* headers renamed to the Standard Webhooks names, as a Svix/Resend receiver reads them. */
function svixAsStandard(h: WebhookHeaders): Record<string, string> {
  return {
    "webhook-id": h["svix-id"],
    "webhook-timestamp": h["svix-timestamp"],
    "webhook-signature": h["svix-signature"],
  };
}

/** Verifies with the independent standardwebhooks package; returns the error name or "ok". */
function verify(secret: string, body: string, headers: Record<string, string>): string {
  try {
    new Webhook(secret).verify(body, headers);
    return "ok";
  } catch (e) {
    return e instanceof WebhookVerificationError ? e.message : String(e);
  }
}

describe("signWebhook verified by the standardwebhooks package", () => {
  it("verifies through the webhook-* headers and the svix-* headers", async () => {
    const h = await signWebhook({
      id: "evt_0123456789abcdef0123456789abcdef",
      timestampSec: nowSec(),
      body: BODY,
      secrets: [secretA],
    });
    expect(verify(secretA, BODY, { ...h })).toBe("ok");
    expect(verify(secretA, BODY, svixAsStandard(h))).toBe("ok");
    expect(h["svix-signature"]).toBe(h["webhook-signature"]);
    expect(h["svix-id"]).toBe(h["webhook-id"]);
    expect(h["svix-timestamp"]).toBe(h["webhook-timestamp"]);
  });

  it("carries one signature per secret during rotation, and each secret alone verifies", async () => {
    const h = await signWebhook({
      id: "evt_rotation",
      timestampSec: nowSec(),
      body: BODY,
      secrets: [secretA, secretB],
    });
    const parts = h["webhook-signature"].split(" ");
    expect(parts).toHaveLength(2);
    for (const p of parts) expect(p).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(verify(secretA, BODY, { ...h })).toBe("ok");
    expect(verify(secretB, BODY, { ...h })).toBe("ok");
    expect(verify(secretB, BODY, svixAsStandard(h))).toBe("ok");
  });

  it.each([
    {
      name: "a tampered body",
      body: BODY.replace("delivered", "bounced"),
      secret: () => secretA,
      mutate: (h: WebhookHeaders) => ({ ...h }),
    },
    { name: "one byte appended", body: `${BODY} `, secret: () => secretA, mutate: (h: WebhookHeaders) => ({ ...h }) },
    {
      name: "a different id",
      body: BODY,
      secret: () => secretA,
      mutate: (h: WebhookHeaders) => ({ ...h, "webhook-id": "evt_other" }),
    },
    {
      name: "a shifted timestamp",
      body: BODY,
      secret: () => secretA,
      mutate: (h: WebhookHeaders) => ({ ...h, "webhook-timestamp": String(Number(h["webhook-timestamp"]) - 1) }),
    },
    {
      name: "an unknown secret",
      body: BODY,
      secret: () => generateWebhookSecret((n) => new Uint8Array(randomBytes(n))),
      mutate: (h: WebhookHeaders) => ({ ...h }),
    },
  ])("fails verification with $name", async ({ body, secret, mutate }) => {
    const h = await signWebhook({ id: "evt_tamper", timestampSec: nowSec(), body: BODY, secrets: [secretA] });
    expect(verify(secret(), body, mutate(h))).toBe("No matching signature found");
  });

  it("signs the exact bytes of a byte body", async () => {
    const bytes = new TextEncoder().encode(BODY);
    const fromBytes = await signWebhook({
      id: "evt_bytes",
      timestampSec: 1_700_000_000,
      body: bytes,
      secrets: [secretA],
    });
    const fromString = await signWebhook({
      id: "evt_bytes",
      timestampSec: 1_700_000_000,
      body: BODY,
      secrets: [secretA],
    });
    expect(fromBytes["webhook-signature"]).toBe(fromString["webhook-signature"]);
  });

  it("matches the library's own signature for the same input", async () => {
    const ts = nowSec();
    const h = await signWebhook({ id: "evt_same", timestampSec: ts, body: BODY, secrets: [secretB] });
    expect(h["webhook-signature"]).toBe(new Webhook(secretB).sign("evt_same", new Date(ts * 1000), BODY));
  });
});

describe("secrets", () => {
  it("generates whsec_ + base64 of the injected bytes", () => {
    const secret = generateWebhookSecret((n) => new Uint8Array(n).map((_, i) => i), 24);
    expect(secret).toBe("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYX");
    expect([...decodeWebhookSecret(secret)]).toEqual([...Array(24).keys()]);
  });

  it.each([
    { name: "too short", run: () => generateWebhookSecret((n) => new Uint8Array(n), 16) },
    { name: "too long", run: () => generateWebhookSecret((n) => new Uint8Array(n), 65) },
    { name: "short random source", run: () => generateWebhookSecret(() => new Uint8Array(3)) },
    { name: "not base64", run: () => decodeWebhookSecret("whsec_not base64!") },
    { name: "empty", run: () => decodeWebhookSecret("whsec_") },
  ])("refuses $name", ({ run }) => {
    expect(run).toThrow(WebhookSigningError);
  });

  it.each([
    { name: "no secrets", input: { id: "evt_x", timestampSec: 1, body: "", secrets: [] } },
    { name: "id with a space", input: { id: "evt x", timestampSec: 1, body: "", secrets: [secretA] } },
    { name: "id with a dot", input: { id: "evt.x", timestampSec: 1, body: "", secrets: [secretA] } },
    { name: "fractional timestamp", input: { id: "evt_x", timestampSec: 1.5, body: "", secrets: [secretA] } },
  ])("signWebhook refuses $name", async ({ input }) => {
    await expect(signWebhook(input)).rejects.toThrow(WebhookSigningError);
  });
});
