/**
 * Reading what the sinks caught: header values out of a raw message, and a per-(message,
 * recipient) ledger of copies for loss and duplicate counting.
 *
 * DESCRIPTION
 *   headerOf(raw, name)         the first value of header `name` (unfolded), or null.
 *   rawOf(caught)               a catcher message's DATA as text.
 *   Ledger                      add(key, rcpt, atMs) per copy; copies(key, rcpt) → times.
 */
import type { CaughtMessage } from "../../../scripts/lib/smtp-catcher";

/** The first value of a header in the header section of `raw`, or null. */
export function headerOf(raw: string, name: string): string | null {
  const end = raw.search(/\r?\n\r?\n/);
  const head = (end < 0 ? raw : raw.slice(0, end)).replace(/\r?\n[ \t]+/g, " ");
  const want = name.toLowerCase();
  for (const line of head.split(/\r?\n/)) {
    const i = line.indexOf(":");
    if (i > 0 && line.slice(0, i).trim().toLowerCase() === want) return line.slice(i + 1).trim();
  }
  return null;
}

/** The DATA of a caught message as text. */
export function rawOf(m: CaughtMessage): string {
  return Buffer.from(m.body, "base64").toString("utf8");
}

/** Copies received per (message key, recipient). */
export class Ledger {
  private readonly seen = new Map<string, number[]>();

  /** Records one copy. */
  add(key: string, rcpt: string, atMs: number): void {
    const k = `${key}\u0000${rcpt.toLowerCase()}`;
    const list = this.seen.get(k) ?? [];
    list.push(atMs);
    this.seen.set(k, list);
  }

  /** Arrival times of the copies of (key, rcpt). */
  copies(key: string, rcpt: string): number[] {
    return this.seen.get(`${key}\u0000${rcpt.toLowerCase()}`) ?? [];
  }
}
