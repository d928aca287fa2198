/**
 * The mail world of bench:mix and of the tests that use it: many recipient domains, each with its
 * mail host on its own loopback address and its own behaviour, whose popularity follows Zipf's law
 * (a few domains take most of the mail, as the big mailbox providers do, and a long tail gets one
 * message or none).
 *
 * DESCRIPTION
 *   createWorld(config?)   the world for a configuration (DEFAULT_WORLD filled in): its domains in
 *                          rank order (index 0 is the most popular), each with its name
 *                          (d<rank>.<suffix>), its MX host (mx.<name>), its loopback address and
 *                          its behaviour. The same configuration always gives the same world.
 *   DEFAULT_WORLD          2,000 domains, Zipf exponent 1, and a realistic share of awkward ones:
 *     normal    accepts every message at once; the BIG_DOMAINS most popular are normal and admit
 *               at most 10 sessions each (421 beyond), as big providers limit each client;
 *     greylist  answers a recipient's first RCPT with 451 4.7.1 and accepts it once greylistMs
 *               have passed since that first attempt (postgrey's rule);
 *     limited   admits at most 2 or 3 sessions at once, 421 4.7.0 at the greeting beyond;
 *     slow      waits 1–3 s before each RCPT reply, or before the reply to the message's final dot;
 *     strict    rejects unknown users (a local part that starts with "nosuch") with 550 5.1.1;
 *     down      refuses every connection (a TCP reset as it is accepted);
 *     timeout   accepts connections and never greets (the client gives up at its greeting timeout);
 *     flaky     refuses connections until backAfterMs after the world's clock started, then is
 *               normal (a host that comes back).
 *   isWellBehaved(domain)  whether mail to the domain is delivered at the first attempt when the
 *                          client keeps within its limits: kinds normal and strict.
 *   domainByName(world, name), domainByAddress(world, address)  look-ups.
 *
 * INVARIANTS
 *   Addresses are distinct, in 127.<net>.0.0/16 (default net 77), never .0 or .255 in the last
 *   octet. Weights sum to 1 and do not increase with rank. Awkward kinds never fall on the
 *   BIG_DOMAINS most popular domains; down, timeout and flaky only on the tail (rank ≥ 50), where
 *   a dead domain's share of the mail is small, as it is in real traffic.
 */
import { createRng } from "../../test/chaos/lib/rng";

/** How a domain's mail host behaves (see the header). */
export type DomainKind = "normal" | "greylist" | "limited" | "slow" | "strict" | "down" | "timeout" | "flaky";

/** The awkward kinds, with their share of the domains below the big ones. */
export type Shares = Record<Exclude<DomainKind, "normal">, number>;

/** One recipient domain. */
export interface Domain {
  /** Rank, 0 the most popular. */
  index: number;
  name: string;
  /** Its only MX host, mx.<name>. */
  mxHost: string;
  /** The MX host's loopback address (127.x.y.z). */
  address: string;
  kind: DomainKind;
  /** Share of the recipients drawn at random (Zipf). */
  weight: number;
  /** Sessions admitted at once; 421 at the greeting beyond (0: no limit). */
  maxSessions: number;
  /** Wait before each RCPT reply, ms. */
  rcptDelayMs: number;
  /** Wait before the reply to the final dot, ms. */
  dataDelayMs: number;
  /** greylist: ms from a recipient's first attempt until it is accepted (else 0). */
  greylistMs: number;
  /** strict: local parts starting with "nosuch" get 550 5.1.1. */
  rejectsUnknown: boolean;
  /** down/flaky: ms after the clock start when connections are accepted again (null: never; 0: never refused). */
  refuseUntilMs: number | null;
  /** timeout: connections are accepted and never greeted. */
  silent: boolean;
}

/** What the world is made of. */
export interface WorldConfig {
  domains: number;
  /** Zipf exponent s: the domain of rank r gets a share proportional to 1 / (r + 1)^s. */
  zipf: number;
  seed: number;
  /** Second octet of the addresses (127.<net>.x.y). */
  net: number;
  /** Domain name suffix. */
  suffix: string;
  /** The most popular domains: normal, limited to bigMaxSessions sessions. */
  bigDomains: number;
  bigMaxSessions: number;
  shares: Shares;
  greylistMs: number;
  /** limited: sessions admitted, drawn from this range. */
  limitedSessions: [number, number];
  /** slow: the wait, drawn from this range (ms). */
  slowMs: [number, number];
  /** flaky: ms until it comes back. */
  backAfterMs: number;
}

/** A world: its configuration and its domains in rank order. */
export interface World {
  config: WorldConfig;
  domains: Domain[];
}

/** The default world (see the header). */
export const DEFAULT_WORLD: WorldConfig = {
  domains: 2000,
  zipf: 1,
  seed: 41,
  net: 77,
  suffix: "mix.test",
  bigDomains: 5,
  bigMaxSessions: 10,
  shares: { greylist: 0.06, limited: 0.03, slow: 0.02, strict: 0.05, down: 0.01, timeout: 0.005, flaky: 0.01 },
  greylistMs: 5000,
  limitedSessions: [2, 3],
  slowMs: [1000, 3000],
  backAfterMs: 30_000,
};

/** Ranks below this never get down, timeout or flaky. */
const TAIL_FROM = 50;

/** The address of the domain of rank `i` in 127.<net>.0.0/16. */
export function addressOf(net: number, i: number): string {
  if (!(i >= 0 && i < 250 * 256)) throw new RangeError(`a world has at most ${250 * 256} domains`);
  return `127.${net}.${Math.floor(i / 250)}.${(i % 250) + 1}`;
}

/** Builds the world of `config` (see the header); throws on a configuration it cannot build. */
export function createWorld(partial: Partial<Omit<WorldConfig, "shares">> & { shares?: Partial<Shares> } = {}): World {
  const config: WorldConfig = { ...DEFAULT_WORLD, ...partial, shares: { ...DEFAULT_WORLD.shares, ...partial.shares } };
  if (!(config.domains >= 1) || !(config.net >= 1 && config.net <= 254))
    throw new RangeError("a world needs at least one domain and a net in 1..254");
  const rng = createRng(config.seed);
  const raw = Array.from({ length: config.domains }, (_, r) => 1 / (r + 1) ** config.zipf);
  const total = raw.reduce((a, w) => a + w, 0);
  const digits = String(config.domains).length;
  const kinds = Object.entries(config.shares) as [Exclude<DomainKind, "normal">, number][];
  const domains = raw.map((w, i): Domain => {
    const name = `d${String(i + 1).padStart(digits, "0")}.${config.suffix}`;
    const kind = i < config.bigDomains ? "normal" : pickKind(rng.next(), kinds, i >= TAIL_FROM);
    const d: Domain = {
      index: i,
      name,
      mxHost: `mx.${name}`,
      address: addressOf(config.net, i),
      kind,
      weight: w / total,
      maxSessions: i < config.bigDomains ? config.bigMaxSessions : 0,
      rcptDelayMs: 0,
      dataDelayMs: 0,
      greylistMs: 0,
      rejectsUnknown: false,
      refuseUntilMs: 0,
      silent: false,
    };
    if (kind === "greylist") d.greylistMs = config.greylistMs;
    else if (kind === "limited") d.maxSessions = rng.int(config.limitedSessions[0], config.limitedSessions[1]);
    else if (kind === "slow") {
      const ms = rng.int(config.slowMs[0], config.slowMs[1]);
      if (rng.next() < 0.5) d.rcptDelayMs = ms;
      else d.dataDelayMs = ms;
    } else if (kind === "strict") d.rejectsUnknown = true;
    else if (kind === "down") d.refuseUntilMs = null;
    else if (kind === "flaky") d.refuseUntilMs = config.backAfterMs;
    else if (kind === "timeout") d.silent = true;
    return d;
  });
  return { config, domains };
}

/** Draws a kind: each awkward kind with its share, the rest normal; dead kinds only on the tail. */
function pickKind(u: number, kinds: [Exclude<DomainKind, "normal">, number][], tail: boolean): DomainKind {
  let acc = 0;
  for (const [kind, share] of kinds) {
    acc += share;
    if (u < acc) return !tail && (kind === "down" || kind === "timeout" || kind === "flaky") ? "normal" : kind;
  }
  return "normal";
}

/** Whether the domain delivers at the first attempt to a client within its limits. */
export function isWellBehaved(d: Domain): boolean {
  return d.kind === "normal" || d.kind === "strict";
}

/** Look-up tables of a world (built once per world). */
const indexes = new WeakMap<World, { byName: Map<string, Domain>; byAddress: Map<string, Domain> }>();

function indexOf(world: World) {
  let ix = indexes.get(world);
  if (!ix) {
    ix = {
      byName: new Map(world.domains.map((d) => [d.name, d])),
      byAddress: new Map(world.domains.map((d) => [d.address, d])),
    };
    indexes.set(world, ix);
  }
  return ix;
}

/** The domain called `name` (case-insensitive, trailing dot ignored), or undefined. */
export function domainByName(world: World, name: string): Domain | undefined {
  return indexOf(world).byName.get(name.toLowerCase().replace(/\.$/, ""));
}

/** The domain whose MX host has `address`, or undefined. */
export function domainByAddress(world: World, address: string): Domain | undefined {
  return indexOf(world).byAddress.get(address.replace(/^::ffff:/, ""));
}

/** How many domains of each kind the world has. */
export function kindCounts(world: World): Record<DomainKind, number> {
  const out: Record<DomainKind, number> = {
    normal: 0,
    greylist: 0,
    limited: 0,
    slow: 0,
    strict: 0,
    down: 0,
    timeout: 0,
    flaky: 0,
  };
  for (const d of world.domains) out[d.kind]++;
  return out;
}
