/*
 * NAME
 *   suppression-policy - which bounces suppress the address, and for how long
 *
 * SUMMARY
 *   A hard bounce (email.bounced) about the address itself suppresses the
 *   recipient for the tenant for a time that depends on the bounce category
 *   (classify.ts); complaints are kept until removed (api-conventions §7,
 *   after Cloudflare Email Service's conventions).
 *
 * DESCRIPTION
 *   SUPPRESSION_TTL_MS is the one table, category -> ms (null = forever):
 *     invalid_recipient  30 d   the mailbox does not exist (5.1.1 …)
 *     bad_domain          7 d   NXDOMAIN / null MX: domains do come back
 *     unknown             7 d   an unclassified 5xx: treated as a hard bounce
 *     mailbox_full        1 d   a permanent "full" usually clears
 *     dns_failure         1 d
 *     complaint         forever (reason "complaint"), until removed
 *     unsubscribe       forever (reason "unsubscribe", or "unsubscribe:<topic>"
 *                       when the email named one), until removed; scoped to the
 *                       tenant's bulk mail ("bulk"), or to its bulk mail of
 *                       that topic ("bulk:<topic>")
 *   Categories not in the table do not suppress: they are about the message
 *   or about us (policy, spam_block, auth_failure, message_too_large,
 *   rate_limited, timeout, expired, transient), so suppressing the
 *   recipient would punish the wrong party.
 *
 *   suppressionFor(event, nowMs) returns {address, reason, expiresAtMs} for
 *   an email.bounced (or email.complained) envelope, or null. The address is
 *   lower-cased, as the suppressions table stores it; the reason is
 *   "bounce:<category>" or "complaint".
 *
 *   The scope says which of the tenant's mail an entry holds back
 *   (migrations/0014): "" all of it (bounces, complaints: the address or the
 *   person refuses mail), "bulk" only emails sent with one-click unsubscribe,
 *   "bulk:<topic>" only those of that topic. suppressionScopes(bulk) lists the
 *   scopes that hold back an email: [""] for transactional mail.
 *
 * INVARIANTS
 *   Only email.bounced, email.complained and email.unsubscribed suppress;
 *   expiresAtMs is null exactly for complaints and unsubscribes.
 *
 * ERRORS
 *   None thrown.
 */

import type { BounceCategory } from "./classify";

const DAY_MS = 86_400_000;

/** How long each bounce category suppresses the address, ms; null = forever. */
export const SUPPRESSION_TTL_MS: Readonly<Partial<Record<BounceCategory | "complaint", number | null>>> = {
  invalid_recipient: 30 * DAY_MS,
  bad_domain: 7 * DAY_MS,
  unknown: 7 * DAY_MS,
  mailbox_full: DAY_MS,
  dns_failure: DAY_MS,
  complaint: null,
};

/** A suppression to add. */
export interface SuppressionEntry {
  address: string;
  /** "", "bulk" or "bulk:<topic>" (see the header). */
  scope: string;
  reason: string;
  expiresAtMs: number | null;
}

/** What an email is, as far as suppressions go: absent for transactional mail; else its unsubscribe topic. */
export interface BulkOf {
  topic: string | null;
}

/** The scopes of entries that hold back an email (see the header). */
export function suppressionScopes(bulk: BulkOf | null | undefined): string[] {
  if (!bulk) return [""];
  return bulk.topic === null ? ["", "bulk"] : ["", "bulk", `bulk:${bulk.topic}`];
}

/** The envelope fields the policy reads. */
export interface SuppressibleEvent {
  type: string;
  data: { recipient: string; classification: string | null; unsubscribe?: { topic: string | null } };
}

/** The suppression an event calls for, or null. */
export function suppressionFor(event: SuppressibleEvent, nowMs: number): SuppressionEntry | null {
  const address = event.data.recipient.trim().toLowerCase();
  if (event.type === "email.complained") return { address, scope: "", reason: "complaint", expiresAtMs: null };
  if (event.type === "email.unsubscribed") {
    const topic = event.data.unsubscribe?.topic ?? null;
    return topic === null
      ? { address, scope: "bulk", reason: "unsubscribe", expiresAtMs: null }
      : { address, scope: `bulk:${topic}`, reason: `unsubscribe:${topic}`, expiresAtMs: null };
  }
  if (event.type !== "email.bounced") return null;
  const category = (event.data.classification ?? "unknown") as BounceCategory;
  const ttl = SUPPRESSION_TTL_MS[category];
  if (ttl === undefined || ttl === null) return null;
  return { address, scope: "", reason: `bounce:${category}`, expiresAtMs: nowMs + ttl };
}
