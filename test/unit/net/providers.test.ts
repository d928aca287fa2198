// Provider rules (issue 13, item 2): matching MX hosts by suffix, validation, the shipped rules
// (and that the migration seeds exactly them), and what the Transport DO is told.
import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  DEFAULT_PROVIDER_RULES,
  matchProvider,
  parseProviderRule,
  shapeOf,
  suffixMatches,
} from "../../../worker/net/core/providers";

describe("matching", () => {
  it("the shipped rules take the big providers' real MX hosts, and nothing else", () => {
    const cases: [string[], string | null][] = [
      [["gmail-smtp-in.l.google.com", "alt1.gmail-smtp-in.l.google.com"], "google"],
      [["aspmx.l.google.com."], "google"],
      [["ASPMX2.GOOGLEMAIL.COM"], "google"],
      [["mta5.am0.yahoodns.net", "mta6.am0.yahoodns.net"], "yahoo"],
      [["outlook-com.olc.protection.outlook.com"], "microsoft"],
      [["contoso-com.mail.protection.outlook.com"], "microsoft"],
      [["contoso-com.o-v1.mx.microsoft"], "microsoft"],
      [["mx01.mail.icloud.com", "mx02.mail.icloud.com"], "apple"],
      [["mx.example.com"], null],
      [["google.com.evil.example"], null],
      [["notgoogle.com"], null],
    ];
    for (const [hosts, want] of cases)
      expect(matchProvider(DEFAULT_PROVIDER_RULES, hosts)?.rule.name ?? null, hosts.join(",")).toBe(want);
  });

  it("a suffix covers the host it names without its dot and every host under it, never a longer label", () => {
    expect(suffixMatches(".google.com", "google.com")).toBe(true);
    expect(suffixMatches(".google.com", "a.b.google.com")).toBe(true);
    expect(suffixMatches(".google.com", "evilgoogle.com")).toBe(false);
    expect(suffixMatches("127.0.0.1", "127.0.0.1")).toBe(true);
  });

  it("reports the host (preference order first) and suffix that matched", () => {
    expect(
      matchProvider(DEFAULT_PROVIDER_RULES, ["mx.example.com", "alt.mta.yahoodns.net", "mx01.mail.icloud.com"]),
    ).toMatchObject({ rule: { name: "yahoo" }, host: "alt.mta.yahoodns.net", suffix: ".yahoodns.net" });
  });

  it("property: a host under a rule's suffix matches that rule; one under none matches nothing", () => {
    const label = fc.stringMatching(/^[a-z0-9]{1,10}$/);
    fc.assert(
      fc.property(
        fc.array(label, { minLength: 0, maxLength: 3 }),
        fc.constantFrom(...DEFAULT_PROVIDER_RULES),
        fc.nat(),
        (labels, rule, k) => {
          const suffix = rule.mx[k % rule.mx.length]!;
          const host = [...labels, suffix.replace(/^\./, "")].join(".");
          expect(matchProvider(DEFAULT_PROVIDER_RULES, [host])?.rule.name).toBe(rule.name);
          expect(matchProvider(DEFAULT_PROVIDER_RULES, [`${host}x.invalid`])).toBeNull();
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("the shipped rules", () => {
  it("are valid, say where each value comes from, and are exactly what migrations 0015 and 0031 seed", () => {
    for (const r of DEFAULT_PROVIDER_RULES) {
      expect(parseProviderRule(r), r.name).toEqual({ ok: true, rule: r });
      for (const field of Object.keys(r).filter((k) => k !== "name" && k !== "sources"))
        expect(r.sources?.[field], `${r.name}.${field}`).toBeTruthy();
    }
    const sql = readFileSync(new URL("../../../migrations/0015_provider_rules.sql", import.meta.url), "utf8");
    const seeded = new Map(
      [...sql.matchAll(/VALUES \('([^']+)', '((?:[^']|'')*)', 0\);/g)].map((m) => [
        m[1],
        JSON.parse(m[2]!.replace(/''/g, "'")) as unknown,
      ]),
    );
    const update = readFileSync(new URL("../../../migrations/0031_compliance.sql", import.meta.url), "utf8");
    for (const m of update.matchAll(/SET rule = '((?:[^']|'')*)', updated_at = 0 WHERE name = '([^']+)'/g))
      seeded.set(m[2], JSON.parse(m[1]!.replace(/''/g, "'")));
    expect([...seeded].map(([name, rule]) => ({ name, rule }))).toEqual(
      DEFAULT_PROVIDER_RULES.map((r) => ({ name: r.name, rule: r })),
    );
  });

  it("tell the Transport DO the name, window bounds and rate only", () => {
    expect(shapeOf(DEFAULT_PROVIDER_RULES.find((r) => r.name === "google")!)).toEqual({
      name: "google",
      initial: 5,
      limit: 5,
    });
    expect(shapeOf({ name: "x", mx: [".x.test"], rate: "300/m", messages_per_session: 3 })).toEqual({
      name: "x",
      rate: "300/m",
    });
  });
});

describe("validation", () => {
  it("names every problem", () => {
    const bad = parseProviderRule({
      name: "Has Space",
      mx: [],
      window: { initial: 0, limit: 2, extra: 1 },
      rate: "lots",
      require_tls: "yes",
      color: "red",
      sources: { nope: 1 },
    });
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.errors.map((e) => e.split(":")[0])).toEqual([
      "color",
      "name",
      "mx",
      "window",
      "rate",
      "require_tls",
      "sources",
    ]);
    expect(parseProviderRule({ name: "w", mx: [".w.test"], window: { initial: 9, limit: 3 } })).toMatchObject({
      ok: false,
      errors: ["window: initial above limit"],
    });
    expect(
      parseProviderRule({
        name: "ok",
        mx: [".OK.Test"],
        recipients_per_message: 100,
        messages_per_session: 10,
        rate: "1/2h",
      }),
    ).toMatchObject({ ok: true, rule: { mx: [".ok.test"] } });
    expect(parseProviderRule(null).ok).toBe(false);
  });
});
