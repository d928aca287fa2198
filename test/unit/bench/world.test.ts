/**
 * The mail world of bench:mix (bench/world/): the domains and their popularity, the arrival
 * stream, the resolver's answers, and the sink's behaviour per domain, driven over real sockets
 * by the submission client.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateArrivals, streamStats } from "../../../bench/world/arrivals";
import { worldDnsAnswer } from "../../../bench/world/doh";
import { startWorldSink, type WorldSink } from "../../../bench/world/sink";
import { createSubmitter } from "../../../bench/world/submit";
import {
  createWorld,
  DEFAULT_WORLD,
  isWellBehaved,
  kindCounts,
  type Domain,
  type World,
} from "../../../bench/world/world";

describe("the world", () => {
  it("has 2,000 domains by default on distinct loopback addresses, Zipf weights that sum to 1, and the same world for the same seed", () => {
    const w = createWorld();
    expect(w.domains).toHaveLength(DEFAULT_WORLD.domains);
    expect(new Set(w.domains.map((d) => d.address)).size).toBe(w.domains.length);
    expect(w.domains.every((d) => /^127\.77\.\d+\.\d+$/.test(d.address) && !/\.(0|255)$/.test(d.address))).toBe(true);
    expect(w.domains.reduce((a, d) => a + d.weight, 0)).toBeCloseTo(1, 9);
    expect(w.domains[0]!.weight / w.domains[9]!.weight).toBeCloseTo(10, 9);
    expect(createWorld()).toEqual(w);
  });

  it("keeps the big domains normal with a session limit, puts dead kinds only on the tail, and has its share of each awkward kind", () => {
    const w = createWorld();
    const counts = kindCounts(w);
    for (const d of w.domains.slice(0, DEFAULT_WORLD.bigDomains))
      expect(d).toMatchObject({ kind: "normal", maxSessions: DEFAULT_WORLD.bigMaxSessions });
    expect(w.domains.slice(0, 50).some((d) => d.kind === "down" || d.kind === "timeout" || d.kind === "flaky")).toBe(
      false,
    );
    for (const k of ["greylist", "limited", "slow", "strict", "down", "timeout", "flaky"] as const)
      expect(counts[k]).toBeGreaterThan(0);
    expect(counts.normal / w.domains.length).toBeGreaterThan(0.75);
    const limited = w.domains.filter((d) => d.kind === "limited");
    expect(limited.every((d) => d.maxSessions >= 2 && d.maxSessions <= 3)).toBe(true);
  });
});

describe("the arrival stream", () => {
  const w = createWorld();
  it("has exactly the messages asked for, distinct recipients, a long tail of domains, and Poisson gaps at the asked rate", () => {
    const a = generateArrivals(w, { messages: 5000, ratePerSec: 40, prefix: "t" });
    const s = streamStats(a);
    expect(s.messages).toBe(5000);
    const all = a.flatMap((x) => x.messages.flatMap((m) => m.to));
    expect(new Set(all).size).toBe(all.length);
    expect(s.domains).toBeGreaterThan(1000);
    expect(a.filter((x) => x.kind === "multi").every((x) => x.messages[0]!.to.length === 10)).toBe(true);
    expect(a.some((x) => x.kind === "batch")).toBe(true);
    // 5,000 messages at 40 a second take about 125 s.
    expect(s.spanMs / 1000).toBeGreaterThan(110);
    expect(s.spanMs / 1000).toBeLessThan(140);
    // Unknown users only at strict domains.
    for (const r of all.filter((x) => x.startsWith("nosuch")))
      expect(w.domains.find((d) => r.endsWith(`@${d.name}`))!.kind).toBe("strict");
  });
});

describe("the world's DNS answers", () => {
  const w = createWorld({ domains: 10 });
  const answer = worldDnsAnswer(w);
  it("answers MX with the domain's own host, A with its address, NODATA for other types and NXDOMAIN for unknown names", () => {
    const d = w.domains[3]!;
    expect(answer(d.name, "MX")).toMatchObject({
      Status: 0,
      Answer: [{ type: 15, TTL: 300, data: `10 ${d.mxHost}.` }],
    });
    expect(answer(`${d.mxHost}.`, "A")).toMatchObject({ Status: 0, Answer: [{ type: 1, data: d.address }] });
    expect(answer(d.name, "AAAA")).toMatchObject({ Status: 0 });
    expect(answer(d.name, "AAAA")!.Answer).toBeUndefined();
    expect(answer(`nope.${w.config.suffix}`, "MX")).toMatchObject({ Status: 3 });
    expect(answer("example.com", "MX")).toBeUndefined();
  });
});

describe("the world's sink", () => {
  let world: World;
  let sink: WorldSink;
  const of = (kind: Domain["kind"]) => world.domains.find((d) => d.kind === kind)!;
  const submitTo = (d: Domain) => createSubmitter({ host: d.address, port: sink.port, connections: 1 });
  const message = (to: string) => ({ from: "a@b.test", to: [to], data: "Subject: t\r\n\r\nhello" });

  beforeAll(async () => {
    world = createWorld({
      domains: 200,
      net: 79,
      seed: 5,
      greylistMs: 300,
      backAfterMs: 1500,
      slowMs: [200, 200],
      shares: { greylist: 0.2, limited: 0.15, slow: 0.1, strict: 0.15, down: 0.1, timeout: 0.05, flaky: 0.1 },
    });
    for (const k of ["greylist", "limited", "strict", "down", "timeout", "flaky"] as const) expect(of(k)).toBeDefined();
    sink = await startWorldSink(world);
  });
  afterAll(async () => sink?.stop());

  it("accepts mail for a normal domain and records the delivery with its time", async () => {
    const s = submitTo(of("normal"));
    const to = `n1@${of("normal").name}`;
    await expect(s.submit(message(to))).resolves.toMatch(/^250 /);
    await s.close();
    expect(sink.deliveries().get(to)).toHaveLength(1);
    expect(isWellBehaved(of("normal"))).toBe(true);
  });

  it("greylists a recipient's first attempt and any attempt before the delay, then accepts it", async () => {
    const d = of("greylist");
    const to = `g1@${d.name}`;
    const s = submitTo(d);
    await expect(s.submit(message(to))).rejects.toThrow(/451 4\.7\.1/);
    await expect(s.submit(message(to))).rejects.toThrow(/451 4\.7\.1/); // too early: refused twice
    await new Promise((r) => setTimeout(r, 320));
    await expect(s.submit(message(to))).resolves.toMatch(/^250 /);
    await s.close();
    expect(sink.greylist().get(to)).toMatchObject({ refusals: 2 });
    expect(sink.stats().greylistRefusedTwice).toBeGreaterThanOrEqual(1);
  });

  it("rejects unknown users of a strict domain with 550 5.1.1 and takes its known ones", async () => {
    const d = of("strict");
    const s = submitTo(d);
    await expect(s.submit(message(`nosuch1@${d.name}`))).rejects.toThrow(/550 5\.1\.1/);
    await expect(s.submit(message(`known@${d.name}`))).resolves.toMatch(/^250 /);
    await s.close();
  });

  it("answers 421 at the greeting beyond a domain's session limit", async () => {
    const d = of("limited");
    const held = Array.from({ length: d.maxSessions }, () => submitTo(d));
    await Promise.all(held.map((s, i) => s.submit(message(`l${i}@${d.name}`)))); // each keeps its connection open
    const before = sink.stats().refused421;
    await expect(submitTo(d).submit(message(`over@${d.name}`))).rejects.toThrow(/421/);
    expect(sink.stats().refused421).toBe(before + 1);
    await Promise.all(held.map((s) => s.close()));
  });

  it("resets connections to a down domain, and to a flaky one until it comes back", async () => {
    sink.startClock();
    const t0 = Date.now();
    await expect(submitTo(of("down")).submit(message(`x@${of("down").name}`))).rejects.toThrow();
    await expect(submitTo(of("flaky")).submit(message(`x@${of("flaky").name}`))).rejects.toThrow();
    await new Promise((r) => setTimeout(r, Math.max(0, t0 + 1600 - Date.now())));
    const s = submitTo(of("flaky"));
    await expect(s.submit(message(`back@${of("flaky").name}`))).resolves.toMatch(/^250 /);
    await s.close();
    expect(sink.stats().refusedConnections).toBeGreaterThanOrEqual(2);
  });

  it("never greets on a silent domain's connections", async () => {
    const d = of("timeout");
    const before = sink.stats().silentConnections;
    const s = submitTo(d);
    const sent = s.submit(message(`s@${d.name}`)).then(
      () => "sent",
      () => "failed",
    );
    const outcome = await Promise.race([sent, new Promise((r) => setTimeout(() => r("silent"), 300))]);
    expect(outcome).toBe("silent");
    expect(sink.stats().silentConnections).toBe(before + 1);
  });
});
