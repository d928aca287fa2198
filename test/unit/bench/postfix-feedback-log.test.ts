// bench:limiter reads Postfix's window from its destination_concurrency_feedback_debug lines.
// The qmgr lines for port 40345 are as Postfix 3.7 wrote them in a bench:limiter run; the
// delivery line and the other queue's line are written after them, to be skipped.
import { describe, expect, it } from "vitest";
import { postfixWindows } from "../../../bench/lib/postfix-feedback-log";

const LOG = `Nov 26 08:02:57 relay postfix/qmgr[18915]: qmgr_queue_unthrottle: feedback 0.2
Nov 26 08:02:57 relay postfix/qmgr[18915]: qmgr_queue_unthrottle: queue [127.0.0.1]:40345: limit 20 window 5 success 0.2 failure 0 fail_cohorts 0
Nov 26 08:02:57 relay postfix/smtp[18920]: 4A1B2C: to=<0rcpt@limit.test>, relay=127.0.0.1[127.0.0.1]:40345, delay=0.6, status=sent (250 OK: message queued)
Nov 26 08:02:57 relay postfix/qmgr[18915]: qmgr_queue_unthrottle: queue [127.0.0.1]:40345: limit 20 window 6 success 0 failure 0 fail_cohorts 0
Nov 26 08:02:57 relay postfix/qmgr[18915]: qmgr_queue_throttle: feedback 0.166667
Nov 26 08:02:57 relay postfix/qmgr[18915]: qmgr_queue_throttle: queue [127.0.0.1]:40345: limit 20 window 5 success 0 failure 0.833333 fail_cohorts 0.166667
Nov 26 08:02:58 relay postfix/qmgr[18915]: qmgr_queue_unthrottle: queue [127.0.0.1]:1040345: limit 20 window 9 success 0 failure 0 fail_cohorts 0
`;

describe("postfixWindows", () => {
  it("takes the window of each feedback step of the queue to the given port, in order, and nothing else", () => {
    expect(postfixWindows(LOG, 40345)).toEqual([5, 6, 5]);
    expect(postfixWindows(LOG, 1040345)).toEqual([9]);
    expect(postfixWindows(LOG, 25)).toEqual([]);
  });
});
