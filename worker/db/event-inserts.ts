/**
 * The two statements that write the D1 event log (db/events.ts logInsertStatements; migration
 * 0040): a row per email whose events none is stored, holding them all (PACKED_INSERT, the rows
 * given by packRuns), then a row per event of the others (ROWS_INSERT). Both bind ?1 tenant,
 * ?2 the rows (JSON), ?3 the seq floor, ?4 the claim time, ?5 the statement's emails, ?6 those
 * of them whose messages row the batch writes after.
 */
import type { LogRow } from "./events";
import { jsonColumns } from "./json-rows";

/** The columns RETURNING gives of a stored row (FeedRow, and `rest` where a row may have one). */
export const RETURNED = "tenant_id, seq, email_id, event_id, event_type AS type, body";

/** Events a row holds in `rest` at most (migration 0040): a reader's bound on seq reaches its row within this. */
export const REST_MAX = 63;

/** An event as an element of `rest` (migration 0040). */
function restOf(r: LogRow): unknown[] {
  return [r.source_seq, r.part, r.type, r.recipient, r.created_at, r.data, r.event_id, r.event_type, r.body];
}

/**
 * The bytes of a row's payload SQLite keeps in its page for a `WITHOUT ROWID` table (a 4 KiB page:
 * (4096 - 12) · 64/255 - 23 = 1,002), less a margin for the record's header and integers. A longer
 * row keeps 489 bytes there and puts the rest in overflow pages of its own, 4 KiB each.
 */
export const IN_PAGE_BYTES = 900;

const utf8 = new TextEncoder();
const textBytes = (v: unknown) => (typeof v === "string" ? utf8.encode(v).length + 3 : 9);

/**
 * Whether an email's events of one statement go in one row: three or more (their rows and deletes
 * saved outweigh the overflow page: a row and its delete are $2 per million emails, a 4 KiB page
 * kept for the retention about $3), or two whose row stays in its page. Two that do not (an email's
 * email.sent and email.delivered envelopes, about 750 bytes each) keep a row each.
 */
function packs(evs: readonly LogRow[]): boolean {
  if (evs.length !== 2) return true;
  // The row's tenant, seq and email id, then each event's fields.
  return evs.flatMap(restOf).reduce<number>((n, v) => n + textBytes(v), 64) <= IN_PAGE_BYTES;
}

/**
 * A chunk's rows as the rows PACKED_INSERT writes: each email's events in pieces of 1 + REST_MAX
 * (of one each when they do not pack),
 * `o` the piece's first seq after the statement's base (seqs in the order of the emails' first
 * rows, each piece keeping a seq for every event it holds), `span` on an email's first piece how
 * far its other pieces' seqs go, `claim` whether the piece holds an envelope, `restClaim` one
 * past its first event.
 */
export function packRuns(chunk: readonly (LogRow & { email_id: string })[]) {
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
  }[] = [];
  let o = 0;
  for (const [email_id, evs] of byEmail) {
    const start = out.length;
    const size = packs(evs) ? REST_MAX + 1 : 1;
    for (let i = 0; i < evs.length; i += size) {
      const piece = evs.slice(i, i + size);
      out.push({
        email_id,
        o,
        first: i === 0,
        span: 0,
        claim: piece.some((e) => e.event_id !== null),
        restClaim: piece.slice(1).some((e) => e.event_id !== null),
        evs: piece.map(restOf),
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

/**
 * The pieces of packRuns (?2) of the emails none of whose events is stored (by Outbox event and
 * part, or by envelope id): one row each. ROWS_INSERT, after it, writes the others' events.
 */
export const PACKED_INSERT = `WITH ${KNOWN},
  stale AS MATERIALIZED (SELECT DISTINCT json_extract(p.value, '$.email_id') AS email_id
    FROM json_each(?2) AS p, json_each(p.value, '$.evs') AS x
    WHERE (json_extract(p.value, '$.email_id'), x.value ->> 0, x.value ->> 1) IN (SELECT email_id, source_seq, part FROM known)
      OR x.value ->> 6 IN (SELECT event_id FROM known WHERE event_id IS NOT NULL))
  INSERT OR IGNORE INTO event_runs (tenant_id, seq, email_id, source_seq, part, type, recipient, created_at, data,
    event_id, event_type, body, enqueued_at, run, rest, rest_envelopes)
  SELECT ?1, MAX(IFNULL(${LAST_SEQ}, 0), ?3) + (p.v ->> '$.o') + 1, p.email_id,
    ${[0, 1, 2, 3, 4, 5, 6, 7, 8].map(HEAD).join(", ")},
    IIF(p.v ->> '$.claim', ?4, NULL),
    IIF(p.named OR NOT (p.v ->> '$.first'), -1, p.v ->> '$.span'),
    IIF(json_array_length(p.v, '$.evs') > 1, json_remove(p.v -> '$.evs', '$[0]'), NULL),
    IIF(p.v ->> '$.restClaim', 1, NULL)
  FROM (SELECT j.key AS k, j.value AS v, j.value ->> '$.email_id' AS email_id, ${NAMED("j.value ->> '$.email_id'")} AS named
    FROM json_each(?2) AS j) AS p
  WHERE p.email_id NOT IN (SELECT email_id FROM stale)
  ORDER BY p.k
  RETURNING ${RETURNED}, rest`;

const LOG_COLUMNS = jsonColumns(
  ["email_id", "source_seq", "part", "type", "recipient", "created_at", "data", "event_id", "event_type", "body"],
  true,
);

/**
 * A row per event (the form before migration 0040) of the events (?2) PACKED_INSERT left: those
 * of emails with an event already stored (a repeated publication), each left out when stored, and
 * without its envelope when another transition gave the same envelope id. An email's rows are one
 * run (migration 0036). An email PACKED_INSERT wrote is stale here only when its row has an index
 * entry (then every event of it is stored); one its messages row is to name is not found at all,
 * and so not stale.
 */
export const ROWS_INSERT =
  `WITH ${KNOWN},
  stale AS MATERIALIZED (SELECT DISTINCT j.value ->> '$.email_id' AS email_id FROM json_each(?2) AS j
    WHERE (j.value ->> '$.email_id', j.value ->> '$.source_seq', j.value ->> '$.part') IN (SELECT email_id, source_seq, part FROM known)
      OR j.value ->> '$.event_id' IN (SELECT event_id FROM known WHERE event_id IS NOT NULL))
       INSERT OR IGNORE INTO event_runs (tenant_id, seq, email_id, source_seq, part, type, recipient, created_at, data, ` +
  `event_id, event_type, body, enqueued_at, run)
       SELECT ?1, MAX(IFNULL(${LAST_SEQ}, 0), ?3) + r.k + 1, ` +
  `r.email_id, r.source_seq, r.part, r.type, r.recipient, r.created_at, r.data,
         IIF(r.dup, NULL, r.event_id), IIF(r.dup, NULL, r.event_type), IIF(r.dup, NULL, r.body), IIF(r.dup OR r.event_id IS NULL, NULL, ?4),
         IIF(r.k = min(r.k) OVER run AND NOT r.named, max(r.k) OVER run - min(r.k) OVER run, -1)
       FROM (SELECT j.key AS k, ${LOG_COLUMNS},
           ${NAMED("json_extract(j.value, '$.email_id')")} AS named,
           json_extract(j.value, '$.event_id') IN (SELECT event_id FROM known WHERE event_id IS NOT NULL) AS dup,
           (json_extract(j.value, '$.email_id'), json_extract(j.value, '$.source_seq'), json_extract(j.value, '$.part'))
             IN (SELECT email_id, source_seq, part FROM known) AS stored
         FROM json_each(?2) AS j) AS r
       WHERE NOT (r.dup AND r.data IS NULL) AND NOT r.stored AND r.email_id IN (SELECT email_id FROM stale)
       WINDOW run AS (PARTITION BY r.email_id)
       ORDER BY r.k
       RETURNING ${RETURNED}`;
