/**
 * GET /emails/metrics's reads: a tenant's events and received mail in a time range, grouped by
 * UTC hour, type and sending domain, folded by core/metrics.ts.
 *
 * DESCRIPTION
 *   hourlyCounts(db, tenant, fromMs, toMs)  two reads, in one D1 batch: the pushed events
 *       (event_log's envelope type) from `fromMs` through event_log's primary key (tenant, seq;
 *       seq ≥ created_at × 1000, so the range starts at fromMs × 1000, and the row of an event
 *       at REST_MAX seqs before it, migration 0040), each with its email's From
 *       domain by the messages primary key; and the received emails by their primary key
 *       (tenant, UUIDv7 id) between the ids of the two times. Nothing is counted on any mail's
 *       path: the rows read grow with the tenant's mail since `fromMs`, not with retention.
 */
import { REST_MAX } from "../db/events";
import { idFloor } from "../receiving/core/received";
import type { HourCount } from "./core/metrics";

/** The events' read (?1 tenant, ?2 its seq floor, ?3 and ?4 the times), exported for its plan's test. */
export const EVENTS_SQL = `SELECT e.created_at / 3600000 * 3600000 AS hour, e.event_type AS type,
    COALESCE(lower(rtrim(substr(m.from_addr, instr(m.from_addr, '@') + 1), '> ')), '') AS domain, count(*) AS n
  FROM event_log e LEFT JOIN messages m ON m.id = e.email_id
  WHERE e.tenant_id = ?1 AND e.seq >= ?2 AND e.head_seq >= ?2 - ${REST_MAX} AND e.created_at >= ?3 AND e.created_at < ?4 AND e.event_type IS NOT NULL AND e.event_type != 'email.received'
  GROUP BY 1, 2, 3`;

const RECEIVED_SQL = `SELECT r.created_at / 3600000 * 3600000 AS hour, 'received' AS type, COALESCE(d.name, '') AS domain, count(*) AS n
  FROM received_emails r LEFT JOIN domains d ON d.id = r.domain_id
  WHERE r.tenant_id = ?1 AND r.id >= ?2 AND r.id < ?3
  GROUP BY 1, 3`;

/** See the header. */
export async function hourlyCounts(db: D1Database, tenant: string, fromMs: number, toMs: number): Promise<HourCount[]> {
  const [events, received] = await db.batch([
    db.prepare(EVENTS_SQL).bind(tenant, fromMs * 1000, fromMs, toMs),
    db.prepare(RECEIVED_SQL).bind(tenant, idFloor(fromMs), idFloor(toMs)),
  ]);
  return [...(events?.results ?? []), ...(received?.results ?? [])] as HourCount[];
}
