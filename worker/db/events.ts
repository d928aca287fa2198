/**
 * The D1 event log (migrations/0007 `event_log`): one row per Outbox transition, carrying the
 * envelope pushed to webhooks when there is one (the pull feed), in per-tenant order. An email's
 * events are found through event_of_email (migration 0036: the first row of each run of them is
 * indexed by email, the rest follow it in seq; migration 0037: the first run of a message whose
 * row was written with it is named by that row instead).
 *
 * DESCRIPTION
 *   logInsertStatements(db, messages, nowMs, named?)  idempotent inserts (by Outbox event and part) of
 *                                messages' transitions and envelopes, one statement per tenant
 *                                (not per message), `seq` continuing the
 *                                tenant's maximum (read inside the statement: D1 runs one
 *                                statement at a time) and never below created_at * 1000; they
 *                                return the envelopes they inserted, claimed for the queue at
 *                                `nowMs` (what is pushed). At most LOG_CHUNK_BYTES of rows per
 *                                statement (D1's statement and parameter limits).
 *   feedTakeoverStatement(db, ids, nowMs, leaseMs)  claims stored envelopes whose claim lapsed
 *                                (a publication that died before enqueueing) and returns them;
 *                                writes nothing when none lapsed. releaseFeedClaims gives claims
 *                                up when the enqueue failed.
 *   listEvents(db, tenant, afterSeq, limit)  the tenant's transitions in order (tests).
 *   Event ids are found through the index of their email's events (see BY_IDS).
 *   seqFloor(ms)                 the least seq a row created at `ms` or later can have.
 *   The feed's readers, which give bodies back whole, are feed.ts. A body is stored compact
 *   (core/stored-body.ts) by the publication that writes its email's messages row in the same
 *   batch (indexing/publish.ts); what RETURNING gives is as stored.
 */
import { emailOfEventId } from "../webhooks/core/event-id";
import { chunkByJson, jsonColumns } from "./json-rows";

/** A stored transition. */
export interface EventRow {
  tenant_id: string;
  seq: number;
  type: string;
  email_id: string;
  recipient: string | null;
  created_at: number;
  data: string;
}

/** A stored pushed envelope (`type` is the envelope's type; `body` as stored: core/stored-body.ts). */
export interface FeedRow {
  tenant_id: string;
  seq: number;
  email_id: string;
  event_id: string;
  type: string;
  body: string;
}

/** One row to log: a transition (part 0, with data) and/or an envelope. */
export interface LogRow {
  source_seq: number;
  part: number;
  type: string;
  recipient: string | null;
  created_at: number;
  /** The transition's data; null on a row that only carries an envelope. */
  data: string | null;
  event_id: string | null;
  event_type: string | null;
  body: string | null;
}

/** seq per ms of created_at: rows of one tenant created in the same ms share this room. */
export const SEQ_PER_MS = 1000;

/**
 * UTF-8 bytes of row JSON bound to one statement. D1 refuses a string or row above 2,000,000
 * bytes (SQLITE_TOOBIG); a pushed envelope repeats the message's `to`, so the envelopes of a
 * 400-recipient message can weigh 10 MB together.
 */
export const LOG_CHUNK_BYTES = 1_000_000;

/** The least seq of a row created at `ms` or later. */
export function seqFloor(ms: number): number {
  return Math.max(0, Math.floor(ms)) * SEQ_PER_MS;
}

const RETURNED = "tenant_id, seq, email_id, event_id, event_type AS type, body";

/** A message's rows to log. */
export interface MessageLog {
  tenant: string;
  emailId: string;
  rows: readonly LogRow[];
}

/**
 * Idempotent inserts of messages' rows: one statement per tenant (per LOG_CHUNK_BYTES of rows),
 * however many messages, the rows in the given order. A row already stored (by Outbox event and
 * part) is left out; a row whose envelope id is already stored (another transition gave the same
 * webhook-id) keeps its transition without the envelope. The stored events of the statement's
 * emails are read once per statement (`known`: an uncorrelated look-up; a correlated one per row
 * read each email's events once per row, quadratic in a large message's), email by email
 * (CROSS JOIN: with `IN (…)` workerd's SQLite took 2–3 times as long on a large message's
 * chunks) through event_of_email (migration 0036): the log has no index of event ids (migration
 * 0010), and an event id names its email, so it is unique among them.
 * An email's rows of one statement are one run (migration 0036): the first row written is its
 * head (in event_log_by_source, `run` = how far the run's seqs go), the others have run -1 and
 * no index entry. The first rows of an email in `named` (its messages row is inserted later in
 * the same batch, and names them: migration 0037, messages.ts) all have run -1 when the log holds
 * none of its rows and D1 no messages row of it yet.
 */
export function logInsertStatements(
  db: D1Database,
  messages: readonly MessageLog[],
  nowMs: number,
  named: ReadonlySet<string> = new Set(),
): D1PreparedStatement[] {
  const byTenant = new Map<string, (LogRow & { email_id: string })[]>();
  // A row given twice (a message twice in a batch) goes in once: only a run's head is in the
  // unique index, so INSERT OR IGNORE no longer catches a repeat within one statement.
  const given = new Set<string>();
  for (const m of messages) {
    const rows = byTenant.get(m.tenant) ?? [];
    for (const r of m.rows) {
      const key = `${m.emailId}\u0000${r.source_seq}\u0000${r.part}`;
      if (given.has(key)) continue;
      given.add(key);
      rows.push({ ...r, email_id: m.emailId });
    }
    byTenant.set(m.tenant, rows);
  }
  const logColumns = jsonColumns(
    ["email_id", "source_seq", "part", "type", "recipient", "created_at", "data", "event_id", "event_type", "body"],
    true,
  );
  return [...byTenant].flatMap(([tenant, rows]) =>
    chunkByJson(rows, LOG_CHUNK_BYTES).map((chunk) => {
      const floor = seqFloor(Math.max(...chunk.map((r) => r.created_at)));
      const emails = [...new Set(chunk.map((r) => r.email_id))];
      return db
        .prepare(
          `WITH known AS MATERIALIZED (SELECT e.email_id, e.source_seq, e.part, e.event_id
           FROM json_each(?5) AS m CROSS JOIN event_of_email e ON e.of_email = m.value)
       INSERT OR IGNORE INTO event_log (tenant_id, seq, email_id, source_seq, part, type, recipient, created_at, data, ` +
            `event_id, event_type, body, enqueued_at, run)
       SELECT ?1, MAX((SELECT COALESCE(MAX(seq), 0) FROM event_log WHERE tenant_id = ?1), ?3) + r.k + 1, ` +
            `r.email_id, r.source_seq, r.part, r.type, r.recipient, r.created_at, r.data,
         IIF(r.dup, NULL, r.event_id), IIF(r.dup, NULL, r.event_type), IIF(r.dup, NULL, r.body), IIF(r.dup OR r.event_id IS NULL, NULL, ?4),
         IIF(r.k = min(r.k) OVER run AND NOT r.named, max(r.k) OVER run - min(r.k) OVER run, -1)
       FROM (SELECT j.key AS k, ${logColumns},
           json_extract(j.value, '$.email_id') IN (SELECT value FROM json_each(?6))
             AND json_extract(j.value, '$.email_id') NOT IN (SELECT email_id FROM known)
             AND NOT EXISTS (SELECT 1 FROM messages WHERE id = json_extract(j.value, '$.email_id')) AS named,
           json_extract(j.value, '$.event_id') IN (SELECT event_id FROM known WHERE event_id IS NOT NULL) AS dup,
           (json_extract(j.value, '$.email_id'), json_extract(j.value, '$.source_seq'), json_extract(j.value, '$.part'))
             IN (SELECT email_id, source_seq, part FROM known) AS stored
         FROM json_each(?2) AS j) AS r
       WHERE NOT (r.dup AND r.data IS NULL) AND NOT r.stored
       WINDOW run AS (PARTITION BY r.email_id)
       ORDER BY r.k
       RETURNING ${RETURNED}`,
        )
        .bind(
          tenant,
          JSON.stringify(chunk),
          floor,
          nowMs,
          JSON.stringify(emails),
          JSON.stringify(emails.filter((id) => named.has(id))),
        );
    }),
  );
}

/**
 * Claims stored envelopes whose claim is older than `leaseMs` (or was released) and returns
 * them. The publication that inserted an envelope holds its claim from the insert, so in the
 * normal case this matches nothing and writes nothing; two concurrent publications thus enqueue
 * an event once.
 */
export function feedTakeoverStatement(
  db: D1Database,
  ids: readonly string[],
  nowMs: number,
  leaseMs: number,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE event_log SET enqueued_at = ?3 WHERE ${BY_IDS} AND (enqueued_at IS NULL OR enqueued_at < ?4) RETURNING ${RETURNED}`,
    )
    .bind(JSON.stringify(emailsOf(ids)), JSON.stringify(ids), nowMs, nowMs - leaseMs);
}

/** Gives up claims (the enqueue failed), so a repeated publication enqueues them. */
export async function releaseFeedClaims(db: D1Database, ids: readonly string[], claimedAtMs: number): Promise<void> {
  await db
    .prepare(`UPDATE event_log SET enqueued_at = NULL WHERE ${BY_IDS} AND enqueued_at = ?3`)
    .bind(JSON.stringify(emailsOf(ids)), JSON.stringify(ids), claimedAtMs)
    .run();
}

/**
 * Rows of the event ids bound as ?2 (JSON), found through their emails (?1, JSON) and the runs
 * of each email's events (event_of_email): event ids name their email (core/event-id.ts), and the log keeps no
 * index of new event ids (migration 0010). The publications only ever hold ids of that form.
 */
const BY_IDS =
  "(tenant_id, seq) IN (SELECT tenant_id, seq FROM event_of_email " +
  "WHERE of_email IN (SELECT value FROM json_each(?1)) AND event_id IN (SELECT value FROM json_each(?2)))";

function emailsOf(ids: readonly string[]): string[] {
  return [...new Set(ids.map(emailOfEventId).filter((e): e is string => e !== null))];
}

/** The tenant's transitions with seq > afterSeq, oldest first. */
export async function listEvents(db: D1Database, tenant: string, afterSeq = 0, limit = 100): Promise<EventRow[]> {
  const r = await db
    .prepare(
      "SELECT tenant_id, seq, type, email_id, recipient, created_at, data FROM event_log " +
        "WHERE tenant_id = ? AND seq > ? AND data IS NOT NULL ORDER BY seq LIMIT ?",
    )
    .bind(tenant, afterSeq, limit)
    .all<EventRow>();
  return r.results;
}
