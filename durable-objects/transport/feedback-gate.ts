/**
 * Which delivery reports a destination's own Destination DO needs (DESTINATION_GROUPING "nexthop").
 *
 * The Transport DO runs the same Postfix 2.5 feedback as the Destination DO, in the reports' true
 * order, and with nexthop grouping the DO's answer changes the Transport DO's queue only by death
 * (worker/delivery/finish.ts). A death needs a site failure, and each report carries the queue's
 * window and failed cohorts before it (`prior`), which the DO takes before applying it; so a
 * success the DO never got leaves nothing stale there. A destination's DO is therefore fed from
 * its first site failure on: that report and every report after it, for its history and its
 * learned ceiling, until the destination has been quiet for destination_idle_memory plus a margin
 * (the DO has then forgotten its record, spec §12.4). A destination that only ever succeeds gets
 * no DO at all, as Postfix keeps no state for a destination beyond its in-memory queue; its window
 * lives in the Transport DO.
 *
 * In memory only: after a restart a destination's successes go unfed until its next site failure
 * (the DO's history then lacks them; `prior` keeps its counts right). With destination_idle_memory
 * 0 the DOs keep their records for ever, and every report is fed.
 *
 * DESCRIPTION
 *   new FeedbackGate(memorySec)    destination_idle_memory, s.
 *   feed(queue, siteFailure, now)  whether this report goes to the DO (now in s); remembers it.
 *
 * INVARIANTS
 *   A report is not fed only if it is no site failure and no report of its destination was fed
 *   within memorySec + FEED_MARGIN_SEC before it, in this object's life. Memory: one entry per
 *   destination fed within that time (expired ones dropped as the oldest come up).
 */

/** Slack for reports that reach a Destination DO after the Transport DO applied them, s. */
export const FEED_MARGIN_SEC = 60;

export class FeedbackGate {
  /** Destination queue → when a report of it was last fed (s), least recent first. */
  private readonly fed = new Map<string, number>();

  constructor(private readonly memorySec: number) {}

  /** Whether the report goes to the destination's DO (see the header). */
  feed(queue: string, siteFailure: boolean, now: number): boolean {
    const keep = this.memorySec + FEED_MARGIN_SEC;
    for (const [q, at] of this.fed) {
      if (now - at < keep) break;
      this.fed.delete(q);
    }
    if (this.memorySec > 0 && !siteFailure && !this.fed.has(queue)) return false;
    this.fed.delete(queue); // re-inserted last: the map stays in order of time
    this.fed.set(queue, now);
    return true;
  }
}
