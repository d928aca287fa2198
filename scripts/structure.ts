/**
 * npm run structure: the shape of the source tree, measured from its imports.
 *
 * Rooms are folders that hold source files; an arrow is a pair of rooms (A ≠ B) with at least one
 * import from a file of A to a file of B. A back arrow points down the layer table below (a lower
 * layer importing a higher one). An import circle across folders is a strongly connected set of
 * files that spans more than one room; a folder circle is the same on the graph of rooms. The
 * counts are what docs/structure.md reports; `--json` prints them as one JSON object last,
 * `--edges` lists every arrow with the files behind it.
 */
import { readFileSync, readdirSync, statSync, existsSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";

/** The folders whose files count as source (tests, benchmarks and tools are measured apart). */
const SOURCE_ROOTS = ["worker", "durable-objects", "bin"];

/**
 * Layers, lowest first: a room belongs to the first entry whose prefix it starts with. An import
 * from a room of a lower layer into one of a higher layer is a back arrow. Rooms of one layer may
 * import each other (no back arrow), but a circle between them still counts as a circle.
 */
const LAYERS: Array<[number, string[]]> = [
  [
    0,
    [
      "worker/model",
      "worker/settings",
      "worker/lib",
      "worker/meter",
      "durable-objects/core",
      "worker/smtp/core",
      "worker/net/core",
      "worker/webhooks/core",
      "worker/dashboard/core",
      "worker/templates/core",
      "worker/receiving/core",
      "worker/metrics/core",
      "worker/tls-policy/core",
      "worker/compliance/core",
      "worker/egress/core",
      "worker/inbound/core",
    ],
  ],
  [1, ["worker/mail", "worker/smtp", "worker/net"]],
  [2, ["worker/db"]],
  [
    3,
    [
      "worker/indexing",
      "worker/webhooks",
      "worker/domains",
      "durable-objects/storage",
      "worker/templates",
      "worker/topics",
      "worker/receiving",
      "worker/compliance",
      "worker/egress",
    ],
  ],
  [
    4,
    [
      "worker/accept",
      "worker/classify",
      "worker/delivery",
      "worker/inbound",
      "worker/policy",
      "worker/consumers",
      "worker/tls-policy",
      "worker/metrics",
      "durable-objects/outbox",
      "durable-objects/transport",
      "durable-objects/destination",
      "durable-objects",
    ],
  ],
  [5, ["worker/api", "worker/dashboard"]],
  [6, ["worker", "bin"]],
];

function layerOf(room: string): number {
  let best = -1;
  let bestLen = -1;
  for (const [rank, prefixes] of LAYERS) {
    for (const p of prefixes) {
      if ((room === p || room.startsWith(`${p}/`)) && p.length > bestLen) {
        best = rank;
        bestLen = p.length;
      }
    }
  }
  return best;
}

function walk(dir: string, out: string[]): void {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) {
      if (name !== "node_modules") walk(p, out);
      continue;
    }
    if (/\.(ts|mts|mjs|js)$/.test(name) && !name.endsWith(".d.ts")) out.push(p);
  }
}

function resolveImport(from: string, spec: string, files: Set<string>): string | undefined {
  if (!spec.startsWith(".")) return undefined;
  const base = resolve(dirname(from), spec);
  for (const cand of [base, `${base}.ts`, `${base}.mts`, `${base}.mjs`, `${base}.js`, join(base, "index.ts")]) {
    if (files.has(cand)) return cand;
  }
  if (base.endsWith(".js")) {
    const ts2 = base.replace(/\.js$/, ".ts");
    if (files.has(ts2)) return ts2;
  }
  return undefined;
}

/** Tarjan's strongly connected components over a graph given as adjacency sets. */
function sccs(nodes: string[], adj: Map<string, Set<string>>): string[][] {
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const out: string[][] = [];
  const strong = (v: string): void => {
    idx.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    onStack.add(v);
    for (const w of adj.get(v) ?? []) {
      if (!idx.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const comp: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        comp.push(w);
      } while (w !== v);
      if (comp.length > 1) out.push(comp.sort());
    }
  };
  for (const v of nodes) if (!idx.has(v)) strong(v);
  return out;
}

export interface Structure {
  files: number;
  lines: number;
  rooms: number;
  arrows: number;
  back_arrows: number;
  file_circles_across_folders: number;
  folder_circles: number;
  files_over_300: number;
  files_over_400: number;
  files_over_500: number;
  lines_over_160: number;
  lines_over_200: number;
  lines_over_300: number;
}

export function measure(root: string): {
  summary: Structure;
  edges: Map<string, Set<string>>;
  back: string[];
  circles: string[][];
  folderCircles: string[][];
  big: Array<[string, number]>;
  longLines: Array<[string, number, number]>;
} {
  const all: string[] = [];
  for (const r of SOURCE_ROOTS) if (existsSync(join(root, r))) walk(join(root, r), all);
  const files = new Set(all);
  const room = (f: string) => relative(root, dirname(f));
  const fileAdj = new Map<string, Set<string>>();
  const edges = new Map<string, Set<string>>(); // "A -> B" → files behind it
  let lines = 0;
  const big: Array<[string, number]> = [];
  const longLines: Array<[string, number, number]> = [];
  for (const f of all) {
    const text = readFileSync(f, "utf8");
    const ls = text.split("\n");
    const n = text.endsWith("\n") ? ls.length - 1 : ls.length;
    lines += n;
    if (n > 300) big.push([relative(root, f), n]);
    ls.forEach((l, i) => {
      if (l.length > 160) longLines.push([relative(root, f), i + 1, l.length]);
    });
    const info = ts.preProcessFile(text, true, true);
    const deps = new Set<string>();
    for (const imp of info.importedFiles) {
      const to = resolveImport(f, imp.fileName, files);
      if (to === undefined || to === f) continue;
      deps.add(to);
      const a = room(f);
      const b = room(to);
      if (a !== b) {
        const key = `${a} -> ${b}`;
        if (!edges.has(key)) edges.set(key, new Set());
        edges.get(key)!.add(`${relative(root, f)} -> ${relative(root, to)}`);
      }
    }
    fileAdj.set(f, deps);
  }
  const rooms = new Set(all.map(room));
  const back = [...edges.keys()].filter((k) => {
    const [a, b] = k.split(" -> ") as [string, string];
    return layerOf(a) < layerOf(b);
  });
  const circles = sccs(all, fileAdj)
    .filter((c) => new Set(c.map(room)).size > 1)
    .map((c) => c.map((f) => relative(root, f)));
  const roomAdj = new Map<string, Set<string>>();
  for (const k of edges.keys()) {
    const [a, b] = k.split(" -> ") as [string, string];
    if (!roomAdj.has(a)) roomAdj.set(a, new Set());
    roomAdj.get(a)!.add(b);
  }
  const folderCircles = sccs([...rooms], roomAdj);
  return {
    summary: {
      files: all.length,
      lines,
      rooms: rooms.size,
      arrows: edges.size,
      back_arrows: back.length,
      file_circles_across_folders: circles.length,
      folder_circles: folderCircles.length,
      files_over_300: big.length,
      files_over_400: big.filter(([, n]) => n > 400).length,
      files_over_500: big.filter(([, n]) => n > 500).length,
      lines_over_160: longLines.length,
      lines_over_200: longLines.filter(([, , n]) => n > 200).length,
      lines_over_300: longLines.filter(([, , n]) => n > 300).length,
    },
    edges,
    back,
    circles,
    folderCircles,
    big: big.sort((x, y) => y[1] - x[1]),
    longLines,
  };
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith("structure.ts")) {
  const args = process.argv.slice(2);
  const root = resolve(args.find((a) => !a.startsWith("--")) ?? ".");
  const m = measure(root);
  const s = m.summary;
  console.log(`source: ${SOURCE_ROOTS.join(", ")} under ${root}`);
  console.log(`files ${s.files}, lines ${s.lines}, rooms ${s.rooms}, arrows ${s.arrows}, back arrows ${s.back_arrows}`);
  console.log(`import circles across folders: ${s.file_circles_across_folders} (files), ${s.folder_circles} (folders)`);
  console.log(`files over 300 lines ${s.files_over_300}, over 400 ${s.files_over_400}, over 500 ${s.files_over_500}`);
  console.log(
    `lines over 160 characters ${s.lines_over_160}, over 200 ${s.lines_over_200}, over 300 ${s.lines_over_300}`,
  );
  if (m.back.length) console.log(`back arrows:\n  ${m.back.join("\n  ")}`);
  for (const c of m.circles) console.log(`circle (${c.length} files): ${c.join(", ")}`);
  for (const c of m.folderCircles) console.log(`folder circle: ${c.join(", ")}`);
  if (m.big.length) console.log(`files over 300 lines:\n  ${m.big.map(([f, n]) => `${n} ${f}`).join("\n  ")}`);
  if (args.includes("--edges")) {
    for (const [k, v] of [...m.edges].sort()) console.log(`${k}\n    ${[...v].join("\n    ")}`);
  }
  if (args.includes("--long")) for (const [f, l, n] of m.longLines) console.log(`${n} ${f}:${l}`);
  if (args.includes("--json")) console.log(JSON.stringify(s));
}
