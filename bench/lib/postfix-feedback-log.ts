/**
 * Postfix's concurrency windows from its log, for bench:limiter: with
 * destination_concurrency_feedback_debug = yes, qmgr logs each feedback step as
 *   qmgr_queue_unthrottle: queue [127.0.0.1]:40345: limit 20 window 5 success 0.2 failure 0 fail_cohorts 0
 * (qmgr_queue_throttle after a site failure).
 *
 * DESCRIPTION
 *   postfixWindows(logText, nexthopPort)  the window after each feedback step of the queue whose
 *                                         nexthop port is nexthopPort, in log order.
 */

const STEP = /qmgr_queue_(?:unthrottle|throttle): queue (\S+?): limit \d+ window (\d+) /;

/** The window after each feedback step of the queue to `nexthopPort`, in log order. */
export function postfixWindows(logText: string, nexthopPort: number): number[] {
  const out: number[] = [];
  for (const line of logText.split("\n")) {
    const m = STEP.exec(line);
    if (m && m[1]!.endsWith(`:${nexthopPort}`)) out.push(Number(m[2]));
  }
  return out;
}
