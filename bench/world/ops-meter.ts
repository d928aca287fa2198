/**
 * The relay's billable operations on the mix, read from the meter (GET /relay/dev/meter, the
 * counters bench:cost reads; METER "on") and priced with bench:cost's prices
 * (bench/lib/cost-price.ts, ../shared/design/cost.md).
 *
 * DESCRIPTION
 *   readMeter(server)        the meter's snapshot.
 *   resetMeter(server)       zeroes the counters (the names of objects touched are kept).
 *   opsOf(before, after, messages)  per email: DO requests (all, and by class), DO objects created
 *       per class (names first seen between the two snapshots), rows, queue and R2 operations,
 *       and usd_per_million_ops; what allIn needs besides CPU (`bill`: the operations, each
 *       object's billed active ms, the bytes each store holds more than before).
 */
import { devFetch, type DevServer } from "../../scripts/lib/dev-server";
import { priceOps, type AllInInput } from "../lib/cost-price";

type Counts = Record<string, number>;

/** The part of the meter's snapshot used here. */
export interface MeterSnapshot {
  worker_invocations: number;
  do_requests: number;
  do_requests_by_class: Counts;
  do_requests_by_method?: Counts;
  do_names: Record<string, string[]>;
  do_rows_read: number;
  do_rows_read_by_class?: Counts;
  do_rows_written: number;
  do_rows_written_by_class?: Counts;
  do_sql_statements_by_class?: Counts;
  d1_rows_read: number;
  d1_rows_written: number;
  d1_statements?: number;
  rows_read_by_statement?: Counts;
  runs_by_statement?: Counts;
  queue_ops: number;
  r2_class_a: number;
  r2_class_b: number;
  email_sends?: number;
  do_active_ms_by_class?: Counts;
  do_bytes_by_class?: Counts;
  d1_bytes?: number;
}

async function dev<T>(s: DevServer, method: string, path: string): Promise<T> {
  const res = await devFetch(`${s.url}${path}`, { method, headers: { authorization: `Bearer ${s.key}` } });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

/** The meter's snapshot. */
export const readMeter = (s: DevServer) => dev<MeterSnapshot>(s, "GET", "/relay/dev/meter");
/** Zeroes the meter. */
export const resetMeter = (s: DevServer) => dev<unknown>(s, "POST", "/relay/dev/meter/reset");

/** Operations per email on the mix. */
export interface OpsPerEmail {
  do_requests: number;
  do_requests_by_class: Counts;
  /** Class.method → requests per email, the most first. */
  do_requests_by_method: Counts;
  do_objects_created: Counts;
  rows_written: number;
  rows_read: number;
  /** Per email, by store (D1, and each DO class): rows read, rows written, SQL statements. */
  by_store: Record<string, { rows_read: number; rows_written: number; statements: number }>;
  /** The statements that read the most rows, those run the most, and the D1 ones run the most: per email, the most first (ten of each). */
  top_statements: { rows_read: Counts; runs: Counts; d1_runs: Counts };
  queue_ops: number;
  usd_per_million_ops: number;
  bill: Pick<AllInInput, "toDelivery" | "activeMs" | "bytes">;
}

const round = (n: number, d = 3) => Math.round(n * 10 ** d) / 10 ** d;

/** Per-email figures between a reset (`before` holds only the object names) and `after`. */
export function opsOf(before: MeterSnapshot, after: MeterSnapshot, messages: number): OpsPerEmail {
  const namesBefore = before.do_names;
  const per = (n: number) => n / messages;
  const created: Counts = {};
  for (const [cls, names] of Object.entries(after.do_names)) {
    const old = new Set(namesBefore[cls] ?? []);
    created[cls] = names.filter((n) => !old.has(n)).length;
  }
  const ops = {
    worker_invocations: per(after.worker_invocations),
    do_requests: per(after.do_requests),
    rows_written: per(after.do_rows_written + after.d1_rows_written),
    rows_read: per(after.do_rows_read + after.d1_rows_read),
    queue_ops: per(after.queue_ops),
    r2_class_a: per(after.r2_class_a),
    r2_class_b: per(after.r2_class_b),
    email_sends: per(after.email_sends ?? 0),
  };
  const classes = new Set([
    ...Object.keys(after.do_bytes_by_class ?? {}),
    ...Object.keys(before.do_bytes_by_class ?? {}),
  ]);
  const grown = (c: string) => per((after.do_bytes_by_class?.[c] ?? 0) - (before.do_bytes_by_class?.[c] ?? 0));
  const bill = {
    toDelivery: ops,
    activeMs: Object.fromEntries(Object.entries(after.do_active_ms_by_class ?? {}).map(([k, v]) => [k, per(v)])),
    bytes: {
      d1: per((after.d1_bytes ?? 0) - (before.d1_bytes ?? 0)),
      do: Object.fromEntries([...classes].map((c) => [c, grown(c)])),
    },
  };
  return {
    do_requests: round(ops.do_requests),
    do_requests_by_class: Object.fromEntries(
      Object.entries(after.do_requests_by_class)
        .sort()
        .map(([k, v]) => [k, round(per(v))]),
    ),
    do_requests_by_method: Object.fromEntries(
      Object.entries(after.do_requests_by_method ?? {})
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => [k, round(per(v))]),
    ),
    do_objects_created: created,
    rows_written: round(ops.rows_written),
    rows_read: round(ops.rows_read),
    by_store: byStore(after, per),
    top_statements: {
      rows_read: top(after.rows_read_by_statement, per),
      runs: top(after.runs_by_statement, per),
      d1_runs: top(only(after.runs_by_statement, "D1: "), per),
    },
    queue_ops: round(ops.queue_ops),
    usd_per_million_ops: priceOps(ops),
    bill,
  };
}

/** Rows read and written and SQL statements per email, for D1 and each DO class. */
function byStore(
  m: MeterSnapshot,
  per: (n: number) => number,
): Record<string, { rows_read: number; rows_written: number; statements: number }> {
  const out: Record<string, { rows_read: number; rows_written: number; statements: number }> = {
    D1: {
      rows_read: round(per(m.d1_rows_read)),
      rows_written: round(per(m.d1_rows_written)),
      statements: round(per(m.d1_statements ?? 0)),
    },
  };
  const classes = new Set([
    ...Object.keys(m.do_rows_read_by_class ?? {}),
    ...Object.keys(m.do_rows_written_by_class ?? {}),
    ...Object.keys(m.do_sql_statements_by_class ?? {}),
  ]);
  for (const c of [...classes].sort())
    out[c] = {
      rows_read: round(per(m.do_rows_read_by_class?.[c] ?? 0)),
      rows_written: round(per(m.do_rows_written_by_class?.[c] ?? 0)),
      statements: round(per(m.do_sql_statements_by_class?.[c] ?? 0)),
    };
  return out;
}

/** The counts whose key starts with `prefix`. */
function only(c: Counts | undefined, prefix: string): Counts {
  return Object.fromEntries(Object.entries(c ?? {}).filter(([k]) => k.startsWith(prefix)));
}

/** The ten largest counts, per email, the largest first. */
function top(c: Counts | undefined, per: (n: number) => number): Counts {
  return Object.fromEntries(
    Object.entries(c ?? {})
      .sort((a, b) => b[1] - a[1])
      .slice(0, 10)
      .map(([k, v]) => [k, round(per(v))]),
  );
}
