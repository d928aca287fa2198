/**
 * The meter: counts every billable Cloudflare operation the Worker and its Durable Objects cause
 * (docs: ../shared/design/cost.md), integer counters only. It counts where METER is "on"
 * (wrangler.toml's development [vars], the tests, npm run bench:cost) and nowhere else: deployed,
 * nobody reads it (its registry is per isolate), and its wrappers cost CPU time on every call
 * (npm run profile of 2,000 emails: the Worker thread busy 12.9 s with it, 10.7 s without).
 *
 * DESCRIPTION
 *   One module-level registry. In workerd (wrangler dev, and one deployed isolate) the Worker
 *   entry and its Durable Object classes are loaded from the same script into the same isolate,
 *   so this one object sees the Worker's and every DO's operations. Checked with wrangler dev
 *   4.86.0: the DO-side counters (SQL rows, alarms) appear in the snapshot that
 *   GET /relay/dev/meter reads from the Worker side. (Deployed, objects may run in other
 *   isolates and machines; there the registry is per isolate and only the local figures add up.)
 *
 *   meterOn(env)          whether METER is "on"; every entry below hands back what it was given,
 *                        untouched and uncounted, when it is not.
 *   meterFetch(req, env)  counts a Worker fetch invocation, returns the metered env. Requests to
 *                        /relay/dev/* are the meter's own observation: neither counted nor metered.
 *   meterQueue(batch, env, run)  counts a queue-consumer invocation, a read per message (per 64 KB)
 *                        and a delete per message that ends acked (ack(), ackAll(), or neither
 *                        ack nor retry when `run` resolves); runs `run` with the metered batch/env.
 *   meterScheduled(env)  counts a scheduled invocation, returns the metered env.
 *   meterEnv(env)        env with D1 (DB), R2 (BODIES), the DO namespaces and the queue producers
 *                        wrapped; idempotent and cached per env object.
 *   meterCtx(ctx, cls)   a DurableObjectState whose storage.sql counts rows read/written (cursor
 *                        deltas as the cursor is consumed) and whose setAlarm counts as a row written.
 *   meterObject(obj, cls)  replaces a constructed Durable Object's `ctx` and `env` with metered
 *                        ones and returns them, for the constructor to go on with:
 *                          super(ctx, env);
 *                          ({ ctx, env } = meterObject(this, "Outbox"));
 *                        (workerd's DurableObject constructor accepts only the real state object,
 *                        so the metered one cannot be handed to super().)
 *   meterAlarm(cls)      one DO request for an alarm() run.
 *   meterQuietly(fn)     runs a synchronous fn without counting (the dev row counts).
 *   meterSnapshot()      the counters as plain JSON; meterReset() zeroes them.
 *
 * INVARIANTS
 *   Counting never changes what an operation does or returns (first()/raw() of D1 are answered
 *   from all(), which reads the same rows). RPC stubs are wrapped so that only a property called
 *   as a function counts as a request; `then` is passed through untouched (never made thenable).
 *   TransportQueue.flush() calls alarm() itself: that call counts as an alarm request too.
 */
import { settingsOf } from "../settings/settings";

/** The Durable Object classes, as counted. */
export type DoClass = "Outbox" | "TransportQueue" | "DestinationQueue" | "DeliveryAgent";

const DO_BINDINGS: Record<string, DoClass> = { OUTBOX: "Outbox", TRANSPORT_QUEUE: "TransportQueue", DESTINATION_QUEUE: "DestinationQueue", DELIVERY_AGENT: "DeliveryAgent" };
const QUEUE_BINDINGS: Record<string, string> = { CLASSIFY: "classify", CLASSIFY_BULK: "classify-bulk", DELIVER: "deliver", WEBHOOKS: "webhooks", WEBHOOKS_SLOW: "webhooks-slow" };
const D1_BINDINGS = ["DB"];
const R2_BINDINGS = ["BODIES"];
const QUEUE_OP_BYTES = 64 * 1024;

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

let reg = fresh();
let quiet = 0;

function add(c: Counts, key: string, n: number): void {
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

const DEV_PREFIX = "/relay/dev/";

/** Counts a fetch invocation of the Worker and returns the env to serve it with (see header). */
export function meterFetch(request: Request, env: Env): Env {
  if (!meterOn(env)) return env;
  const path = new URL(request.url).pathname;
  if (path.startsWith(DEV_PREFIX)) return env;
  add(reg.worker_invocations, "fetch", 1);
  return meterEnv(env);
}

/** Whether the meter counts in the runtime of `env` (METER "on"; see header). */
export function meterOn(env: object): boolean {
  return settingsOf(env).meter;
}

/** Counts a scheduled invocation and returns the metered env. */
export function meterScheduled(env: Env): Env {
  if (!meterOn(env)) return env;
  add(reg.worker_invocations, "scheduled", 1);
  return meterEnv(env);
}

/** Counts an email invocation (Email Routing's) and returns the metered env. */
export function meterEmail(env: Env): Env {
  if (!meterOn(env)) return env;
  add(reg.worker_invocations, "email", 1);
  return meterEnv(env);
}

/**
 * Counts a queue-consumer invocation and its messages' reads, runs `run` with a batch whose
 * ack/retry are tracked, then counts a delete per message that ended acked.
 */
export async function meterQueue<B extends MessageBatch<unknown>, R>(batch: B, env: Env, run: (batch: B, env: Env) => Promise<R>): Promise<R> {
  if (!meterOn(env)) return run(batch, env);
  add(reg.worker_invocations, "queue", 1);
  const q = batch.queue;
  const acked = new Set<number>();
  const retried = new Set<number>();
  let reads = 0;
  const messages = batch.messages.map((m, i) => {
    reads += queueOps(m.body);
    return wrapMessage(m, () => { if (!retried.has(i)) acked.add(i); }, () => { if (!acked.has(i)) retried.add(i); });
  });
  add(reg.queue_reads, q, reads);
  const wrapped = new Proxy(batch, {
    get(target, prop) {
      if (prop === "messages") return messages;
      if (prop === "ackAll") return () => { messages.forEach((_, i) => { if (!retried.has(i)) acked.add(i); }); target.ackAll(); };
      if (prop === "retryAll") return (o?: QueueRetryOptions) => { messages.forEach((_, i) => { if (!acked.has(i)) retried.add(i); }); target.retryAll(o); };
      return bindTo(target, Reflect.get(target, prop, target));
    },
  });
  let ok = false;
  try {
    const r = await run(wrapped, meterEnv(env));
    ok = true;
    return r;
  } finally {
    // A message neither acked nor retried is acked when the invocation succeeds (and redelivered when it throws).
    const deletes = ok ? messages.length - retried.size : acked.size;
    add(reg.queue_deletes, q, deletes);
  }
}

function wrapMessage<M extends Message<unknown>>(m: M, onAck: () => void, onRetry: () => void): M {
  return new Proxy(m, {
    get(target, prop) {
      if (prop === "ack") return () => { onAck(); target.ack(); };
      if (prop === "retry") return (o?: QueueRetryOptions) => { onRetry(); target.retry(o); };
      return bindTo(target, Reflect.get(target, prop, target));
    },
  });
}

/** Queue operations a message body costs: one per 64 KB started (at least one). */
export function queueOps(body: unknown, contentType?: string): number {
  let bytes: number;
  if (body instanceof ArrayBuffer || ArrayBuffer.isView(body)) bytes = (body as ArrayBuffer).byteLength;
  else if (typeof body === "string" && contentType === "text") bytes = utf8Length(body);
  else {
    let s: string | undefined;
    try { s = JSON.stringify(body); } catch { s = undefined; }
    bytes = s === undefined ? 0 : utf8Length(s);
  }
  return Math.max(1, Math.ceil(bytes / QUEUE_OP_BYTES));
}

function utf8Length(s: string): number {
  // Below 64 KB / 3 characters the exact byte count cannot change the op count.
  return s.length * 3 < QUEUE_OP_BYTES ? s.length : new TextEncoder().encode(s).byteLength;
}

/** A function property bound to its object (Function.prototype.bind, since RPC stubs answer any property name, even `bind`). */
function bindTo(target: object, v: unknown): unknown {
  return typeof v === "function" ? Function.prototype.bind.call(v, target) : v;
}

// ---------------------------------------------------------------------------------------------
// Env

const METERED = Symbol.for("cohort.meter.metered");
const envCache = new WeakMap<object, Env>();

/** The env with every billable binding wrapped (see header). */
export function meterEnv(env: Env): Env {
  if ((env as unknown as Record<symbol, unknown>)[METERED]) return env;
  const cached = envCache.get(env);
  if (cached) return cached;
  const e = { ...env } as unknown as Record<string | symbol, unknown>;
  const raw = env as unknown as Record<string, unknown>;
  for (const [b, cls] of Object.entries(DO_BINDINGS)) if (raw[b]) e[b] = meterNamespace(raw[b] as DurableObjectNamespace, cls);
  for (const [b, q] of Object.entries(QUEUE_BINDINGS)) if (raw[b]) e[b] = meterQueueProducer(raw[b] as Queue, q);
  for (const b of D1_BINDINGS) if (raw[b]) e[b] = meterD1(raw[b] as D1Database);
  for (const b of R2_BINDINGS) if (raw[b]) e[b] = meterR2(raw[b] as R2Bucket);
  Object.defineProperty(e, METERED, { value: true, enumerable: false });
  envCache.set(env, e as unknown as Env);
  return e as unknown as Env;
}

function noteName(cls: DoClass, name: string | undefined): void {
  if (!name) return;
  (reg.do_names[cls] ??= new Set()).add(name);
}

/** A DO namespace whose stubs count every call as a request of `cls`. */
export function meterNamespace<N extends DurableObjectNamespace>(ns: N, cls: DoClass): N {
  return new Proxy(ns, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (prop === "getByName") return (name: string, o?: unknown) => { noteName(cls, name); return meterStub(Reflect.apply(v as (n: string, o?: unknown) => object, target, [name, o]), cls); };
      if (prop === "get") return (id: DurableObjectId, o?: unknown) => { noteName(cls, id.name); return meterStub(Reflect.apply(v as (i: DurableObjectId, o?: unknown) => object, target, [id, o]), cls); };
      if (prop === "jurisdiction") return (j: string) => meterNamespace(Reflect.apply(v as (j: string) => N, target, [j]), cls);
      return bindTo(target, v);
    },
  });
}

/** A stub (any RPC target) whose method calls count as DO requests of `cls`. */
export function meterStub<S extends object>(stub: S, cls: DoClass): S {
  return new Proxy(stub, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      // Symbols (dispose) and `then` (await probing) pass through as they are.
      if (typeof prop === "symbol" || prop === "then" || typeof v !== "function") return v;
      return (...args: unknown[]) => {
        add(reg.do_requests, cls, 1);
        add(reg.do_methods, `${cls}.${prop}`, 1);
        return Reflect.apply(v as (...a: unknown[]) => unknown, target, args);
      };
    },
  });
}

/** One DO request: an alarm() run of `cls`. */
export function meterAlarm(cls: DoClass): void {
  add(reg.do_requests, cls, 1);
  add(reg.do_methods, `${cls}.alarm`, 1);
  add(reg.do_alarms, cls, 1);
}

function meterQueueProducer(q: Queue, name: string): Queue {
  return new Proxy(q, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (prop === "send") {
        return (body: unknown, o?: QueueSendOptions) => { add(reg.queue_writes, name, queueOps(body, o?.contentType)); return target.send(body, o); };
      }
      if (prop === "sendBatch") {
        return (msgs: Iterable<MessageSendRequest>, o?: QueueSendBatchOptions) => {
          const list = [...msgs];
          let n = 0;
          for (const m of list) n += queueOps(m.body, m.contentType);
          add(reg.queue_writes, name, n);
          return target.sendBatch(list, o);
        };
      }
      return bindTo(target, v);
    },
  });
}

const R2_CLASS_A = new Set(["put", "list", "createMultipartUpload"]);
const R2_CLASS_B = new Set(["get", "head"]);

function meterR2(bucket: R2Bucket): R2Bucket {
  return new Proxy(bucket, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (typeof prop !== "string" || typeof v !== "function") return v;
      const f = v as (...a: unknown[]) => unknown;
      if (R2_CLASS_A.has(prop)) return (...a: unknown[]) => { add(reg.r2_class_a, prop, 1); return Reflect.apply(f, target, a); };
      if (R2_CLASS_B.has(prop)) return (...a: unknown[]) => { add(reg.r2_class_b, prop, 1); return Reflect.apply(f, target, a); };
      if (prop === "delete") return (keys: string | string[]) => { if (quiet === 0) reg.r2_deletes += Array.isArray(keys) ? keys.length : 1; return Reflect.apply(f, target, [keys]); };
      return bindTo(target, f);
    },
  });
}

// ---------------------------------------------------------------------------------------------
// D1

interface D1Meta { rows_read?: number; rows_written?: number }

const keys = new Map<string, Map<string, string>>();

/** The key of a statement in rows_written_by_statement and rows_read_by_statement: its first words, whitespace folded (cached per text: a few hundred distinct ones). */
function statementKey(owner: string, q: string): string {
  let byText = keys.get(owner);
  if (byText === undefined) keys.set(owner, (byText = new Map()));
  let v = byText.get(q);
  if (v === undefined) {
    v = `${owner}: ${q.replace(/\s+/g, " ").trim().slice(0, 72)}`;
    if (byText.size < 1000) byText.set(q, v);
  }
  return v;
}

/** Adds the rows of one D1 result (its `meta`); `q` is the statement's text when known. */
export function recordD1(meta: D1Meta | undefined, q = "?"): void {
  if (quiet > 0) return;
  reg.d1_statements++;
  reg.d1_rows_read += meta?.rows_read ?? 0;
  const w = meta?.rows_written ?? 0;
  reg.d1_rows_written += w;
  if (w > 0) add(reg.rows_written_by_statement, statementKey("D1", q), w);
  if ((meta?.rows_read ?? 0) > 0) add(reg.rows_read_by_statement, statementKey("D1", q), meta!.rows_read!);
}

const RAW_STATEMENT = Symbol("cohort.meter.rawStatement");

class MeteredStatement {
  [RAW_STATEMENT]: D1PreparedStatement;

  constructor(raw: D1PreparedStatement, readonly query: string) {
    this[RAW_STATEMENT] = raw;
  }

  bind(...values: unknown[]): MeteredStatement {
    return new MeteredStatement(this[RAW_STATEMENT].bind(...values), this.query);
  }

  async run<T = Record<string, unknown>>(): Promise<D1Result<T>> {
    const r = await this[RAW_STATEMENT].run<T>();
    recordD1(r.meta, this.query);
    return r;
  }

  async all<T = Record<string, unknown>>(): Promise<D1Result<T>> {
    const r = await this[RAW_STATEMENT].all<T>();
    recordD1(r.meta, this.query);
    return r;
  }

  /** As D1's first(): the same query through all(), so its rows are counted. */
  async first<T = unknown>(column?: string): Promise<T | null> {
    const row = (await this.all<Record<string, unknown>>()).results[0];
    if (row === undefined) return null;
    if (column === undefined) return row as T;
    if (!(column in row)) throw new Error(`D1_COLUMN_NOTFOUND: Column not found (${column})`);
    return row[column] as T;
  }

  /** As D1's raw(): rows as arrays (through all(); columns with the same name collapse as in all()). */
  async raw<T = unknown[]>(options?: { columnNames?: boolean }): Promise<T[]> {
    const rows = (await this.all<Record<string, unknown>>()).results;
    const arrays = rows.map((r) => Object.values(r)) as T[];
    if (options?.columnNames) return [Object.keys(rows[0] ?? {}) as T, ...arrays];
    return arrays;
  }
}

function rawStatement(s: D1PreparedStatement): D1PreparedStatement {
  return (s as unknown as MeteredStatement)[RAW_STATEMENT] ?? s;
}

/** A D1Database whose every result's rows are counted. */
export function meterD1(db: D1Database): D1Database {
  return new Proxy(db, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (prop === "prepare") return (q: string) => new MeteredStatement(target.prepare(q), q);
      if (prop === "batch") {
        return async (stmts: D1PreparedStatement[]) => {
          const rs = await target.batch(stmts.map(rawStatement));
          rs.forEach((r, i) => recordD1(r.meta, (stmts[i] as unknown as MeteredStatement).query ?? "?"));
          return rs;
        };
      }
      if (prop === "exec") {
        // exec() answers no row counts: each of its statements is counted with none.
        return async (q: string) => { const r = await target.exec(q); if (quiet === 0) reg.d1_statements += r.count; return r; };
      }
      return bindTo(target, v);
    },
  });
}

// ---------------------------------------------------------------------------------------------
// Durable Object storage

/** The part of a SqlStorageCursor the meter reads. */
interface CursorLike {
  readonly rowsRead: number;
  readonly rowsWritten: number;
  next(): IteratorResult<unknown>;
  toArray(): unknown[];
  one(): unknown;
  raw(): IterableIterator<unknown[]>;
  readonly columnNames: string[];
}

/** A cursor that adds its rowsRead/rowsWritten growth to `cls` each time it is consumed. */
export class MeteredCursor {
  private seenRead = 0;
  private seenWritten = 0;

  constructor(private readonly cursor: CursorLike, private readonly cls: DoClass, private readonly query = "?") {
    add(reg.runs_by_statement, statementKey(cls, query), 1);
    this.sync();
  }

  private sync(): void {
    const r = this.cursor.rowsRead;
    const w = this.cursor.rowsWritten;
    add(reg.do_rows_read, this.cls, r - this.seenRead);
    add(reg.do_rows_written, this.cls, w - this.seenWritten);
    if (w > this.seenWritten) add(reg.rows_written_by_statement, statementKey(this.cls, this.query), w - this.seenWritten);
    if (r > this.seenRead) add(reg.rows_read_by_statement, statementKey(this.cls, this.query), r - this.seenRead);
    this.seenRead = r;
    this.seenWritten = w;
  }

  next(): IteratorResult<unknown> {
    try { return this.cursor.next(); } finally { this.sync(); }
  }

  toArray(): unknown[] {
    try { return this.cursor.toArray(); } finally { this.sync(); }
  }

  one(): unknown {
    try { return this.cursor.one(); } finally { this.sync(); }
  }

  raw(): IterableIterator<unknown[]> {
    const it = this.cursor.raw();
    const self = this;
    return {
      next() { try { return it.next(); } finally { self.sync(); } },
      [Symbol.iterator]() { return this; },
    } as IterableIterator<unknown[]>;
  }

  [Symbol.iterator](): this {
    return this;
  }

  get columnNames(): string[] {
    return this.cursor.columnNames;
  }

  get rowsRead(): number {
    return this.cursor.rowsRead;
  }

  get rowsWritten(): number {
    return this.cursor.rowsWritten;
  }
}

/** A SqlStorage whose exec() cursors are metered for `cls`. */
export function meterSql(sql: SqlStorage, cls: DoClass): SqlStorage {
  return new Proxy(sql, {
    get(target, prop) {
      if (prop === "exec") {
        return (q: string, ...b: unknown[]) => {
          add(reg.do_sql_statements, cls, 1);
          return new MeteredCursor(target.exec(q, ...b) as unknown as CursorLike, cls, q);
        };
      }
      return bindTo(target, Reflect.get(target, prop, target));
    },
  });
}

function meterStorage(storage: DurableObjectStorage, cls: DoClass): DurableObjectStorage {
  const sql = meterSql(storage.sql, cls);
  return new Proxy(storage, {
    get(target, prop) {
      if (prop === "sql") return sql;
      const v = Reflect.get(target, prop, target);
      if (prop === "setAlarm") {
        // cost.md: a setAlarm is a row written.
        return (...a: unknown[]) => { add(reg.do_set_alarms, cls, 1); add(reg.do_rows_written, cls, 1); return Reflect.apply(v as (...x: unknown[]) => unknown, target, a); };
      }
      return bindTo(target, v);
    },
  });
}

/** Swaps a Durable Object's ctx and env for metered ones (see header); returns them. */
export function meterObject(obj: object, cls: DoClass): { ctx: DurableObjectState; env: Env } {
  const o = obj as { ctx: DurableObjectState; env: Env };
  if (!meterOn(o.env)) return { ctx: o.ctx, env: o.env };
  const ctx = meterCtx(o.ctx, cls);
  const env = meterEnv(o.env);
  Object.defineProperty(o, "ctx", { value: ctx, writable: true, enumerable: true, configurable: true });
  Object.defineProperty(o, "env", { value: env, writable: true, enumerable: true, configurable: true });
  return { ctx, env };
}

/** A DurableObjectState whose storage is metered for `cls` (see header). */
export function meterCtx(ctx: DurableObjectState, cls: DoClass): DurableObjectState {
  const storage = meterStorage(ctx.storage, cls);
  return new Proxy(ctx, {
    get(target, prop) {
      if (prop === "storage") return storage;
      return bindTo(target, Reflect.get(target, prop, target));
    },
  });
}

/** Rows held now in every table of a DO's SQLite (not sqlite_, _cf_ or miniflare's own), read without counting. */
export function sqlRowCounts(sql: SqlStorage): Record<string, number> {
  return meterQuietly(() => {
    const tables = sql.exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'").toArray()
      .filter(({ name }) => !name.startsWith("sqlite_") && !name.startsWith("_cf_") && !name.startsWith("__miniflare"));
    const out: Record<string, number> = {};
    for (const { name } of tables) out[name] = sql.exec<{ n: number }>(`SELECT count(*) AS n FROM "${name.replace(/"/g, '""')}"`).one().n;
    return out;
  });
}
