/*
 * NAME
 *   sim - command-line front end of the discrete-event simulator (`npm run sim`)
 * DESCRIPTION
 *   Runs the simulator's scenarios against the REAL scheduling core and prints their
 *   results: `limiter` (concurrency feedback against a server with an active concurrency
 *   limiter, spec §6.7), `bulk-small` (small-message latency behind a bulk job with and
 *   without preemption, spec §5) and `ceiling` (the relay's learned session ceiling, §12.7,
 *   against fixed, rising and falling server limits). The models, arrivals and retry handling are described in
 *   bench/sim/*.ts. See usage() for the options.
 *
 *   With --json exactly one scenario must be named; the last line printed is then one JSON
 *   object for it (human-readable output comes first). Runs are reproducible: every random
 *   draw comes from a PRNG seeded by --seed (default 1).
 * INVARIANTS
 *   Exit status 0 only if every run's invariant checks passed.
 * ERRORS
 *   Exit status 1 on a violated invariant, 2 on a usage error.
 */
import { BULK_SMALL_DEFAULTS, runBulkSmall } from "./sim/bulk-small";
import { LIMITER_DEFAULTS, runLimiter } from "./sim/limiter";
import { ceilingJson, formatCeiling, runCeiling } from "./sim/ceiling";
import { bulkSmallJson, formatAudit, formatBulkSmall, formatLimiter, limiterJson } from "./sim/report";

const SCENARIOS = ["limiter", "bulk-small", "ceiling"] as const;
type Scenario = (typeof SCENARIOS)[number];

interface CliArgs {
  scenarios: Scenario[];
  json: boolean;
  seed: number;
  rejectDelaySec: number;
}

function usage(): string {
  return [
    "usage: npx tsx bench/sim.ts [limiter|bulk-small|ceiling] [--json] [--seed N] [--reject-delay SEC] [--help]",
    "",
    "  limiter        2000 recipients to a server that accepts 5 sessions and answers 421 beyond that;",
    "                 feedback 1/N, 1/sqrt(N) and 1 compared with the seed README and spec §6.7",
    "  bulk-small     a 10,000-recipient message plus 200 single-recipient messages; small-message",
    "                 latency with preemption on (delivery_slot_cost 5) and off (0)",
    "  ceiling        6000 recipients to a server with a fixed, a rising and a falling session limit;",
    "                 Postfix's feedback against the relay's learned session ceiling (relay §12.7)",
    "  (none)         run every scenario, human-readable output only",
    "",
    "  --json         also print one JSON object as the LAST line; needs exactly one scenario",
    "  --seed N       seed of every random draw (integer, default 1); same seed, same output",
    "  --reject-delay SEC  limiter only: time until the 421 of an over-limit connection (default 0 = at once)",
    "",
    "exit status: 0 ok, 1 an invariant was violated, 2 usage error",
  ].join("\n");
}

/** Parses argv; returns a usage error message instead of throwing. */
function parseArgs(argv: readonly string[]): CliArgs | string {
  const args: CliArgs = { scenarios: [], json: false, seed: 1, rejectDelaySec: 0 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--json") args.json = true;
    else if (a === "--seed" || a === "--reject-delay") {
      const v = Number(argv[++i]);
      if (a === "--seed" && !Number.isSafeInteger(v)) return `--seed needs an integer, got "${argv[i] ?? ""}"`;
      if (a === "--reject-delay" && !(v >= 0 && Number.isFinite(v)))
        return `--reject-delay needs seconds ≥ 0, got "${argv[i] ?? ""}"`;
      if (a === "--seed") args.seed = v;
      else args.rejectDelaySec = v;
    } else if ((SCENARIOS as readonly string[]).includes(a)) {
      if (!args.scenarios.includes(a as Scenario)) args.scenarios.push(a as Scenario);
    } else return `unknown argument "${a}"`;
  }
  if (args.json && args.scenarios.length !== 1)
    return "--json needs exactly one scenario (limiter, bulk-small or ceiling), so that the last line is that scenario's JSON object";
  if (args.scenarios.length === 0) args.scenarios = [...SCENARIOS];
  return args;
}

/** Runs one scenario; prints its human output; returns its JSON object and status. */
function runScenario(name: Scenario, args: CliArgs): { json: object; ok: boolean } {
  if (name === "limiter") {
    const opts = { ...LIMITER_DEFAULTS, seed: args.seed, rejectDelaySec: args.rejectDelaySec };
    const runs = runLimiter(opts);
    const audit = formatAudit(runs.map((r) => r.audit));
    for (const line of [...formatLimiter(runs, opts), ...audit.lines]) console.log(line);
    return { json: limiterJson(runs), ok: audit.ok };
  }
  if (name === "ceiling") {
    const runs = runCeiling(args.seed);
    const audit = formatAudit(runs.map((r) => r.audit));
    for (const line of [...formatCeiling(runs), ...audit.lines]) console.log(line);
    return { json: ceilingJson(runs), ok: audit.ok };
  }
  const rep = runBulkSmall({ ...BULK_SMALL_DEFAULTS, seed: args.seed });
  const audit = formatAudit([rep.on.audit, rep.off.audit]);
  for (const line of [...formatBulkSmall(rep), ...audit.lines]) console.log(line);
  return { json: bulkSmallJson(rep), ok: audit.ok };
}

function main(argv: readonly string[]): number {
  if (argv.includes("--help") || argv.includes("-h")) {
    console.log(usage());
    return 0;
  }
  const args = parseArgs(argv);
  if (typeof args === "string") {
    console.error(`sim: ${args}\n\n${usage()}`);
    return 2;
  }
  let ok = true;
  let last: object | null = null;
  args.scenarios.forEach((name, i) => {
    if (i > 0) console.log("");
    const r = runScenario(name, args);
    ok &&= r.ok;
    last = r.json;
  });
  if (args.json && last) console.log(JSON.stringify(last));
  return ok ? 0 : 1;
}

process.exitCode = main(process.argv.slice(2));
