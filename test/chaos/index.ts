/**
 * npm run chaos [-- --quick] [--only crash|faults|fuzz|load[,…]] [--seed <n>] [--json] [--no-docs]
 *                [--var NAME=value …]
 *
 * The reliability campaigns against a real local runtime (wrangler dev + workerd) and real SMTP
 * sinks: crash (kill -9 and restart), SMTP faults, API fuzz, sustained load with a flapping
 * destination. Each campaign starts its own wrangler dev on a fresh temporary state and free
 * loopback ports, and stops everything it started.
 *
 * DESCRIPTION
 *   Full mode: crash 5,000 messages / 10 kills, every fault with its recovery (including the
 *   300 s greeting timeout), 10,000 fuzzed requests, 5 min of load. --quick (CI, about 5
 *   minutes): crash 500 / 2 kills, faults without waiting out the greeting timeout, the first
 *   2,000 fuzz requests of the same seed, 30 s of load with a shorter bulk job and drain.
 *   Prints a results table, writes it between the markers of docs/reliability.md (unless
 *   --no-docs), and with --json prints one summary object as the last stdout line:
 *   {"mode","seed","ok","campaigns":[{campaign,result,figures,failures,details}]}.
 *   --var overrides a wrangler.toml [vars] value (and a campaign's own) in every runtime.
 *   Exit status 1 when a campaign failed.
 */
import { readFile, writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { lostConnections, proxyResets, refusals } from "./lib/api";
import type { Fault } from "./lib/fault-sink";
import { formatTable, mergeResults, type CampaignResult } from "./lib/report";
import { overrideVars, stopAllRuntimes } from "./lib/runtime";
import { commandLine } from "../../scripts/lib/command-line";

const { values } = commandLine(import.meta.url, () =>
  parseArgs({
    options: {
      quick: { type: "boolean", default: false },
      only: { type: "string", default: "crash,faults,fuzz,load" },
      seed: { type: "string", default: "20261122" },
      json: { type: "boolean", default: false },
      "no-docs": { type: "boolean", default: false },
      messages: { type: "string" },
      kills: { type: "string" },
      requests: { type: "string" },
      "load-seconds": { type: "string" },
      faults: { type: "string" },
      var: { type: "string", multiple: true, default: [] },
    },
  }),
);
for (const kv of values.var) {
  const eq = kv.indexOf("=");
  if (eq < 1) throw new Error(`--var needs NAME=value, got ${kv}`);
  overrideVars[kv.slice(0, eq)] = kv.slice(eq + 1);
}

const QUICK = values.quick;
const SEED = Number(values.seed) >>> 0;
const ONLY = new Set(values.only.split(",").map((s) => s.trim()));
const DOC = new URL("../../docs/reliability.md", import.meta.url);
const log = (line: string) => console.log(line);

async function runOne(name: string): Promise<CampaignResult> {
  const t0 = Date.now();
  log(`\n== ${name} (seed ${SEED}) ==`);
  try {
    proxyResets.count = 0;
    lostConnections.count = 0;
    lostConnections.causes.clear();
    refusals.count = 0;
    const r = await dispatch(name);
    if (refusals.count > 0) {
      r.figures += `; ${refusals.count} requests sent again after a 429 (back-pressure at accept, Retry-After)`;
      r.details = { ...r.details, refusals_resent: refusals.count };
    }
    if (proxyResets.count > 0) {
      r.figures += `; ${proxyResets.count} requests sent again after wrangler dev's proxy lost its connection (workers-sdk#14641)`;
      r.details = { ...r.details, proxy_resets: proxyResets.count };
    }
    if (lostConnections.count > 0) {
      r.figures +=
        `; ${lostConnections.count} POSTs sent again under their Idempotency-Key after the ` +
        `connection closed before an answer (${[...lostConnections.causes].join("; ")})`;
      r.details = { ...r.details, lost_connections: lostConnections.count };
    }
    log(`== ${name}: ${r.result.toUpperCase()} in ${((Date.now() - t0) / 1000).toFixed(0)} s — ${r.figures}`);
    for (const f of r.failures) log(`   ✗ ${f}`);
    return r;
  } catch (e) {
    const msg = e instanceof Error ? `${e.message}` : String(e);
    log(`== ${name}: ERROR ${msg.slice(0, 2000)}`);
    return {
      campaign: name,
      tried: "(did not complete)",
      result: "fail",
      figures: "error",
      failures: [msg.slice(0, 500)],
      details: {},
    };
  }
}

async function dispatch(name: string): Promise<CampaignResult> {
  switch (name) {
    case "crash": {
      const { runCrash } = await import("./crash");
      return runCrash({
        messages: Number(values.messages ?? (QUICK ? 500 : 5000)),
        kills: Number(values.kills ?? (QUICK ? 2 : 10)),
        seed: SEED,
        drainTimeoutS: QUICK ? 180 : 900,
        log,
      });
    }
    case "faults": {
      const { runFaults } = await import("./faults");
      return runFaults({ quick: QUICK, log, ...(values.faults ? { only: values.faults.split(",") as Fault[] } : {}) });
    }
    case "fuzz": {
      const { runFuzz } = await import("./fuzz");
      return runFuzz({ requests: Number(values.requests ?? (QUICK ? 2000 : 10_000)), seed: SEED, log });
    }
    case "load": {
      const { runLoad } = await import("./load");
      return runLoad({ seconds: Number(values["load-seconds"] ?? (QUICK ? 30 : 300)), log });
    }
    default:
      throw new Error(`unknown campaign ${name} (crash, faults, fuzz, load)`);
  }
}

/** Merges this run's results into the block between the markers of docs/reliability.md. */
async function updateDoc(rows: CampaignResult[]): Promise<void> {
  const start = "<!-- chaos:results:start -->",
    end = "<!-- chaos:results:end -->";
  let doc: string;
  try {
    doc = await readFile(DOC, "utf8");
  } catch {
    return;
  }
  const a = doc.indexOf(start),
    b = doc.indexOf(end);
  if (a < 0 || b < a) return;
  const run = `${QUICK ? "--quick" : "full"}, seed ${SEED}, ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC`;
  const block = mergeResults(doc.slice(a + start.length, b), rows, run);
  await writeFile(DOC, `${doc.slice(0, a + start.length)}\n${block}\n${doc.slice(b)}`);
}

for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.once(sig, () => void stopAllRuntimes().then(() => process.exit(130)));
}
const order = ["crash", "faults", "fuzz", "load"].filter((c) => ONLY.has(c));
for (const c of ONLY)
  if (!order.includes(c)) {
    console.error(`unknown campaign ${c}`);
    process.exit(2);
  }
log(`chaos: ${QUICK ? "quick" : "full"} mode, campaigns ${order.join(", ")}, seed ${SEED} (rerun with --seed ${SEED})`);
const rows: CampaignResult[] = [];
for (const c of order) rows.push(await runOne(c));
log(`\n${formatTable(rows)}`);
for (const r of rows) if (r.table) log(`\n${r.campaign}:\n${r.table}`);
if (!values["no-docs"]) await updateDoc(rows);
const ok = rows.every((r) => r.result === "pass");
if (values.json) {
  console.log(
    JSON.stringify({
      mode: QUICK ? "quick" : "full",
      seed: SEED,
      ok,
      campaigns: rows.map((r) => ({
        campaign: r.campaign,
        result: r.result,
        figures: r.figures,
        failures: r.failures,
        details: r.details,
      })),
    }),
  );
}
process.exit(ok ? 0 : 1);
