import { describe, expect, it } from "vitest";
import {
  activeSuspensions,
  mergeQshape,
  parseSuspensionKey,
  percentileRanks,
  resumeRule,
  stateTable,
  suspendRule,
  suspensionKey,
  throughputSeries,
} from "../../../worker/dashboard/core/operator-views";

describe("mergeQshape", () => {
  it("puts one TOTAL row first with the column sums of every transport's rows, then the rows largest first", () => {
    const got = mergeQshape(
      [
        {
          transport: "smtp",
          qshape: [
            { destination: "TOTAL", total: 3, buckets: [2, 1, 0] },
            { destination: "a.example", total: 2, buckets: [1, 1, 0] },
            { destination: "b.example", total: 1, buckets: [1, 0, 0] },
          ],
        },
        {
          transport: "bulk",
          qshape: [
            { destination: "TOTAL", total: 4, buckets: [0, 0, 4] },
            { destination: "a.example", total: 4, buckets: [0, 0, 4] },
          ],
        },
      ],
      3,
    );
    expect(got).toEqual([
      { transport: "", destination: "TOTAL", total: 7, buckets: [2, 1, 4] },
      { transport: "bulk", destination: "a.example", total: 4, buckets: [0, 0, 4] },
      { transport: "smtp", destination: "a.example", total: 2, buckets: [1, 1, 0] },
      { transport: "smtp", destination: "b.example", total: 1, buckets: [1, 0, 0] },
    ]);
  });

  it("answers a zero TOTAL row for no transports", () => {
    expect(mergeQshape([], 2)).toEqual([{ transport: "", destination: "TOTAL", total: 0, buckets: [0, 0] }]);
  });
});

describe("percentileRanks", () => {
  it.each([
    { name: "empty", n: 0, ps: [50], want: [] },
    {
      name: "one value",
      n: 1,
      ps: [50, 99],
      want: [
        { p: 50, rank: 0 },
        { p: 99, rank: 0 },
      ],
    },
    {
      name: "nearest rank of 10",
      n: 10,
      ps: [50, 90, 95, 99, 100],
      want: [
        { p: 50, rank: 4 },
        { p: 90, rank: 8 },
        { p: 95, rank: 9 },
        { p: 99, rank: 9 },
        { p: 100, rank: 9 },
      ],
    },
    { name: "p0 is the smallest", n: 5, ps: [0], want: [{ p: 0, rank: 0 }] },
  ])("$name", ({ n, ps, want }) => {
    expect(percentileRanks(n, ps)).toEqual(want);
  });
});

describe("throughputSeries", () => {
  it("zero-fills every minute of the window and counts outcome types only", () => {
    const got = throughputSeries(
      [
        { minute: 100, type: "email.delivered", n: 3 },
        { minute: 101, type: "email.bounced", n: 1 },
        { minute: 101, type: "email.delivery_delayed", n: 2 },
        { minute: 101, type: "email.accepted", n: 9 },
        { minute: 99, type: "email.delivered", n: 5 },
        { minute: 102, type: "email.failed", n: 1 },
      ],
      100,
      102,
    );
    expect(got).toEqual([
      { at: 6_000_000, delivered: 3, bounced: 0, deferred: 0, failed: 0 },
      { at: 6_060_000, delivered: 0, bounced: 1, deferred: 2, failed: 0 },
      { at: 6_120_000, delivered: 0, bounced: 0, deferred: 0, failed: 1 },
    ]);
  });
});

describe("suspension keys and rules", () => {
  it.each([
    { name: "tenant", target: "tenant" as const, n: "acme", t: "smtp", want: "tenant:acme" },
    { name: "transport", target: "transport" as const, n: "bulk", t: "smtp", want: "transport:bulk" },
    {
      name: "destination",
      target: "destination" as const,
      n: "[10.0.0.1]:25",
      t: "smtp",
      want: "dest:smtp/[10.0.0.1]:25",
    },
    { name: "destination without transport", target: "destination" as const, n: "x.example", t: "", want: null },
    { name: "site", target: "site" as const, n: "yahoodns.net", t: "smtp", want: "site:yahoodns.net" },
    { name: "egress", target: "egress" as const, n: "eu-1", t: "smtp", want: "egress:eu-1" },
    { name: "a name with a space", target: "tenant" as const, n: "a b", t: "smtp", want: null },
    { name: "an empty name", target: "tenant" as const, n: "", t: "smtp", want: null },
  ])("names the policy key of a $name", ({ target, n, t, want }) => {
    expect(suspensionKey(target, n, t)).toBe(want);
    if (want !== null) expect(parseSuspensionKey(want)).toMatchObject({ target, name: n });
  });

  it("takes site and egress keys (a reply rule suspends a site), not malformed ones", () => {
    expect(parseSuspensionKey("egress:eu")).toEqual({ target: "egress", transport: null, name: "eu" });
    expect(parseSuspensionKey("site:mx.example")).toEqual({ target: "site", transport: null, name: "mx.example" });
    expect(parseSuspensionKey("site:")).toBeNull();
    expect(parseSuspensionKey("dest:noslash")).toBeNull();
    expect(parseSuspensionKey("tenant:")).toBeNull();
  });

  it("keeps a rule's caps when suspending and resuming, and clears an otherwise empty rule", () => {
    expect(suspendRule({ concurrency: 2 }, 500)).toEqual({ concurrency: 2, suspendedUntil: 500 });
    expect(suspendRule(undefined, 500)).toEqual({ suspendedUntil: 500 });
    expect(resumeRule({ concurrency: 2, suspendedUntil: 500 })).toEqual({ concurrency: 2 });
    expect(resumeRule({ suspendedUntil: 500 })).toBeNull();
    expect(resumeRule(undefined)).toBeNull();
    // An operator's suspension replaces a reply rule's label; resuming drops it.
    expect(suspendRule({ suspendedUntil: 400, label: "reply_rule:yahoo-tss04" }, 500)).toEqual({ suspendedUntil: 500 });
    expect(resumeRule({ concurrency: 2, suspendedUntil: 500, label: "reply_rule:yahoo-tss04" })).toEqual({
      concurrency: 2,
    });
  });

  it("lists suspensions in force once per key, with every transport holding it", () => {
    const got = activeSuspensions(
      [
        { transport: "bulk", key: "tenant:acme", rule: { suspendedUntil: 200 } },
        { transport: "smtp", key: "tenant:acme", rule: { suspendedUntil: 300 } },
        { transport: "smtp", key: "dest:smtp/a.example", rule: { suspendedUntil: 100 } },
        { transport: "smtp", key: "tenant:capped", rule: { concurrency: 1 } },
        { transport: "smtp", key: "egress:eu", rule: { suspendedUntil: 900 } },
      ],
      100,
    );
    expect(got).toEqual([
      {
        target: "egress",
        transport: null,
        name: "eu",
        key: "egress:eu",
        until: 900,
        transports: ["smtp"],
        setBy: null,
      },
      {
        target: "tenant",
        transport: null,
        name: "acme",
        key: "tenant:acme",
        until: 300,
        transports: ["bulk", "smtp"],
        setBy: null,
      },
    ]);
    expect(
      activeSuspensions(
        [
          {
            transport: "smtp",
            key: "dest:smtp/mx.test",
            rule: { suspendedUntil: 900, label: "reply_rule:yahoo-tss04" },
          },
        ],
        100,
      )[0]!.setBy,
    ).toBe("reply_rule:yahoo-tss04");
  });
});

describe("stateTable", () => {
  it("groups counts by state, transport and destination, largest first, capped", () => {
    const got = stateTable(
      [
        { status: "delivered", transport: "smtp", nexthop: "a.example", n: 5 },
        { status: "deferred", transport: "smtp", nexthop: "a.example", n: 1 },
        { status: "delivered", transport: "smtp", nexthop: "b.example", n: 2 },
        { status: "incoming", transport: null, nexthop: null, n: 3 },
      ],
      2,
    );
    expect(got.total).toBe(11);
    expect(got.by_state).toEqual({ delivered: 7, deferred: 1, incoming: 3 });
    expect(got.by_transport).toEqual([
      { transport: "smtp", total: 8, states: { delivered: 7, deferred: 1 } },
      { transport: null, total: 3, states: { incoming: 3 } },
    ]);
    expect(got.by_destination).toEqual([
      { transport: "smtp", destination: "a.example", total: 6, states: { delivered: 5, deferred: 1 } },
      { transport: null, destination: null, total: 3, states: { incoming: 3 } },
    ]);
  });
});
