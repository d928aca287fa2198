/*
 * NAME
 *   event-id - stable, deterministic event ids (the webhook-id)
 *
 * SUMMARY
 *   An event's id is the Standard Webhooks `webhook-id` and the pull feed's
 *   `id`; it must be the same on every retry and replay and in the feed, so
 *   it is derived from the event's identity rather than drawn at random.
 *
 * DESCRIPTION
 *   eventId({emailId, recipient, attempt, type}) returns "evt_", the email
 *   id, "_" and 16 hex digits: a 64-bit FNV-1a hash over the
 *   length-prefixed fields, so ("a.b", "c") and ("a", "b.c") differ. The
 *   email id in it lets D1 find the event through the index of its email's
 *   events (migration 0010), so the event log needs no index of event ids.
 *   Recipient addresses are hashed as given; callers pass the normalised
 *   address they store.
 *
 *   emailOfEventId(id) the email id an event id names, or null for an id
 *   of the earlier form ("evt_" and 32 hex digits, two such hashes), which
 *   events stored before migration 0010 keep.
 *
 *   fnv1a64(text, offsetBasis) is the hash itself, over UTF-16 code units
 *   (deterministic in every JavaScript runtime, no TextEncoder needed).
 *
 * INVARIANTS
 *   Same identity, same id; emailOfEventId(eventId(x)) === x.emailId for
 *   an email id without "_" (every message id: hex digits and dashes).
 *
 * ERRORS
 *   None thrown.
 */

/** The fields an event id is derived from. */
export interface EventIdentity {
  emailId: string;
  recipient: string;
  attempt: number;
  type: string;
}

/** The standard 64-bit FNV offset basis. */
const OFFSET_A = 0xcbf29ce484222325n;

/**
 * 64-bit FNV-1a over the UTF-16 code units of `text`. The hash is kept as two 32-bit halves in
 * plain numbers, not a BigInt per step (every published event's id is hashed on the delivery
 * path): multiplying by the prime 2^40 + 0x1b3 modulo 2^64 is the low half times 0x1b3 (below
 * 2^41, exact in a double), whose carry, the high half times 0x1b3 and the low half's bits
 * shifted by 40 make the new high half.
 */
export function fnv1a64(text: string, offsetBasis: bigint = OFFSET_A): bigint {
  let hi = Number(offsetBasis >> 32n) >>> 0;
  let lo = Number(offsetBasis & 0xffffffffn) >>> 0;
  for (let i = 0; i < text.length; i++) {
    lo = (lo ^ text.charCodeAt(i)) >>> 0;
    const low = lo * 0x1b3;
    hi = (Math.imul(hi, 0x1b3) + Math.floor(low / 0x100000000) + (lo << 8)) >>> 0;
    lo = low >>> 0;
  }
  return (BigInt(hi) << 32n) | BigInt(lo);
}

/** Deterministic event id from (email id, recipient, attempt, type). */
export function eventId(identity: EventIdentity): string {
  const fields = [identity.emailId, identity.recipient, String(identity.attempt), identity.type];
  const text = fields.map((f) => `${f.length}:${f}`).join("|");
  return `evt_${identity.emailId}_${fnv1a64(text, OFFSET_A).toString(16).padStart(16, "0")}`;
}

/** The earlier form of event ids (before migration 0010): no email id in them. */
export const LEGACY_EVENT_ID = /^evt_[0-9a-f]{32}$/;

/** The email id an event id names; null for an id of the earlier form (see the header). */
export function emailOfEventId(id: string): string | null {
  if (!id.startsWith("evt_") || LEGACY_EVENT_ID.test(id)) return null;
  const cut = id.lastIndexOf("_");
  return cut > 4 && /^[0-9a-f]{16}$/.test(id.slice(cut + 1)) ? id.slice(4, cut) : null;
}
