/**
 * CPU time of a V8 profile of the relay's Worker (bench/scale.ts), split by the object class that
 * spent it: the Worker itself, each Durable Object class, or code several share.
 *
 * DESCRIPTION
 *   cpuByClass(profile, bundle, intervalUs)  ms of CPU per class, each sample counting for its
 *                                delta, at most four sampling intervals (`intervalUs`: a longer
 *                                one is a gap in the sampling; scripts/lib/cdp.ts sampleMs). Every sample's frames are mapped to their
 *                                source file through the bundle's module markers (esbuild writes
 *                                `// <path>` before each module of an unminified bundle); the
 *                                sample goes to the class of the first frame, from the bottom of
 *                                its stack, in a file only one class runs (FILE_CLASSES), else to
 *                                the class of its own file's folder (FOLDER_CLASSES), else to
 *                                "shared". "(idle)" is left out; "(program)" and "(garbage
 *                                collector)" are "runtime".
 *
 * LIMITS
 *   An async function resumed after an await starts a stack of its own, so work done after an
 *   await in shared code (D1 statements built in worker/db, say) is attributed by its folder.
 *   The profiler slows the thread it samples: compare shares, not absolute figures, with
 *   production.
 */
import { sampleMs, type Profile } from "../../scripts/lib/cdp";

/** Files only one class runs. */
const FILE_CLASSES: [RegExp, string][] = [
  [/^durable-objects\/outbox\//, "Outbox"],
  [/^durable-objects\/transport\//, "TransportQueue"],
  [/^durable-objects\/destination\//, "DestinationQueue"],
  [/^worker\/delivery\/(delivery-agent|agent-work)\.ts$/, "DeliveryAgent"],
  [/^worker\/(api|accept|classify|webhooks|inbound)\//, "Worker"],
  [/^worker\/index\.ts$/, "Worker"],
];

/** Folders whose code runs, for the most part, in one class (where no frame below says). */
const FOLDER_CLASSES: [RegExp, string][] = [
  [/^durable-objects\/core\//, "TransportQueue"],
  [/^worker\/(delivery|smtp|net|indexing)\//, "DeliveryAgent"],
  [/^worker\/(mail|domains)\//, "Worker"],
  [/^node_modules\/(hono|zod|mimetext|postal-mime)\//, "Worker"],
];

/** The 0-based first line of each module in the bundle, with its path. */
function modulesOf(bundle: string): { line: number; file: string }[] {
  const out: { line: number; file: string }[] = [];
  bundle.split("\n").forEach((text, line) => {
    const m = /^\/\/ ((?:worker|durable-objects|node_modules)\/\S+\.(?:ts|js|mjs))$/.exec(text);
    if (m) out.push({ line, file: m[1]! });
  });
  return out;
}

function fileAt(mods: { line: number; file: string }[], line: number): string | null {
  let lo = 0;
  let hi = mods.length - 1;
  let found: string | null = null;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (mods[mid]!.line <= line) {
      found = mods[mid]!.file;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

const classOf = (table: [RegExp, string][], file: string | null) =>
  file === null ? null : (table.find(([re]) => re.test(file))?.[1] ?? null);

/** ms of CPU per class (see the header). */
export function cpuByClass(profile: Profile, bundle: string, intervalUs: number): Record<string, number> {
  const mods = modulesOf(bundle);
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const memo = new Map<number, string>();
  const classOfNode = (id: number): string => {
    const hit = memo.get(id);
    if (hit !== undefined) return hit;
    const f = byId.get(id)!.callFrame;
    let out: string;
    if (f.functionName === "(idle)") out = "idle";
    else if (f.functionName === "(program)" || f.functionName === "(garbage collector)") out = "runtime";
    else {
      const path: number[] = [];
      for (let p: number | undefined = id; p !== undefined; p = parent.get(p)) path.unshift(p);
      const files = path.map((p) => {
        const cf = byId.get(p)!.callFrame;
        return cf.url.endsWith("index.js") ? fileAt(mods, cf.lineNumber) : null;
      });
      out =
        files.map((file) => classOf(FILE_CLASSES, file)).find((c) => c !== null) ??
        classOf(FOLDER_CLASSES, files[files.length - 1] ?? null) ??
        "shared";
    }
    memo.set(id, out);
    return out;
  };
  const ms: Record<string, number> = {};
  const weights = sampleMs(profile, intervalUs);
  profile.samples.forEach((id, i) => {
    const c = classOfNode(id);
    if (c !== "idle") ms[c] = (ms[c] ?? 0) + weights[i]!;
  });
  return ms;
}
