/**
 * The statement that writes the D1 event log (db/events.ts logInsertStatements; migration 0040):
 * a row per email whose events none is stored, holding them all, and a row per event of the
 * others (LOG_INSERT, given the pieces packRuns makes). It binds ?1 tenant, ?2 the pieces (JSON),
 * ?3 the seq floor, ?4 the claim time, ?5 the statement's emails, ?6 those of them whose messages
 * row the batch writes after.
 */
import type { LogRow } from "./events";

/** The columns RETURNING gives of a stored row (FeedRow, and `rest` where a row may have one). */
export const RETURNED = "tenant_id, seq, email_id, event_id, event_type AS type, body, created_at, recipient";

/** Events a row holds in `rest` at most (migration 0040): a reader's bound on seq reaches its row within this. */
export const REST_MAX = 63;

/** An event's fields, in the order of an element of `rest`. */
function fieldsOf(r: LogRow): unknown[] {
  return [r.source_seq, r.part, r.type, r.recipient, r.created_at, r.data, r.event_id, r.event_type, r.body];
}

/**
 * An event as an element of the rest of the row whose first event is `head` (migration 0040):
 * its recipient 0 when it is the row's, its event id from the `_` after the email id, its
 * envelope type 0 when it is its type. restColumns reads it back.
 */
export function restOf(r: LogRow, emailId: string, head: LogRow): unknown[] {
  const own = `evt_${emailId}_`;
  return [
    r.source_seq,
    r.part,
    r.type,
    r.recipient === head.recipient ? 0 : r.recipient,
    r.created_at,
    r.data,
    r.event_id !== null && r.event_id.startsWith(own) ? r.event_id.slice(own.length - 1) : r.event_id,
    r.event_type !== null && r.event_type === r.type ? 0 : r.event_type,
    r.body,
  ];
}

/** An element of the rest of a row (email `emailId`, recipient `recipient`) as the columns RETURNED names. */
export function restEvent(e: unknown[], emailId: string, recipient: string | null) {
  const id = e[6] as string | null;
  return {
    recipient: e[3] === 0 ? recipient : (e[3] as string | null),
    created_at: e[4] as number,
    event_id: (id !== null && id.startsWith("_") ? `evt_${emailId}${id}` : id) as string,
    type: (e[7] === 0 ? e[2] : e[7]) as string,
    body: e[8] as string,
  };
}

/**
 * An element `j` of the rest of row `h` as columns (restOf's inverse; the views of migration 0040
 * spell the same): recipient, event_id, event_type; the others are j.value ->> their index.
 */
export function restColumns(h: string, j: string): { recipient: string; event_id: string; event_type: string } {
  return {
    recipient: `IIF(${j}.value ->> 3 IS 0, ${h}.recipient, ${j}.value ->> 3)`,
    event_id: `IIF(substr(${j}.value ->> 6, 1, 1) = '_', 'evt_' || ${h}.email_id || (${j}.value ->> 6), ${j}.value ->> 6)`,
    event_type: `IIF(${j}.value ->> 7 IS 0, ${j}.value ->> 2, ${j}.value ->> 7)`,
  };
}

/**
 * The bytes of a row's payload (its record) SQLite keeps in its page for a `WITHOUT ROWID` table
 * (a 4 KiB page: (4096 - 12) · 64/255 - 23 = 1,002), less a margin. A longer row keeps 489 bytes
 * there and puts the rest in overflow pages of its own, 4 KiB each.
 */
export const IN_PAGE_BYTES = 990;

const utf8 = new TextEncoder();

/** The bytes of a SQLite record of `values`: its header (a serial type each) and their bodies. */
export function recordBytes(values: readonly unknown[]): number {
  let header = 1;
  let body = 0;
  for (const v of values) {
    if (typeof v === "string" || (typeof v === "object" && v !== null)) {
      const n = utf8.encode(typeof v === "string" ? v : JSON.stringify(v)).length;
      body += n;
      header += 2 * n + 13 < 128 ? 1 : 2;
    } else {
      header += 1;
      if (typeof v === "number" && Number.isInteger(v) && v !== 0 && v !== 1) {
        const a = Math.abs(v);
        body += a < 128 ? 1 : a < 32_768 ? 2 : a < 2 ** 23 ? 3 : a < 2 ** 31 ? 4 : a < 2 ** 47 ? 6 : 8;
      } else if (typeof v === "number" && !Number.isInteger(v)) body += 8;
    }
  }
  return header + body;
}

/**
 * Whether an email's events of one statement go in one row: three or more (their rows and deletes
 * saved outweigh the overflow page: a row and its delete are $2 per million emails, a 4 KiB page
 * kept for the retention about $3), or two whose row stays in its page. Two that do not (an email's
 * email.sent and email.delivered envelopes, about 750 bytes each) keep a row each.
 */
function packs(tenant: string, emailId: string, evs: readonly LogRow[]): boolean {
  if (evs.length !== 2) return true;
  // The row as LOG_INSERT writes it (seq and the claim time at their largest).
  const [h, rest] = [evs[0]!, [restOf(evs[1]!, emailId, evs[0]!)]];
  const row = [tenant, 2 ** 53 - 1, emailId, h.source_seq, h.part, h.type, h.recipient, h.created_at, h.data];
  return recordBytes([...row, h.event_id, h.event_type, h.body, 2 ** 47, -1, JSON.stringify(rest), 1]) <= IN_PAGE_BYTES;
}

/**
 * A chunk's rows as the pieces LOG_INSERT writes: each email's events in pieces of 1 + REST_MAX
 * (of one each when they do not pack),
 * `o` the piece's first seq after the statement's base (seqs in the order of the emails' first
 * rows, each piece keeping a seq for every event it holds), `span` on an email's first piece how
 * far its other pieces' seqs go, `claim` whether the piece holds an envelope, `restClaim` one
 * past its first event; `evs` its events' fields (what the statement checks against the stored),
 * `rest` all but the first as stored (restOf).
 */
export function packRuns(tenant: string, chunk: readonly (LogRow & { email_id: string })[]) {
  const byEmail = new Map<string, LogRow[]>();
  for (const r of chunk) {
    const list = byEmail.get(r.email_id);
    if (list) list.push(r);
    else byEmail.set(r.email_id, [r]);
  }
  const out: {
    email_id: string;
    o: number;
    first: boolean;
    span: number;
    claim: boolean;
    restClaim: boolean;
    evs: unknown[][];
    rest: unknown[][] | null;
  }[] = [];
  let o = 0;
  for (const [email_id, evs] of byEmail) {
    const start = out.length;
    const size = packs(tenant, email_id, evs) ? REST_MAX + 1 : 1;
    for (let i = 0; i < evs.length; i += size) {
      const piece = evs.slice(i, i + size);
      out.push({
        email_id,
        o,
        first: i === 0,
        span: 0,
        claim: piece.some((e) => e.event_id !== null),
        restClaim: piece.slice(1).some((e) => e.event_id !== null),
        evs: piece.map(fieldsOf),
        rest: piece.length > 1 ? piece.slice(1).map((e) => restOf(e, email_id, piece[0]!)) : null,
      });
      o += piece.length;
    }
    out[start]!.span = out[out.length - 1]!.o - out[start]!.o;
  }
  return out;
}

/** The seq a tenant's next row starts after: its last row's, and the seqs that row's rest holds (migration 0040). */
const LAST_SEQ = `(SELECT seq + IFNULL(json_array_length(rest), 0) FROM event_runs WHERE tenant_id = ?1 ORDER BY seq DESC LIMIT 1)`;

/** The stored events of the statement's emails (?5), read once per statement (see logInsertStatements). */
const KNOWN = `known AS MATERIALIZED (SELECT k.email_id, k.source_seq, k.part, k.event_id
           FROM event_of_email k WHERE k.of_email IN (SELECT value FROM json_each(?5)))`;

/**
 * Whether an email given in ?6 is named by the messages row its batch writes after this
 * statement (migration 0037): it has no stored event and no messages row yet.
 */
const NAMED = (email: string) =>
  `(${email} IN (SELECT value FROM json_each(?6)) AND ${email} NOT IN (SELECT email_id FROM known)
     AND NOT EXISTS (SELECT 1 FROM messages WHERE id = ${email}))`;

const HEAD = (i: number) => `p.v ->> '$.evs[0][${i}]'`;

const COLUMNS =
  "tenant_id, seq, email_id, source_seq, part, type, recipient, created_at, data, event_id, event_type, body, " +
  "enqueued_at, run, rest, rest_envelopes";

/**
 * The insert of a chunk's events (logInsertStatements), given as the pieces of packRuns (?2). The
 * pieces of an email none of whose events is stored (by Outbox event and part, or by envelope id)
 * are a row each. The other emails' events (a repeated publication) are a row each, the form
 * before migration 0040: one already stored is left out, one whose envelope id is stored (another
 * transition gave the same webhook-id) keeps its transition without the envelope, and an email's
 * rows are one run (migration 0036). Every row's seq is the statement's base and the offset
 * packRuns gave its first event, so no row takes another's seqs.
 */
export const LOG_INSERT = `WITH ${KNOWN},
  pieces AS MATERIALIZED (SELECT j.key AS k, j.value AS v, j.value ->> '$.email_id' AS email_id FROM json_each(?2) AS j),
  stale AS MATERIALIZED (SELECT DISTINCT p.email_id FROM pieces p, json_each(p.v, '$.evs') AS x
    WHERE (p.email_id, x.value ->> 0, x.value ->> 1) IN (SELECT email_id, source_seq, part FROM known)
      OR x.value ->> 6 IN (SELECT event_id FROM known WHERE event_id IS NOT NULL)),
  base AS MATERIALIZED (SELECT MAX(IFNULL(${LAST_SEQ}, 0), ?3) AS b),
  flat AS (SELECT p.email_id, (p.v ->> '$.o') + x.key AS o, x.value AS e,
      x.value ->> 6 IN (SELECT event_id FROM known WHERE event_id IS NOT NULL) AS dup,
      (p.email_id, x.value ->> 0, x.value ->> 1) IN (SELECT email_id, source_seq, part FROM known) AS stored
    FROM pieces p, json_each(p.v, '$.evs') AS x WHERE p.email_id IN (SELECT email_id FROM stale))
  INSERT OR IGNORE INTO event_runs (${COLUMNS})
  SELECT ?1, (SELECT b FROM base) + (p.v ->> '$.o') + 1, p.email_id,
    ${[0, 1, 2, 3, 4, 5, 6, 7, 8].map(HEAD).join(", ")},
    IIF(p.v ->> '$.claim', ?4, NULL),
    IIF(${NAMED("p.email_id")} OR NOT (p.v ->> '$.first'), -1, p.v ->> '$.span'),
    IIF(json_type(p.v, '$.rest') = 'array', p.v -> '$.rest', NULL),
    IIF(p.v ->> '$.restClaim', 1, NULL)
  FROM pieces p WHERE p.email_id NOT IN (SELECT email_id FROM stale)
  UNION ALL
  SELECT ?1, (SELECT b FROM base) + f.o + 1, f.email_id,
    f.e ->> 0, f.e ->> 1, f.e ->> 2, f.e ->> 3, f.e ->> 4, f.e ->> 5,
    IIF(f.dup, NULL, f.e ->> 6), IIF(f.dup, NULL, f.e ->> 7), IIF(f.dup, NULL, f.e ->> 8),
    IIF(f.dup OR f.e ->> 6 IS NULL, NULL, ?4),
    IIF(f.o = min(f.o) OVER run, max(f.o) OVER run - min(f.o) OVER run, -1), NULL, NULL
  FROM flat f WHERE NOT (f.dup AND f.e ->> 5 IS NULL) AND NOT f.stored
  WINDOW run AS (PARTITION BY f.email_id)
  ORDER BY 2
  RETURNING ${RETURNED}, rest`;
