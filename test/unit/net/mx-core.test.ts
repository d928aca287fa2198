// Pure MX resolution (worker/net/core/mx.ts, doh.ts) driven by DoH JSON fixtures: ordering,
// ties, null MX, NXDOMAIN, SERVFAIL, A/AAAA fallback, CNAMEs, names, site keys, TTLs.

import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { normalizeDnsName, parseDohJson, selectAnswers, negativeTtlSec } from "../../../worker/net/core/doh";
import {
  advanceMxLookup,
  createMxConfig,
  startMxLookup,
  type DohEvent,
  type MxResolution,
} from "../../../worker/net/core/mx";
import { orderMxHosts, parseMxData, siteKey } from "../../../worker/net/core/mx-hosts";

const ANSWERS = JSON.parse(
  readFileSync(new URL("../../fixtures/net/doh-answers.json", import.meta.url), "utf8"),
) as Record<string, unknown>;
const NOW = 1_700_000_000_000;
const cfg = createMxConfig();

/** Runs a lookup against the fixtures; `override` replaces the answer to a query. */
function resolve(domain: string, opts: { seed?: number; override?: Record<string, DohEvent> } = {}) {
  const queries: string[] = [];
  let step = startMxLookup({ domain, tieSeed: opts.seed ?? null }, NOW, cfg);
  while (step.kind === "query") {
    const key = `${step.name} ${step.type}`;
    queries.push(key);
    const event = opts.override?.[key] ?? fixture(key);
    step = advanceMxLookup(step.state, event, NOW, cfg);
  }
  return { result: step.result, queries };
}

function fixture(key: string): DohEvent {
  const body = ANSWERS[key];
  if (body === undefined) throw new Error(`no fixture for query ${key}`);
  return { kind: "answer", body };
}

const hostsOf = (r: MxResolution) => (r.kind === "hosts" ? r.hosts.map((h) => `${h.preference} ${h.host}`) : r.kind);

describe("MX resolution over DoH JSON fixtures", () => {
  const table: {
    name: string;
    domain: string;
    want: Partial<MxResolution> & { hosts?: unknown };
    queries: string[];
  }[] = [
    {
      name: "orders several MX by preference",
      domain: "several.example",
      want: { kind: "hosts", implicit: false, site: "backup.other.example,mx1.several.example,mx2.several.example" },
      queries: ["several.example MX"],
    },
    {
      name: "null MX bounces 5.1.10",
      domain: "nullmx.example",
      want: { kind: "bounce", code: 556, enhanced: "5.1.10" },
      queries: ["nullmx.example MX"],
    },
    {
      name: "NXDOMAIN bounces 5.1.2",
      domain: "missing.example",
      want: { kind: "bounce", code: 550, enhanced: "5.1.2" },
      queries: ["missing.example MX"],
    },
    {
      name: "SERVFAIL defers 4.4.3",
      domain: "broken.example",
      want: { kind: "defer", code: 451, enhanced: "4.4.3" },
      queries: ["broken.example MX"],
    },
    {
      name: "REFUSED defers 4.4.3",
      domain: "refused.example",
      want: { kind: "defer", enhanced: "4.4.3" },
      queries: ["refused.example MX"],
    },
    {
      name: "falls back to A when there is no MX",
      domain: "aonly.example",
      want: { kind: "hosts", implicit: true, site: "aonly.example" },
      queries: ["aonly.example MX", "aonly.example A"],
    },
    {
      name: "falls back to AAAA when there is no MX and no A",
      domain: "v6only.example",
      want: { kind: "hosts", implicit: true, site: "v6only.example" },
      queries: ["v6only.example MX", "v6only.example A", "v6only.example AAAA"],
    },
    {
      name: "bounces 5.4.4 with no MX, A or AAAA",
      domain: "nothing.example",
      want: { kind: "bounce", code: 554, enhanced: "5.4.4" },
      queries: ["nothing.example MX", "nothing.example A", "nothing.example AAAA"],
    },
    {
      name: "follows a CNAME on the domain to the MX records of its target",
      domain: "cname-domain.example",
      want: { kind: "hosts", site: "mx.hosting.example" },
      queries: ["cname-domain.example MX"],
    },
    {
      name: "defers on a CNAME loop",
      domain: "cname-loop.example",
      want: { kind: "defer", enhanced: "4.4.3" },
      queries: ["cname-loop.example MX"],
    },
    {
      name: "keeps an MX host that is an alias as published (TLS is verified against it)",
      domain: "alias-mx.example",
      want: { kind: "hosts", site: "mail.alias-mx.example" },
      queries: ["alias-mx.example MX"],
    },
    {
      name: "lower-cases names and drops trailing dots",
      domain: "UPPER.Example.",
      want: { kind: "hosts", domain: "upper.example", site: "mx1.upper.example,mx2.upper.example" },
      queries: ["upper.example MX"],
    },
    {
      name: "passes punycode names through",
      domain: "xn--bcher-kva.example",
      want: { kind: "hosts", site: "mx.xn--bcher-kva.example" },
      queries: ["xn--bcher-kva.example MX"],
    },
    {
      name: "defers when no MX record is usable",
      domain: "garbage.example",
      want: { kind: "defer", enhanced: "4.4.3" },
      queries: ["garbage.example MX"],
    },
    {
      name: "ignores a null MX next to real MX records",
      domain: "mixednull.example",
      want: { kind: "hosts", site: "mx.mixednull.example" },
      queries: ["mixednull.example MX"],
    },
    {
      name: "keeps the best preference of a host listed twice",
      domain: "dup.example",
      want: { kind: "hosts", site: "mx.dup.example" },
      queries: ["dup.example MX"],
    },
  ];

  it.each(table)("$name", ({ domain, want, queries }) => {
    const got = resolve(domain);
    expect(got.result).toMatchObject(want);
    expect(got.queries).toEqual(queries);
  });

  it("gives hosts in ascending preference", () => {
    expect(hostsOf(resolve("several.example").result)).toEqual([
      "10 mx1.several.example",
      "20 mx2.several.example",
      "30 backup.other.example",
    ]);
    expect(hostsOf(resolve("UPPER.Example.").result)).toEqual(["10 mx1.upper.example", "20 mx2.upper.example"]);
    expect(hostsOf(resolve("dup.example").result)).toEqual(["10 mx.dup.example"]);
    expect(hostsOf(resolve("aonly.example").result)).toEqual(["0 aonly.example"]);
  });

  it("puts equal preferences in name order without a seed", () => {
    expect(hostsOf(resolve("ties.example").result)).toEqual([
      "5 first.ties.example",
      "10 a.ties.example",
      "10 b.ties.example",
      "10 c.ties.example",
      "10 d.ties.example",
    ]);
  });

  it("shuffles equal preferences by seed, deterministically, within their group only", () => {
    const orders = new Set<string>();
    for (let seed = 0; seed < 40; seed++) {
      const a = hostsOf(resolve("ties.example", { seed }).result) as string[];
      expect(hostsOf(resolve("ties.example", { seed }).result)).toEqual(a);
      expect(a[0]).toBe("5 first.ties.example");
      expect([...a].sort()).toEqual([...(hostsOf(resolve("ties.example").result) as string[])].sort());
      orders.add(a.join("|"));
    }
    expect(orders.size).toBeGreaterThan(5);
  });

  it("names the bounce and deferral texts after Postfix", () => {
    expect(resolve("missing.example").result).toMatchObject({
      text: "Host or domain name not found. Name service error for name=missing.example type=MX: Host not found",
    });
    expect(resolve("broken.example").result).toMatchObject({
      text: "Name service error for name=broken.example type=MX: SERVFAIL, try again",
    });
    expect(resolve("nullmx.example").result).toMatchObject({
      text: "Domain nullmx.example does not accept mail (null MX)",
    });
  });

  it("defers when the query itself failed or the body is not DoH JSON", () => {
    const timeout = resolve("several.example", {
      override: { "several.example MX": { kind: "failed", reason: "resolver timed out after 5 ms" } },
    });
    expect(timeout.result).toMatchObject({
      kind: "defer",
      enhanced: "4.4.3",
      text: expect.stringContaining("timed out"),
    });
    const notDoh = resolve("several.example", {
      override: { "several.example MX": { kind: "answer", body: { Answer: [] } } },
    });
    expect(notDoh.result).toMatchObject({ kind: "defer", text: expect.stringContaining("no numeric Status") });
    const aFails = resolve("aonly.example", {
      override: { "aonly.example A": { kind: "answer", body: { Status: 2 } } },
    });
    expect(aFails.result).toMatchObject({ kind: "defer", text: expect.stringContaining("type=A") });
  });

  it("resolves address literals without DNS and bounces bad domains without DNS", () => {
    expect(resolve("[192.0.2.7]")).toMatchObject({
      result: { kind: "hosts", hosts: [{ host: "192.0.2.7", preference: 0 }] },
      queries: [],
    });
    expect(resolve("[IPv6:2001:DB8::7]")).toMatchObject({
      result: { kind: "hosts", site: "2001:db8::7" },
      queries: [],
    });
    for (const bad of [
      "",
      "a..b",
      "bad domain.example",
      "bücher.example",
      `${"a".repeat(64)}.example`,
      "[300.1.1.1]",
    ]) {
      expect(resolve(bad)).toMatchObject({ result: { kind: "bounce", enhanced: "5.1.2" }, queries: [] });
    }
  });
});

describe("cache expiry from TTLs", () => {
  const expiresIn = (r: MxResolution) => (r.expiresAtMs - NOW) / 1000;

  it("uses the smallest TTL of the records used, CNAMEs included", () => {
    expect(expiresIn(resolve("several.example").result)).toBe(1800);
    expect(expiresIn(resolve("cname-domain.example").result)).toBe(120);
  });

  it("clamps to minTtlSec and maxTtlSec", () => {
    expect(expiresIn(resolve("shortttl.example").result)).toBe(60);
    const big = advanceMxLookup(
      { domain: "x.example", query: "MX", tieSeed: null, ttlSec: null },
      {
        kind: "answer",
        body: { Status: 0, Answer: [{ name: "x.example", type: 15, TTL: 10_000_000, data: "1 mx.x.example" }] },
      },
      NOW,
      cfg,
    );
    expect(big.kind === "done" && expiresIn(big.result)).toBe(86_400);
  });

  it("bounds an implicit MX by the MX NODATA's negative TTL", () => {
    expect(expiresIn(resolve("aonly.example").result)).toBe(600);
    expect(expiresIn(resolve("v6only.example").result)).toBe(600);
  });

  it("uses the SOA negative TTL for NXDOMAIN and transientTtlSec for deferrals", () => {
    expect(expiresIn(resolve("missing.example").result)).toBe(120);
    expect(expiresIn(resolve("nothing.example").result)).toBe(700);
    expect(expiresIn(resolve("broken.example").result)).toBe(30);
  });

  it("falls back to defaults for bad config values", () => {
    expect(createMxConfig({ minTtlSec: -1, maxTtlSec: Number.NaN, transientTtlSec: 5 })).toEqual({
      minTtlSec: 60,
      maxTtlSec: 86_400,
      negativeTtlSec: 300,
      transientTtlSec: 5,
    });
    expect(createMxConfig({ minTtlSec: 100, maxTtlSec: 50 })).toMatchObject({ minTtlSec: 50, maxTtlSec: 50 });
  });
});

describe("DoH JSON and MX data parsing", () => {
  it.each([
    ["10 mx.example.", { preference: 10, exchange: "mx.example" }],
    ["0 .", { preference: 0, exchange: "" }],
    ["  65535   MX.Example.COM  ", { preference: 65535, exchange: "mx.example.com" }],
    ["65536 mx.example.", null],
    ["-1 mx.example.", null],
    ["mx.example.", null],
    ["10", null],
    ["10 a b", null],
  ])("parseMxData(%j)", (data, want) => {
    expect(parseMxData(data)).toEqual(want);
  });

  it.each([
    [null, "not a JSON object"],
    [[], "not a JSON object"],
    [{ Status: "0" }, "no numeric Status"],
    [{ Status: 0, Answer: {} }, "Answer is not an array"],
    [{ Status: 0, Answer: [{ name: "a", type: 15, TTL: "1", data: "1 b" }] }, "record without"],
    [{ Status: 0, Authority: [null] }, "Authority has a record without"],
  ])("rejects %j", (body, error) => {
    expect(parseDohJson(body)).toEqual({ error: expect.stringContaining(error) });
  });

  it("reads the RFC 2308 negative TTL as min(SOA TTL, MINIMUM)", () => {
    const msg = parseDohJson(ANSWERS["missing.example MX"]);
    expect("error" in msg ? null : negativeTtlSec(msg)).toBe(120);
    expect(negativeTtlSec({ status: 0, answers: [], authority: [] })).toBeNull();
  });

  it("follows CNAME chains case-insensitively", () => {
    const msg = parseDohJson({
      Status: 0,
      Answer: [
        { name: "A.example.", type: 5, TTL: 50, data: "B.example." },
        { name: "b.example", type: 5, TTL: 40, data: "c.example." },
        { name: "C.EXAMPLE.", type: 1, TTL: 300, data: "192.0.2.1" },
      ],
    });
    if ("error" in msg) throw new Error(msg.error);
    expect(selectAnswers(msg, "a.example", 1)).toMatchObject({
      owner: "c.example",
      chainTtl: 40,
      records: [{ data: "192.0.2.1" }],
      error: null,
    });
    expect(normalizeDnsName(" Foo.Example. ")).toBe("foo.example");
    expect(normalizeDnsName(".")).toBe("");
  });
});

describe("site key and ordering properties", () => {
  const host = fc.stringMatching(/^[a-z][a-z0-9-]{0,8}\.example$/);
  const records = fc.array(fc.record({ preference: fc.integer({ min: 0, max: 30 }), exchange: host }), {
    minLength: 1,
    maxLength: 12,
  });

  it("site key and order depend on the record set and seed only, not the answer order", () => {
    fc.assert(
      fc.property(records, fc.option(fc.integer()), fc.integer(), (rs, seed, rot) => {
        const shuffled = [...rs.slice(rot % rs.length), ...rs.slice(0, rot % rs.length)].reverse();
        const a = orderMxHosts(rs, seed);
        expect(orderMxHosts(shuffled, seed)).toEqual(a);
        expect(siteKey(a)).toBe(siteKey(orderMxHosts(rs, null)));
        expect(siteKey(a)).toBe([...new Set(rs.map((r) => r.exchange))].sort().join(","));
        for (let i = 1; i < a.length; i++) expect(a[i - 1]!.preference).toBeLessThanOrEqual(a[i]!.preference);
      }),
    );
  });

  it("site key is the same for answers that differ only in preferences and order", () => {
    const one = resolve("several.example").result;
    const other = advanceMxLookup(
      { domain: "several.example", query: "MX", tieSeed: 7, ttlSec: null },
      {
        kind: "answer",
        body: {
          Status: 0,
          Answer: ["5 BACKUP.other.example.", "5 mx2.several.example", "50 mx1.several.example."].map((data) => ({
            name: "several.example.",
            type: 15,
            TTL: 60,
            data,
          })),
        },
      },
      NOW,
      cfg,
    );
    expect(other.kind === "done" && other.result.kind === "hosts" && other.result.site).toBe(
      one.kind === "hosts" && one.site,
    );
  });
});
