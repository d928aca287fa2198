/*
 * parseLog on hand-written Postfix log lines (maillog_file format): what counts as accepted,
 * sent, deferred, bounced, removed and rejected. Needs no Postfix and no root.
 */

import { describe, expect, it } from "vitest";
import { parseLog } from "./harness";

const H = "Nov 22 11:02:40 mx";

describe("parseLog", () => {
  it("counts each queue id once as accepted and every delivery status line", () => {
    const log = [
      `${H} postfix/postfix-script[1]: starting the Postfix mail system`,
      `${H} postfix/smtpd[2]: connect from unknown[127.0.0.1]`,
      `${H} postfix/smtpd[2]: BFBEB20C4A2: client=unknown[127.0.0.1]`,
      `${H} postfix/cleanup[3]: BFBEB20C4A2: message-id=<a@cohort.test>`,
      `${H} postfix/qmgr[4]: BFBEB20C4A2: from=<a@cohort.test>, size=377, nrcpt=2 (queue active)`,
      `${H} postfix/virtual[5]: BFBEB20C4A2: to=<b@example.test>, relay=virtual, delay=0.02, dsn=2.0.0, status=sent (delivered to maildir)`,
      `${H} postfix/smtp[6]: BFBEB20C4A2: to=<c@example.test>, relay=127.0.0.1[127.0.0.1]:2525, delay=1, dsn=4.4.1, status=deferred (connect refused)`,
      // The same message re-enters the active queue on retry: still one accepted message.
      `${H} postfix/qmgr[4]: BFBEB20C4A2: from=<a@cohort.test>, size=377, nrcpt=2 (queue active)`,
      `${H} postfix/smtp[6]: BFBEB20C4A2: to=<c@example.test>, relay=127.0.0.1[127.0.0.1]:2525, delay=2, dsn=5.1.1, status=bounced (host said: 550 no)`,
      `${H} postfix/qmgr[4]: BFBEB20C4A2: removed`,
      `${H} postfix/smtpd[2]: NOQUEUE: reject: RCPT from unknown[127.0.0.1]: 554 5.7.1 <x@y>: Relay access denied`,
      `${H} postfix/smtpd[2]: warning: something odd`,
      `${H} postfix-relay/qmgr[9]: C065820C247: from=<>, size=10, nrcpt=1 (queue active)`,
      "not a postfix line: ABCDEF1234: status=sent",
      "",
    ].join("\n");
    expect(parseLog(log)).toEqual({
      accepted: 2,
      recipients: 3,
      received: 1,
      sent: 1,
      deferred: 1,
      bounced: 1,
      expired: 0,
      removed: 1,
      rejected: 1,
      problems: [`${H} postfix/smtpd[2]: warning: something odd`],
    });
  });

  it("counts a queue id Postfix reused after the first message's removal as a second message", () => {
    // Short queue ids come from the queue file's inode and time: with a thousand messages one can recur.
    const one = (n: number) => [
      `${H} postfix/qmgr[4]: 4B2F520C4A2: from=<s${n}@cohort.test>, size=377, nrcpt=1 (queue active)`,
      `${H} postfix/smtp[6]: 4B2F520C4A2: to=<r${n}@example.test>, relay=127.0.0.1[127.0.0.1]:2525, delay=0.1, dsn=2.0.0, status=sent (250 ok)`,
      `${H} postfix/qmgr[4]: 4B2F520C4A2: removed`,
    ];
    expect(parseLog([...one(1), ...one(2)].join("\n"))).toMatchObject({
      accepted: 2,
      recipients: 2,
      sent: 2,
      removed: 2,
    });
  });

  it("counts nothing in an empty log", () => {
    expect(parseLog("")).toMatchObject({ accepted: 0, sent: 0, deferred: 0, bounced: 0, problems: [] });
  });
});
