/*
 * NAME
 *   destination - the simulated receiving mail server of one nexthop
 * DESCRIPTION
 *   DestinationServer models what a delivery agent meets when it connects for one entry
 *   (a delivery request of k recipients of one message):
 *
 *   - dead server: before `deadUntilSec` every connection is refused after
 *     `refuseDelaySec` (a site failure, 4.4.1);
 *   - connect timeout: with probability `connectTimeoutProb` the connection attempt hangs
 *     and fails after `connectTimeoutSec` (a site failure, 4.4.2);
 *   - active concurrency limiter: a server that already holds `sessionLimit` sessions
 *     rejects the excess with "421 too many connections" after `rejectDelaySec` (0 = at
 *     once; a site failure, 4.7.0, spec §6.1 and §6.7);
 *   - otherwise the session is accepted and delivers all k recipients after
 *     k × perRcptLatencySec × a jitter factor drawn uniformly in [1 - jitter, 1 + jitter].
 *
 *   connect() decides the outcome when the session starts and returns its plan: when it
 *   ends, the report to give the core, and whether it holds a server session meanwhile.
 *   close() ends a session. Only accepted sessions count towards the server's limit: a
 *   rejected, refused or timed-out attempt never reaches the limiter's session table.
 * INVARIANTS
 *   0 ≤ open ≤ sessionLimit (when the limit is non-zero); peakOpen is the largest open seen.
 * ERRORS
 *   close() throws on a plan that holds no session or on a server with none open (bugs).
 */
import type { DeliveryReport } from "../../durable-objects/core";
import { uniformBetween, type Rng } from "./rng";

/** The behaviour of a simulated destination server. */
export interface DestinationSpec {
  /** Seconds per recipient of an accepted delivery; default 1. */
  perRcptLatencySec: number;
  /** Relative jitter of a delivery's duration, in [0, 1); default 0.1 (±10 %). */
  jitter: number;
  /** Sessions the server accepts at once; 0 = unlimited (default). */
  sessionLimit: number;
  /** When set, the session limit at time t (seconds) instead of sessionLimit (a server that changes it). */
  sessionLimitAt?: (t: number) => number;
  /** Seconds until an over-limit connection gets its 421; default 0 (at once). */
  rejectDelaySec: number;
  /** Probability that a connection attempt times out; default 0. */
  connectTimeoutProb: number;
  /** Seconds until a connection attempt times out; default 30 (Postfix smtp_connect_timeout). */
  connectTimeoutSec: number;
  /** Every connection is refused before this time (seconds); default 0 (never dead). */
  deadUntilSec: number;
  /** Seconds until a refused connection fails; default 0. */
  refuseDelaySec: number;
}

/** A destination that always accepts, 1 s per recipient, ±10 % jitter. */
export const DEFAULT_DESTINATION: DestinationSpec = {
  perRcptLatencySec: 1,
  jitter: 0.1,
  sessionLimit: 0,
  rejectDelaySec: 0,
  connectTimeoutProb: 0,
  connectTimeoutSec: 30,
  deadUntilSec: 0,
  refuseDelaySec: 0,
};

/** How an attempt ended, as the delivery agent saw it. */
export type AttemptOutcome = "delivered" | "rejected-421" | "connect-timeout" | "refused";

/** The fate of one session, decided when it starts. */
export interface SessionPlan {
  outcome: AttemptOutcome;
  endAt: number;
  report: DeliveryReport;
  /** True if the session occupies one of the server's session slots until endAt. */
  holdsSession: boolean;
}

const REJECT_421: DeliveryReport = {
  status: "defer",
  siteFailure: { dsnStatus: "4.7.0", reason: "421 too many connections" },
};
const TIMEOUT: DeliveryReport = { status: "defer", siteFailure: { dsnStatus: "4.4.2", reason: "connect timeout" } };
const REFUSED: DeliveryReport = { status: "defer", siteFailure: { dsnStatus: "4.4.1", reason: "connection refused" } };
const DELIVERED: DeliveryReport = { status: "ok" };

/** The simulated server of one nexthop. */
export class DestinationServer {
  /** Sessions currently accepted. */
  open = 0;
  /** Largest number of sessions ever open at once. */
  peakOpen = 0;

  constructor(readonly spec: DestinationSpec) {}

  /** Starts a session for an entry of `rcptCount` recipients at time `at`. */
  connect(at: number, rcptCount: number, rng: Rng): SessionPlan {
    const s = this.spec;
    if (at < s.deadUntilSec)
      return { outcome: "refused", endAt: at + s.refuseDelaySec, report: REFUSED, holdsSession: false };
    if (s.connectTimeoutProb > 0 && rng.next() < s.connectTimeoutProb) {
      return { outcome: "connect-timeout", endAt: at + s.connectTimeoutSec, report: TIMEOUT, holdsSession: false };
    }
    const limit = s.sessionLimitAt ? s.sessionLimitAt(at) : s.sessionLimit;
    if (limit > 0 && this.open >= limit) {
      return { outcome: "rejected-421", endAt: at + s.rejectDelaySec, report: REJECT_421, holdsSession: false };
    }
    this.open += 1;
    this.peakOpen = Math.max(this.peakOpen, this.open);
    const factor = s.jitter > 0 ? uniformBetween(rng, 1 - s.jitter, 1 + s.jitter) : 1;
    return {
      outcome: "delivered",
      endAt: at + rcptCount * s.perRcptLatencySec * factor,
      report: DELIVERED,
      holdsSession: true,
    };
  }

  /** Ends a session started by connect(). */
  close(plan: SessionPlan): void {
    if (!plan.holdsSession) return;
    if (this.open <= 0) throw new Error("DestinationServer.close: no session open");
    this.open -= 1;
  }
}
