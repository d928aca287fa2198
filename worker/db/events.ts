/**
 * The D1 event log (migrations/0007 `event_log`): an event per Outbox transition, carrying the
 * envelope pushed to webhooks when there is one (the pull feed), in per-tenant order. The events
 * an email's publication writes are one row of `event_runs` (migration 0040; the view event_log
 * gives each event as a row). An email's events are found through event_of_email (migration
 * 0036: the first row of each run of them is indexed by email, the rest follow it in seq;
 * migration 0037: the first run of a message whose row was written with it is named by that row
 * instead).
 *
 * DESCRIPTION
 *   logInsertStatements(db, messages, nowMs, named?)  idempotent inserts (by Outbox event and part) of
 *                                messages' transitions and envelopes, one statement per tenant
 *                                (not per message: a row per email, a row per event of an email
 *                                published before), `seq` continuing the
 *                                tenant's maximum (read inside the statement: D1 runs one
 *                                statement at a time) and never below created_at * 1000; they
 *                                return the envelopes they inserted, claimed for the queue at
 *                                `nowMs` (what is pushed; read them with returnedEvents). At most
 *                                LOG_CHUNK_BYTES of rows per statement (D1's statement and
 *                                parameter limits).
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
import { chunkByJson } from "./json-rows";
import { LOG_INSERT, packRuns, restEvent, RETURNED } from "./event-inserts";

export { REST_MAX } from "./event-inserts";

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
  /** The event row's columns a body compact of them leaves out (core/stored-body.ts). */
  created_at: number;
  recipient: string | null;
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
 * UTF-8 bytes of row JSON per statement. D1 refuses a string or row above 2,000,000 bytes
 * (SQLITE_TOOBIG); a pushed envelope repeats the message's `to`, so the envelopes of a
 * 400-recipient message can weigh 10 MB together; the statement binds each event twice (its
 * fields, and as a row's rest stores it: event-inserts.ts packRuns).
 */
export const LOG_CHUNK_BYTES = 450_000;

/** The least seq of a row created at `ms` or later. */
export function seqFloor(ms: number): number {
  return Math.max(0, Math.floor(ms)) * SEQ_PER_MS;
}

/** A message's rows to log. */
export interface MessageLog {
  tenant: string;
  emailId: string;
  rows: readonly LogRow[];
}

/**
 * Idempotent inserts of messages' events: one statement per tenant (per LOG_CHUNK_BYTES of
 * rows), however many messages. The events of an email none of whose events is stored are one
 * row (migration 0040), in pieces of 1 + REST_MAX; the others' go in a row each
 * (event-inserts.ts LOG_INSERT): an event already stored (by Outbox event and part) is left out, one whose
 * envelope id is already stored (another transition gave the same webhook-id) keeps its
 * transition without the envelope. The stored events of the statement's emails are read once per
 * statement (`known`: an uncorrelated look-up; a correlated one per row read each email's events
 * once per row, quadratic in a large message's) through event_of_email (migration 0036), the
 * emails bound by IN, which SQLite pushes into each of the view's arms (a join to the view read
 * the whole view since its arms read rests): the log has no index of event ids (migration 0010),
 * and an event id names its email, so it is unique among them.
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
  return [...byTenant].flatMap(([tenant, rows]) =>
    chunkByJson(rows, LOG_CHUNK_BYTES).flatMap((chunk) => {
      const floor = seqFloor(Math.max(...chunk.map((r) => r.created_at)));
      const emails = [...new Set(chunk.map((r) => r.email_id))];
      const binds = [floor, nowMs, JSON.stringify(emails), JSON.stringify(emails.filter((id) => named.has(id)))];
      return [db.prepare(LOG_INSERT).bind(tenant, JSON.stringify(packRuns(tenant, chunk)), ...binds)];
    }),
  );
}

/** A stored row as RETURNING gives it, with the events of its rest (migration 0040). */
type ReturnedRow = FeedRow & { rest?: string | null };

/**
 * The envelopes (and transitions, event_id null) of rows RETURNING gave: each row's own, then
 * those of its rest, with their seqs.
 */
export function returnedEvents(rows: readonly ReturnedRow[]): FeedRow[] {
  return rows.flatMap(({ rest, ...row }) => [
    row,
    ...(rest ? (JSON.parse(rest) as unknown[][]) : []).map((e, i) => ({
      tenant_id: row.tenant_id,
      seq: row.seq + i + 1,
      email_id: row.email_id,
      ...restEvent(e, row.email_id, row.recipient),
    })),
  ]);
}

/**
 * Claims stored envelopes whose claim is older than `leaseMs` (or was released) and returns
 * them. The publication that inserted an envelope holds its claim from the insert, so in the
 * normal case this matches nothing and writes nothing; two concurrent publications thus enqueue
 * an event once. A claim is a row's (migration 0040): the envelopes stored with a lapsed one are
 * taken with it (read its results with returnedEvents).
 */
export function feedTakeoverStatement(
  db: D1Database,
  ids: readonly string[],
  nowMs: number,
  leaseMs: number,
): D1PreparedStatement {
  return db
    .prepare(
      `UPDATE event_runs SET enqueued_at = ?3 WHERE ${BY_IDS} AND (enqueued_at IS NULL OR enqueued_at < ?4) RETURNING ${RETURNED}, rest`,
    )
    .bind(JSON.stringify(emailsOf(ids)), JSON.stringify(ids), nowMs, nowMs - leaseMs);
}

/** Gives up claims (the enqueue failed), so a repeated publication enqueues them. */
export async function releaseFeedClaims(db: D1Database, ids: readonly string[], claimedAtMs: number): Promise<void> {
  await db
    .prepare(`UPDATE event_runs SET enqueued_at = NULL WHERE ${BY_IDS} AND enqueued_at = ?3`)
    .bind(JSON.stringify(emailsOf(ids)), JSON.stringify(ids), claimedAtMs)
    .run();
}

/**
 * Rows holding the event ids bound as ?2 (JSON), found through their emails (?1, JSON) and the runs
 * of each email's events (event_of_email): event ids name their email (core/event-id.ts), and the log keeps no
 * index of new event ids (migration 0010). The publications only ever hold ids of that form.
 */
const BY_IDS =
  "(tenant_id, seq) IN (SELECT tenant_id, head_seq FROM event_of_email " +
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
