/**
 * The mail that came back through Email Routing, under /relay/inbound (operator key only): its
 * counts by day and kind, and the DSNs and ARF reports themselves.
 *
 * DESCRIPTION
 *   GET    /relay/inbound?days=  mail that came back through Email Routing, by UTC day and kind
 *                                (bounce, complaint, auto_reply, rejected...: inbound/email.ts).
 *   GET    /relay/inbound/reports?days=&verdict=&limit=&before=  the DSNs and ARF reports that
 *                                came back, newest first, each with its verdict (acted,
 *                                unauthenticated, mismatch, ...), what it said and its first
 *                                64 KiB (inbound/reports.ts).
 *
 * ERRORS
 *   403 restricted_api_key for a tenant key; 422 validation_error for bad input.
 */
import { Hono } from "hono";
import { type AppEnv } from "../../http/context";
import { parseInput } from "../../http/body";
import { listReports } from "../../../db/inbound";
import { InboundQuerySchema, ReportsQuerySchema } from "./schemas";

/** The inbound routes (mounted under /relay behind the API key and the operator check). */
export function inboundRoutes() {
  const r = new Hono<AppEnv>();

  r.get("/inbound/reports", async (c) => {
    const q = parseInput(ReportsQuerySchema, c.req.query());
    const now = Date.now();
    const beforeMs = q.before ? Date.parse(q.before) : now + 1;
    const rows = await listReports(c.env.DB, {
      fromMs: now - q.days * 86_400_000,
      beforeMs,
      limit: q.limit + 1,
      verdict: q.verdict ?? null,
    });
    const data = rows.slice(0, q.limit).map((r) => ({
      object: "inbound_report" as const,
      id: r.id,
      received_at: new Date(r.received_at).toISOString(),
      kind: r.kind,
      verdict: r.verdict,
      email_id: r.email_id,
      tenant: r.tenant_id,
      envelope_from: r.envelope_from,
      envelope_to: r.envelope_to,
      message_id: r.message_id,
      detail: JSON.parse(r.detail) as Record<string, unknown>,
      size: r.raw_size,
      raw: r.raw,
    }));
    return c.json({ object: "list", has_more: rows.length > q.limit, data });
  });

  r.get("/inbound", async (c) => {
    const q = parseInput(InboundQuerySchema, c.req.query());
    const from = new Date(Date.now() - (q.days - 1) * 86_400_000).toISOString().slice(0, 10);
    const rows = (
      await c.env.DB.prepare("SELECT day, kind, n FROM inbound_counts WHERE day >= ? ORDER BY day, kind")
        .bind(from)
        .all<{ day: string; kind: string; n: number }>()
    ).results;
    const days = new Map<string, Record<string, number>>();
    const totals: Record<string, number> = {};
    for (const r of rows) {
      days.set(r.day, { ...days.get(r.day), [r.kind]: r.n });
      totals[r.kind] = (totals[r.kind] ?? 0) + r.n;
    }
    return c.json({ object: "inbound", from, totals, days: [...days].map(([day, counts]) => ({ day, counts })) });
  });

  return r;
}
