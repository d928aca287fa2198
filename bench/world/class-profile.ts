/**
 * CPU of the relay by object class, from a V8 CPU profile of wrangler dev's Worker thread (one
 * isolate runs the Worker and every Durable Object locally, so /proc alone cannot split it).
 *
 * DESCRIPTION
 *   startClassProfile(server)  starts the sampling profiler (scripts/lib/cdp.ts) on the dev
 *       server's inspector; stop() returns ClassProfile: sampled ms by class. Each sample is
 *       charged to the class of the root-most frame on its stack whose source module (found from
 *       the frozen bundle's "// <path>" module comments) belongs to one:
 *         Outbox            durable-objects/outbox/
 *         TransportQueue    durable-objects/transport/, durable-objects/core/
 *         DestinationQueue  durable-objects/destination/
 *         DeliveryAgent     worker/delivery/, worker/smtp/, worker/indexing/
 *         Worker            worker/api/, worker/accept/, worker/classify/, worker/webhooks/, worker/index.ts
 *       (the root-most frame is the function an event or a resumed promise entered); a stack with
 *       no such frame is "other" (libraries, shared modules called from the runtime), and the
 *       profiler's own entries are "(idle)", "(program)" and "(garbage collector)".
 *   Each sample counts for its delta from the one before, at most four sampling intervals
 *   (scripts/lib/cdp.ts sampleMs: a longer delta is a gap in the sampling, mostly idle time).
 *   With MIX_PROFILE_DUMP=<file>, stop() also writes the raw profile there and the bundle it
 *   refers to beside it (<file>.bundle.js), for reading by hand.
 *   classOfPath(path)  the class a source path belongs to, or null.
 *
 * INVARIANTS
 *   The profile slows the Worker: compare shares between classes, not with unprofiled runs.
 */
import { copyFile, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { cdp, sampleMs, type Profile } from "../../scripts/lib/cdp";
import type { DevServer } from "../../scripts/lib/dev-server";

/** Sampled ms by class (see the header), and the functions with the most self time in each. */
export interface ClassProfile {
  sampledMs: number;
  byClass: Record<string, number>;
  top: Record<string, { fn: string; module: string; ms: number }[]>;
}

/** The profiler's sampling interval, µs. */
const SAMPLING_US = 1000;

const CLASSES: [RegExp, string][] = [
  [/^durable-objects\/outbox\//, "Outbox"],
  [/^durable-objects\/(transport|core)\//, "TransportQueue"],
  [/^durable-objects\/destination\//, "DestinationQueue"],
  [/^worker\/(delivery|smtp|indexing)\//, "DeliveryAgent"],
  [/^worker\/(api|accept|classify|webhooks)\/|^worker\/index\.ts$/, "Worker"],
];

/** The class a source path belongs to, or null. */
export function classOfPath(path: string): string | null {
  for (const [re, cls] of CLASSES) if (re.test(path)) return cls;
  return null;
}

/** Line (0-based) → source module of the bundle, from its "// path" comments. */
function moduleLines(bundle: string): (line: number) => string {
  const starts: [number, string][] = [];
  bundle.split("\n").forEach((text, i) => {
    const m = /^\/\/ ((?:worker|durable-objects|node_modules)\/\S+)$/.exec(text);
    if (m) starts.push([i, m[1]!]);
  });
  return (line) => {
    let [lo, hi, found] = [0, starts.length - 1, ""];
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (starts[mid]![0] <= line) [found, lo] = [starts[mid]![1], mid + 1];
      else hi = mid - 1;
    }
    return found;
  };
}

/** Charges each sample to a class (see the header). */
function charge(p: Profile, pathOf: (line: number) => string): ClassProfile {
  const weights = sampleMs(p, SAMPLING_US);
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const classOfNode = new Map<number, string>();
  const classOf = (id: number): string => {
    const known = classOfNode.get(id);
    if (known) return known;
    const f = byId.get(id)!.callFrame;
    let cls: string;
    if (f.functionName.startsWith("(") && !f.url) cls = f.functionName;
    else {
      // Root-most first: walk up, remember the last class met.
      let [at, found]: [number | undefined, string | null] = [id, null];
      while (at !== undefined) {
        const cf = byId.get(at)!.callFrame;
        const c = cf.url.endsWith("index.js") ? classOfPath(pathOf(cf.lineNumber)) : null;
        if (c) found = c;
        at = parent.get(at);
      }
      cls = found ?? "other";
    }
    classOfNode.set(id, cls);
    return cls;
  };
  const out: ClassProfile = { sampledMs: 0, byClass: {}, top: {} };
  const self = new Map<string, Map<string, number>>();
  for (let i = 0; i < p.samples.length; i++) {
    const ms = weights[i]!;
    const cls = classOf(p.samples[i]!);
    out.byClass[cls] = (out.byClass[cls] ?? 0) + ms;
    out.sampledMs += ms;
    const f = byId.get(p.samples[i]!)!.callFrame;
    const fn = `${f.functionName || "(anonymous)"}|${f.url.endsWith("index.js") ? pathOf(f.lineNumber) : (f.url.split("/").pop() ?? "")}`;
    const m = self.get(cls) ?? new Map<string, number>();
    m.set(fn, (m.get(fn) ?? 0) + ms);
    self.set(cls, m);
  }
  for (const [cls, m] of self) {
    out.top[cls] = [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 12)
      .map(([k, ms]) => ({ fn: k.split("|")[0]!, module: k.split("|")[1]!, ms }));
  }
  return out;
}

/** Starts the profiler on the server's Worker; stop() charges the samples to classes. */
export async function startClassProfile(server: DevServer): Promise<{ stop: () => Promise<ClassProfile> }> {
  const pathOf = moduleLines(await readFile(join(server.state, "bundle", "index.js"), "utf8"));
  const session = await cdp(server.inspector);
  await session.send("Profiler.enable");
  await session.send("Profiler.setSamplingInterval", { interval: SAMPLING_US });
  await session.send("Profiler.start");
  return {
    stop: async () => {
      const { profile } = (await session.send("Profiler.stop")) as { profile: Profile };
      session.close();
      const dump = process.env.MIX_PROFILE_DUMP;
      if (dump) {
        await writeFile(dump, JSON.stringify(profile));
        await copyFile(join(server.state, "bundle", "index.js"), `${dump}.bundle.js`);
      }
      return charge(profile, pathOf);
    },
  };
}
