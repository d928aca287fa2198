/*
 * NAME
 *   flow - inflow control: is mail arriving faster than this transport delivers it?
 *
 * DESCRIPTION
 *   Postfix's smtpd pauses up to in_flow_delay (1 s) before accepting a message "when the
 *   message arrival rate exceeds the message delivery rate" (postconf(5)), so a sender at full
 *   speed cannot take the machine from the delivery agents. A Worker has no processes for the
 *   operating system to share the CPU between: accepting at the ceiling starves delivery unless
 *   the accepting side holds back. This is the measurement behind that pause; each Outbox shard
 *   keeps one, for the recipients it accepts and the outcomes that come back to it.
 *
 *   FlowMeter counts, in one-second buckets over the last `windowSec` seconds, recipients
 *   arriving (accepted) and recipients leaving a delivery attempt (any outcome: delivered,
 *   bounced, deferred). It is "over" when the net inflow of the window exceeds both
 *   `minBacklog` recipients and what delivery clears in `slackSec` seconds at the window's
 *   delivery rate. Pausing then cannot starve delivery: the queue already holds more work than
 *   delivery clears during one pause of at most `slackSec / 2` seconds. A burst smaller than
 *   `minBacklog` (by default 2,000 recipients: twenty batch requests of 100) is never held
 *   back: pausing a burst lets delivery run dry before the rest arrives, so the pause is for
 *   sustained overload.
 *
 * INVARIANTS
 *   Memory is O(windowSec). Time is an argument (whole seconds); nothing here reads a clock.
 */

export interface FlowOptions {
  /** Seconds of history. */
  windowSec: number;
  /** Seconds of delivery the net inflow may hold before the flow is over. */
  slackSec: number;
  /** Recipients the net inflow may hold whatever the delivery rate. */
  minBacklog: number;
}

export const FLOW_DEFAULTS: FlowOptions = { windowSec: 10, slackSec: 2, minBacklog: 2000 };

export class FlowMeter {
  private readonly arrived: number[];
  private readonly left: number[];
  /** The second bucket 0 of the ring last held. */
  private at = 0;

  constructor(private readonly opts: FlowOptions = FLOW_DEFAULTS) {
    this.arrived = new Array<number>(opts.windowSec).fill(0);
    this.left = new Array<number>(opts.windowSec).fill(0);
  }

  /** `n` recipients arrived at `now`. */
  arrive(n: number, now: number): void {
    this.roll(now);
    this.arrived[now % this.opts.windowSec]! += n;
  }

  /** `n` recipients left a delivery attempt at `now`. */
  leave(n: number, now: number): void {
    this.roll(now);
    this.left[now % this.opts.windowSec]! += n;
  }

  /** Recipients arrived and left over the window ending at `now`. */
  totals(now: number): { arrived: number; left: number } {
    this.roll(now);
    let arrived = 0,
      left = 0;
    for (let i = 0; i < this.opts.windowSec; i++) {
      arrived += this.arrived[i]!;
      left += this.left[i]!;
    }
    return { arrived, left };
  }

  /** Whether arrivals outrun delivery (see the header). */
  over(now: number): boolean {
    const { arrived, left } = this.totals(now);
    return arrived - left > Math.max(this.opts.minBacklog, (left / this.opts.windowSec) * this.opts.slackSec);
  }

  /** Clears the buckets that fell out of the window since the last reading. */
  private roll(now: number): void {
    if (now <= this.at) return;
    const w = this.opts.windowSec;
    for (let s = Math.max(this.at + 1, now - w + 1); s <= now; s++) {
      this.arrived[s % w] = 0;
      this.left[s % w] = 0;
    }
    this.at = now;
  }
}
