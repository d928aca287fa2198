/**
 * The delivery stage's decisions, pure (no I/O): what a queue message says, where a nexthop
 * goes, how a batch splits into SMTP sessions, and what an SMTP result means for each
 * recipient, for the Transport DO and for the Outbox.
 *
 * DESCRIPTION
 *   parseJob(body)                   a `deliver` queue body, or null when malformed.
 *   relayTarget(nexthop)             "[host]:port" / "host:port" / "[host]" → the `relay`
 *                                    transport kind's fixed host and port; null for a domain
 *                                    (the `mx` kind).
 *   groupByNexthop(items)            one group per (transport, nexthop): one session each.
 *   sendableRcpts(job, envelope)     the job's recipients matched to the Outbox's recipients;
 *                                    the ones already final there are not sent again.
 *   judgeEntry(job, matched, txn, siteFailure, rules)  the per-recipient outcome of one entry
 *                                    and the report for the Transport DO: 2xx delivered, 4xx
 *                                    deferred, 5xx bounced, unless a reply rule says otherwise
 *                                    (a defer rule makes a 5xx a deferral, blocked_by
 *                                    reply_rule:<name>; a bounce rule makes a 4xx a bounce, with
 *                                    relay.destination.throttled); a recipient with no result is
 *                                    deferred. `mx` and `tls` are reported when a remote host
 *                                    answered. `blockedBy` (a policy of the delivery stage that
 *                                    deferred the entry: mta_sts, egress:<id>) labels its deferrals.
 */
import type { DeliverJob } from "../model/delivery";
import { FINAL_STATUSES, type DeliveryEnvelope, type OutcomeReport } from "../model/message";
import type { SiteFailure, TransactionResult } from "../smtp/core/types";
import { outcomeOverride, replyRuleLabel, type ReplyRule } from "../../durable-objects/core/reply-rules";

/** A recipient of a job matched to its Outbox record. */
export interface MatchedRcpt {
  /** Index in the Transport DO's backlog (reported back as final). */
  idx: number;
  address: string;
  /** Index in the Outbox, or null when the Outbox has no such open recipient. */
  outboxIdx: number | null;
  /** Already final in the Outbox (a repeated queue delivery): not sent again. */
  final: boolean;
}

/** The verdict on one entry. */
export interface EntryVerdict {
  status: "ok" | "defer";
  /** Backlog indexes of recipients that are final now. */
  finalIdx: number[];
  /** Outcomes for the Outbox (nextAttemptAt filled in later from the Transport DO's answer). */
  outcomes: OutcomeReport[];
}

/** A fixed host and port. */
export interface RelayTarget {
  host: string;
  port: number;
}

/** A `deliver` queue body, or null when malformed. */
export function parseJob(body: unknown): DeliverJob | null {
  const b = body as Partial<DeliverJob> | null;
  if (!b || typeof b !== "object") return null;
  if (
    typeof b.entryId !== "number" ||
    typeof b.messageId !== "string" ||
    typeof b.transport !== "string" ||
    typeof b.nexthop !== "string"
  )
    return null;
  if (typeof b.attempt !== "number" || !Array.isArray(b.rcpts)) return null;
  if (!b.rcpts.every((r) => r && typeof r.idx === "number" && typeof r.address === "string")) return null;
  return b as DeliverJob;
}

/** The relay host and port a nexthop names, or null for a domain (MX delivery). */
export function relayTarget(nexthop: string): RelayTarget | null {
  const m = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(nexthop) ?? /^([^\[\]:]+):(\d{1,5})$/.exec(nexthop);
  if (!m) return null;
  const port = m[2] === undefined ? 25 : Number(m[2]);
  if (!(port > 0 && port < 65536)) return null;
  return { host: m[1]!, port };
}

/** Groups items by transport and nexthop, keeping their order. */
export function groupByNexthop<T extends { job: DeliverJob }>(items: T[]): T[][] {
  const groups = new Map<string, T[]>();
  for (const it of items) {
    const k = `${it.job.transport}\u0000${it.job.nexthop}`;
    const g = groups.get(k) ?? [];
    g.push(it);
    groups.set(k, g);
  }
  return [...groups.values()];
}

/**
 * Splits nexthop groups into SMTP sessions: the Transport DO dispatched each entry as one
 * delivery in flight (its window counts them, like Postfix's delivery agents), so a group gets up
 * to its share of the invocation's sockets, floor(maxSockets / groups) and at least one, and its
 * entries are spread evenly over them (each session still carries several entries with RSET
 * between when there are more entries than sessions). Order within a group is kept.
 */
export function splitForSessions<T>(groups: T[][], maxSockets: number): T[][] {
  const share = Math.max(1, Math.floor(maxSockets / Math.max(1, groups.length)));
  return groups.flatMap((g) => {
    const n = Math.min(share, g.length);
    const base = Math.floor(g.length / n);
    const extra = g.length % n;
    const out: T[][] = [];
    for (let i = 0, at = 0; i < n; i++) {
      const size = base + (i < extra ? 1 : 0);
      out.push(g.slice(at, at + size));
      at += size;
    }
    return out;
  });
}

/** Matches the job's recipients to the Outbox's by address (each Outbox recipient once). */
export function sendableRcpts(job: DeliverJob, env: DeliveryEnvelope | null): MatchedRcpt[] {
  const used = new Set<number>();
  return job.rcpts.map((r) => {
    const hit = env?.rcpts.find((o) => !used.has(o.idx) && o.address.toLowerCase() === r.address.toLowerCase());
    if (!hit) return { idx: r.idx, address: r.address, outboxIdx: null, final: true };
    used.add(hit.idx);
    return { idx: r.idx, address: r.address, outboxIdx: hit.idx, final: FINAL_STATUSES.includes(hit.status) };
  });
}

/** Judges one entry from its transaction (if it ran) and the session's site failure. */
export function judgeEntry(
  job: DeliverJob,
  matched: MatchedRcpt[],
  txn: TransactionResult | undefined,
  site: SiteFailure | null,
  rules: readonly ReplyRule[] = [],
  blockedBy: string | null = null,
): EntryVerdict {
  const finalIdx: number[] = [];
  const outcomes: OutcomeReport[] = [];
  for (const m of matched) {
    if (m.final || m.outboxIdx === null) {
      finalIdx.push(m.idx);
      continue;
    }
    const res = txn?.recipients.find((r) => r.rcpt.toLowerCase() === m.address.toLowerCase());
    if (!res) {
      outcomes.push({
        idx: m.outboxIdx,
        status: "deferred",
        attempt: job.attempt,
        response: { text: site?.reason ?? "not attempted", ...(site ? { enhanced: site.dsnStatus } : {}) },
        blockedBy: blockedBy ?? (site ? "site_failure" : null),
      });
      continue;
    }
    // No remote host: the result was decided before any connection (an MX lookup that failed).
    const remote = txn!.remoteHost ? { mx: txn!.remoteHost, tls: txn!.tls } : {};
    const response = { code: res.code, ...(res.enhanced ? { enhanced: res.enhanced } : {}), text: res.text, ...remote };
    const override =
      res.status === "delivered" || rules.length === 0
        ? null
        : outcomeOverride(rules, { code: res.code, enhanced: res.enhanced ?? null, text: res.text });
    const status = override?.status ?? res.status;
    if (status !== "deferred") finalIdx.push(m.idx);
    const reply = [res.code, res.enhanced, res.text].filter((x) => x !== undefined && x !== null && x !== "").join(" ");
    outcomes.push({
      idx: m.outboxIdx,
      status,
      attempt: job.attempt,
      response,
      blockedBy:
        override?.status === "deferred" ? replyRuleLabel(override.rule) : status === "deferred" ? blockedBy : null,
      // A deferral is told to the Transport DO, whose rules say it once; a bounce only here.
      ...(override?.status === "bounced"
        ? {
            throttled: {
              rule: override.rule.name,
              key: `dest:${job.transport}/${job.nexthop}`,
              until: 0,
              reply,
              action: "bounce",
            },
          }
        : {}),
    });
  }
  const status = outcomes.some((o) => o.status === "deferred") ? "defer" : "ok";
  return { status, finalIdx, outcomes };
}
