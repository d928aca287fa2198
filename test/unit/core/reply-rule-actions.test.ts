// Reply rules beyond suspension (issue #13, item 3): `rate` throttles the rule's key for a while
// (the stricter of it and an operator's rate applies, blocked_by names the rule, and the
// operator's rate is back when it ends), `ceiling` takes a reply for a concurrency refusal
// whatever its wording, and `defer` / `bounce` turn a permanent reply into a deferral and a
// temporary one into a bounce (outcomeOverride, which the delivery stage applies).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  admitMessage,
  dispatchAll,
  drainEffects,
  explainMessage,
  reportDelivery,
  setPolicy,
  tick,
  type Effect,
} from "../../../durable-objects/core";
import {
  outcomeOverride,
  parseReplyRules,
  replyOf,
  replyRulePolicy,
  type ReplyRule,
} from "../../../durable-objects/core/reply-rules";
import { rateOf } from "../../../durable-objects/core/policy";
import { makeQmgr, rcpts } from "./harness";

const SLOW = {
  dsnStatus: "4.7.0",
  reason: "host mx.test[192.0.2.1] said: 421 4.7.0 Slow down: too much mail from your IP",
};
const LATER = {
  dsnStatus: "4.3.2",
  reason: "host mx.test[192.0.2.1] refused to talk to me: 451 4.3.2 Please try again later",
};
const rateRule: ReplyRule = {
  name: "slow-down",
  codes: [421],
  text: "slow down",
  action: { kind: "rate", scope: "destination", rate: "2/m", seconds: 600 },
};
const ceilingRule: ReplyRule = {
  name: "try-later",
  codes: [451],
  text: "try again later",
  action: { kind: "ceiling" },
};

/** `n` one-recipient messages to mx.test, admitted at `at`. */
function messages(input: object, n: number, at = 0) {
  const { q, src } = makeQmgr({
    default_destination_recipient_limit: 2,
    initial_destination_concurrency: 5,
    default_destination_concurrency_limit: 20,
    ...input,
  });
  for (let i = 0; i < n; i++) {
    src.files.set(`m${i}`, rcpts(1, "mx.test", "smtp", i));
    admitMessage(q, { id: `m${i}`, createTime: at, rcptTotal: 1 }, at);
  }
  return q;
}

const ruleEffects = (effects: Effect[]) =>
  effects.filter((e): e is Extract<Effect, { kind: "reply-rule" }> => e.kind === "reply-rule");

describe("a rate rule", () => {
  it("throttles the key to its rate for its seconds, says so in blocked_by, and lets go when it ends", () => {
    const q = messages({ reply_rules: [rateRule] }, 30);
    const first = dispatchAll(q, 0);
    expect(first).toHaveLength(5);
    drainEffects(q);
    reportDelivery(q, first[0]!.id, { status: "defer", siteFailure: SLOW }, 10);
    expect(ruleEffects(drainEffects(q))).toEqual([
      expect.objectContaining({ rule: "slow-down", action: "rate", rate: "2/m", key: "dest:smtp/mx.test", until: 610 }),
    ]);
    expect(q.policies.get("dest:smtp/mx.test")!.rule.throttle).toEqual({
      count: 2,
      perSec: 60,
      until: 610,
      label: "reply_rule:slow-down",
    });
    for (const e of first.slice(1)) reportDelivery(q, e.id, { status: "ok" }, 11);
    // Two at once (the bucket's burst), then one per 30 s.
    expect(dispatchAll(q, 11)).toHaveLength(2);
    expect(dispatchAll(q, 12)).toHaveLength(0);
    const waiting = explainMessage(q, "m29", 12)[0]!.blockedBy;
    expect(waiting).toMatchObject({
      kind: "policy",
      key: "dest:smtp/mx.test",
      reason: "rate",
      label: "reply_rule:slow-down",
    });
    tick(q, 41);
    expect(dispatchAll(q, 41)).toHaveLength(1);
    // Once it ends nothing holds the destination back but its window.
    tick(q, 611);
    expect(dispatchAll(q, 611).length).toBeGreaterThan(1);
  });

  it("never loosens an operator's own rate, and keeps a stricter throttle in force, lengthened", () => {
    const dest = { transport: "smtp", queue: "mx.test", egress: null, site: null };
    const strict = { rate: { count: 1, perSec: 60 } };
    const withOps = replyRulePolicy(rateRule, dest, strict, 0)!;
    expect(rateOf(withOps.rule, 10)).toEqual({ count: 1, perSec: 60 });
    const loose = { rate: { count: 100, perSec: 60 } };
    expect(rateOf(replyRulePolicy(rateRule, dest, loose, 0)!.rule, 10)).toEqual({
      count: 2,
      perSec: 60,
      label: "reply_rule:slow-down",
    });
    expect(rateOf(replyRulePolicy(rateRule, dest, loose, 0)!.rule, 600)).toEqual(loose.rate);
    const stricter = { throttle: { count: 1, perSec: 3600, until: 100, label: "reply_rule:other" } };
    expect(replyRulePolicy(rateRule, dest, stricter, 50)).toEqual({
      key: "dest:smtp/mx.test",
      until: 650,
      rule: { throttle: { count: 1, perSec: 3600, until: 650, label: "reply_rule:other" } },
    });
  });

  it("property: while a throttle is in force, no more than its burst plus its rate is selected in any stretch of time", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 40 }), (gaps) => {
        const q = messages({ reply_rules: [rateRule] }, 60);
        const [e, ...rest] = dispatchAll(q, 0);
        reportDelivery(q, e!.id, { status: "defer", siteFailure: SLOW }, 0);
        for (const x of rest) reportDelivery(q, x.id, { status: "ok" }, 0);
        let t = 0;
        let selected = 0;
        for (const gap of gaps) {
          t += gap;
          if (t >= 600) break;
          tick(q, t);
          const sent = dispatchAll(q, t);
          selected += sent.length;
          for (const x of sent) reportDelivery(q, x.id, { status: "ok" }, t);
          expect(selected).toBeLessThanOrEqual(2 + Math.floor((t * 2) / 60));
        }
      }),
      { numRuns: 100 },
    );
  });
});

describe("a ceiling rule", () => {
  it("learns the session ceiling from a reply worded as no concurrency refusal; without it the core is Postfix's", () => {
    for (const [rules, learned] of [
      [[ceilingRule], true],
      [[], false],
    ] as const) {
      const q = messages({ reply_rules: rules, default_destination_concurrency_ceiling_memory: 3600 }, 10);
      const sent = dispatchAll(q, 0);
      expect(sent).toHaveLength(5);
      reportDelivery(q, sent[4]!.id, { status: "defer", siteFailure: LATER }, 1);
      const queue = q.transports.get("smtp")!.queues.get("mx.test")!;
      if (learned) {
        expect(queue.ceiling).toMatchObject({ limit: 4 });
        expect(queue.window).toBe(4);
        expect(ruleEffects(drainEffects(q))).toEqual([
          expect.objectContaining({ rule: "try-later", action: "ceiling", key: "dest:smtp/mx.test" }),
        ]);
      } else {
        expect(queue.ceiling ?? null).toBeNull();
        expect(ruleEffects(drainEffects(q))).toEqual([]);
      }
    }
  });
});

describe("defer and bounce rules", () => {
  const rules: ReplyRule[] = [
    { name: "ms-blocklist", codes: [550], enhanced: "5.7.1", text: "\\(S3150\\)", action: { kind: "defer" } },
    { name: "full-is-gone", codes: [452], enhanced: "4.2.2", action: { kind: "bounce" } },
  ];
  const S3150 = {
    code: 550,
    enhanced: "5.7.1",
    text:
      "Unfortunately, messages from [198.51.100.4] weren't sent. Please contact your Internet " +
      "service provider since part of their network is on our block list (S3150).",
  };

  it("turn a matching 5xx into a deferral and a matching 4xx into a bounce, and leave every other reply alone", () => {
    expect(outcomeOverride(rules, S3150)).toMatchObject({ status: "deferred", rule: { name: "ms-blocklist" } });
    expect(outcomeOverride(rules, { code: 452, enhanced: "4.2.2", text: "Mailbox full" })).toMatchObject({
      status: "bounced",
      rule: { name: "full-is-gone" },
    });
    expect(outcomeOverride(rules, { code: 550, enhanced: "5.1.1", text: "No such user" })).toBeNull();
    expect(outcomeOverride(rules, { code: 421, enhanced: "4.7.0", text: "(S3150)" })).toBeNull();
    expect(outcomeOverride([rateRule], { code: 421, enhanced: "4.7.0", text: "slow down" })).toBeNull();
  });

  it("a defer rule's 5xx, reported as the deferring reply, is said once by the core (no policy set)", () => {
    const q = messages({ reply_rules: rules }, 2);
    const [e] = dispatchAll(q, 0);
    drainEffects(q);
    reportDelivery(q, e!.id, { status: "defer", reply: S3150 }, 3);
    expect(ruleEffects(drainEffects(q))).toEqual([
      expect.objectContaining({ rule: "ms-blocklist", action: "defer", key: "dest:smtp/mx.test", until: 3 }),
    ]);
    expect(q.policies.size).toBe(0);
  });

  it("validates every kind of action", () => {
    expect(parseReplyRules([rateRule, ceilingRule, ...rules])).toMatchObject({ ok: true });
    const bad = parseReplyRules([
      { name: "a", codes: [421], action: { kind: "rate", scope: "site", rate: "fast", seconds: 60 } },
      { name: "b", codes: [421], action: { kind: "ceiling", seconds: 5 } },
      { name: "c", codes: [421], action: { kind: "explode" } },
    ]);
    expect(!bad.ok && bad.errors.map((x) => x.split(":")[0])).toEqual([
      "reply_rules[0].action",
      "reply_rules[1].action",
      "reply_rules[2].action",
    ]);
  });
});

describe("operator policies beside a throttle", () => {
  it("an operator's rule set while a throttle is in force keeps the throttle only if the operator keeps it", () => {
    const q = messages({ reply_rules: [rateRule] }, 3);
    setPolicy(
      q,
      "dest:smtp/mx.test",
      { concurrency: 3, throttle: { count: 1, perSec: 60, until: 100, label: "reply_rule:slow-down" } },
      0,
    );
    expect(dispatchAll(q, 0)).toHaveLength(1);
    expect(explainMessage(q, "m2", 0)[0]!.blockedBy).toMatchObject({ reason: "rate", label: "reply_rule:slow-down" });
  });
});
