/**
 * The meter's registry: integer counters of every billable operation, one per isolate (meter.ts
 * says what is counted and where).
 *
 * DESCRIPTION
 *   meterSnapshot()      the counters as plain JSON; meterReset() zeroes them.
 *   meterQuietly(fn)     runs a synchronous fn without counting (the dev row counts).
 *   add / reg            the counting primitives the wrappers use; levels, the bytes each store
 *                        holds (not reset).
 */

/** The Durable Object classes, as counted. */
export type DoClass = "Outbox" | "TransportQueue" | "DestinationQueue" | "DeliveryAgent";

type Counts = Record<string, number>;

/** The registry (see header). */
interface Registry {
  worker_invocations: Counts;
  do_requests: Counts;
  do_methods: Counts;
  do_alarms: Counts;
  do_rows_read: Counts;
  do_rows_written: Counts;
  do_set_alarms: Counts;
  do_sql_statements: Counts;
  d1_rows_read: number;
  d1_rows_written: number;
  d1_statements: number;
  queue_writes: Counts;
  queue_reads: Counts;
  queue_deletes: Counts;
  r2_class_a: Counts;
  r2_class_b: Counts;
  r2_deletes: number;
  do_names: Record<string, Set<string>>;
  rows_written_by_statement: Counts;
  rows_read_by_statement: Counts;
  runs_by_statement: Counts;
  /** Wall-clock ms each class's objects were billed as active (activity.ts). */
  do_active_ms: Counts;
  /** Times an object of each class went from idle (hibernatable) to active. */
  do_wakes: Counts;
  /** Objects of each class that were active since the reset, by "<class>/<name>". */
  do_active_objects: Record<string, Set<string>>;
  /** Messages sent through the send_email binding (EMAIL). */
  email_sends: number;
  /** Requests per object, by "<class>/<name>" (docs/scale.md: the hottest object). */
  do_requests_by_object: Counts;
}

function fresh(): Registry {
  return {
    worker_invocations: {},
    do_requests: {},
    do_methods: {},
    do_alarms: {},
    do_rows_read: {},
    do_rows_written: {},
    do_set_alarms: {},
    do_sql_statements: {},
    d1_rows_read: 0,
    d1_rows_written: 0,
    d1_statements: 0,
    queue_writes: {},
    queue_reads: {},
    queue_deletes: {},
    r2_class_a: {},
    r2_class_b: {},
    r2_deletes: 0,
    do_names: {},
    rows_written_by_statement: {},
    rows_read_by_statement: {},
    runs_by_statement: {},
    do_active_ms: {},
    do_wakes: {},
    do_active_objects: {},
    email_sends: 0,
    do_requests_by_object: {},
  };
}

/**
 * Bytes each store holds now, not counts: a Durable Object's SQLite (databaseSize, by
 * "<class>/<name>") after its last write, and D1's (meta.size_after of its last result). Kept
 * across resets.
 */
export const levels = { do_bytes: new Map<string, number>(), d1_bytes: 0 };

export let reg = fresh();

export let quiet = 0;

export function add(c: Counts, key: string, n: number): void {
  if (quiet > 0 || n === 0) return;
  c[key] = (c[key] ?? 0) + n;
}

function sum(c: Counts): number {
  let s = 0;
  for (const k in c) s += c[k]!;
  return s;
}

/** What meterSnapshot() answers. */
export interface MeterSnapshot {
  worker_invocations: number;
  worker_invocations_by_kind: Counts;
  do_requests: number;
  do_requests_by_class: Counts;
  /** Requests per "<class>.<method>" (alarms as "<class>.alarm"). */
  do_requests_by_method: Counts;
  do_alarms_by_class: Counts;
  do_rows_read: number;
  do_rows_read_by_class: Counts;
  do_rows_written: number;
  do_rows_written_by_class: Counts;
  do_set_alarms_by_class: Counts;
  do_sql_statements_by_class: Counts;
  d1_rows_read: number;
  d1_rows_written: number;
  d1_statements: number;
  queue_ops: number;
  queue_ops_by_queue: Counts;
  queue_writes: Counts;
  queue_reads: Counts;
  queue_deletes: Counts;
  r2_class_a: number;
  r2_class_a_by_op: Counts;
  r2_class_b: number;
  r2_class_b_by_op: Counts;
  r2_deletes: number;
  do_names: Record<string, string[]>;
  /** Rows written per statement: "<DO class or D1>: <the statement's first words>". */
  rows_written_by_statement: Counts;
  /** Rows read per statement, keyed as rows_written_by_statement. */
  rows_read_by_statement: Counts;
  /** SQL executions per statement, keyed as rows_written_by_statement (a DO class or "D1"): not billed of themselves, but each costs the object's (or the database's) thread. */
  runs_by_statement: Counts;
  /** Wall-clock ms each class's objects were active (billed as duration), closed intervals only. */
  do_active_ms_by_class: Counts;
  do_wakes_by_class: Counts;
  /** Distinct objects of each class active since the reset. */
  do_active_objects_by_class: Counts;
  /** Objects active right now (their open interval is not in do_active_ms_by_class yet). */
  do_busy_now: number;
  /** Bytes held now: each class's objects' SQLite databases summed, and D1 (levels). */
  do_bytes_by_class: Counts;
  d1_bytes: number;
  email_sends: number;
  /** Requests per object, "<class>/<name>". */
  do_requests_by_object: Counts;
}

/** Objects active now, set by activity.ts (a function, to keep this module below it). */
let busyNow: () => number = () => 0;
export function countBusyWith(f: () => number): void {
  busyNow = f;
}

/** The counters as plain JSON. */
export function meterSnapshot(): MeterSnapshot {
  const queues: Counts = {};
  for (const c of [reg.queue_writes, reg.queue_reads, reg.queue_deletes])
    for (const k in c) queues[k] = (queues[k] ?? 0) + c[k]!;
  const copy = (c: Counts) => ({ ...c });
  return {
    worker_invocations: sum(reg.worker_invocations),
    worker_invocations_by_kind: copy(reg.worker_invocations),
    do_requests: sum(reg.do_requests),
    do_requests_by_class: copy(reg.do_requests),
    do_requests_by_method: copy(reg.do_methods),
    do_alarms_by_class: copy(reg.do_alarms),
    do_rows_read: sum(reg.do_rows_read),
    do_rows_read_by_class: copy(reg.do_rows_read),
    do_rows_written: sum(reg.do_rows_written),
    do_rows_written_by_class: copy(reg.do_rows_written),
    do_set_alarms_by_class: copy(reg.do_set_alarms),
    do_sql_statements_by_class: copy(reg.do_sql_statements),
    d1_rows_read: reg.d1_rows_read,
    d1_rows_written: reg.d1_rows_written,
    d1_statements: reg.d1_statements,
    queue_ops: sum(queues),
    queue_ops_by_queue: queues,
    queue_writes: copy(reg.queue_writes),
    queue_reads: copy(reg.queue_reads),
    queue_deletes: copy(reg.queue_deletes),
    r2_class_a: sum(reg.r2_class_a),
    r2_class_a_by_op: copy(reg.r2_class_a),
    r2_class_b: sum(reg.r2_class_b),
    r2_class_b_by_op: copy(reg.r2_class_b),
    r2_deletes: reg.r2_deletes,
    do_names: Object.fromEntries(Object.entries(reg.do_names).map(([k, v]) => [k, [...v].sort()])),
    rows_written_by_statement: copy(reg.rows_written_by_statement),
    rows_read_by_statement: copy(reg.rows_read_by_statement),
    runs_by_statement: copy(reg.runs_by_statement),
    do_active_ms_by_class: copy(reg.do_active_ms),
    do_wakes_by_class: copy(reg.do_wakes),
    do_active_objects_by_class: Object.fromEntries(Object.entries(reg.do_active_objects).map(([k, v]) => [k, v.size])),
    do_busy_now: busyNow(),
    do_bytes_by_class: bytesByClass(),
    d1_bytes: levels.d1_bytes,
    email_sends: reg.email_sends,
    do_requests_by_object: copy(reg.do_requests_by_object),
  };
}

function bytesByClass(): Counts {
  const out: Counts = {};
  for (const [key, n] of levels.do_bytes) {
    const cls = key.slice(0, key.indexOf("/"));
    out[cls] = (out[cls] ?? 0) + n;
  }
  return out;
}

/** Zeroes every counter (the names of the objects touched are kept: they still hold rows). */
export function meterReset(): void {
  const names = reg.do_names;
  reg = fresh();
  reg.do_names = names;
  for (const f of resetHooks) f();
}

const resetHooks: (() => void)[] = [];

/** `f` runs at every reset (activity.ts restarts the open intervals there). */
export function onMeterReset(f: () => void): void {
  resetHooks.push(f);
}

/** Runs a synchronous fn without counting anything it does. */
export function meterQuietly<T>(fn: () => T): T {
  quiet++;
  try {
    return fn();
  } finally {
    quiet--;
  }
}

// ---------------------------------------------------------------------------------------------
// Entries
