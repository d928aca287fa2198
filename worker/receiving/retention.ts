/**
 * Retention of received mail and of the kept files behind download links: what
 * MESSAGE_RETENTION_DAYS allows for a message, it allows for these. Called from the cron beside
 * the D1 purge of sent mail (db/retention.ts).
 *
 * DESCRIPTION
 *   purgeKept(env, nowMs, retentionMs, budget?)  deletes every received email older than the
 *       cutoff (its row and its email.received event_log rows, PURGE_ROWS at a time, tenant by
 *       tenant by seeks on the primary key; then its raw bytes in R2), and every kept R2 object
 *       (`sent/…`, `received/…`, model/files.ts) whose time is before the cutoff: a sent email's
 *       copy for its attachment links, and a received message's bytes whose row was never
 *       written. Keys sort by time, so each prefix is listed from its start and the walk stops
 *       at the first key not yet due. Returns the rows and objects deleted and whether the
 *       statement budget stopped it (the next run goes on).
 *
 * INVARIANTS
 *   Nothing younger than the cutoff is touched; every D1 statement goes through a primary key or
 *   event_log_by_source.
 */
import { nextReceivingTenant, purgeReceivedBefore } from "../db/received";
import { keptAt, KEPT_KINDS } from "../model/files";
import { idFloor } from "./core/received";

const PURGE_ROWS = 500;
const DEFAULT_BUDGET = 200;

/** What a run deleted. */
export interface KeptPurgeReport {
  rows: number;
  objects: number;
  truncated: boolean;
}

/** See the header. */
export async function purgeKept(
  env: Env,
  nowMs: number,
  retentionMs: number,
  budget = DEFAULT_BUDGET,
): Promise<KeptPurgeReport> {
  const report: KeptPurgeReport = { rows: 0, objects: 0, truncated: false };
  if (!(retentionMs > 0)) return report;
  const cutoff = nowMs - retentionMs;
  let left = budget;
  const spend = () => (--left >= 0 ? true : ((report.truncated = true), false));
  let tenant = "";
  tenants: while (spend()) {
    const t = await nextReceivingTenant(env.DB, tenant);
    if (t === null) break;
    tenant = t;
    for (;;) {
      if (!spend()) break tenants;
      const { keys, rows } = await purgeReceivedBefore(env.DB, tenant, idFloor(cutoff), PURGE_ROWS);
      report.rows += rows;
      if (keys.length > 0) {
        await env.BODIES.delete(keys);
        report.objects += keys.length;
      }
      if (keys.length < PURGE_ROWS) break;
    }
  }
  for (const kind of KEPT_KINDS) {
    let cursor: string | undefined;
    for (;;) {
      if (!spend()) return report;
      const page = await env.BODIES.list({ prefix: `${kind}/`, limit: 1000, ...(cursor ? { cursor } : {}) });
      const due = page.objects.map((o) => o.key).filter((k) => (keptAt(k) ?? Infinity) < cutoff);
      if (due.length > 0) {
        await env.BODIES.delete(due);
        report.objects += due.length;
      }
      if (due.length < page.objects.length || !page.truncated) break;
      cursor = page.cursor;
    }
  }
  return report;
}
