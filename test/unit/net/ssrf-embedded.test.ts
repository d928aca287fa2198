/**
 * IPv6 forms that carry an IPv4 address (issue 12's probe: NAT64 local-use and IPv4-translated
 * forms embedding private addresses were accepted), and the send-time check of the addresses a
 * webhook host name resolves to.
 */
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { classifyIp, formatIpv4, parseIpv4Loose } from "../../../worker/net/core/ip-address";
import { checkEndpointUrl } from "../../../worker/net/core/ssrf";
import { clearResolvedCache, resolvedTarget } from "../../../worker/net/fetch-guard";

const hex = (v4: number) => [Math.floor(v4 / 65536), v4 % 65536].map((g) => g.toString(16)).join(":");

/** Every IPv6 spelling of `v4` that a translator or the stack would turn back into it. */
function embeddings(v4: number): string[] {
  const dotted = formatIpv4(v4);
  return [
    `::ffff:${dotted}`,
    `::ffff:${hex(v4)}`, // IPv4-mapped
    `::ffff:0:${dotted}`,
    `::ffff:0:${hex(v4)}`, // IPv4-translated (SIIT)
    `64:ff9b::${dotted}`,
    `64:ff9b::${hex(v4)}`, // NAT64 well-known prefix
    `2002:${hex(v4)}::1`, // 6to4
  ];
}

const PRIVATE = ["10.0.0.1", "127.0.0.1", "169.254.169.254", "172.16.5.4", "192.168.1.1", "100.64.0.1", "0.0.0.0"];

describe("IPv6 addresses that embed an IPv4 address", () => {
  it.each(PRIVATE)("every embedding of %s is refused, as the address itself is", (ip) => {
    for (const form of embeddings(parseIpv4Loose(ip)!)) {
      expect(classifyIp(form)?.range, form).not.toBe("public");
      expect(checkEndpointUrl(new URL(`https://[${form}]/`)).ok, form).toBe(false);
    }
  });

  it("the local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215) is refused whatever it carries, wherever", () => {
    for (const form of ["64:ff9b:1::a00:1", "64:ff9b:1:a00:1::", "64:ff9b:1:ffff::7f00:1", "64:ff9b:1::808:808"]) {
      expect(classifyIp(form)?.range, form).not.toBe("public");
    }
  });

  it("property: an embedded address is judged exactly as the IPv4 address it carries", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 32 - 1 }), (v4) => {
        const own = classifyIp(formatIpv4(v4))!.range;
        for (const form of embeddings(v4)) expect(classifyIp(form)!.range === "public", form).toBe(own === "public");
      }),
      { numRuns: 2000 },
    );
  });
});

/** A DoH JSON resolver answering from a table: name → A/AAAA records (or a failure). */
function resolver(table: Record<string, { A?: string[]; AAAA?: string[]; fail?: boolean }>) {
  const calls: string[] = [];
  const fetchFn = (async (input: RequestInfo | URL) => {
    const url = new URL(String(input));
    const name = url.searchParams.get("name")!;
    const type = url.searchParams.get("type") as "A" | "AAAA";
    calls.push(`${name} ${type}`);
    const entry = table[name];
    if (entry?.fail) return new Response("busy", { status: 503 });
    const data = entry?.[type] ?? [];
    const Answer = data.map((d) => ({ name: `${name}.`, type: type === "A" ? 1 : 28, TTL: 300, data: d }));
    return Response.json({ Status: entry ? 0 : 3, Answer });
  }) as typeof fetch;
  return { fetch: fetchFn, calls };
}

const production = { COHORT_ENV: "production", DOH_RESOLVER_URL: "https://doh.test/dns-query" };

describe("the addresses a webhook host name resolves to, checked before each send", () => {
  afterEach(() => clearResolvedCache());

  it.each([
    ["loopback", { A: ["127.0.0.1"] }],
    ["link-local (cloud metadata)", { A: ["169.254.169.254"] }],
    ["a private IPv6 (unique-local)", { AAAA: ["fd00::1"] }],
    ["an IPv4-mapped loopback in AAAA", { AAAA: ["::ffff:127.0.0.1"] }],
    ["one private among public ones", { A: ["93.184.216.34", "10.1.2.3"] }],
  ])("a name resolving to %s is refused", async (_, records) => {
    const r = resolver({ "hooks.example.com": records });
    const v = await resolvedTarget(production, "https://hooks.example.com/in", { fetch: r.fetch });
    expect(v.kind).toBe("refused");
  });

  it("a name resolving only to public addresses passes, and the answer is cached for its TTL (at most a minute)", async () => {
    const r = resolver({ "hooks.example.com": { A: ["93.184.216.34"], AAAA: ["2606:2800:220:1::1"] } });
    let now = 1_000_000;
    const deps = { fetch: r.fetch, now: () => now };
    expect(await resolvedTarget(production, "https://hooks.example.com/in", deps)).toEqual({ kind: "ok" });
    expect(await resolvedTarget(production, "https://hooks.example.com/other", deps)).toEqual({ kind: "ok" });
    expect(r.calls).toHaveLength(2); // A and AAAA once
    now += 61_000;
    await resolvedTarget(production, "https://hooks.example.com/in", deps);
    expect(r.calls).toHaveLength(4);
  });

  it("a resolver failure or a name without addresses is 'unresolved' (retried later), not allowed", async () => {
    const r = resolver({ "down.example.com": { fail: true } });
    expect((await resolvedTarget(production, "https://down.example.com/", { fetch: r.fetch })).kind).toBe("unresolved");
    expect((await resolvedTarget(production, "https://nxdomain.example.com/", { fetch: r.fetch })).kind).toBe(
      "unresolved",
    );
  });

  it("development and test resolve nothing (local receivers listen on loopback); IP literals are left to the URL guard", async () => {
    const r = resolver({});
    expect(await resolvedTarget({ COHORT_ENV: "development" }, "http://localhost:9000/", { fetch: r.fetch })).toEqual({
      kind: "ok",
    });
    expect(await resolvedTarget(production, "https://93.184.216.34/", { fetch: r.fetch })).toEqual({ kind: "ok" });
    expect(r.calls).toEqual([]);
  });
});
