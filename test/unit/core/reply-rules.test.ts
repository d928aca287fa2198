// Reply rules (issue #13, item 3): a site failure whose reply a rule matches suspends the rule's
// key as a pickup policy labelled reply_rule:<name>; with no rule (reply_rules []) the core is
// Postfix's.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  admitMessage,
  dispatchAll,
  drainEffects,
  explainMessage,
  nextWakeupAt,
  parseSchedulerConfig,
  reportDelivery,
  setPolicy,
  tick,
  type Effect,
} from "../../../durable-objects/core";
import {
  DEFAULT_REPLY_RULES,
  matchReplyRule,
  parseReplyRules,
  replyOf,
  replyRulePolicy,
  type ReplyRule,
} from "../../../durable-objects/core/reply-rules";
import { makeQmgr, type TestRcpt } from "./harness";

// As the SMTP client reports a refused MAIL FROM (worker/smtp/core/session.ts refuseSession).
const TSS04 = {
  dsnStatus: "4.7.0",
  reason:
    "host mta5.am0.yahoodns.net[192.0.2.7] said: 421 4.7.0 [TSS04] Messages from " +
    "198.51.100.4 temporarily deferred due to unexpected volume or user complaints - " +
    "4.16.55.1; see https://postmaster.yahooinc.com/error-codes",
};
const GMAIL = {
  dsnStatus: "4.7.28",
  reason:
    "host gmail-smtp-in.l.google.com[192.0.2.9] said: 421 4.7.28 Gmail has detected an unusual rate of unsolicited mail originating from your IP address",
};
const SESSIONS = {
  dsnStatus: "4.7.0",
  reason: "host mx.test[192.0.2.1] refused to talk to me: 421 4.7.0 Too many sessions, try again later",
};

/** A three-recipient message to the site "yahoo" (recipient limit 2: two entries). */
function yahoo(input: object = {}) {
  const { q, src } = makeQmgr({
    default_destination_recipient_limit: 2,
    minimal_backoff_time: 10,
    maximal_backoff_time: 20,
    ...input,
  });
  const to = (id: string, n: number) =>
    src.files.set(
      id,
      Array.from(
        { length: n },
        (_, i) =>
          ({
            n: i,
            address: `u${i}@${id}.example`,
            transport: "smtp",
            nexthop: "mx.yahoodns.net",
            site: "yahoo",
          }) as TestRcpt,
      ),
    );
  to("m1", 3);
  admitMessage(q, { id: "m1", createTime: 0, rcptTotal: 3 }, 0);
  return { q, src, to };
}

describe("reading and matching replies", () => {
  it("reads the code, enhanced code and text of a site failure as the client reports it", () => {
    expect(replyOf(TSS04)).toMatchObject({ code: 421, enhanced: "4.7.0" });
    expect(replyOf(TSS04).text).toMatch(/^\[TSS04\] Messages from/);
    expect(replyOf({ dsnStatus: "4.4.1", reason: "connect to mx.test[192.0.2.1]:25: Connection refused" })).toEqual({
      code: null,
      enhanced: "4.4.1",
      text: "connect to mx.test[192.0.2.1]:25: Connection refused",
    });
  });

  it("matches the shipped rules to the providers' throttling replies, and nothing else", () => {
    expect(matchReplyRule(DEFAULT_REPLY_RULES, replyOf(TSS04))?.name).toBe("yahoo-tss04");
    expect(matchReplyRule(DEFAULT_REPLY_RULES, replyOf(GMAIL))?.name).toBe("gmail-4.7.28");
    expect(
      matchReplyRule(
        DEFAULT_REPLY_RULES,
        replyOf({
          dsnStatus: "4.7.650",
          reason:
            "host x said: 451 4.7.650 The mail server [192.0.2.1] has been temporarily rate limited due to IP reputation.",
        }),
      )?.name,
    ).toBe("microsoft-4.7.650");
    expect(matchReplyRule(DEFAULT_REPLY_RULES, replyOf(SESSIONS))).toBeNull();
    // The code must match too: the same text in a 250 is not a throttle.
    expect(matchReplyRule(DEFAULT_REPLY_RULES, { code: 250, enhanced: null, text: "[TSS04] ok" })).toBeNull();
    for (const r of DEFAULT_REPLY_RULES) expect(r.source, r.name).toBeTruthy();
  });

  it("validates configured rules", () => {
    expect(
      parseReplyRules([{ name: "x", text: "slow down", action: { kind: "suspend", scope: "egress", seconds: 60 } }]),
    ).toMatchObject({ ok: true });
    const bad = parseReplyRules([
      { name: "Bad Name", action: { kind: "suspend", scope: "planet", seconds: 0 } },
      { name: "y", codes: [99], text: "(", action: { kind: "suspend", scope: "site", seconds: 5 } },
    ]);
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.errors.map((e) => e.split(":")[0])).toEqual([
      "reply_rules[0].name",
      "reply_rules[0]",
      "reply_rules[0].action",
      "reply_rules[1].codes",
      "reply_rules[1].text",
    ]);
    expect(parseSchedulerConfig({ reply_rules: [{ name: "z" }] }).ok).toBe(false);
    expect(parseSchedulerConfig({ reply_rules: [] })).toMatchObject({
      ok: true,
      config: { global: { replyRules: [] } },
    });
    expect(parseSchedulerConfig({})).toMatchObject({
      ok: true,
      config: { global: { replyRules: DEFAULT_REPLY_RULES } },
    });
  });
});

describe("a reply rule in the scheduler", () => {
  it("suspends the site on Yahoo's TSS04: nothing more goes there, blocked_by names the rule, and it resumes when the suspension ends", () => {
    const { q, to } = yahoo();
    const sent = dispatchAll(q, 0);
    expect(sent.length).toBeGreaterThan(0);
    drainEffects(q);
    reportDelivery(q, sent[0]!.id, { status: "defer", siteFailure: TSS04 }, 5);
    const hit = drainEffects(q).filter((e): e is Extract<Effect, { kind: "reply-rule" }> => e.kind === "reply-rule");
    expect(hit).toEqual([
      {
        kind: "reply-rule",
        entryId: sent[0]!.id,
        messageId: "m1",
        transport: "smtp",
        queue: "mx.yahoodns.net",
        rule: "yahoo-tss04",
        action: "suspend",
        key: "site:yahoo",
        until: 3605,
        reply: TSS04.reason,
      },
    ]);
    for (const e of sent.slice(1)) reportDelivery(q, e.id, { status: "ok" }, 6);
    // Another message to the same site waits, and says why.
    to("m2", 2);
    admitMessage(q, { id: "m2", createTime: 6, rcptTotal: 2 }, 6);
    expect(dispatchAll(q, 6)).toHaveLength(0);
    expect(explainMessage(q, "m2", 6)[0]!.blockedBy).toEqual({
      kind: "policy",
      key: "site:yahoo",
      reason: "suspended",
      until: 3605,
      label: "reply_rule:yahoo-tss04",
    });
    tick(q, 3604);
    expect(dispatchAll(q, 3604)).toHaveLength(0);
    expect(nextWakeupAt(q)).toBe(3605);
    tick(q, 3605);
    expect(dispatchAll(q, 3605).length).toBeGreaterThan(0);
  });

  it("also matches the reply that deferred a transaction without a site failure (Yahoo's TSS04 to MAIL FROM)", () => {
    const { q } = yahoo();
    const [e, f] = dispatchAll(q, 0);
    drainEffects(q);
    reportDelivery(q, e!.id, { status: "defer", reply: replyOf(TSS04) }, 7);
    expect(drainEffects(q).find((x) => x.kind === "reply-rule")).toMatchObject({
      rule: "yahoo-tss04",
      key: "site:yahoo",
      until: 3607,
    });
    // A deferring reply no rule matches changes nothing.
    reportDelivery(q, f!.id, { status: "defer", reply: replyOf(SESSIONS) }, 8);
    expect(drainEffects(q).some((x) => x.kind === "reply-rule")).toBe(false);
    expect(q.policies.get("site:yahoo")!.rule.suspendedUntil).toBe(3607);
  });

  it("keeps an operator's cap on the same key and never shortens a suspension in force", () => {
    const { q } = yahoo();
    setPolicy(q, "site:yahoo", { concurrency: 2, suspendedUntil: 0 }, 0);
    const sent = dispatchAll(q, 0);
    reportDelivery(q, sent[0]!.id, { status: "defer", siteFailure: TSS04 }, 5);
    expect(q.policies.get("site:yahoo")!.rule).toEqual({
      concurrency: 2,
      suspendedUntil: 3605,
      label: "reply_rule:yahoo-tss04",
    });
    const longer = replyRulePolicy(
      DEFAULT_REPLY_RULES[0]!,
      { transport: "smtp", queue: "q", egress: null, site: "yahoo" },
      { suspendedUntil: 90_000, label: "held by ops" },
      10,
    );
    expect(longer).toEqual({
      key: "site:yahoo",
      until: 90_000,
      rule: { suspendedUntil: 90_000, label: "held by ops" },
    });
  });

  it("puts a site-scoped rule on the destination when the queue has no site, and an egress-scoped one on the egress", () => {
    const rule: ReplyRule = { name: "r", codes: [421], action: { kind: "suspend", scope: "site", seconds: 60 } };
    expect(
      replyRulePolicy(rule, { transport: "smtp", queue: "mx.test", egress: null, site: null }, undefined, 0)!.key,
    ).toBe("dest:smtp/mx.test");
    expect(
      replyRulePolicy(
        { ...rule, action: { kind: "suspend", scope: "egress", seconds: 60 } },
        { transport: "smtp", queue: "mx.test", egress: "ip-1", site: "s" },
        undefined,
        0,
      )!.key,
    ).toBe("egress:ip-1");
  });

  it("with reply_rules [] a throttling reply changes no policy (Postfix)", () => {
    const { q } = yahoo({ reply_rules: [] });
    const sent = dispatchAll(q, 0);
    reportDelivery(q, sent[0]!.id, { status: "defer", siteFailure: TSS04 }, 5);
    expect(q.policies.size).toBe(0);
    expect(drainEffects(q).some((e) => e.kind === "reply-rule")).toBe(false);
  });

  it("property: a matching reply suspends its key at least `seconds` from then and never moves a suspension earlier; others change nothing", () => {
    const reply = fc.oneof(
      fc.constant(TSS04),
      fc.constant(GMAIL),
      fc.constant(SESSIONS),
      fc.record({
        dsnStatus: fc.constantFrom("4.4.1", "4.7.0", "5.7.1"),
        reason: fc.string({ maxLength: 40 }).map((s) => `host x said: 421 ${s}`),
      }),
    );
    fc.assert(
      fc.property(
        fc.array(fc.tuple(reply, fc.integer({ min: 0, max: 5000 })), { minLength: 1, maxLength: 8 }),
        (steps) => {
          const { q } = yahoo({ default_destination_recipient_limit: 1 });
          let t = 0;
          let until = 0;
          for (const [failure, dt] of steps) {
            t += dt;
            tick(q, t);
            const [e] = dispatchAll(q, t);
            if (!e) continue;
            const before = q.policies.get("site:yahoo")?.rule.suspendedUntil ?? 0;
            reportDelivery(q, e.id, { status: "defer", siteFailure: failure }, t);
            const rule = matchReplyRule(DEFAULT_REPLY_RULES, replyOf(failure));
            const after = q.policies.get("site:yahoo")?.rule.suspendedUntil ?? 0;
            if (rule?.action.kind === "suspend") expect(after).toBe(Math.max(before, t + rule.action.seconds));
            else expect(after).toBe(before);
            until = Math.max(until, after);
          }
          expect(q.policies.get("site:yahoo")?.rule.suspendedUntil ?? 0).toBe(until);
        },
      ),
      { numRuns: 200 },
    );
  });
});
