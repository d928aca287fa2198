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
 *   compactBody(body, m, ev)  with `ev`, the columns of the event's row (its event_type,
 *                         created_at and recipient), the shorter form `^` and the rest of `data`
 *                         when that gives `body` back: the type and time are the row's, the
 *                         recipient 0 when it is the row's, the relay's own Message-ID `~` and
 *                         what follows the email id (migration 0040: so an email's two envelopes
 *                         of one publication fit one row's page).
 *   expandBody(stored, m, ev?) the envelope a stored body stands for: `stored` itself when it is
 *                         not compact; null when it is and `m` is null, or `ev` for a `^` body (a
 *                         compact body is only written in the batch that writes its messages row,
 *                         which retention deletes after the email's events: a bug, never a
 *                         state).
 *
 *   Why: event_log is WITHOUT ROWID, and SQLite keeps at most about 1,000 bytes of a row of such
 *   a table in its page; the rest goes to an overflow page of its own (4 KiB). A delivered
 *   envelope of a ten-recipient email (its `to` list, then a row's other columns) passed that, so
 *   each took 4 KiB more than it held; without the repeated fields no envelope row of the
 *   benchmarks does. A one-recipient envelope loses about 200 of its 580 bytes.
 *
 * INVARIANTS
 *   expandBody(compactBody(b, m, ev), m, ev) === b for every b, m and ev. The fields put back come only from
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

/**
 * A body compact of its event's row too starts with this (migration 0040): only the rest of its
 * `data`, the event's type, time and recipient and the relay's Message-ID taken from the row.
 */
export const ROW_COMPACT_MARK = "^";

/** The columns of an event's row that its envelope repeats: event_type, created_at, recipient. */
export interface EventFields {
  type: string | null;
  created_at: number;
  recipient: string | null;
}

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

/**
 * The stored form of an envelope of the email whose messages row is `m` (see the header), with
 * `ev` its event row's columns: the shortest form that gives it back.
 */
export function compactBody(body: string, m: MessageFields, ev?: EventFields): string {
  const e = envelopeOf(body);
  if (e === null || Object.keys(e.data).slice(0, MOVED.length).join() !== MOVED.join()) return body;
  const rest = { ...e.data };
  for (const k of MOVED) delete rest[k];
  const forms = [COMPACT_MARK + JSON.stringify({ type: e.type, created_at: e.created_at, data: rest })];
  if (ev !== undefined) forms.unshift(ROW_COMPACT_MARK + JSON.stringify(ofRow(rest, m, ev)));
  for (const form of forms) {
    try {
      if (expandBody(form, m, ev) === body) return form;
    } catch {
      // a row that could not give it back (not a time, not JSON): the next form
    }
  }
  return body;
}

/** The relay's own Message-ID names the email: `<id@…>` is kept as `~@…>`. */
const OWN_ID = "~";

/** `data` without what the event's row gives back: its recipient (as 0) and the email id in its Message-ID. */
function ofRow(rest: Record<string, unknown>, m: MessageFields, ev: EventFields): Record<string, unknown> {
  const out = { ...rest };
  const mid = out.message_id;
  if (typeof mid === "string" && mid.startsWith(`<${m.id}`)) out.message_id = OWN_ID + mid.slice(m.id.length + 1);
  if ("recipient" in out && out.recipient === ev.recipient) out.recipient = 0;
  return out;
}

/** `data` as ofRow took it. */
function fromRow(rest: Record<string, unknown>, m: MessageFields, ev: EventFields): Record<string, unknown> {
  const out = { ...rest };
  const mid = out.message_id;
  if (typeof mid === "string" && mid.startsWith(OWN_ID)) out.message_id = `<${m.id}${mid.slice(OWN_ID.length)}`;
  if (out.recipient === 0) out.recipient = ev.recipient;
  return out;
}

/** The envelope a stored body stands for (see the header); a row compact body needs its event's row `ev` too. */
export function expandBody(stored: string, m: MessageFields | null, ev?: EventFields): string | null {
  const row = stored.startsWith(ROW_COMPACT_MARK);
  if (!row && !stored.startsWith(COMPACT_MARK)) return stored;
  if (m === null || (row && ev === undefined)) return null;
  const e = row
    ? {
        type: ev!.type,
        created_at: new Date(ev!.created_at).toISOString(),
        data: fromRow(JSON.parse(stored.slice(ROW_COMPACT_MARK.length)) as Record<string, unknown>, m, ev!),
      }
    : (JSON.parse(stored.slice(COMPACT_MARK.length)) as Envelope);
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
