/**
 * The meter's coverage (worker/meter/): every binding wrangler.toml declares and every Durable
 * Object storage method the relay uses is counted, checked against an independent count.
 *
 * THE INDEPENDENT COUNT
 *   Before the run, the runtime's own classes are wrapped at their prototypes, below every wrapper
 *   of the meter: D1 statements (run, all, first, raw, batch, exec, with the rows D1 reports),
 *   R2 calls, queue sends, calls on Durable Object stubs (RPC), and every Durable Object storage
 *   method (SQL statements with the rows their cursors report, alarms set and deleted). Whatever
 *   reaches the runtime is counted there, whether or not it went through the meter. The
 *   send_email binding has no method to wrap (a service binding's `send` is an RPC name): its
 *   sends are counted from the outcomes, one per recipient the relay delivered through it.
 * THE RUN
 *   Mail through the whole path with delivery agents: a small message and one too large to keep
 *   inline (R2) to the SMTP sink, one through the cf-email transport (EMAIL); then one probe per
 *   queue producer (a message its consumer drops as malformed). Every binding of wrangler.toml
 *   must have been used by then, and the meter must have counted exactly what the runtime saw,
 *   binding by binding (Durable Objects by class: the meter counts a request where it lands).
 * Runs in the delivery-agents project (the queue project's agents are the deliver queue).
 */
import { env, runInDurableObject } from "cloudflare:test";
import { EmailMessage } from "cloudflare:email";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import toml from "../../../wrangler.toml?raw";
import { meterEnv, meterReset, meterSnapshot, queueOps, STORAGE_METHODS } from "../../../worker/meter";
import { callWithKey, email, eventually, newKey, newOperatorKey } from "../helpers";
import { recipientsWhen } from "./observe";

const sink = inject("sink");

/** The bindings of wrangler.toml's top level (not [env.*]): name, kind and what it names. */
function bindingsOf(text: string): { name: string; kind: string; target: string }[] {
  const top = text.split(/^\[env\./m)[0]!;
  const out: { name: string; kind: string; target: string }[] = [];
  for (const block of top.split(/^(?=\[)/m)) {
    const header = /^\[\[?([\w.]+)\]?\]/.exec(block)?.[1];
    if (!header) continue;
    const field = (k: string) => new RegExp(`^${k}\\s*=\\s*"([^"]*)"`, "m").exec(block)?.[1];
    const name =
      field("binding") ??
      (header === "durable_objects.bindings" || header === "send_email" ? field("name") : undefined);
    if (name === undefined) continue;
    const kinds: Record<string, string> = {
      "durable_objects.bindings": "do",
      d1_databases: "d1",
      r2_buckets: "r2",
      "queues.producers": "queue",
      send_email: "email",
    };
    const kind = kinds[header] ?? `unknown (${header})`;
    out.push({ name, kind, target: field("class_name") ?? field("queue") ?? name });
  }
  return out;
}

type Tally = Record<string, number>;
const seen: Tally = {};
const bump = (k: string, n = 1) => {
  seen[k] = (seen[k] ?? 0) + n;
};
const restore: (() => void)[] = [];
const cursors: { rowsRead: number; rowsWritten: number }[] = [];
const storageUsed = new Set<string>();

/** Wraps `proto[name]` (a method) with `before`, restored after the file. */
function wrap(proto: object, name: string, before: (self: unknown, args: unknown[], out: unknown) => unknown): void {
  const d = Object.getOwnPropertyDescriptor(proto, name);
  if (!d || typeof d.value !== "function") return;
  const f = d.value as (...a: unknown[]) => unknown;
  const wrapped = function (this: unknown, ...args: unknown[]) {
    return before(this, args, Reflect.apply(f, this, args));
  };
  Object.defineProperty(proto, name, { ...d, value: wrapped });
  restore.push(() => Object.defineProperty(proto, name, d));
}

const afterMeta = (key: string) => (_s: unknown, _a: unknown[], out: unknown) => {
  bump(`${key}.statements`);
  return Promise.resolve(out).then((r) => {
    const meta = (r as { meta?: { rows_read?: number; rows_written?: number } } | null)?.meta;
    bump(`${key}.rows_read`, meta?.rows_read ?? 0);
    bump(`${key}.rows_written`, meta?.rows_written ?? 0);
    return r;
  });
};

/** The runtime's classes, from the raw bindings and a raw Durable Object state (see the header). */
async function installIndependentCount(): Promise<Map<object, string>> {
  // Storage: from the raw state of an object (its prototype's accessor, beneath the meter's own `storage`).
  await runInDurableObject(env.OUTBOX.getByName("coverage-probe"), (_obj, state) => {
    let getter: (() => unknown) | undefined;
    for (
      let p = Object.getPrototypeOf(state) as object | null;
      p && !getter;
      p = Object.getPrototypeOf(p) as object | null
    ) {
      getter = Object.getOwnPropertyDescriptor(p, "storage")?.get;
    }
    const raw = (getter ? getter.call(state) : state.storage) as DurableObjectStorage;
    const storage = Object.getPrototypeOf(raw) as object;
    for (const m of Object.getOwnPropertyNames(storage)) {
      const d = Object.getOwnPropertyDescriptor(storage, m);
      if (m === "constructor" || typeof d?.value !== "function") continue;
      wrap(storage, m, (_s, _a, out) => {
        storageUsed.add(m);
        if (m === "setAlarm" || m === "deleteAlarm") bump("do.rows_written");
        return out;
      });
    }
    wrap(Object.getPrototypeOf(raw.sql) as object, "exec", (_s, a, out) => {
      storageUsed.add("sql");
      if (!String(a[0]).includes("__miniflare")) cursors.push(out as { rowsRead: number; rowsWritten: number });
      return out;
    });
  });
  const namespaces = new Map<object, string>();
  for (const b of bindingsOf(toml))
    if (b.kind === "do") namespaces.set((env as unknown as Record<string, object>)[b.name]!, b.target);
  const ns = Object.getPrototypeOf(env.OUTBOX) as object;
  const stubbed = (cls: string, stub: object) =>
    new Proxy(stub, {
      get(t, p) {
        const v = Reflect.get(t, p, t);
        if (typeof p === "symbol" || p === "then" || typeof v !== "function") return v;
        return (...a: unknown[]) => {
          if (!String(p).startsWith("dev")) bump(`do.${cls}`);
          return Reflect.apply(v as (...x: unknown[]) => unknown, t, a);
        };
      },
    });
  for (const m of ["get", "getByName"])
    wrap(ns, m, (self, _a, out) => stubbed(namespaces.get(self as object) ?? "unknown namespace", out as object));
  const stmt = Object.getPrototypeOf(env.DB.prepare("SELECT 1")) as object;
  for (const m of ["run", "all", "first", "raw"]) wrap(stmt, m, afterMeta("d1"));
  const db = Object.getPrototypeOf(env.DB) as object;
  wrap(db, "batch", (_s, a, out) => {
    bump("d1.statements", (a[0] as unknown[]).length - 1);
    return afterMetaAll(out);
  });
  wrap(db, "exec", (_s, _a, out) => {
    bump("d1.statements");
    return out;
  });
  const r2 = Object.getPrototypeOf(env.BODIES) as object;
  for (const m of ["put", "list", "createMultipartUpload"])
    wrap(r2, m, (_s, _a, out) => {
      bump("r2.class_a");
      return out;
    });
  for (const m of ["get", "head"])
    wrap(r2, m, (_s, _a, out) => {
      bump("r2.class_b");
      return out;
    });
  wrap(r2, "delete", (_s, a, out) => {
    bump("r2.deletes", Array.isArray(a[0]) ? (a[0] as unknown[]).length : 1);
    return out;
  });
  const producers = new Map<object, string>();
  for (const b of bindingsOf(toml))
    if (b.kind === "queue") producers.set((env as unknown as Record<string, object>)[b.name]!, b.target);
  const q = Object.getPrototypeOf(env.CLASSIFY) as object;
  const queueOf = (self: unknown) => `queue.${producers.get(self as object) ?? "unknown producer"}`;
  wrap(q, "send", (self, a, out) => {
    bump(queueOf(self), queueOps(a[0], (a[1] as { contentType?: string } | undefined)?.contentType));
    return out;
  });
  wrap(q, "sendBatch", (self, a, out) => {
    for (const m of a[0] as MessageSendRequest[]) bump(queueOf(self), queueOps(m.body, m.contentType));
    return out;
  });
  return namespaces;
}

function afterMetaAll(out: unknown): unknown {
  bump("d1.statements");
  return Promise.resolve(out).then((rs) => {
    for (const r of rs as { meta?: { rows_read?: number; rows_written?: number } }[]) {
      bump("d1.rows_read", r.meta?.rows_read ?? 0);
      bump("d1.rows_written", r.meta?.rows_written ?? 0);
    }
    return rs;
  });
}

/** Until no object is active and the meter has not moved for a second (runInDurableObject, which settle() uses, takes no wrapped stub). */
async function quiet(): Promise<void> {
  let last = "";
  let since = Date.now();
  await eventually(
    async () => {
      const now = JSON.stringify(meterSnapshot());
      if (now !== last || (meterSnapshot().do_busy_now ?? 0) > 0) {
        last = now;
        since = Date.now();
        return undefined;
      }
      return Date.now() - since >= 1000 ? true : undefined;
    },
    15_000,
    "the meter to stand still",
  );
}

describe.skipIf(env.DELIVERY !== "agents")("the meter's coverage", () => {
  let key: string;
  let operator: string;
  beforeAll(async () => {
    key = await newKey("acme");
    operator = await newOperatorKey("ops");
    await env.DB.batch([
      env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('covsmtp', ?), ('covmail', 'cf-email')").bind(
        `[127.0.0.1]:${sink.smtpPort}`,
      ),
      env.DB.prepare(
        "INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'cov.test', 'covsmtp'), (NULL, 'covmail.test', 'covmail')",
      ),
    ]);
    await installIndependentCount();
  });
  afterAll(() => {
    for (const r of restore.reverse()) r();
  });

  it("counts exactly what the runtime saw, for every binding of wrangler.toml and every storage method used", async () => {
    const bindings = bindingsOf(toml);
    expect(
      bindings.filter((b) => b.kind.startsWith("unknown")),
      "bindings of a kind the meter does not know",
    ).toEqual([]);
    await quiet();
    meterReset();
    for (const k of Object.keys(seen)) delete seen[k];
    cursors.length = 0;
    const ids: string[] = [];
    for (const [to, text] of [
      ["a@cov.test", "small"],
      ["b@cov.test", "x".repeat(40_000)],
      ["c@covmail.test", "via Email Service"],
    ] as const) {
      const res = await callWithKey(key, "POST", "/emails", email({ to: [to], subject: "coverage", text }));
      expect(res.status).toBe(200);
      ids.push((await res.json<{ id: string }>()).id);
    }
    for (const id of ids) {
      const rs = await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered", 15_000);
      // The send_email binding is a service binding whose `send` is an RPC name, not a method of a
      // prototype: its sends are counted by what the relay recorded, one per recipient it delivered.
      bump("email.sends", rs.filter((r) => r.last_response?.mx === "email-service.cloudflare").length);
    }
    // A destination that only succeeds gets no Destination DO request on the delivery path
    // (feedback-gate.ts): the operator's view of one reaches it.
    const dest = await callWithKey(
      operator,
      "GET",
      `/relay/destinations/covsmtp/${encodeURIComponent(`[127.0.0.1]:${sink.smtpPort}`)}`,
    );
    expect(dest.status).toBe(200);
    await dest.arrayBuffer();
    const metered = meterEnv(env);
    for (const b of bindings.filter((x) => x.kind === "queue"))
      await (metered as unknown as Record<string, Queue>)[b.name]!.send({ probe: "meter coverage" });
    await quiet();
    const m = meterSnapshot();
    const written = cursors.reduce((n, c) => n + c.rowsWritten, 0) + (seen["do.rows_written"] ?? 0);
    const storage = { written, read: cursors.reduce((n, c) => n + c.rowsRead, 0) };
    for (const b of bindings) {
      const [want, got] =
        b.kind === "do"
          ? [
              seen[`do.${b.target}`] ?? 0,
              (m.do_requests_by_class[b.target] ?? 0) - (m.do_alarms_by_class[b.target] ?? 0),
            ]
          : b.kind === "d1"
            ? [seen["d1.statements"] ?? 0, m.d1_statements]
            : b.kind === "r2"
              ? [(seen["r2.class_a"] ?? 0) + (seen["r2.class_b"] ?? 0), m.r2_class_a + m.r2_class_b]
              : b.kind === "email"
                ? [seen["email.sends"] ?? 0, m.email_sends]
                : b.kind === "queue"
                  ? [seen[`queue.${b.target}`] ?? 0, m.queue_writes[b.target] ?? 0]
                  : [0, 0];
      expect(want, `${b.name} (${b.kind}) was used by the run`).toBeGreaterThan(0);
      expect(got, `${b.name} (${b.kind}): the meter's count against the runtime's`).toBe(want);
    }
    expect(
      Object.keys(seen).filter((k) => k.includes("unknown")),
      "calls on objects of no binding",
    ).toEqual([]);
    expect({ d1_written: m.d1_rows_written, d1_read: m.d1_rows_read }).toEqual({
      d1_written: seen["d1.rows_written"] ?? 0,
      d1_read: seen["d1.rows_read"] ?? 0,
    });
    expect({ written: m.do_rows_written, read: m.do_rows_read }).toEqual(storage);
    expect(m.r2_deletes).toBe(seen["r2.deletes"] ?? 0);
    expect(
      [...storageUsed].filter((s) => !(s in STORAGE_METHODS)),
      "storage methods the meter does not count",
    ).toEqual([]);
  });
});
