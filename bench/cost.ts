/**
 * npm run bench:cost [-- --messages N] [--trickle T] [--mix-messages M] [--cases 1rcpt,10rcpt,…] [--var NAME=value …] [--json] [--budget]
 *
 * What one email costs on Cloudflare, the whole bill, counted, not estimated: every billable
 * operation its mail causes from accept to purge under `wrangler dev`, the time each Durable
 * Object is billed as active, the bytes each store holds, and the CPU, read from the meter
 * (worker/meter/) through GET /relay/dev/meter and priced with ../shared/design/cost.md
 * (bench/lib/cost-price.ts).
 *
 * DESCRIPTION
 *   The cases run one after the other on one fresh private wrangler dev (scripts/lib/dev-server.ts,
 *   frozen bundle, operator key) whose default transport relays to a real SMTP sink
 *   (scripts/lib/smtp-catcher.ts, scripted: greylisting `tempfail-…`), with a real webhook
 *   receiver on loopback subscribed to every event. Those cases send to ONE destination (the
 *   sink); `mix` (a server of its own) sends to a world of 1,000 domains by MX, and `mx`, `mx-sts`
 *   (one more server) to MX hosts with and without MTA-STS. Ten warm-up messages go first.
 *   The server keeps a message MESSAGE_RETENTION_DAYS of 60 s (--retention-s; trickle's server of
 *   its own 20 s) instead of 30 days, and OUTBOX_GRACE_SECONDS is 15 (the index lag; 300 in
 *   production), so that a message's whole life, accept to purge, fits in the run: an Outbox's
 *   full sweeps then come every 15 s while it is busy, not every 5 minutes. The back-off is 5–10 s
 *   so that the deferred case's retry comes soon. Each case is run by bench/lib/cost-cases.ts (runCase: to delivery, then retention
 *   and the cron, then the cron's own cost measured and taken off). Cases: 1rcpt (--messages,
 *   1,000), 10rcpt, batch100, trickle (--trickle, 5, 40 s apart), deferred, spread, template,
 *   received, mix (--mix-messages, 500); named only: compliance, mx, mx-sts (cost-cases.ts says
 *   what each is). compliance / 1rcpt and mx-sts / mx are printed as ratios when both ran.
 *   The figures:
 *     usd_per_million          the operations until delivery (the figure printed before the whole
 *                              bill was counted; batched cases batch as the workload allows);
 *     usd_per_million_all_in   the whole bill: operations over the whole life (retention's deletes
 *                              included), DO duration, storage at the default retention (30 days;
 *                              the Transport DO's records a day), Workers CPU; every part in all_in.
 *   Storage is priced from the bytes each store holds per message after delivery (trickle: the
 *   1rcpt case's, measured on many messages, since stores grow by 4 KiB pages); duration from
 *   the meter's clock of active objects (worker/meter/activity.ts, Cloudflare's rule); CPU from
 *   the workerd processes' CPU time until delivery (it includes the objects' CPU, billed as
 *   duration instead, so it is an upper bound).
 *   rows_left_after_retention: rows of message tables each server still holds after its last case's purge.
 *   --var overrides a wrangler.toml [vars] value for the whole run, printed with the figures.
 *   --budget: exits 1 when a figure of a case named in bench/cost-budget.json exceeds it, or when
 *   retention left any row. CI runs `--cases 1rcpt,trickle --messages 200 --trickle 3
 *   --retention-s 20 --budget` (one server for both cases).
 *
 * OUTPUT
 *   Tables per case; with --json the last line is one JSON object:
 *   {"cases":{"1rcpt":{"usd_per_million":N,"usd_per_million_all_in":N,"all_in":{…},"per_message":{…},…},…},"rows_left_after_retention":N}
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { casesOf, runCase, type CaseDef, type Measured } from "./lib/cost-cases";
import { printCase, summarise, type CaseResult } from "./lib/cost-report";
import { running, setup, sleep, teardown, waitStill, type Counts, type Setup } from "./lib/cost-server";
import { GRACE_S, rowsLeft, runCron, waitPurged } from "./lib/cost-retention";
import { startWorld, verifySender, type World } from "./lib/cost-worlds";
import { commandLine } from "../scripts/lib/command-line";

const { values } = commandLine(import.meta.url, () =>
  parseArgs({
    options: {
      messages: { type: "string", default: "1000" },
      trickle: { type: "string", default: "5" },
      cases: { type: "string", default: "1rcpt,10rcpt,batch100,trickle,deferred,spread,template,received,mix" },
      "mix-messages": { type: "string", default: "500" },
      "retention-s": { type: "string", default: "60" },
      json: { type: "boolean", default: false },
      budget: { type: "boolean", default: false },
      var: { type: "string", multiple: true, default: [] },
    },
  }),
);

/** --var NAME=value overrides of wrangler.toml [vars]. */
const VARS: Record<string, string> = Object.fromEntries(
  values.var.map((kv) => {
    const eq = kv.indexOf("=");
    if (eq < 1) throw new Error(`--var needs NAME=value, got ${kv}`);
    return [kv.slice(0, eq), kv.slice(eq + 1)];
  }),
);

const RETENTION_MS = Number(values["retention-s"]) * 1000;

const round = (n: number, d = 3) => Math.round(n * 10 ** d) / 10 ** d;

function checkBudget(results: Record<string, CaseResult>): string[] {
  const budget = JSON.parse(readFileSync(new URL("./cost-budget.json", import.meta.url), "utf8")) as Record<
    string,
    Record<string, number>
  >;
  const over: string[] = [];
  for (const [name, limits] of Object.entries(budget)) {
    const r = results[name];
    if (!r) continue;
    for (const [k, max] of Object.entries(limits)) {
      // usd_* are the case's prices; every other key a per-message figure to delivery.
      const v = k.startsWith("usd_") ? (r as unknown as Record<string, number>)[k]! : r.per_message[k]!;
      if (v > max) over.push(`${name} ${k}${k.startsWith("usd_") ? "" : " per message"} ${v} > budget ${max}`);
    }
  }
  return over;
}

async function main(): Promise<number> {
  const want = new Set(
    values.cases
      .split(",")
      .map((c) => c.trim())
      .filter(Boolean),
  );
  const defs = casesOf({
    messages: Math.max(1, Number(values.messages)),
    trickle: Math.max(1, Number(values.trickle)),
    mixMessages: Math.max(1, Number(values["mix-messages"])),
  }).filter((d) => want.has(d.name));
  type Out = {
    cases: Record<string, CaseResult>;
    rows_left_after_retention?: number;
    rows_left_by_table?: Counts;
    retention_seconds: Record<string, number>;
  };
  const out: Out = { cases: {}, retention_seconds: {} };
  const t0 = Date.now();
  const measured: Record<string, Measured> = {};
  const left: Counts = {};
  // One server per world and retention (trickle has its own), the cases in their order.
  const groups = new Map<string, CaseDef[]>();
  for (const d of defs) {
    const key = `${d.world ?? "sink"}/${d.retentionMs ?? RETENTION_MS}`;
    groups.set(key, [...(groups.get(key) ?? []), d]);
  }
  for (const group of groups.values()) {
    const retentionMs = group[0]!.retentionMs ?? RETENTION_MS;
    const world: World = await startWorld(group[0]!.world ?? "sink", Math.max(1, Number(values["mix-messages"])));
    let s: Setup;
    try {
      s = await setup(
        {
          MESSAGE_RETENTION_DAYS: String(retentionMs / 86_400_000),
          OUTBOX_GRACE_SECONDS: String(GRACE_S),
          SCHEDULER_CONFIG: JSON.stringify({ minimal_backoff_time: "5s", maximal_backoff_time: "10s" }),
          ...world.vars,
          ...VARS,
        },
        world.catcher,
      );
    } catch (e) {
      await world.close();
      throw e;
    }
    s.world = world.mix;
    try {
      await verifySender(s, world);
      // Start-up is not the mail's: every Outbox shard's tables (the cron wakes each), then ten
      // warm-up messages over their whole life (migrations, first alarms, key look-ups; the mx
      // world's MTA-STS discovery).
      await runCron(s);
      await world.warm(s);
      await sleep(retentionMs + 2000);
      await runCron(s);
      await waitPurged(s, "warm-up");
      await waitStill(s, "warm-up");
      for (const def of group) {
        const lookups = await world.lookups?.();
        const m = await runCase(s, def, retentionMs);
        measured[def.name] = m;
        out.retention_seconds[def.name] = retentionMs / 1000;
        // A case of one message at a time takes its bytes per message from the case named (the same mail, held by many).
        if (def.bytesOf) m.bytes = measured[def.bytesOf]?.bytes ?? { d1: 0, do: {} };
        const r = summarise(def, m);
        out.cases[def.name] = r;
        printCase(def.name, r, VARS);
        if (lookups && world.lookups) {
          // What the case itself asked of DNS and of the policy server (the warm-up discovered the policy).
          const after = await world.lookups();
          const sts = Object.keys(after.queries)
            .filter((k) => /mta-sts|smtp\._tls/.test(k))
            .reduce((n, k) => n + after.queries[k]! - (lookups.queries[k] ?? 0), 0);
          Object.assign(r, { sts_doh_queries: sts, policy_fetches: after.fetches - lookups.fetches });
          console.log(
            `  MTA-STS and TLS-RPT DoH queries during the case's life: ${sts}; policy fetches: ${after.fetches - lookups.fetches}`,
          );
        }
      }
      for (const [t, n] of Object.entries(await rowsLeft(s))) left[t] = (left[t] ?? 0) + n;
    } finally {
      await teardown(s);
      await world.close();
    }
  }
  for (const [a, b] of [
    ["compliance", "1rcpt"],
    ["mx-sts", "mx"],
  ] as const) {
    const [x, y] = [out.cases[a], out.cases[b]];
    if (x && y)
      console.log(
        `\n== ${a} / ${b} (same run): all in ${round(x.usd_per_million_all_in / y.usd_per_million_all_in, 2)}; ` +
          Object.keys(y.per_message)
            .map((k) => `${k} ${y.per_message[k] ? round(x.per_message[k]! / y.per_message[k]!, 2) : "-"}`)
            .join(", "),
      );
  }
  out.rows_left_by_table = Object.fromEntries(Object.entries(left).filter(([, v]) => v > 0));
  out.rows_left_after_retention = Object.values(left).reduce((a, b) => a + b, 0);
  console.log(
    `\n== retention: rows of message tables left after every case's purge: ${out.rows_left_after_retention}` +
      ` ${JSON.stringify(out.rows_left_by_table)}`,
  );
  console.log(`\n(${round((Date.now() - t0) / 1000, 0)} s in all)`);
  const over = values.budget ? checkBudget(out.cases) : [];
  if (values.budget && out.rows_left_after_retention > 0)
    over.push(`rows left after retention ${out.rows_left_after_retention} > 0`);
  for (const o of over) console.log(`OVER BUDGET: ${o}`);
  if (values.json) console.log(JSON.stringify(out));
  return over.length > 0 ? 1 : 0;
}

process.once("SIGINT", () => void Promise.all(running.map(teardown)).then(() => process.exit(130)));
try {
  process.exitCode = await main();
} catch (e) {
  await Promise.all([...running].map(teardown));
  console.error(e instanceof Error ? (e.stack ?? e.message) : String(e));
  process.exitCode = 1;
}
