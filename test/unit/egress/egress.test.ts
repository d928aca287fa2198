// Egress pools and health (worker/egress/core/): configuration, choice, suspension and return.
import { describe, expect, it } from "vitest";
import { parseEgress, parseEgressPools, poolFor } from "../../../worker/egress/core/pools";
import {
  HEALTHY,
  healthFailure,
  observe,
  orderMembers,
  usable,
  type EgressHealth,
} from "../../../worker/egress/core/health";

const cfg = { failures: 3, windowSec: 60, suspendSec: 300 };

describe("EGRESS_POOLS", () => {
  it("reads SOCKS5 bridges, smarthosts, Email Service and direct, and rules per tenant, domain and provider", () => {
    const res = parseEgressPools(
      JSON.stringify({
        pools: {
          dedicated: ["socks5://10.0.0.1:1080", "smtp://[relay.example.net]:587"],
          shared: ["direct", "cf-email"],
        },
        rules: [
          { tenant: "Acme", pool: "dedicated" },
          { provider: "google", pool: "shared" },
        ],
        default: "shared",
      }),
    );
    expect(res.ok).toBe(true);
    const pools = res.ok ? res.pools! : null!;
    expect(pools.pools.get("dedicated")!.map((e) => e.id)).toEqual(["10.0.0.1:1080", "smtp:[relay.example.net]:587"]);
    expect(poolFor(pools, { tenant: "acme" })!.name).toBe("dedicated");
    expect(poolFor(pools, { tenant: "other", provider: "google" })!.name).toBe("shared");
    expect(poolFor(pools, { tenant: "other" })!.name).toBe("shared");
    expect(parseEgressPools("")).toEqual({ ok: true, pools: null });
  });

  it("names every problem", () => {
    const res = parseEgressPools(
      JSON.stringify({
        pools: { a: [], b: ["ftp://x:1", "direct", "direct"] },
        rules: [{ pool: "a" }, { tenant: "t", pool: "zz" }],
        default: "nope",
      }),
    );
    expect(res.ok).toBe(false);
    expect(!res.ok && res.errors).toEqual([
      "pools.a: a non-empty list of egresses",
      'pools.b[0]: "socks5://host:port", "smtp://[host]:port", "cf-email" or "direct"',
      "pools.b: an egress appears twice",
      'rules[0]: {"tenant"|"domain"|"provider": "…", "pool": "…"}',
      'rules[1]: no pool "zz"',
      'default: no pool "nope"',
    ]);
    expect(parseEgress("socks5://[::1]:1080")).toEqual({ id: "::1:1080", kind: "socks5", host: "::1", port: 1080 });
    expect(parseEgress("socks5://h:0")).toBeNull();
  });
});

describe("health", () => {
  it("counts connection and TLS failures, 421s and block-list replies against the egress, not refusals of the mail", () => {
    expect(healthFailure({ site: { dsnStatus: "4.4.1", reason: "connect to mx: refused" }, replies: [] })).toMatch(
      /connect/,
    );
    expect(healthFailure({ site: { dsnStatus: "4.7.5", reason: "TLS handshake failed" }, replies: [] })).toMatch(/TLS/);
    expect(healthFailure({ site: null, replies: [{ code: 421, text: "4.7.0 try later", source: "remote" }] })).toMatch(
      /^421/,
    );
    expect(
      healthFailure({
        site: null,
        replies: [
          { code: 554, text: "5.7.1 Service unavailable; client host blocked using Spamhaus", source: "remote" },
        ],
      }),
    ).toMatch(/Spamhaus/);
    expect(
      healthFailure({ site: null, replies: [{ code: 550, text: "5.1.1 user unknown", source: "remote" }] }),
    ).toBeNull();
    expect(healthFailure({ site: null, replies: [{ code: 250, text: "ok", source: "remote" }] })).toBeNull();
  });

  it("suspends after `failures` failures within the window, offers it again after the suspension, and a success brings it back", () => {
    let h: EgressHealth = HEALTHY;
    h = observe(h, "x", 100, cfg).health;
    h = observe(h, "x", 110, cfg).health;
    const third = observe(h, "x", 120, cfg);
    expect(third.event).toEqual({ kind: "suspended", reason: "x", until: 420 });
    h = third.health;
    expect(usable(h, 419)).toBe("down");
    expect(usable(h, 420)).toBe("probe");
    expect(observe(h, null, 300, cfg).event).toBeNull(); // a delivery started before the suspension
    const back = observe(h, null, 430, cfg);
    expect(back).toEqual({ health: { ...HEALTHY, failures: [] }, event: { kind: "resumed" } });
  });

  it("forgets failures older than the window, and a relapse on probation doubles the suspension", () => {
    let h: EgressHealth = HEALTHY;
    for (const t of [0, 10, 100]) h = observe(h, "x", t, cfg).health;
    expect(h.state).toBe("healthy");
    for (const t of [110, 120]) h = observe(h, "x", t, cfg).health;
    expect(h).toMatchObject({ state: "suspended", suspendedUntil: 420, strikes: 0 });
    const relapse = observe(h, "y", 420, cfg);
    expect(relapse.event).toEqual({ kind: "suspended", reason: "y", until: 420 + 600 });
    expect(relapse.health.strikes).toBe(1);
  });

  it("offers the members in the pool's order without the suspended ones", () => {
    const members = [{ id: "a" }, { id: "b" }, { id: "c" }];
    const healths = new Map<string, EgressHealth>([
      ["a", { ...HEALTHY, state: "suspended", suspendedUntil: 500 }],
      ["c", { ...HEALTHY, state: "suspended", suspendedUntil: 100 }],
    ]);
    expect(orderMembers(members, healths, 200).map((m) => m.id)).toEqual(["b", "c"]);
  });
});
