/**
 * D1 queries of the operator surface (admin API under /relay/, dashboard, CLI).
 *
 * DESCRIPTION
 *   roleForKey(db, hash)           the role ('tenant' | 'operator') of a live key hash, or null.
 *   setKeyRole(db, hash, role)     changes a key's role (tests; scripts use keyRoleSql).
 *   keyRoleSql(hash, role)         the same as SQL text, for `wrangler d1 execute --command`.
 *   transportNames(db)             names in the `transports` table.
 *   stateCounts(db)                recipients grouped by (status, transport, nexthop), all tenants.
 *   openAges(db, nowMs, ps)        the count of not-yet-final recipients and their age
 *                                  percentiles (ms since their message was accepted).
 *   searchMessages(db, q)          messages by id, address, tag and state, newest first, with
 *                                  their recipients' states; tenant-scoped unless q.tenant is null.
 *   tenantOfMessage(db, id)        the tenant of an indexed message, or null.
 *   messageEvents(db, id, tenant)  the message's events, oldest first.
 *   throughputRows(db, from, to)   event counts per (minute, type) in [from, to) ms.
 *
 * INVARIANTS
 *   No SQL is built from input: every value is bound. Search with q.tenant set never returns
 *   another tenant's rows.
 */
import { REST_MAX, seqFloor } from "./events";
import { percentileRanks, THROUGHPUT_TYPES, type StateCountRow } from "../dashboard/core/operator-views";

/** A key's role. */
export type KeyRole = "tenant" | "operator";

/** Recipient states that are not final. */
export const OPEN_STATES = ["incoming", "ready", "active", "deferred"] as const;

/** The role of a live key, or null for an unknown or revoked key. */
export async function roleForKey(db: D1Database, keyHash: string): Promise<KeyRole | null> {
  const row = await db
    .prepare("SELECT role FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL")
    .bind(keyHash)
    .first<{ role: KeyRole }>();
  return row?.role ?? null;
}

/** Sets a key's role. */
export async function setKeyRole(db: D1Database, keyHash: string, role: KeyRole): Promise<void> {
  await db.prepare("UPDATE api_keys SET role = ? WHERE key_hash = ?").bind(role, keyHash).run();
}

/** SQL setting a key's role (hash and role are checked, so the text is safe to run). */
export function keyRoleSql(keyHash: string, role: KeyRole): string {
  if (!/^[0-9a-f]{64}$/.test(keyHash)) throw new RangeError("key hash must be hex SHA-256");
  if (role !== "tenant" && role !== "operator") throw new RangeError(`unknown role ${JSON.stringify(role)}`);
  return `UPDATE api_keys SET role = '${role}' WHERE key_hash = '${keyHash}';`;
}

/** Transport names configured in D1. */
export async function transportNames(db: D1Database): Promise<string[]> {
  return (await db.prepare("SELECT name FROM transports ORDER BY name").all<{ name: string }>()).results.map(
    (r) => r.name,
  );
}

/** OPEN_STATES as an SQL list, in the order of the partial index recipients_open (migration 0009). */
export const OPEN_SQL = OPEN_STATES.map((s) => `'${s}'`).join(", ");

/**
 * Counts of the recipients in the queue (not final) by (status, transport, nexthop) over every
 * tenant, from the partial indexes recipients_open, messages_r_open and messages_rcpts_open
 * (migrations 0009, 0035 and 0039; the view recipients_open_all reads each through its own): the
 * work follows the queue, not the retention. Final
 * outcomes are counted over a window by the event log instead (throughputRows, /relay/stats):
 * counting them here read every recipient kept for the retention at each look at the queue.
 */
export async function stateCounts(db: D1Database): Promise<StateCountRow[]> {
  return (
    await db
      .prepare(
        `SELECT status, transport, nexthop, count(*) AS n FROM recipients_open_all WHERE status IN (${OPEN_SQL}) GROUP BY status, transport, nexthop`,
      )
      .all<StateCountRow>()
  ).results;
}

/** How many recipients are not final, and percentiles of their age in ms. */
export async function openAges(
  db: D1Database,
  nowMs: number,
  ps: readonly number[],
): Promise<{ count: number; percentiles: { p: number; age_ms: number }[] }> {
  const count =
    (
      await db
        .prepare(`SELECT count(*) AS n FROM recipients_open_all WHERE status IN (${OPEN_SQL})`)
        .first<{ n: number }>()
    )?.n ?? 0;
  const ranks = percentileRanks(count, ps);
  if (ranks.length === 0) return { count, percentiles: [] };
  // Youngest first: the rank-th youngest recipient's age is the percentile.
  const stmt = db.prepare(
    `SELECT ?1 - m.created_at AS age FROM recipients_open_all r JOIN messages m ON m.id = r.message_id
     WHERE r.status IN (${OPEN_SQL}) ORDER BY m.created_at DESC LIMIT 1 OFFSET ?2`,
  );
  const rows = await db.batch<{ age: number }>(ranks.map((r) => stmt.bind(nowMs, r.rank)));
  return { count, percentiles: ranks.map((r, i) => ({ p: r.p, age_ms: Math.max(0, rows[i]?.results[0]?.age ?? 0) })) };
}

/** A message search. */
export interface SearchQuery {
  /** Restrict to this tenant; null = every tenant (operators). */
  tenant: string | null;
  id?: string | undefined;
  address?: string | undefined;
  tag?: { name: string; value: string | null } | undefined;
  state?: string | undefined;
  limit: number;
  /** Cursor: an email id; answers messages older than it. */
  after?: string | undefined;
}

/** A search hit. */
export interface SearchHit {
  id: string;
  tenant_id: string;
  from_addr: string;
  subject: string | null;
  created_at: number;
  last_event: string;
  recipients: { address: string; status: string; attempts: number; transport: string | null; nexthop: string | null }[];
}

/** One page of matching messages (newest first); null when the cursor is not a visible message. */
export async function searchMessages(
  db: D1Database,
  q: SearchQuery,
): Promise<{ data: SearchHit[]; hasMore: boolean } | null> {
  const where: string[] = [];
  const args: unknown[] = [];
  const add = (sql: string, ...v: unknown[]) => {
    where.push(sql);
    args.push(...v);
  };
  if (q.tenant !== null) add("m.tenant_id = ?", q.tenant);
  if (q.id) add("m.id = ?", q.id);
  if (q.address || q.state) {
    const parts = ["r.message_id = m.id"];
    const own = ["m.r_status IS NOT NULL"]; // a one-recipient message's, in its row (migration 0035)
    const inRow = ["true"]; // those of two or more, in its row (migration 0039)
    const rargs: unknown[] = [];
    if (q.address) {
      parts.push("r.address = ? COLLATE NOCASE");
      own.push("m.r_address = ? COLLATE NOCASE");
      inRow.push("j.value ->> 0 = ? COLLATE NOCASE");
      rargs.push(q.address);
    }
    if (q.state) {
      parts.push("r.status = ?");
      own.push("m.r_status = ?");
      inRow.push("j.value ->> 1 = ?");
      rargs.push(q.state);
    }
    add(
      `(EXISTS (SELECT 1 FROM recipients r WHERE ${parts.join(" AND ")}) OR (${own.join(" AND ")}) OR ` +
        `(m.rcpts IS NOT NULL AND EXISTS (SELECT 1 FROM json_each(m.rcpts) j WHERE ${inRow.join(" AND ")})))`,
      ...rargs,
      ...rargs,
      ...rargs,
    );
  }
  if (q.tag) {
    if (q.tag.value === null)
      add("EXISTS (SELECT 1 FROM message_tags t WHERE t.message_id = m.id AND t.name = ?)", q.tag.name);
    else
      add(
        "EXISTS (SELECT 1 FROM message_tags t WHERE t.message_id = m.id AND t.name = ? AND t.value = ?)",
        q.tag.name,
        q.tag.value,
      );
  }
  if (q.after) {
    const c = await db
      .prepare(`SELECT created_at, id FROM messages m WHERE id = ?${q.tenant !== null ? " AND tenant_id = ?" : ""}`)
      .bind(...(q.tenant !== null ? [q.after, q.tenant] : [q.after]))
      .first<{ created_at: number; id: string }>();
    if (!c) return null;
    add("(m.created_at, m.id) < (?, ?)", c.created_at, c.id);
  }
  const sql = `SELECT m.id, m.tenant_id, m.from_addr, m.subject, m.created_at, m.last_event FROM messages m
    ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY m.created_at DESC, m.id DESC LIMIT ?`;
  const rows = (
    await db
      .prepare(sql)
      .bind(...args, q.limit + 1)
      .all<Omit<SearchHit, "recipients">>()
  ).results;
  const page = rows.slice(0, q.limit);
  const rcpts =
    page.length === 0
      ? []
      : (
          await db
            .prepare(
              // The forms named: SQLite does not push an IN (subquery) into the parts of recipients_all.
              `SELECT message_id, idx, address, status, attempts, transport, nexthop FROM recipients ` +
                `WHERE message_id IN (SELECT value FROM json_each(?1)) UNION ALL ` +
                `SELECT id, 0, r_address, r_status, r_attempts, r_transport, r_nexthop FROM messages ` +
                `WHERE id IN (SELECT value FROM json_each(?1)) AND r_status IS NOT NULL UNION ALL ` +
                `SELECT m.id, CAST(j.key AS INTEGER), j.value ->> 0, j.value ->> 1, j.value ->> 4, j.value ->> 2, j.value ->> 3 ` +
                `FROM messages m, json_each(m.rcpts) j WHERE m.id IN (SELECT value FROM json_each(?1)) AND m.rcpts IS NOT NULL ` +
                `ORDER BY 1, 2`,
            )
            .bind(JSON.stringify(page.map((m) => m.id)))
            .all<SearchHit["recipients"][number] & { message_id: string; idx: number }>()
        ).results;
  const data = page.map((m) => ({
    ...m,
    recipients: rcpts.filter((r) => r.message_id === m.id).map(({ message_id: _m, idx: _i, ...r }) => r),
  }));
  return { data, hasMore: rows.length > q.limit };
}

/** The tenant of an indexed message, or null. */
export async function tenantOfMessage(db: D1Database, id: string): Promise<string | null> {
  return (
    (await db.prepare("SELECT tenant_id FROM messages WHERE id = ?").bind(id).first<{ tenant_id: string }>())
      ?.tenant_id ?? null
  );
}

/** A stored event of one message. */
export interface MessageEvent {
  seq: number;
  type: string;
  recipient: string | null;
  created_at: number;
  data: string;
}

/**
 * A message's events, oldest first (at most `limit`). The first, email.accepted, comes from the
 * message's own index row (no event row is stored for it); rows logged before that change have
 * one of their own and are shown instead.
 */
export async function messageEvents(db: D1Database, id: string, tenant: string, limit = 500): Promise<MessageEvent[]> {
  return (await db.prepare(MESSAGE_EVENTS_SQL).bind(id, tenant, limit).all<MessageEvent>()).results;
}

/**
 * The timeline's query (?1 email, ?2 tenant, ?3 limit), exported for its plan's test. The tenant
 * is compared with `+`: as an index term it would lead SQLite to the tenant's whole log.
 */
export const MESSAGE_EVENTS_SQL = `SELECT 0 AS seq, 'email.accepted' AS type, NULL AS recipient, m.created_at,
       json_object('recipients', (SELECT count(*) FROM recipients_all WHERE message_id = ?1)) AS data
     FROM messages m WHERE m.id = ?1 AND m.tenant_id = ?2
       AND NOT EXISTS (SELECT 1 FROM event_of_email WHERE of_email = ?1 AND type = 'email.accepted')
     UNION ALL
     SELECT seq, type, recipient, created_at, data FROM event_of_email WHERE of_email = ?1 AND +tenant_id = ?2 AND data IS NOT NULL
     ORDER BY created_at, seq LIMIT ?3`;

/**
 * Event counts per (minute, type) for the outcome types of the throughput chart. The log has no
 * time index: the tenants are enumerated through its primary key (one seek each) and each
 * tenant's rows are read from the window's seq floor on (less REST_MAX for the events a row
 * holds in its rest, migration 0040).
 */
export async function throughputRows(
  db: D1Database,
  fromMs: number,
  toMs: number,
): Promise<{ minute: number; type: string; n: number }[]> {
  const types = Object.values(THROUGHPUT_TYPES);
  return (
    await db
      .prepare(throughputSql(types.length))
      .bind(fromMs, toMs, seqFloor(fromMs), ...types)
      .all<{ minute: number; type: string; n: number }>()
  ).results;
}

/** throughputRows' query (?1 and ?2 the times, ?3 their seq floor, the `n` types after), exported for its plan's test. */
export function throughputSql(n: number): string {
  return (
    `WITH RECURSIVE t(id) AS (
       SELECT (SELECT MIN(tenant_id) FROM event_runs)
       UNION ALL SELECT (SELECT MIN(tenant_id) FROM event_runs WHERE tenant_id > t.id) FROM t WHERE t.id IS NOT NULL)
     SELECT e.created_at / 60000 AS minute, e.type, count(*) AS n FROM event_log e
     WHERE e.tenant_id IN (SELECT id FROM t) AND e.seq >= ?3 AND e.head_seq >= ?3 - ${REST_MAX}
       AND e.created_at >= ?1 AND e.created_at < ?2 AND e.data IS NOT NULL ` +
    `AND e.type IN (${Array.from({ length: n }, (_, i) => `?${i + 4}`).join(", ")}) GROUP BY minute, e.type`
  );
}
