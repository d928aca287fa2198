/**
 * R2 keys of the files kept for Resend's download links: the copy of a sent email with
 * attachments ("sent") and the raw bytes of a received email ("received").
 *
 * DESCRIPTION
 *   keptKey(kind, atMs, id)   "<kind>/<atMs, 13 digits>/<id>": keys sort by time within a kind,
 *                             so retention lists a kind's prefix from the start and stops at the
 *                             first key that is not yet due.
 *   keptAt(key)               the time a kept key names, or null for another key.
 *   KEPT_KINDS                the kinds.
 */

/** What a kept file is. */
export type KeptKind = "sent" | "received";

export const KEPT_KINDS: readonly KeptKind[] = ["sent", "received"];

/** The R2 key of a kept file (see the header). */
export function keptKey(kind: KeptKind, atMs: number, id: string): string {
  return `${kind}/${String(Math.max(0, Math.floor(atMs))).padStart(13, "0")}/${id}`;
}

/** The time a kept key names, or null. */
export function keptAt(key: string): number | null {
  const m = /^(?:sent|received)\/(\d{13})\//.exec(key);
  return m ? Number(m[1]) : null;
}
