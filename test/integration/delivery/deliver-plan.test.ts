/** The delivery stage's pure decisions (worker/delivery/plan.ts). */
import { describe, expect, it } from "vitest";
import type { DeliverJob } from "../../../worker/model/delivery";
import {
  groupByNexthop,
  judgeEntry,
  parseJob,
  relayTarget,
  sendableRcpts,
  splitForSessions,
} from "../../../worker/delivery/plan";
import type { TransactionResult } from "../../../worker/smtp/core/types";
import type { ReplyRule } from "../../../durable-objects/core/reply-rules";

const job: DeliverJob = {
  entryId: 7,
  messageId: "m",
  attempt: 2,
  transport: "smtp",
  nexthop: "[relay.example]:587",
  rcpts: [
    { idx: 0, address: "a@x.test" },
    { idx: 1, address: "B@x.test" },
    { idx: 2, address: "c@x.test" },
  ],
  leaseUntil: 0,
};

describe("relayTarget", () => {
  it.each([
    ["[relay.example]:587", { host: "relay.example", port: 587 }],
    ["[127.0.0.1]:2526", { host: "127.0.0.1", port: 2526 }],
    ["[relay.example]", { host: "relay.example", port: 25 }],
    ["relay.example:2525", { host: "relay.example", port: 2525 }],
    ["example.com", null],
    ["[relay.example]:0", null],
    ["[relay.example]:70000", null],
  ])("%s", (nexthop, want) => expect(relayTarget(nexthop)).toEqual(want));
});

describe("parseJob and groupByNexthop", () => {
  it("accepts a dispatched entry and rejects malformed bodies", () => {
    expect(parseJob(job)).toEqual(job);
    expect(parseJob({ ...job, rcpts: [{ idx: "0", address: "a@x.test" }] })).toBeNull();
    expect(parseJob({ ...job, entryId: "7" })).toBeNull();
    expect(parseJob(null)).toBeNull();
  });

  it("groups by transport and nexthop, keeping order", () => {
    const items = [
      { job },
      { job: { ...job, entryId: 8, nexthop: "[other]:25" } },
      { job: { ...job, entryId: 9 } },
      { job: { ...job, entryId: 10, transport: "t2" } },
    ];
    expect(groupByNexthop(items).map((g) => g.map((i) => i.job.entryId))).toEqual([[7, 9], [8], [10]]);
  });

  it("spreads a group over its share of the 6 sockets, evenly and in order", () => {
    const range = (a: number, n: number) => Array.from({ length: n }, (_, i) => a + i);
    expect(splitForSessions([range(0, 10)], 6)).toEqual([[0, 1], [2, 3], [4, 5], [6, 7], [8], [9]]);
    expect(splitForSessions([range(0, 3)], 6)).toEqual([[0], [1], [2]]);
    expect(splitForSessions([range(0, 5), range(10, 5)], 6)).toEqual([[0, 1], [2, 3], [4], [10, 11], [12, 13], [14]]);
    // More groups than sockets: one session each (the pool runs 6 at a time).
    expect(
      splitForSessions(
        range(0, 8).map((g) => [g * 10, g * 10 + 1]),
        6,
      ),
    ).toHaveLength(8);
    expect(splitForSessions([], 6)).toEqual([]);
  });
});

describe("judgeEntry", () => {
  const envelope = {
    id: "m",
    mailFrom: "s@x.test",
    size: 10,
    rcpts: [
      { idx: 4, address: "a@x.test", status: "ready" as const, attempts: 1 },
      { idx: 5, address: "b@x.test", status: "delivered" as const, attempts: 1 },
      { idx: 6, address: "c@x.test", status: "deferred" as const, attempts: 1 },
    ],
  };

  it("skips recipients already final in the Outbox and matches addresses case-insensitively", () => {
    const m = sendableRcpts(job, envelope);
    expect(m.map((r) => [r.outboxIdx, r.final])).toEqual([
      [4, false],
      [5, true],
      [6, false],
    ]);
  });

  it("2xx delivered, 4xx deferred, 5xx bounced; the entry defers when any recipient does", () => {
    const txn: TransactionResult = {
      messageId: "7",
      remoteHost: "relay.example",
      tls: true,
      possibleDuplicate: false,
      recipients: [
        { rcpt: "a@x.test", code: 550, enhanced: "5.1.1", text: "no such user", status: "bounced", source: "remote" },
        { rcpt: "c@x.test", code: 451, enhanced: "4.3.0", text: "later", status: "deferred", source: "remote" },
      ],
    };
    const v = judgeEntry(job, sendableRcpts(job, envelope), txn, null);
    expect(v.status).toBe("defer");
    expect(v.finalIdx).toEqual([0, 1]);
    expect(v.outcomes).toEqual([
      {
        idx: 4,
        status: "bounced",
        attempt: 2,
        response: { code: 550, enhanced: "5.1.1", text: "no such user", mx: "relay.example", tls: true },
        blockedBy: null,
      },
      {
        idx: 6,
        status: "deferred",
        attempt: 2,
        response: { code: 451, enhanced: "4.3.0", text: "later", mx: "relay.example", tls: true },
        blockedBy: null,
      },
    ]);
  });

  it("a site failure without a transaction defers every open recipient with its reason", () => {
    const v = judgeEntry(job, sendableRcpts(job, envelope), undefined, {
      dsnStatus: "4.4.1",
      reason: "connection refused",
    });
    expect(v.status).toBe("defer");
    expect(v.outcomes.map((o) => [o.idx, o.status, o.response?.text, o.blockedBy])).toEqual([
      [4, "deferred", "connection refused", "site_failure"],
      [6, "deferred", "connection refused", "site_failure"],
    ]);
  });

  it("an entry whose recipients are all delivered is ok", () => {
    const txn: TransactionResult = {
      messageId: "7",
      remoteHost: "r",
      tls: false,
      possibleDuplicate: false,
      recipients: [
        { rcpt: "a@x.test", code: 250, enhanced: "2.1.5", text: "ok", status: "delivered", source: "remote" },
        { rcpt: "c@x.test", code: 250, enhanced: null, text: "ok", status: "delivered", source: "remote" },
      ],
    };
    const v = judgeEntry(job, sendableRcpts(job, envelope), txn, null);
    expect(v).toMatchObject({ status: "ok", finalIdx: [0, 1, 2] });
    expect(v.outcomes[1]!.response).toEqual({ code: 250, text: "ok", mx: "r", tls: false });
  });

  it("reply rules: a defer rule's 5xx is a deferral blocked by the rule, a bounce rule's 4xx a bounce that says so; other replies are judged as before", () => {
    const rules: ReplyRule[] = [
      { name: "ms-blocklist", codes: [550], text: "\\(S3150\\)", action: { kind: "defer" } },
      { name: "full-is-gone", codes: [452], enhanced: "4.2.2", action: { kind: "bounce" } },
    ];
    const txn: TransactionResult = {
      messageId: "7",
      remoteHost: "relay.example",
      tls: true,
      possibleDuplicate: false,
      recipients: [
        {
          rcpt: "a@x.test",
          code: 550,
          enhanced: "5.7.1",
          text: "part of their network is on our block list (S3150)",
          status: "bounced",
          source: "remote",
        },
        { rcpt: "c@x.test", code: 452, enhanced: "4.2.2", text: "mailbox full", status: "deferred", source: "remote" },
      ],
    };
    const v = judgeEntry(job, sendableRcpts(job, envelope), txn, null, rules);
    expect(v.status).toBe("defer");
    expect(v.finalIdx).toEqual([1, 2]);
    expect(v.outcomes).toEqual([
      {
        idx: 4,
        status: "deferred",
        attempt: 2,
        response: {
          code: 550,
          enhanced: "5.7.1",
          text: "part of their network is on our block list (S3150)",
          mx: "relay.example",
          tls: true,
        },
        blockedBy: "reply_rule:ms-blocklist",
      },
      {
        idx: 6,
        status: "bounced",
        attempt: 2,
        response: { code: 452, enhanced: "4.2.2", text: "mailbox full", mx: "relay.example", tls: true },
        blockedBy: null,
        throttled: {
          rule: "full-is-gone",
          key: "dest:smtp/[relay.example]:587",
          until: 0,
          reply: "452 4.2.2 mailbox full",
          action: "bounce",
        },
      },
    ]);
    // Without rules, the same replies are judged by their codes.
    expect(judgeEntry(job, sendableRcpts(job, envelope), txn, null).outcomes.map((o) => o.status)).toEqual([
      "bounced",
      "deferred",
    ]);
  });
});
