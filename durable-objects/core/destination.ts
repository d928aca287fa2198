/*
 * NAME
 *   destination - one destination's feedback record, as the Destination DO keeps it
 * DESCRIPTION
 *   The Destination Durable Object is the authority for one (transport, nexthop) — or one MX
 *   site — window: it runs Postfix 2.5 feedback and pseudo-cohort dead detection on every
 *   delivery report (destination-window.ts) and answers with the window and the time the
 *   destination comes back if it is dead.
 *
 *   createDestination() makes a record; applyDestinationReport() applies one report and
 *   returns the new record, the answer, a history event for the dashboard, and the alarm
 *   time when the destination just died; reviveDestination() is the alarm (or a flush).
 *   A live record unused for idleMemorySec since its last report forgets what it learned and
 *   starts again at the initial window (spec §12.4). With 0 it is kept; Postfix's forgetting
 *   of empty queues then happens in the Transport DO's core alone.
 *   These functions return new values and never mutate their input.
 * INVARIANTS
 *   window 0 iff deadUntil > 0. A dead destination ignores site failures of deliveries still
 *   in flight; any success revives it (window = deliveries in flight, else initial).
 * ERRORS
 *   None.
 */
import { isConcurrencyRefusal, learnCeiling, refusalOnly } from "./ceiling";
import { onNegativeFeedback, onPositiveFeedback, reviveWindow } from "./destination-window";
import type { FeedbackOutcome, WindowParams, WindowState } from "./window-state";

/** A destination's stored record (version 1). */
export interface DestinationRecord extends WindowState {
  v: 1;
  transport: string;
  /** When a dead destination comes back (seconds); 0 while alive. */
  deadUntil: number;
  /** Why it died. */
  reason: string | null;
  /** Time of the last report (seconds; 0 = never). */
  lastReportAt: number;
}

/** The parameters a destination needs. */
export interface DestinationParams extends WindowParams {
  /** minimal_backoff_time: how long a dead destination stays dead (seconds). */
  deadTimeSec: number;
  /** destination_idle_memory: forget the learned window after this long unused (seconds). */
  idleMemorySec: number;
}

/** One delivery report as the destination sees it. */
export interface DestinationReport {
  /** Deliveries to this destination in flight, counting the one reported. */
  busy: number;
  /** Deliveries in flight when the reported one started, itself included (§12.7); default `busy`. */
  conc?: number;
  siteFailure: { dsnStatus: string; reason: string } | null;
  /**
   * The window the scheduler's queue had after applying this report, when this record is the
   * queue's own (not a site's): it becomes the record's window while both are live, since the
   * scheduler applied the reports in their true order and the reports reach this record in
   * batches per delivery agent. Dead detection stays this record's own.
   */
  window?: number;
  /**
   * The scheduler's queue before this report (its window and failed cohorts), when this record
   * is the queue's own: the record takes them before applying the report, so reports it never got
   * (a destination's successes go to its DO only from its first site failure on) or got out of
   * order leave no stale failure count, and dead detection counts as the scheduler does.
   */
  prior?: { window: number; failCohorts: number };
  /** The reply rule this site failure set off (reply-rules.ts), for the history. */
  replyRule?: string;
}

/** One line of the destination's history, for the dashboard. */
export interface DestinationEvent {
  at: number;
  kind: "success" | "site_failure";
  /** "ceiling": a concurrency refusal that only taught the learned ceiling (refusalOnly): no negative feedback. */
  outcome: FeedbackOutcome | "ignored" | "ceiling";
  window: number;
  busy: number;
  reason: string | null;
  /** The reply rule the site failure set off (its suspension is the Transport DO's pickup policy). */
  replyRule?: string;
}

/** What applying a report produced. */
export interface DestinationStep {
  record: DestinationRecord;
  answer: { window: number; deadUntil: number };
  event: DestinationEvent;
  /** Set when the destination just died: arm the revival alarm at this time. */
  alarmAt: number | null;
}

/** A fresh record at the initial window. */
export function createDestination(transport: string, p: DestinationParams): DestinationRecord {
  return {
    v: 1,
    transport,
    window: p.initialConcurrency,
    success: 0,
    failure: 0,
    failCohorts: 0,
    deadUntil: 0,
    reason: null,
    lastReportAt: 0,
  };
}

/** Applies one delivery report. */
export function applyDestinationReport(
  rec: DestinationRecord,
  r: DestinationReport,
  now: number,
  p: DestinationParams,
): DestinationStep {
  let s: DestinationRecord = { ...rec };
  if (s.deadUntil === 0 && s.lastReportAt > 0 && p.idleMemorySec > 0 && now - s.lastReportAt >= p.idleMemorySec) {
    s = { ...createDestination(s.transport, p), lastReportAt: s.lastReportAt };
  }
  s.lastReportAt = now;
  if (r.prior && r.prior.window > 0 && s.window > 0) {
    s.window = r.prior.window;
    s.failCohorts = r.prior.failCohorts;
  }
  let outcome: DestinationEvent["outcome"];
  let alarmAt: number | null = null;
  const conc = r.conc ?? r.busy;
  if (r.siteFailure) {
    if (s.window > 0) {
      const refusal = isConcurrencyRefusal(r.siteFailure.reason);
      const only = refusalOnly(refusal, conc, p);
      outcome = only ? "ceiling" : onNegativeFeedback(s, p);
      if (outcome !== "died" && refusal) {
        s.ceiling = s.ceiling ? { ...s.ceiling } : s.ceiling;
        learnCeiling(s, conc, now, p);
      }
      if (outcome === "died") {
        s.deadUntil = now + p.deadTimeSec;
        s.reason = r.siteFailure.reason;
        alarmAt = s.deadUntil;
      }
    } else outcome = "ignored";
  } else {
    if (s.ceiling) s.ceiling = { ...s.ceiling };
    outcome = onPositiveFeedback(s, r.busy, p, now, conc);
    if (outcome === "revived") {
      s.deadUntil = 0;
      s.reason = null;
    }
  }
  if (r.window !== undefined && r.window > 0 && s.window > 0) s.window = r.window;
  const event: DestinationEvent = {
    at: now,
    kind: r.siteFailure ? "site_failure" : "success",
    outcome,
    window: s.window,
    busy: r.busy,
    reason: r.siteFailure?.reason ?? null,
    ...(r.replyRule ? { replyRule: r.replyRule } : {}),
  };
  return { record: s, answer: { window: s.window, deadUntil: s.deadUntil }, event, alarmAt };
}

/** Brings a dead destination back (its alarm, or a flush); a live one is returned as is. */
export function reviveDestination(rec: DestinationRecord, p: DestinationParams): DestinationRecord {
  if (rec.window !== 0) return rec;
  const s = { ...rec, deadUntil: 0, reason: null };
  reviveWindow(s, 0, p);
  return s;
}
