/**
 * The meter's registry: integer counters of every billable operation, one per isolate (meter.ts
 * says what is counted and where).
 *
 * DESCRIPTION
 *   meterSnapshot()      the counters as plain JSON; meterReset() zeroes them.
 *   meterQuietly(fn)     runs a synchronous fn without counting (the dev row counts).
 *   add / reg            the counting primitives the wrappers use.
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
}

function fresh(): Registry {
  return {
    worker_invocations: {}, do_requests: {}, do_methods: {}, do_alarms: {}, do_rows_read: {}, do_rows_written: {}, do_set_alarms: {}, do_sql_statements: {},
    d1_rows_read: 0, d1_rows_written: 0, d1_statements: 0, queue_writes: {}, queue_reads: {}, queue_deletes: {},
    r2_class_a: {}, r2_class_b: {}, r2_deletes: 0, do_names: {},
    rows_written_by_statement: {}, rows_read_by_statement: {}, runs_by_statement: {},
  };
}

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
  /** DO SQL executions per statement, keyed as rows_written_by_statement: not billed, but each costs the object's thread. */
  runs_by_statement: Counts;
}

/** The counters as plain JSON. */
export function meterSnapshot(): MeterSnapshot {
  const queues: Counts = {};
  for (const c of [reg.queue_writes, reg.queue_reads, reg.queue_deletes]) for (const k in c) queues[k] = (queues[k] ?? 0) + c[k]!;
  const copy = (c: Counts) => ({ ...c });
  return {
    worker_invocations: sum(reg.worker_invocations), worker_invocations_by_kind: copy(reg.worker_invocations),
    do_requests: sum(reg.do_requests), do_requests_by_class: copy(reg.do_requests), do_requests_by_method: copy(reg.do_methods), do_alarms_by_class: copy(reg.do_alarms),
    do_rows_read: sum(reg.do_rows_read), do_rows_read_by_class: copy(reg.do_rows_read),
    do_rows_written: sum(reg.do_rows_written), do_rows_written_by_class: copy(reg.do_rows_written),
    do_set_alarms_by_class: copy(reg.do_set_alarms), do_sql_statements_by_class: copy(reg.do_sql_statements),
    d1_rows_read: reg.d1_rows_read, d1_rows_written: reg.d1_rows_written, d1_statements: reg.d1_statements,
    queue_ops: sum(queues), queue_ops_by_queue: queues,
    queue_writes: copy(reg.queue_writes), queue_reads: copy(reg.queue_reads), queue_deletes: copy(reg.queue_deletes),
    r2_class_a: sum(reg.r2_class_a), r2_class_a_by_op: copy(reg.r2_class_a), r2_class_b: sum(reg.r2_class_b), r2_class_b_by_op: copy(reg.r2_class_b),
    r2_deletes: reg.r2_deletes,
    do_names: Object.fromEntries(Object.entries(reg.do_names).map(([k, v]) => [k, [...v].sort()])),
    rows_written_by_statement: copy(reg.rows_written_by_statement), rows_read_by_statement: copy(reg.rows_read_by_statement), runs_by_statement: copy(reg.runs_by_statement),
  };
}

/** Zeroes every counter (the names of the objects touched are kept: they still hold rows). */
export function meterReset(): void {
  const names = reg.do_names;
  reg = fresh();
  reg.do_names = names;
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
