/**
 * What comes back about a recipient after delivery, in the Outbox's SQLite: a feedback-loop
 * complaint, a late bounce, expiry or delay notice, an unsubscribe, what the next hop said of it
 * later, and the complaint-rate brake's event.
 *
 * DESCRIPTION
 *   AfterDelivery         the report, one union for every kind.
 *   recordAfterDelivery   records it (control.ts recordComplaint, recordLateBounce,
 *                         recordUnsubscribe) with its event when it was recorded.
 *
 * INVARIANTS
 *   An event is recorded only with a report that was recorded (result "ok"), in the same
 *   transaction (the caller's); the brake's event is its only write.
 */
import {
  recordComplaint,
  recordLateBounce,
  recordUnsubscribe,
  type ComplaintResult,
  type ComplaintTarget,
  type LateBounceTarget,
  type LateOutcome,
} from "./control";
import type { MessageSummary } from "../../worker/model/message";
import { recordEvent } from "./events";
import { readWithSummary } from "./store";
import { writeLateReport } from "./rcpt";

/** What came back about a delivered recipient: a feedback-loop complaint, a late bounce, or an unsubscribe. */
export type AfterDelivery =
  | { kind: "complaint"; address: ComplaintTarget; feedbackType: string }
  | { kind: "unsubscribe"; idx: number; method: "one-click" | "mailto" }
  /** The complaint-rate brake a complaint about `address` set off (api/complaint-brake.ts): its event only. */
  | {
      kind: "brake";
      address: string;
      data: { rate: number; threshold: number; delivered: number; complained: number; paused_until: number };
    }
  /**
   * A DSN that came back by mail: a late bounce (email.bounced), an expiry downstream
   * (email.failed, reason "expired"), or a delay notice (email.delivery_delayed, the recipient
   * stays delivered). `named`: the addresses the DSN names, checked against a VERP target.
   */
  | {
      kind: "bounce";
      target: LateBounceTarget;
      response: { code: number | null; enhanced?: string; text: string; mx?: string };
      named?: (string | null)[];
      outcome?: LateOutcome;
    }
  /**
   * What the next hop (Cloudflare Email Service) later said of a recipient it accepted: the
   * receiving server's reply becomes its last_response; `delayed` (a deferral there) also records
   * email.delivery_delayed. The recipient stays delivered.
   */
  | {
      kind: "relayed";
      address: string;
      response: { code: number | null; enhanced?: string; text: string; mx?: string };
      delayed: boolean;
    };

/** The event a late report records, by its outcome: a delay notice's is published as it comes (`late`), not counted as a deferral. */
const LATE_EVENTS: Record<LateOutcome, { type: string; data: Record<string, unknown> }> = {
  bounced: { type: "email.bounced", data: { reason: "late bounce" } },
  expired: { type: "email.failed", data: { reason: "expired" } },
  delayed: { type: "email.delivery_delayed", data: { reason: "late delay", late: true } },
};

/** recordComplaint, recordLateBounce or recordUnsubscribe, with its email.complained, email.bounced or email.unsubscribed event when recorded. */
export function recordAfterDelivery(
  sql: SqlStorage,
  id: string,
  tenant: string,
  report: AfterDelivery,
  nowMs: number,
): ComplaintResult {
  if (report.kind === "brake") {
    recordEvent(sql, {
      message_id: id,
      tenant,
      type: "relay.complaint_rate.exceeded",
      recipient: report.address,
      created_at: nowMs,
      data: report.data,
    });
    return { result: "ok", address: report.address };
  }
  if (report.kind === "unsubscribe") {
    const r = recordUnsubscribe(sql, id, report.idx, report.method, nowMs);
    const topic = (JSON.parse(readWithSummary(sql, id)?.summary ?? "{}") as MessageSummary).unsubscribe_topic ?? null;
    if (r.result === "ok")
      recordEvent(sql, {
        message_id: id,
        tenant,
        type: "email.unsubscribed",
        recipient: r.address,
        created_at: nowMs,
        data: { reason: topic, method: report.method },
      });
    return r;
  }
  if (report.kind === "relayed") {
    const row = sql
      .exec<{ idx: number; address: string; status: string; attempts: number }>(
        "SELECT idx, address, status, attempts FROM rcpt_all WHERE message_id = ?",
        id,
      )
      .toArray()
      .find((x) => x.address.toLowerCase() === report.address.trim().toLowerCase());
    if (!row) return { result: "no_recipient" };
    if (row.status !== "delivered") return { result: "not_delivered" };
    writeLateReport(sql, id, row.idx, { last_response: JSON.stringify(report.response), updated_at: nowMs });
    if (report.delayed)
      recordEvent(sql, {
        message_id: id,
        tenant,
        type: "email.delivery_delayed",
        recipient: row.address,
        created_at: nowMs,
        data: { attempt: row.attempts, response: report.response, reason: "deferred by Cloudflare Email Service" },
      });
    return { result: "ok", address: row.address };
  }
  if (report.kind === "complaint") {
    const r = recordComplaint(sql, id, report.address, report.feedbackType, nowMs);
    if (r.result === "ok")
      recordEvent(sql, {
        message_id: id,
        tenant,
        type: "email.complained",
        recipient: r.address,
        created_at: nowMs,
        data: { reason: report.feedbackType },
      });
    return r;
  }
  const outcome = report.outcome ?? "bounced";
  const r = recordLateBounce(sql, id, report.target, report.response, nowMs, report.named ?? [], outcome);
  if (r.result === "ok") {
    const attempt =
      sql
        .exec<{ attempts: number }>("SELECT attempts FROM rcpt_all WHERE message_id = ? AND address = ?", id, r.address)
        .toArray()[0]?.attempts ?? 0;
    const late = LATE_EVENTS[outcome];
    const data = { attempt, response: report.response, ...late.data };
    recordEvent(sql, { message_id: id, tenant, type: late.type, recipient: r.address, created_at: nowMs, data });
  }
  return r;
}
