/**
 * The pull feed and the stored envelopes of the D1 event log (db/events.ts writes them): read
 * whole, a compact body given back the fields its messages row holds (core/stored-body.ts).
 *
 * DESCRIPTION
 *   feedSeqOf(db, tenant, id)    the tenant's seq of an event id, or null.
 *   feedBodyOf(db, id)           a stored envelope's body, whole, or null.
 *   Event ids are found through the index of their email's events (event_of_email).
 *   listFeed(db, tenant, q)      a page of envelopes after a seq, oldest first, optionally of some types.
 *   feedRange(db, tenant, q)     envelopes in a seq and time range, for replay.
 *   Both read the rows of event_runs in order and the events each holds (migration 0040), never
 *   more rows than the page and REST_MAX.
 *
 * INVARIANTS
 *   A compact body finds its messages row: it is written only in the batch that writes the row,
 *   and retention deletes an email's events before its row (db/retention.ts).
 */
import { emailOfEventId } from "../webhooks/core/event-id";
import {
  COMPACT_MARK,
  expandBody,
  ROW_COMPACT_MARK,
  type EventFields,
  type MessageFields,
} from "../webhooks/core/stored-body";
import { REST_MAX, seqFloor, type FeedRow } from "./events";
import { restColumns } from "./event-inserts";

/**
 * RETURNED of event_log `e` with the columns of its messages row `m` that a compact body leaves
 * out (core/stored-body.ts), joined only for such a body (a look-up by primary key).
 */
const FEED_COLUMNS =
  "e.tenant_id, e.seq, e.email_id, e.event_id, e.event_type AS type, e.body, e.created_at, e.recipient, " +
  "m.id AS m_id, m.created_at AS m_created_at, " +
  "m.from_addr AS m_from_addr, m.to_json AS m_to_json, m.subject AS m_subject";
const WITH_MESSAGE = `LEFT JOIN messages m ON substr(e.body, 1, 1) IN ('${COMPACT_MARK}', '${ROW_COMPACT_MARK}') AND m.id = e.email_id`;

type JoinedRow = FeedRow & { [K in keyof MessageFields as `m_${K}`]: MessageFields[K] | null };

/** A row of FEED_COLUMNS with its envelope whole; throws when a compact body lost its messages row (a bug). */
function whole(r: JoinedRow): FeedRow {
  const m =
    r.m_id === null
      ? null
      : {
          id: r.m_id,
          created_at: r.m_created_at!,
          from_addr: r.m_from_addr!,
          to_json: r.m_to_json!,
          subject: r.m_subject,
        };
  const body = expandBody(r.body, m, eventFields(r));
  if (body === null)
    throw new Error(`event ${r.event_id}: its envelope is stored compact, and its messages row is gone`);
  const { tenant_id, seq, email_id, event_id, type, created_at, recipient } = r;
  return { tenant_id, seq, email_id, event_id, type, body, created_at, recipient };
}

/** The columns of a stored event's row that a body compact of them leaves out. */
export function eventFields(r: Pick<FeedRow, "type" | "created_at" | "recipient">): EventFields {
  return { type: r.type, created_at: r.created_at, recipient: r.recipient };
}

/** The rows (FROM and WHERE, with their parameters) that find an event id: by its email's events, or for an id of the earlier form by the partial index that keeps those. */
function whereEventId(id: string): { from: string; where: string; binds: string[] } {
  const email = emailOfEventId(id);
  return email !== null
    ? { from: "event_of_email", where: "of_email = ? AND event_id = ?", binds: [email, id] }
    : { from: "event_runs", where: "event_id = ? AND instr(substr(event_id, 5), '_') = 0", binds: [id] };
}

/** A stored envelope's body, whole, or null. */
export async function feedBodyOf(db: D1Database, eventId: string): Promise<string | null> {
  const { from, where, binds } = whereEventId(eventId);
  const r = await db
    .prepare(`SELECT ${FEED_COLUMNS} FROM ${from} e ${WITH_MESSAGE} WHERE ${where} AND e.body IS NOT NULL`)
    .bind(...binds)
    .first<JoinedRow>();
  return r ? whole(r).body : null;
}

/** The tenant's seq of an event id, or null when the tenant has no such event. */
export async function feedSeqOf(db: D1Database, tenant: string, eventId: string): Promise<number | null> {
  const { from, where, binds } = whereEventId(eventId);
  // `+tenant_id`: not the primary key's tenant prefix (every row of the tenant), the id's index.
  const r = await db
    .prepare(`SELECT seq FROM ${from} WHERE ${where} AND +tenant_id = ?`)
    .bind(...binds, tenant)
    .first<{ seq: number }>();
  return r?.seq ?? null;
}

/** An envelope's columns, in a stored row (`h`) or in its rest (`j`, migration 0040). */
type Cols = { id: string; type: string; at: string };
const HEAD_COLS: Cols = { id: "h.event_id", type: "h.event_type", at: "h.created_at" };
const REST = restColumns("h", "j");
const REST_COLS: Cols = { id: "j.value ->> 6", type: REST.event_type, at: "j.value ->> 4" };

/**
 * Up to `limit` envelopes with afterSeq < seq (≤ untilSeq) that `match` takes, oldest first. The
 * rows holding one are read in the primary key's order from REST_MAX seqs before afterSeq (a
 * row's rest starts there at most): `limit` of them, and as many as start in those REST_MAX seqs
 * (usually the one row that held afterSeq, if any), since every later row holds one past
 * afterSeq; rows' seqs never interleave, so that is enough and in order. ?1 tenant, ?2 afterSeq,
 * ?3 limit, ?4 untilSeq; `match`'s parameters from ?5.
 */
function pageSql(match: (c: Cols) => string): string {
  const takes = (c: Cols) => `${c.id} IS NOT NULL AND ${match(c)}`;
  return `WITH h AS MATERIALIZED (SELECT tenant_id, seq, email_id, event_id, event_type, created_at, recipient, body, rest FROM event_runs h
      WHERE tenant_id = ?1 AND seq > ?2 - ${REST_MAX} AND seq <= ?4
        AND (${takes(HEAD_COLS)} OR EXISTS (SELECT 1 FROM json_each(rest) j WHERE ${takes(REST_COLS)}))
      ORDER BY seq LIMIT ?3 + (SELECT count(*) FROM event_runs WHERE tenant_id = ?1 AND seq > ?2 - ${REST_MAX} AND seq <= ?2)),
    ev AS (SELECT h.tenant_id, h.seq, h.email_id, h.event_id, h.event_type, h.body, h.created_at, h.recipient
      FROM h WHERE ${takes(HEAD_COLS)}
      UNION ALL SELECT h.tenant_id, h.seq + j.key + 1, h.email_id, ${REST.event_id}, ${REST.event_type}, j.value ->> 8,
        j.value ->> 4, ${REST.recipient}
      FROM h, json_each(h.rest) j WHERE ${takes(REST_COLS)})
    SELECT ${FEED_COLUMNS} FROM ev e ${WITH_MESSAGE} WHERE e.seq > ?2 AND e.seq <= ?4 ORDER BY e.seq LIMIT ?3`;
}

/** listFeed's query (?5: the types, when `typed`), exported for its plan's test. */
export function listFeedSql(typed: boolean): string {
  return pageSql((c) => (typed ? `${c.type} IN (SELECT value FROM json_each(?5))` : "1"));
}

/**
 * A page of the tenant's envelopes with seq > afterSeq, oldest first. A type filter walks the
 * tenant's log in order and skips other types (no per-type index is written).
 */
export async function listFeed(
  db: D1Database,
  tenant: string,
  q: { afterSeq: number; limit: number; types?: readonly string[] },
): Promise<{ rows: FeedRow[]; hasMore: boolean }> {
  const typed = q.types !== undefined && q.types.length > 0;
  const sql = listFeedSql(typed);
  const binds: unknown[] = [tenant, q.afterSeq, q.limit + 1, Number.MAX_SAFE_INTEGER];
  const { results } = await db
    .prepare(sql)
    .bind(...binds, ...(typed ? [JSON.stringify(q.types)] : []))
    .all<JoinedRow>();
  return { rows: results.slice(0, q.limit).map(whole), hasMore: results.length > q.limit };
}

/**
 * The tenant's envelopes in a seq range (exclusive after, inclusive until) and time range,
 * oldest first. The scan starts at the time range's seq floor.
 */
export async function feedRange(
  db: D1Database,
  tenant: string,
  q: { afterSeq: number; untilSeq: number; fromMs: number; toMs: number; limit: number },
): Promise<FeedRow[]> {
  const after = Math.max(q.afterSeq, seqFloor(q.fromMs) - 1);
  const { results } = await db
    .prepare(pageSql((c) => `${c.at} >= ?5 AND ${c.at} <= ?6`))
    .bind(tenant, after, q.limit, q.untilSeq, q.fromMs, q.toMs)
    .all<JoinedRow>();
  return results.map(whole);
}
