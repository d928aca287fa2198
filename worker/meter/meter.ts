/**
 * The meter: counts every billable Cloudflare operation the Worker and its Durable Objects cause
 * (docs: ../shared/design/cost.md), integer counters only. It counts where METER is "on"
 * (wrangler.toml's development [vars], the tests, npm run bench:cost) and nowhere else: deployed,
 * nobody reads it (its registry is per isolate), and its wrappers cost CPU time on every call.
 *
 * DESCRIPTION
 *   One module-level registry. In workerd (wrangler dev, and one deployed isolate) the Worker
 *   entry and its Durable Object classes are loaded from the same script into the same isolate,
 *   so this one object sees the Worker's and every DO's operations. Checked with wrangler dev
 *   4.86.0: the DO-side counters (SQL rows, alarms) appear in the snapshot that
 *   GET /relay/dev/meter reads from the Worker side. (Deployed, objects may run in other
 *   isolates and machines; there the registry is per isolate and only the local figures add up.)
 *
 *   meterOn / meterFetch / meterQueue / meterScheduled / meterEmail  (invocations.ts) count the
 *                        Worker's invocations and hand on the metered env.
 *   meterEnv(env)        env with D1 (DB), R2 (BODIES), the send_email binding (EMAIL), the DO
 *                        namespaces and the queue producers wrapped; idempotent and cached per env.
 *   meterClass(cls, Impl) / meterWorker(handlers)  (objects.ts) apply the meter once around each
 *                        Durable Object class and the Worker entry: every object's storage and
 *                        env metered, every request to it (RPC, alarm) counted where it lands,
 *                        and its billed duration clocked (activity.ts).
 *   meterQuietly(fn)     runs a synchronous fn without counting (the dev row counts).
 *   meterSnapshot()      the counters as plain JSON; meterReset() zeroes them.
 *
 * INVARIANTS
 *   Counting never changes what an operation does or returns (first()/raw() of D1 are answered
 *   from all(), which reads the same rows). RPC stubs are wrapped so that only a property called
 *   as a function counts as a request; `then` is passed through untouched (never made thenable).
 *   A DO request is counted once, by the object that receives it; a method an object calls on
 *   itself (TransportQueue.flush() runs alarm()) is not a request.
 */
import { DoClass, add, quiet, reg } from "./registry";
import { meterD1 } from "./d1";
import { trackIo } from "./activity";

const DO_BINDINGS: Record<string, DoClass> = {
  OUTBOX: "Outbox",
  TRANSPORT_QUEUE: "TransportQueue",
  DESTINATION_QUEUE: "DestinationQueue",
  DELIVERY_AGENT: "DeliveryAgent",
};

const QUEUE_BINDINGS: Record<string, string> = {
  CLASSIFY: "classify",
  CLASSIFY_BULK: "classify-bulk",
  DELIVER: "deliver",
  WEBHOOKS: "webhooks",
  WEBHOOKS_SLOW: "webhooks-slow",
  EMAIL_EVENTS: "email-events",
};

const D1_BINDINGS = ["DB"];

const R2_BINDINGS = ["BODIES"];

const EMAIL_BINDINGS = ["EMAIL"];

/** Every binding the meter wraps, by kind. */
export const BINDINGS = {
  durableObjects: DO_BINDINGS,
  queues: QUEUE_BINDINGS,
  d1: D1_BINDINGS,
  r2: R2_BINDINGS,
  email: EMAIL_BINDINGS,
} as const;

const QUEUE_OP_BYTES = 64 * 1024;

/** Queue operations a message body costs: one per 64 KB started (at least one). */
export function queueOps(body: unknown, contentType?: string): number {
  let bytes: number;
  if (body instanceof ArrayBuffer || ArrayBuffer.isView(body)) bytes = (body as ArrayBuffer).byteLength;
  else if (typeof body === "string" && contentType === "text") bytes = utf8Length(body);
  else {
    let s: string | undefined;
    try {
      s = JSON.stringify(body);
    } catch {
      s = undefined;
    }
    bytes = s === undefined ? 0 : utf8Length(s);
  }
  return Math.max(1, Math.ceil(bytes / QUEUE_OP_BYTES));
}

function utf8Length(s: string): number {
  // Below 64 KB / 3 characters the exact byte count cannot change the op count.
  return s.length * 3 < QUEUE_OP_BYTES ? s.length : new TextEncoder().encode(s).byteLength;
}

/** A function property bound to its object (Function.prototype.bind, since RPC stubs answer any property name, even `bind`). */
export function bindTo(target: object, v: unknown): unknown {
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
  for (const [b, cls] of Object.entries(DO_BINDINGS))
    if (raw[b]) e[b] = meterNamespace(raw[b] as DurableObjectNamespace, cls);
  for (const [b, q] of Object.entries(QUEUE_BINDINGS)) if (raw[b]) e[b] = meterQueueProducer(raw[b] as Queue, q);
  for (const b of D1_BINDINGS) if (raw[b]) e[b] = meterD1(raw[b] as D1Database);
  for (const b of R2_BINDINGS) if (raw[b]) e[b] = meterR2(raw[b] as R2Bucket);
  for (const b of EMAIL_BINDINGS) if (raw[b]) e[b] = meterSendEmail(raw[b] as SendEmail);
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
      if (prop === "getByName")
        return (name: string, o?: unknown) => {
          noteName(cls, name);
          return meterStub(Reflect.apply(v as (n: string, o?: unknown) => object, target, [name, o]), cls);
        };
      if (prop === "get")
        return (id: DurableObjectId, o?: unknown) => {
          noteName(cls, id.name);
          return meterStub(Reflect.apply(v as (i: DurableObjectId, o?: unknown) => object, target, [id, o]), cls);
        };
      if (prop === "jurisdiction")
        return (j: string) => meterNamespace(Reflect.apply(v as (j: string) => N, target, [j]), cls);
      return bindTo(target, v);
    },
  });
}

/**
 * A stub (any RPC target) whose calls, made from inside a Durable Object, keep that object
 * active until answered (activity.ts). The request itself is counted where it lands, by the
 * callee's class (objects.ts), so that a call from anywhere is counted once.
 */
export function meterStub<S extends object>(stub: S, _cls: DoClass): S {
  return new Proxy(stub, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      // Symbols (dispose) and `then` (await probing) pass through as they are.
      if (typeof prop === "symbol" || prop === "then" || typeof v !== "function") return v;
      return (...args: unknown[]) => trackIo(Reflect.apply(v as (...a: unknown[]) => unknown, target, args));
    },
  });
}

function meterQueueProducer(q: Queue, name: string): Queue {
  return new Proxy(q, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (prop === "send") {
        return (body: unknown, o?: QueueSendOptions) => {
          add(reg.queue_writes, name, queueOps(body, o?.contentType));
          return trackIo(target.send(body, o));
        };
      }
      if (prop === "sendBatch") {
        return (msgs: Iterable<MessageSendRequest>, o?: QueueSendBatchOptions) => {
          const list = [...msgs];
          let n = 0;
          for (const m of list) n += queueOps(m.body, m.contentType);
          add(reg.queue_writes, name, n);
          return trackIo(target.sendBatch(list, o));
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
      if (R2_CLASS_A.has(prop))
        return (...a: unknown[]) => {
          add(reg.r2_class_a, prop, 1);
          return trackIo(Reflect.apply(f, target, a));
        };
      if (R2_CLASS_B.has(prop))
        return (...a: unknown[]) => {
          add(reg.r2_class_b, prop, 1);
          return trackIo(Reflect.apply(f, target, a));
        };
      if (prop === "delete") {
        return (keys: string | string[]) => {
          if (quiet === 0) reg.r2_deletes += Array.isArray(keys) ? keys.length : 1;
          return trackIo(Reflect.apply(f, target, [keys]));
        };
      }
      return bindTo(target, f);
    },
  });
}

/** The send_email binding (EMAIL): each message sent counts (Email Service bills per message). */
function meterSendEmail(binding: SendEmail): SendEmail {
  return new Proxy(binding, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (prop !== "send") return bindTo(target, v);
      return (...a: unknown[]) => {
        if (quiet === 0) reg.email_sends++;
        return trackIo(Reflect.apply(v as (...x: unknown[]) => unknown, target, a));
      };
    },
  });
}
