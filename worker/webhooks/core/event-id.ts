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
 *   eventId({emailId, recipient, attempt, type}) returns "evt_" followed by
 *   32 hex digits: two 64-bit FNV-1a hashes (different offset bases) over
 *   the length-prefixed fields, so ("a.b", "c") and ("a", "b.c") differ.
 *   Recipient addresses are hashed as given; callers pass the normalised
 *   address they store.
 *
 *   fnv1a64(text, offsetBasis) is the hash itself, over UTF-16 code units
 *   (deterministic in every JavaScript runtime, no TextEncoder needed).
 *
 * INVARIANTS
 *   Same identity, same id; the id matches /^evt_[0-9a-f]{32}$/.
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

const FNV_PRIME = 0x100000001b3n;
const MASK_64 = 0xffffffffffffffffn;
/** The standard 64-bit FNV offset basis, and a second one for the other half. */
const OFFSET_A = 0xcbf29ce484222325n;
const OFFSET_B = 0x84222325cbf29ce4n;

/** 64-bit FNV-1a over the UTF-16 code units of `text`. */
export function fnv1a64(text: string, offsetBasis: bigint = OFFSET_A): bigint {
  let hash = offsetBasis;
  for (let i = 0; i < text.length; i++) {
    hash ^= BigInt(text.charCodeAt(i));
    hash = (hash * FNV_PRIME) & MASK_64;
  }
  return hash;
}

/** Deterministic event id from (email id, recipient, attempt, type). */
export function eventId(identity: EventIdentity): string {
  const fields = [identity.emailId, identity.recipient, String(identity.attempt), identity.type];
  const text = fields.map((f) => `${f.length}:${f}`).join("|");
  const hex = (h: bigint) => h.toString(16).padStart(16, "0");
  return `evt_${hex(fnv1a64(text, OFFSET_A))}${hex(fnv1a64(text, OFFSET_B))}`;
}
