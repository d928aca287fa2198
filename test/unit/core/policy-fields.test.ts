// The rest of Halon's pickup policies (issue 13, item 5): message fields as keys (jobid from the
// campaign tag, bulk mail for the complaint brake), combinations of fields as sub-queues of
// their own (policy_combinations, e.g. egress+site), and connectinterval (PolicyRule.interval).
// With none configured, selection is exactly Postfix's.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  admitMessage,
  dispatchAll,
  explainMessage,
  parseSchedulerConfig,
  policyKeysOf,
  reportDelivery,
  setPolicy,
  tick,
} from "../../../durable-objects/core";
import { makeQmgr, type TestRcpt } from "./harness";

function setup(input: object = {}) {
  const { q, src } = makeQmgr({ default_destination_recipient_limit: 2, initial_destination_concurrency: 5, ...input });
  let n = 0;
  const add = (
    id: string,
    nexthop: string,
    opts: { tenant?: string; fields?: { jobid?: string; bulk?: boolean }; egress?: string; site?: string } = {},
    at = 0,
  ) => {
    src.files.set(id, [
      {
        n: n++,
        address: `u${n}@${nexthop}`,
        transport: "smtp",
        nexthop,
        ...(opts.egress ? { egress: opts.egress } : {}),
        ...(opts.site ? { site: opts.site } : {}),
      } as TestRcpt,
    ]);
    admitMessage(
      q,
      {
        id,
        createTime: at,
        rcptTotal: 1,
        tenant: opts.tenant ?? "acme",
        ...(opts.fields ? { fields: opts.fields } : {}),
      },
      at,
    );
  };
  return { q, add };
}

const ids = (entries: { peer: { job: { message: { id: string } } } }[]) =>
  entries.map((e) => e.peer.job.message.id).sort();

describe("policy keys", () => {
  it("are transport, destination, tenant, campaign, bulk, egress and site, then each configured combination present", () => {
    expect(
      policyKeysOf("acme", "smtp", "a.test", "ip1", "yahoo", { jobid: "spring", bulk: true }, [
        ["egress", "site"],
        ["tenant", "jobid"],
        ["egress", "dest"],
      ]),
    ).toEqual([
      "transport:smtp",
      "dest:smtp/a.test",
      "tenant:acme",
      "jobid:acme/spring",
      "bulk:acme",
      "egress:ip1",
      "site:yahoo",
      "egress:ip1+site:yahoo",
      "tenant:acme+jobid:acme/spring",
      "egress:ip1+dest:smtp/a.test",
    ]);
    expect(policyKeysOf("acme", "smtp", "a.test", null, "yahoo", undefined, [["egress", "site"]])).toEqual([
      "transport:smtp",
      "dest:smtp/a.test",
      "tenant:acme",
      "site:yahoo",
    ]);
    // Custom fields: the tags named in policy_tags, in name order.
    expect(policyKeysOf("acme", "smtp", "a.test", null, null, { tags: { region: "eu", class: "gold" } })).toEqual([
      "transport:smtp",
      "dest:smtp/a.test",
      "tenant:acme",
      "tag:acme/class=gold",
      "tag:acme/region=eu",
    ]);
  });

  it("combinations are validated", () => {
    expect(parseSchedulerConfig({ policy_combinations: ["egress+site", "tenant+site+jobid"] })).toMatchObject({
      ok: true,
      config: {
        global: {
          policyCombinations: [
            ["egress", "site"],
            ["tenant", "site", "jobid"],
          ],
        },
      },
    });
    expect(parseSchedulerConfig({ policy_combinations: ["egress"] }).ok).toBe(false);
    expect(parseSchedulerConfig({ policy_combinations: ["egress+planet"] }).ok).toBe(false);
    expect(parseSchedulerConfig({})).toMatchObject({
      ok: true,
      config: { global: { policyCombinations: [], policyTags: [] } },
    });
    expect(parseSchedulerConfig({ policy_tags: ["region"] })).toMatchObject({
      ok: true,
      config: { global: { policyTags: ["region"] } },
    });
    expect(parseSchedulerConfig({ policy_tags: ["has space"] }).ok).toBe(false);
  });
});

describe("message fields", () => {
  it("a suspended campaign or tenant's bulk mail waits; the rest of the tenant's mail goes", () => {
    const { q, add } = setup();
    add("spring", "a.test", { fields: { jobid: "spring" } });
    add("news", "a.test", { fields: { bulk: true } });
    add("receipt", "a.test");
    add("other-tenant", "a.test", { tenant: "globex", fields: { jobid: "spring", bulk: true } });
    setPolicy(q, "jobid:acme/spring", { suspendedUntil: 100 }, 0);
    setPolicy(q, "bulk:acme", { suspendedUntil: 100, label: "complaint_brake" }, 0);
    expect(ids(dispatchAll(q, 0))).toEqual(["other-tenant", "receipt"]);
    expect(explainMessage(q, "news", 0)[0]!.blockedBy).toMatchObject({
      kind: "policy",
      key: "bulk:acme",
      reason: "suspended",
      label: "complaint_brake",
    });
    expect(explainMessage(q, "spring", 0)[0]!.blockedBy).toMatchObject({ key: "jobid:acme/spring" });
    tick(q, 100);
    expect(ids(dispatchAll(q, 100))).toEqual(["news", "spring"]);
  });
});

describe("combined sub-queues", () => {
  it("one IP's jam at a provider does not slow another IP's, nor the same IP elsewhere", () => {
    const { q, add } = setup({ policy_combinations: ["egress+site"] });
    add("ip1-yahoo", "y1.test", { egress: "ip1", site: "yahoo" });
    add("ip2-yahoo", "y2.test", { egress: "ip2", site: "yahoo" });
    add("ip1-google", "g1.test", { egress: "ip1", site: "google" });
    setPolicy(q, "egress:ip1+site:yahoo", { suspendedUntil: 50 }, 0);
    expect(ids(dispatchAll(q, 0))).toEqual(["ip1-google", "ip2-yahoo"]);
    expect(explainMessage(q, "ip1-yahoo", 0)[0]!.blockedBy).toMatchObject({
      key: "egress:ip1+site:yahoo",
      reason: "suspended",
    });
  });
});

describe("combined sub-queues, property", () => {
  it("a suspension on a combined key holds exactly the entries that carry every one of its fields", () => {
    const egresses = ["ip1", "ip2", null] as const;
    const sites = ["yahoo", "google", null] as const;
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom(...egresses), fc.constantFrom(...sites)), { minLength: 1, maxLength: 12 }),
        fc.constantFrom("ip1", "ip2"),
        fc.constantFrom("yahoo", "google"),
        (mix, e, st) => {
          const { q, add } = setup({ policy_combinations: ["egress+site"] });
          mix.forEach(([eg, si], i) =>
            add(`m${i}`, `d${i}.test`, { ...(eg ? { egress: eg } : {}), ...(si ? { site: si } : {}) }),
          );
          setPolicy(q, `egress:${e}+site:${st}`, { suspendedUntil: 100 }, 0);
          const sent = new Set(ids(dispatchAll(q, 0)));
          mix.forEach(([eg, si], i) => expect(sent.has(`m${i}`), `m${i} ${eg}/${si}`).toBe(!(eg === e && si === st)));
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe("remoteip", () => {
  it("the MX address a report names becomes the queue's remoteip key, and the entry counts against it", () => {
    expect(policyKeysOf("acme", "smtp", "a.test", null, null, undefined, [], "192.0.2.7")).toEqual([
      "transport:smtp",
      "dest:smtp/a.test",
      "tenant:acme",
      "remoteip:192.0.2.7",
    ]);
    const { q, add } = setup();
    for (let i = 0; i < 3; i++) add(`r${i}`, "r.test");
    setPolicy(q, "remoteip:192.0.2.7", { interval: 60 }, 0);
    const [e] = dispatchAll(q, 0, 1);
    reportDelivery(q, e!.id, { status: "ok", remoteip: "192.0.2.7" }, 1);
    expect(q.transports.get("smtp")!.queues.get("r.test")!.remoteip).toBe("192.0.2.7");
    expect(dispatchAll(q, 2)).toHaveLength(0);
    expect(explainMessage(q, "r2", 2)[0]!.blockedBy).toMatchObject({ key: "remoteip:192.0.2.7", reason: "interval" });
  });
});

describe("connectinterval", () => {
  it("keeps two selections of a key at least `interval` seconds apart, and says so", () => {
    const { q, add } = setup();
    for (let i = 0; i < 4; i++) add(`m${i}`, "a.test");
    setPolicy(q, "dest:smtp/a.test", { interval: 10 }, 0);
    const first = dispatchAll(q, 0);
    expect(first).toHaveLength(1);
    expect(explainMessage(q, "m3", 1)[0]!.blockedBy).toMatchObject({
      kind: "policy",
      key: "dest:smtp/a.test",
      reason: "interval",
      until: 10,
    });
    tick(q, 9);
    expect(dispatchAll(q, 9)).toHaveLength(0);
    tick(q, 10);
    expect(dispatchAll(q, 10)).toHaveLength(1);
  });

  it("property: whatever the timing, selections with an interval key are at least that far apart", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 30 }),
        fc.array(fc.integer({ min: 0, max: 20 }), { minLength: 1, maxLength: 40 }),
        (interval, gaps) => {
          const { q, add } = setup();
          for (let i = 0; i < 30; i++) add(`m${i}`, "a.test");
          setPolicy(q, "dest:smtp/a.test", { interval }, 0);
          let t = 0;
          const times: number[] = [];
          for (const gap of gaps) {
            t += gap;
            tick(q, t);
            for (const e of dispatchAll(q, t)) {
              times.push(t);
              reportDelivery(q, e.id, { status: "ok" }, t);
            }
          }
          for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(interval);
        },
      ),
      { numRuns: 200 },
    );
  });
});
