/*
 * NAME
 *   stored-body - an envelope as the event log stores it: without what its messages row holds
 *
 * SUMMARY
 *   An envelope of an email repeats the email's id, creation time, sender, recipients and subject,
 *   which its D1 messages row holds already. The log stores the rest (`~` and the JSON of the
 *   envelope without those five fields) and puts them back when it is read.
 *
 * DESCRIPTION
 *   compactBody(body, m)  the stored form of `body`, an envelope of the email whose messages row
 *                         is `m`: compact when expandBody gives `body` back byte for byte from it,
 *                         else `body` itself (another shape, other values, an envelope of no email).
 *   expandBody(stored, m) the envelope a stored body stands for: `stored` itself when it is not
 *                         compact; null when it is and `m` is null (a compact body is only written
 *                         in the batch that writes its messages row, which retention deletes after
 *                         the email's events: a bug, never a state).
 *
 *   Why: event_log is WITHOUT ROWID, and SQLite keeps at most about 1,000 bytes of a row of such
 *   a table in its page; the rest goes to an overflow page of its own (4 KiB). A delivered
 *   envelope of a ten-recipient email (its `to` list, then a row's other columns) passed that, so
 *   each took 4 KiB more than it held; without the repeated fields no envelope row of the
 *   benchmarks does. A one-recipient envelope loses about 200 of its 580 bytes.
 *
 * INVARIANTS
 *   expandBody(compactBody(b, m), m) === b for every b and m. The fields put back come only from
 *   columns the messages row never changes after its insert (id, created_at, from_addr, to_json,
 *   subject).
 */

/** The columns of an email's messages row that its envelopes repeat. */
export interface MessageFields {
  id: string;
  created_at: number;
  from_addr: string;
  to_json: string;
  subject: string | null;
}

/** A compact body starts with this; a full one, a JSON object, never does (db/feed.ts tests it in SQL). */
export const COMPACT_MARK = "~";

/** The fields of `data` the messages row holds, in the envelope's order (they come first). */
const MOVED = ["email_id", "created_at", "from", "to", "subject"] as const;

type Envelope = { type: unknown; created_at: unknown; data: Record<string, unknown> };

function envelopeOf(text: string): Envelope | null {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) return null;
  const keys = Object.keys(v);
  const data = (v as Envelope).data;
  if (keys.join() !== "type,created_at,data" || data === null || typeof data !== "object" || Array.isArray(data))
    return null;
  return v as Envelope;
}

/** The stored form of an envelope of the email whose messages row is `m` (see the header). */
export function compactBody(body: string, m: MessageFields): string {
  const e = envelopeOf(body);
  if (e === null || Object.keys(e.data).slice(0, MOVED.length).join() !== MOVED.join()) return body;
  const rest = { ...e.data };
  for (const k of MOVED) delete rest[k];
  const compact = COMPACT_MARK + JSON.stringify({ type: e.type, created_at: e.created_at, data: rest });
  try {
    return expandBody(compact, m) === body ? compact : body;
  } catch {
    return body; // a row `m` that could not give it back (not a time, not JSON): kept whole
  }
}

/** The envelope a stored body stands for (see the header). */
export function expandBody(stored: string, m: MessageFields | null): string | null {
  if (!stored.startsWith(COMPACT_MARK)) return stored;
  if (m === null) return null;
  const e = JSON.parse(stored.slice(COMPACT_MARK.length)) as Envelope;
  return JSON.stringify({
    type: e.type,
    created_at: e.created_at,
    data: {
      email_id: m.id,
      created_at: new Date(m.created_at).toISOString(),
      from: m.from_addr,
      to: JSON.parse(m.to_json) as unknown,
      subject: m.subject ?? "",
      ...e.data,
    },
  });
}
