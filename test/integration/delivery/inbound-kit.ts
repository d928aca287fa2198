/**
 * What the inbound tests share: sending through the relay to the sink, the transaction the sink
 * caught, handing a fixture to the email() handler as Email Routing would, the events of a
 * recipient in D1, and DKIM keys published through the fixture DoH server (POST /records) for
 * signing reports the relay then verifies itself.
 */
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { expect, inject } from "vitest";
import worker from "../../../worker";
import { handleInbound } from "../../../worker/inbound/email";
import { signDkim } from "../../../worker/mail/dkim";
import { eventually } from "../helpers";
import { caught, type Caught } from "./observe";
import { feedBodyOf } from "../../../worker/db/feed";

const sink = inject("sink");

/** POST /emails as `key`, with the operator's BOUNCE_DOMAIN set (or not). */
export async function send(key: string, body: Record<string, unknown>, bounceDomain: string | null): Promise<string> {
  const ctx = createExecutionContext();
  const req = new Request("http://relay.test/emails", {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  }) as Request<unknown, IncomingRequestCfProperties>;
  const res = await worker.fetch(
    req,
    bounceDomain === null ? env : ({ ...env, BOUNCE_DOMAIN: bounceDomain } as Env),
    ctx,
  );
  await waitOnExecutionContext(ctx);
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json<{ id: string }>()).id;
}

/** The transaction the sink received for `rcpt`. */
export const arrival = (rcpt: string) =>
  eventually(
    async () => (await caught(sink.httpPort)).find((m) => m.rcptTo.includes(rcpt)),
    10_000,
    `mail for ${rcpt}`,
  );

export function messageIdOf(m: Caught): string {
  return /^Message-ID:\s*(<[^>]+>)/im.exec(atob(m.body))![1]!;
}

/** A fixture's text with its placeholders filled and CRLF line ends. */
export function filled(template: string, vars: Record<string, string>): string {
  return template.replace(/\{\{(\w+)\}\}/g, (_, k: string) => vars[k] ?? "").replace(/\r?\n/g, "\r\n");
}

/** Hands `text` to the email() handler as Email Routing would, with `vars` over the env's settings. */
export async function inbound(text: string, to: string, from = "", settings: Record<string, string> = {}) {
  const bytes = new TextEncoder().encode(text);
  let rejected: string | null = null;
  const e = Object.keys(settings).length === 0 ? env : ({ ...env, ...settings } as Env);
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
    e,
  );
  return { kind, rejected: rejected as string | null };
}

/** The event types of one recipient of an email, in order, as D1 indexes them. */
export const events = async (id: string, rcpt: string) =>
  (
    await env.DB.prepare(
      "SELECT type FROM event_log WHERE email_id = ? AND recipient = ? AND type IS NOT NULL ORDER BY seq",
    )
      .bind(id, rcpt)
      .all<{ type: string }>()
  ).results.map((r) => r.type);

/** The published envelopes of one recipient of an email. */
export const envelopes = async (id: string, rcpt: string) =>
  Promise.all(
    (
      await env.DB.prepare(
        "SELECT event_type, event_id FROM event_log WHERE email_id = ? AND recipient = ? AND body IS NOT NULL ORDER BY seq",
      )
        .bind(id, rcpt)
        .all<{ event_type: string; event_id: string }>()
    ).results.map(async (r) => ({
      type: r.event_type,
      data: (JSON.parse((await feedBodyOf(env.DB, r.event_id))!) as { data: Record<string, unknown> }).data,
    })),
  );

/** Publishes a DNS answer at the fixture DoH server. */
export async function publishRecord(name: string, type: "TXT" | "MX", data: string[]): Promise<void> {
  const res = await fetch(inject("doh").url.replace(/\/dns-query$/, "/records"), {
    method: "POST",
    body: JSON.stringify({ name, type, data }),
  });
  expect(res.status).toBe(204);
}

const b64 = (buf: ArrayBuffer) => btoa(String.fromCharCode(...new Uint8Array(buf)));

/** A fresh RSA key for `domain` (selector s1), its public half published; signs a message as that domain. */
export async function reporterKey(domain: string): Promise<(text: string) => Promise<string>> {
  const pair = (await crypto.subtle.generateKey(
    { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" },
    true,
    ["sign", "verify"],
  )) as CryptoKeyPair;
  const spki = (await crypto.subtle.exportKey("spki", pair.publicKey)) as ArrayBuffer;
  await publishRecord(`s1._domainkey.${domain}`, "TXT", [`v=DKIM1; k=rsa; p=${b64(spki)}`]);
  return (text) => signDkim(text, { domain, selector: "s1", algorithm: "rsa-sha256", privateKey: pair.privateKey });
}

/** The stored report of the last inbound message with this own Message-ID. */
export async function storedReport(
  messageId: string,
): Promise<{ verdict: string; detail: { recipients: { verdict: string; why?: string }[] } } | null> {
  const r = await env.DB.prepare(
    "SELECT verdict, detail FROM inbound_reports WHERE message_id = ? ORDER BY received_at DESC LIMIT 1",
  )
    .bind(messageId)
    .first<{ verdict: string; detail: string }>();
  return r === null ? null : { verdict: r.verdict, detail: JSON.parse(r.detail) };
}
