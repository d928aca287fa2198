/*
 * npm run bench:d1-calls [-- --statements N] [--json]
 *
 * What a D1 statement costs the local runtime alone and in a batch: the same one-row primary-key
 * read, run N times (default 3,000) one call each, then in batches of 3 and of 6, by a Worker on
 * Miniflare's D1 (the simulator `wrangler dev` runs, in the same workerd process). Prints the
 * workerd CPU (from /proc) and the wall time per statement of each form, and their ratios to the
 * one-statement calls of the same run; each form runs ROUNDS times alternately and the median is
 * kept (the machine is shared). With --json the last line is
 *   {"statements":N,"cpu_ms_per_statement":{"1":…,"3":…,"6":…},"wall_ms_per_statement":{…},
 *    "cpu_ratio_3":…,"cpu_ratio_6":…}.
 * Why: bench:mix's relay runs its D1 on the Worker's own process, where the cost is per call more
 * than per statement; this says how much, so that a change is judged by the calls it saves
 * (real-traffic.md). On Cloudflare a call is a round trip to the database instead.
 */
import { parseArgs } from "node:util";
import { Miniflare } from "miniflare";
import { commandLine } from "../scripts/lib/command-line";
import { cpuSample } from "./world/cpu";

const args = commandLine(import.meta.url, () =>
  parseArgs({ options: { statements: { type: "string", default: "3000" }, json: { type: "boolean" } } }),
);
const N = Number(args.values.statements);
if (!Number.isInteger(N) || N < 6) {
  console.error("bench:d1-calls: --statements must be an integer of at least 6");
  process.exit(2);
}
const ROUNDS = 3;
const FORMS = [1, 3, 6] as const;

const script = `export default { async fetch(req, env) {
  const u = new URL(req.url);
  if (u.pathname === "/init") {
    await env.DB.exec("CREATE TABLE IF NOT EXISTS t (id TEXT PRIMARY KEY, v TEXT)");
    await env.DB.prepare("INSERT OR IGNORE INTO t VALUES ('a', 'b')").run();
    return new Response("ok");
  }
  const n = Number(u.searchParams.get("n")), k = Number(u.searchParams.get("k"));
  const st = () => env.DB.prepare("SELECT v FROM t WHERE id = ?").bind("a");
  let rows = 0;
  for (let i = 0; i < n; i += k) {
    if (k === 1) rows += (await st().first()) === null ? 0 : 1;
    else rows += (await env.DB.batch(Array.from({ length: k }, st))).reduce((s, r) => s + r.results.length, 0);
  }
  return new Response(String(rows));
} }`;

const mf = new Miniflare({ modules: true, script, d1Databases: ["DB"], compatibilityDate: "2026-05-01" });
// This run's workerd only: Miniflare starts it as a child of this process.
const workerd = (s: { comm: string; ppid: number }) => s.comm.startsWith("workerd") && s.ppid === process.pid;
try {
  await mf.dispatchFetch("http://bench/init");
  const cpu: Record<number, number[]> = { 1: [], 3: [], 6: [] };
  const wall: Record<number, number[]> = { 1: [], 3: [], 6: [] };
  for (let r = 0; r < ROUNDS; r++)
    for (const k of FORMS) {
      const n = N - (N % k);
      const c0 = cpuSample(workerd).totalMs;
      const t0 = performance.now();
      const rows = Number(await (await mf.dispatchFetch(`http://bench/run?n=${n}&k=${k}`)).text());
      if (rows !== n) throw new Error(`read ${rows} rows of ${n}`);
      wall[k]!.push((performance.now() - t0) / n);
      cpu[k]!.push((cpuSample(workerd).totalMs - c0) / n);
    }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const round = (x: number) => Math.round(x * 1000) / 1000;
  const c = Object.fromEntries(FORMS.map((k) => [k, round(median(cpu[k]!))]));
  const w = Object.fromEntries(FORMS.map((k) => [k, round(median(wall[k]!))]));
  console.log(`bench:d1-calls: ${N} one-row reads on Miniflare's D1, median of ${ROUNDS} alternating rounds`);
  for (const k of FORMS)
    console.log(
      `  ${k === 1 ? "one call each     " : `batches of ${k}      `} ${c[k]} ms workerd CPU, ${w[k]} ms wall per statement`,
    );
  const ratio = (k: number) => round(c[k]! / c[1]!);
  console.log(`  CPU per statement against one call each: batches of 3 ${ratio(3)}, of 6 ${ratio(6)}`);
  if (args.values.json)
    console.log(
      JSON.stringify({
        statements: N,
        cpu_ms_per_statement: c,
        wall_ms_per_statement: w,
        cpu_ratio_3: ratio(3),
        cpu_ratio_6: ratio(6),
      }),
    );
} finally {
  await mf.dispose();
}
