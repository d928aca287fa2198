/**
 * bench:cost's figures of one case: per message, priced (cost-price.ts), and printed.
 *
 * DESCRIPTION
 *   summarise(def, measured, opts)  the case's result: the operations to delivery as before
 *                          (per_message, usd_per_million, breakdown), the whole life (accept to
 *                          purge, the cron's own cost taken off), the duration, the storage, the
 *                          CPU, and the all-in figure with every part (all_in).
 *   printCase(name, r)     the tables for people.
 */
import { allIn, priceOps, type AllIn } from "./cost-price";
import type { CaseDef, Measured } from "./cost-cases";
import type { Counts, Snapshot } from "./cost-server";

/** The defaults a deployment holds a message's bytes for: MESSAGE_RETENTION_DAYS, and the Transport DO's admission TTL (a day). */
export const HOLD = { retentionDays: 30, holdDays: { TransportQueue: 1 } };

export interface CaseResult {
  about: string;
  messages: number;
  recipients: number;
  seconds: number;
  totals: Record<string, number>;
  per_message: Record<string, number>;
  per_recipient?: Record<string, number>;
  /** Operations to delivery (the figure printed before the whole bill was counted). */
  usd_per_million: number;
  usd_per_million_rcpts?: number;
  usd_per_million_all_in: number;
  all_in: AllIn["parts"];
  whole_life_per_message: Record<string, number>;
  duration: { active_ms_per_message: Counts; wakes_per_message: Counts; objects_active: Counts };
  storage: { bytes_per_message: Counts };
  cpu_ms_per_message: number;
  /** The same before the processes' idle rate was taken off. */
  cpu_raw_ms_per_message: number;
  /** Where the case measures it (trickle): ms from an accept's answer to the sink's receipt, the median and the largest. */
  delivery_ms?: { p50: number; max: number };
  breakdown: {
    worker_invocations_by_kind: Counts;
    do_requests_by_class: Counts;
    do_requests_by_method: Counts;
    do_alarms_by_class: Counts;
    do_rows_written_by_class: Counts;
    do_rows_read_by_class: Counts;
    queue_ops_by_queue: Counts;
    d1_statements: number;
    r2_deletes: number;
    rows_written_by_statement: Counts;
    rows_read_by_statement: Counts;
    /** DO SQL statements run per message (not billed: each costs the object's thread). */
    do_sql_statements: number;
    runs_by_statement: Counts;
    whole_life_do_requests_by_method: Counts;
    whole_life_rows_written_by_statement: Counts;
  };
}

const round = (n: number, d = 3) => Math.round(n * 10 ** d) / 10 ** d;
const perN = (c: Counts | undefined, n: number) =>
  Object.fromEntries(
    Object.entries(c ?? {})
      .sort()
      .map(([k, v]) => [k, round(v / n)]),
  );
/** A runs_by_statement key of a D1 statement (worker/meter/d1.ts statementKey's owner "D1"). */
const isD1 = (key: string) => key.startsWith("D1: ");
const sorted = (c: Counts | undefined, n: number) =>
  Object.fromEntries(
    Object.entries(c ?? {})
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => [k, round(v / n)]),
  );

/** The billed totals of a snapshot. */
function totalsOf(s: Snapshot): Record<string, number> {
  return {
    worker_invocations: s.worker_invocations,
    do_requests: s.do_requests,
    do_rows_written: s.do_rows_written,
    do_rows_read: s.do_rows_read,
    d1_rows_written: s.d1_rows_written,
    d1_rows_read: s.d1_rows_read,
    rows_written: s.do_rows_written + s.d1_rows_written,
    rows_read: s.do_rows_read + s.d1_rows_read,
    queue_ops: s.queue_ops,
    r2_class_a: s.r2_class_a,
    r2_class_b: s.r2_class_b,
    email_sends: s.email_sends ?? 0,
  };
}

/** a − b, field by field (numbers and maps of numbers); what b has that a lacks counts as 0. */
export function minus(a: Snapshot, b: Snapshot): Snapshot {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(a)) {
    const w = (b as unknown as Record<string, unknown>)[k];
    if (typeof v === "number") out[k] = v - (typeof w === "number" ? w : 0);
    else if (v && typeof v === "object" && !Array.isArray(v)) {
      const m: Counts = {};
      for (const [kk, vv] of Object.entries(v as Counts))
        if (typeof vv === "number") m[kk] = vv - ((w as Counts | undefined)?.[kk] ?? 0);
      out[k] = m;
    } else out[k] = v;
  }
  return out as unknown as Snapshot;
}

export function summarise(def: CaseDef, m: Measured): CaseResult {
  const n = def.messages;
  const recipients = n * def.rcptsPer;
  const snap = m.toDelivery;
  const totals = totalsOf(snap);
  const exact = (t: Record<string, number>, d: number) =>
    Object.fromEntries(Object.entries(t).map(([k, v]) => [k, v / d]));
  const per_message = Object.fromEntries(Object.entries(totals).map(([k, v]) => [k, round(v / n)]));
  const life = minus(m.whole, m.cron);
  const lifeTotals = totalsOf(life);
  const activeMs = exact(life.do_active_ms_by_class ?? {}, n);
  const bill = allIn({
    toDelivery: exact(totals, n),
    wholeLife: exact(lifeTotals, n),
    activeMs,
    bytes: m.bytes,
    cpuMs: m.cpuMs / n,
    ...HOLD,
  });
  const res: CaseResult = {
    about: def.about,
    messages: n,
    recipients,
    seconds: round(m.seconds, 1),
    totals,
    per_message,
    usd_per_million: priceOps(exact(totals, n)),
    usd_per_million_all_in: bill.usd_per_million_all_in,
    all_in: bill.parts,
    whole_life_per_message: Object.fromEntries(Object.entries(lifeTotals).map(([k, v]) => [k, round(v / n)])),
    duration: {
      active_ms_per_message: perN(life.do_active_ms_by_class, n),
      wakes_per_message: perN(life.do_wakes_by_class, n),
      objects_active: { ...(m.whole.do_active_objects_by_class ?? {}) },
    },
    storage: {
      bytes_per_message: {
        D1: round(m.bytes.d1, 0),
        ...Object.fromEntries(Object.entries(m.bytes.do).map(([k, v]) => [k, round(v, 0)])),
      },
    },
    cpu_ms_per_message: round(m.cpuMs / n, 2),
    cpu_raw_ms_per_message: round(m.cpuRawMs / n, 2),
    breakdown: {
      worker_invocations_by_kind: perN(snap.worker_invocations_by_kind, n),
      do_requests_by_class: perN(snap.do_requests_by_class, n),
      do_requests_by_method: perN(snap.do_requests_by_method, n),
      do_alarms_by_class: perN(snap.do_alarms_by_class, n),
      do_rows_written_by_class: perN(snap.do_rows_written_by_class, n),
      do_rows_read_by_class: perN(snap.do_rows_read_by_class, n),
      queue_ops_by_queue: perN(snap.queue_ops_by_queue, n),
      d1_statements: round(snap.d1_statements / n),
      r2_deletes: round(snap.r2_deletes / n),
      rows_written_by_statement: sorted(snap.rows_written_by_statement, n),
      rows_read_by_statement: sorted(snap.rows_read_by_statement, n),
      do_sql_statements: round(
        Object.entries(snap.runs_by_statement ?? {})
          .filter(([k]) => !isD1(k))
          .reduce((a, [, v]) => a + v, 0) / n,
      ),
      runs_by_statement: sorted(snap.runs_by_statement, n),
      whole_life_do_requests_by_method: sorted(life.do_requests_by_method, n),
      whole_life_rows_written_by_statement: sorted(life.rows_written_by_statement, n),
    },
  };
  if (def.latencies && def.latencies.length > 0) {
    const l = [...def.latencies].sort((a, b) => a - b);
    res.delivery_ms = { p50: l[Math.floor((l.length - 1) / 2)]!, max: l[l.length - 1]! };
  }
  if (def.rcptsPer > 1) {
    res.per_recipient = Object.fromEntries(Object.entries(totals).map(([k, v]) => [k, round(v / recipients)]));
    res.per_recipient.transport_do_requests = round((snap.do_requests_by_class.TransportQueue ?? 0) / recipients);
    res.usd_per_million_rcpts = priceOps(exact(totals, recipients));
  }
  return res;
}

const line = (label: string, c: Counts) => console.log(`  ${label.padEnd(34)}${JSON.stringify(c)}`);

export function printCase(name: string, r: CaseResult, vars: Record<string, string>): void {
  const overrides = Object.keys(vars).length > 0 ? `; --var ${JSON.stringify(vars)}` : "";
  console.log(`\n== ${name}: ${r.messages} ${r.about}; ${r.recipients} recipients, ${r.seconds} s${overrides}`);
  console.log(`${"".padEnd(20)}${"to delivery".padStart(14)}${"whole life".padStart(14)}   (per message)`);
  for (const k of Object.keys(r.per_message)) {
    console.log(
      `${k.padEnd(20)}${String(r.per_message[k]).padStart(14)}${String(r.whole_life_per_message[k] ?? "").padStart(14)}`,
    );
  }
  const b = r.breakdown;
  line("DO requests by class", b.do_requests_by_class);
  line("  by method (to delivery)", b.do_requests_by_method);
  line("  by method (whole life)", b.whole_life_do_requests_by_method);
  line("DO rows written by class", b.do_rows_written_by_class);
  line("queue ops by queue", b.queue_ops_by_queue);
  line("Worker invocations", b.worker_invocations_by_kind);
  line("DO active ms by class", r.duration.active_ms_per_message);
  line("DO wakes by class", r.duration.wakes_per_message);
  line("objects active (count)", r.duration.objects_active);
  line("bytes held per message", r.storage.bytes_per_message);
  console.log(
    `  workerd CPU ms per message (Worker and objects, over the server's idle rate; an upper bound of Workers CPU): ` +
      `${r.cpu_ms_per_message} (${r.cpu_raw_ms_per_message} with the idle rate)`,
  );
  if (r.delivery_ms)
    console.log(`  ms from an accept's answer to the sink: median ${r.delivery_ms.p50}, largest ${r.delivery_ms.max}`);
  console.log(`  rows written per message over the whole life, by statement:`);
  for (const [k, v] of Object.entries(b.whole_life_rows_written_by_statement))
    if (v >= 0.01) console.log(`    ${String(v).padStart(8)}  ${k}`);
  console.log(
    `  DO SQL statements run per message to delivery: ${b.do_sql_statements} (not billed; each costs the object's thread)`,
  );
  // D1 runs one query at a time: its statements per message set where the database binds (docs/scale.md).
  const d1 = Object.entries(b.runs_by_statement).filter(([k, v]) => isD1(k) && v >= 0.05);
  console.log(`  D1 statements run per message to delivery: ${b.d1_statements}, the most run:`);
  for (const [k, v] of d1.slice(0, 8)) console.log(`    ${String(v).padStart(8)}  ${k}`);
  if (r.per_recipient?.transport_do_requests !== undefined)
    console.log(`  Transport DO requests per recipient: ${r.per_recipient.transport_do_requests}`);
  const p = r.all_in;
  console.log(
    `  $ per million messages, all in: ${r.usd_per_million_all_in} = operations to delivery ${p.operations_to_delivery}` +
      ` + after delivery ${p.operations_after_delivery}` +
      ` + DO duration ${p.do_duration} + storage D1 ${p.storage_d1} + storage DO ${p.storage_do} + Workers CPU ${p.workers_cpu}`,
  );
  const rcpts = r.usd_per_million_rcpts !== undefined ? `; per million recipients: ${r.usd_per_million_rcpts}` : "";
  console.log(`  $ per million messages, operations to delivery (as printed before): ${r.usd_per_million}${rcpts}`);
}
