/**
 * One signed webhook POST: the I/O half of a delivery attempt.
 *
 * DESCRIPTION
 *   signingSecrets(env, row, nowMs)  the endpoint's currently valid secrets, decrypted: the
 *                         current one, plus the previous one while its rotation overlap lasts.
 *   guardTarget(env, url)  the SSRF guard at send time (core/ssrf.ts): nothing is resolved;
 *                         IP literals in special ranges, internal names and odd ports are
 *                         refused; http: and loopback only when COHORT_ENV is development or
 *                         test. Returns null when allowed, else the reason.
 *   postWebhook({url, id, body, secrets, timeoutMs, nowMs})  signs the exact body bytes
 *                         (sign.ts: webhook-* and svix-* headers, one signature per secret),
 *                         POSTs with a timeout (AbortSignal) and without following redirects,
 *                         discards the response body, and returns the outcome for
 *                         core/retry.ts: the status with Retry-After and webhook-delivery
 *                         headers, a timeout, or a network error.
 *
 * ERRORS
 *   postWebhook never throws for network trouble (it is an outcome); signing errors (a broken
 *   stored secret) do throw. No secret ever appears in a message.
 */
import type { EndpointRow } from "../db/webhooks";
import type { HttpOutcome } from "./core/retry";
import { checkEndpointUrl, LOCAL_DEVELOPMENT } from "../net/core/ssrf";
import { openSecret, secretsKey } from "../lib/secrets";
import { signWebhook } from "./sign";
import { settingsOf } from "../settings/settings";

/** The endpoint's valid signing secrets, current first. */
export async function signingSecrets(env: Env, row: EndpointRow, nowMs: number): Promise<string[]> {
  const key = await secretsKey(env);
  const secrets = [await openSecret(key, row.secret_enc)];
  if (row.previous_secret_enc !== null && row.previous_valid_until !== null && row.previous_valid_until > nowMs) {
    secrets.push(await openSecret(key, row.previous_secret_enc));
  }
  return secrets;
}

/** Null when the URL may be called now, else why not. */
export function guardTarget(env: Env, url: string): string | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "endpoint is not a URL";
  }
  const local = settingsOf(env).local;
  const verdict = checkEndpointUrl(parsed, local ? LOCAL_DEVELOPMENT : {});
  return verdict.ok ? null : `refused by the SSRF guard: ${verdict.detail}`;
}

/** Input of postWebhook. */
export interface PostInput {
  url: string;
  id: string;
  body: string;
  secrets: readonly string[];
  timeoutMs: number;
  nowMs: number;
}

/** Signs and POSTs one delivery; returns its outcome. */
export async function postWebhook(input: PostInput): Promise<HttpOutcome> {
  const bytes = new TextEncoder().encode(input.body);
  const headers = await signWebhook({
    id: input.id,
    timestampSec: Math.floor(input.nowMs / 1000),
    body: bytes,
    secrets: input.secrets,
  });
  try {
    const res = await fetch(input.url, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json", "user-agent": "Cohort-Webhooks/1" },
      body: input.body, // UTF-8 on the wire: exactly the bytes signed
      redirect: "manual",
      signal: AbortSignal.timeout(input.timeoutMs),
    });
    await res.body?.cancel().catch(() => undefined);
    return {
      kind: "response",
      status: res.status,
      retryAfter: res.headers.get("retry-after"),
      deliveryHeader: res.headers.get("webhook-delivery"),
    };
  } catch (e) {
    const name = e instanceof Error ? e.name : "";
    if (name === "TimeoutError" || name === "AbortError") return { kind: "timeout" };
    return { kind: "network-error", message: e instanceof Error ? e.message : String(e) };
  }
}
