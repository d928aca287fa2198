import { beforeEach, describe, expect, it } from "vitest";
import {
  meterCtx,
  meterD1,
  meterEnv,
  meterFetch,
  meterQueue,
  meterReset,
  meterScheduled,
  meterSnapshot,
  meterStub,
  queueOps,
} from "../../../worker/meter";

const ON = { METER: "on" } as Env;

/** A fake SqlStorageCursor: `written` rows at exec, then one row read per row handed out. */
function fakeCursor(rows: Record<string, unknown>[], written = 0) {
  let i = 0;
  let read = 0;
  const cursor = {
    get rowsRead() {
      return read;
    },
    get rowsWritten() {
      return written;
    },
    columnNames: Object.keys(rows[0] ?? {}),
    next() {
      if (i < rows.length) {
        read++;
        return { done: false, value: rows[i++] };
      }
      return { done: true, value: undefined };
    },
    toArray() {
      const out = [];
      for (let r = cursor.next(); !r.done; r = cursor.next()) out.push(r.value);
      return out;
    },
    one() {
      const r = cursor.next();
      if (r.done) throw new Error("no row");
      read += rows.length - i;
      i = rows.length;
      return r.value;
    },
    raw() {
      return {
        next: () => {
          const r = cursor.next();
          return r.done ? r : { done: false, value: Object.values(r.value as object) };
        },
        [Symbol.iterator]() {
          return this;
        },
      };
    },
    [Symbol.iterator]() {
      return cursor;
    },
  };
  return cursor;
}

function fakeCtx(results: () => ReturnType<typeof fakeCursor>) {
  const alarms: number[] = [];
  const storage = {
    sql: { exec: () => results(), databaseSize: 0 },
    setAlarm: async (t: number) => {
      alarms.push(t);
    },
    getAlarm: async () => alarms.at(-1) ?? null,
  };
  return {
    ctx: {
      storage,
      id: { name: "x" },
      blockConcurrencyWhile: async (f: () => Promise<void>) => f(),
    } as unknown as DurableObjectState,
    alarms,
  };
}

beforeEach(() => meterReset());

describe("meter: Durable Object SQL", () => {
  const rows = [{ a: 1 }, { a: 2 }, { a: 3 }];
  it.each([
    { name: "toArray()", consume: (c: SqlStorageCursor<Record<string, SqlStorageValue>>) => c.toArray(), read: 3 },
    { name: "one()", consume: (c: SqlStorageCursor<Record<string, SqlStorageValue>>) => c.one(), read: 3 },
    {
      name: "for…of over the cursor",
      consume: (c: SqlStorageCursor<Record<string, SqlStorageValue>>) => {
        for (const _ of c) void _;
      },
      read: 3,
    },
    { name: "raw()", consume: (c: SqlStorageCursor<Record<string, SqlStorageValue>>) => [...c.raw()], read: 3 },
    {
      name: "next() twice",
      consume: (c: SqlStorageCursor<Record<string, SqlStorageValue>>) => {
        c.next();
        c.next();
      },
      read: 2,
    },
    { name: "nothing (exec only)", consume: () => undefined, read: 0 },
  ])("counts the rows a cursor reports as it is consumed by $name", ({ consume, read }) => {
    const { ctx } = fakeCtx(() => fakeCursor(rows, 4));
    const sql = meterCtx(ctx, "Outbox").storage.sql;
    consume(sql.exec("SELECT a FROM t"));
    const s = meterSnapshot();
    expect({ read: s.do_rows_read_by_class.Outbox ?? 0, written: s.do_rows_written_by_class.Outbox }).toEqual({
      read,
      written: 4,
    });
  });

  it("returns the rows unchanged", () => {
    const { ctx } = fakeCtx(() => fakeCursor(rows));
    expect(meterCtx(ctx, "Outbox").storage.sql.exec("SELECT a FROM t").toArray()).toEqual(rows);
  });

  it("counts a setAlarm as one row written, and keeps it working", async () => {
    const { ctx, alarms } = fakeCtx(() => fakeCursor([]));
    const storage = meterCtx(ctx, "TransportQueue").storage;
    await storage.setAlarm(42);
    expect(await storage.getAlarm()).toBe(42);
    expect(alarms).toEqual([42]);
    expect(meterSnapshot()).toMatchObject({
      do_rows_written_by_class: { TransportQueue: 1 },
      do_set_alarms_by_class: { TransportQueue: 1 },
    });
  });
});

describe("meter: D1", () => {
  function fakeD1(rows: Record<string, unknown>[], meta: { rows_read: number; rows_written: number }) {
    const stmt = (bound: unknown[]): D1PreparedStatement =>
      ({
        bind: (...v: unknown[]) => stmt(v),
        all: async () => ({ results: rows, success: true, meta }),
        run: async () => ({ results: [], success: true, meta }),
        first: async () => {
          throw new Error("first() must not be called: it has no meta");
        },
        raw: async () => {
          throw new Error("raw() must not be called: it has no meta");
        },
        bound,
      }) as unknown as D1PreparedStatement;
    return {
      prepare: () => stmt([]),
      batch: async (s: D1PreparedStatement[]) => s.map(() => ({ results: rows, success: true, meta })),
    } as unknown as D1Database;
  }

  it("sums meta of run, all, first (through all), raw (through all) and batch", async () => {
    const db = meterD1(fakeD1([{ a: 1, b: "x" }], { rows_read: 2, rows_written: 5 }));
    await db.prepare("INSERT").bind(1).run();
    await db.prepare("SELECT").all();
    expect(await db.prepare("SELECT").bind(1).first()).toEqual({ a: 1, b: "x" });
    expect(await db.prepare("SELECT").first("b")).toBe("x");
    expect(await db.prepare("SELECT").raw()).toEqual([[1, "x"]]);
    expect(await db.prepare("SELECT").raw({ columnNames: true })).toEqual([
      ["a", "b"],
      [1, "x"],
    ]);
    await db.batch([db.prepare("A"), db.prepare("B").bind(2)]);
    expect(meterSnapshot()).toMatchObject({ d1_statements: 8, d1_rows_read: 16, d1_rows_written: 40 });
  });

  it("attributes rows written to each statement, D1 and Durable Object alike, by its first words", async () => {
    const db = meterD1(fakeD1([], { rows_read: 0, rows_written: 3 }));
    await db.prepare("INSERT INTO a\n   (x) VALUES (?)").bind(1).run();
    await db.batch([db.prepare("DELETE FROM b"), db.prepare("INSERT INTO a\n   (x) VALUES (?)").bind(2)]);
    const { ctx } = fakeCtx(() => fakeCursor([], 2));
    meterCtx(ctx, "Outbox").storage.sql.exec("UPDATE m SET s = 1");
    expect(meterSnapshot().rows_written_by_statement).toEqual({
      "D1: INSERT INTO a (x) VALUES (?)": 6,
      "D1: DELETE FROM b": 3,
      "Outbox: UPDATE m SET s = 1": 2,
    });
  });

  it("answers first() with null when there is no row", async () => {
    const db = meterD1(fakeD1([], { rows_read: 0, rows_written: 0 }));
    expect(await db.prepare("SELECT").first()).toBeNull();
  });
});

describe("meter: queues", () => {
  it.each([
    { name: "a small body", body: { id: "m" }, ops: 1 },
    { name: "exactly 64 KB of JSON", body: "x".repeat(65536 - 2), ops: 1 },
    { name: "one byte more than 64 KB", body: "x".repeat(65536 - 1), ops: 2 },
  ])("bills $name as $ops operation(s)", ({ body, ops }) => {
    expect(queueOps(body)).toBe(ops);
  });

  function fakeBatch(n: number) {
    const log: string[] = [];
    const messages = Array.from({ length: n }, (_, i) => ({
      id: String(i),
      body: { id: i },
      attempts: 1,
      ack: () => log.push(`ack ${i}`),
      retry: () => log.push(`retry ${i}`),
    }));
    return {
      batch: {
        queue: "deliver",
        messages,
        ackAll: () => log.push("ackAll"),
        retryAll: () => log.push("retryAll"),
      } as unknown as MessageBatch<unknown>,
      log,
    };
  }

  it("counts one read per message and one delete per message that ends acked", async () => {
    const { batch, log } = fakeBatch(4);
    await meterQueue(batch, ON, async (b) => {
      b.messages[0]!.ack();
      b.messages[1]!.retry();
      // 2 and 3: neither, acked when the invocation succeeds.
    });
    expect(log).toEqual(["ack 0", "retry 1"]);
    expect(meterSnapshot()).toMatchObject({
      worker_invocations: 1,
      queue_reads: { deliver: 4 },
      queue_deletes: { deliver: 3 },
      queue_ops_by_queue: { deliver: 7 },
    });
  });

  it("counts only explicit acks when the invocation throws", async () => {
    const { batch } = fakeBatch(3);
    await expect(
      meterQueue(batch, ON, async (b) => {
        b.messages[2]!.ack();
        throw new Error("boom");
      }),
    ).rejects.toThrow("boom");
    expect(meterSnapshot().queue_deletes).toEqual({ deliver: 1 });
  });

  it("counts ackAll for every message not retried", async () => {
    const { batch } = fakeBatch(3);
    await meterQueue(batch, ON, async (b) => {
      b.messages[0]!.retry();
      b.ackAll();
    });
    expect(meterSnapshot().queue_deletes).toEqual({ deliver: 2 });
  });

  it("counts a write per message sent through a metered producer", async () => {
    const sent: unknown[] = [];
    const producer = {
      send: async (b: unknown) => void sent.push(b),
      sendBatch: async (m: MessageSendRequest[]) => void sent.push(...m),
    } as unknown as Queue;
    const env = meterEnv({ CLASSIFY: producer } as unknown as Env);
    await env.CLASSIFY.send({ id: "a" });
    await env.CLASSIFY.sendBatch([{ body: { id: "b" } }, { body: { id: "c" } }]);
    expect(sent).toHaveLength(3);
    expect(meterSnapshot().queue_writes).toEqual({ classify: 3 });
  });
});

describe("meter: Durable Object stubs and entries", () => {
  it("passes a call on a stub through (the object that receives it counts the request), and leaves `then` and plain properties alone", async () => {
    const stub = meterStub(
      { name: "o", ping: async (x: number) => x + 1 } as {
        name: string;
        ping: (x: number) => Promise<number>;
        then?: unknown;
      },
      "Outbox",
    );
    expect(stub.then).toBeUndefined();
    expect(stub.name).toBe("o");
    expect(await stub.ping(1)).toBe(2);
    expect(meterSnapshot().do_requests_by_class).toEqual({});
  });

  it("remembers the names of the objects stubs were made for", () => {
    const ns = { getByName: (n: string) => ({ n }) } as unknown as DurableObjectNamespace;
    meterEnv({ OUTBOX: ns } as unknown as Env).OUTBOX.getByName("outbox-01");
    expect(meterSnapshot().do_names).toEqual({ Outbox: ["outbox-01"] });
  });

  it("counts a fetch invocation but not the meter's own /relay/dev/ requests", () => {
    const env = { METER: "on" } as Env;
    expect(meterFetch(new Request("http://x/relay/dev/meter"), env)).toBe(env);
    meterFetch(new Request("http://x/emails"), env);
    expect(meterSnapshot().worker_invocations_by_kind).toEqual({ fetch: 1 });
  });
});

describe('meter: off unless METER is "on"', () => {
  it("hands back the env, batch, ctx and bindings untouched and counts nothing", async () => {
    const ns = { getByName: (n: string) => ({ n }) } as unknown as DurableObjectNamespace;
    for (const METER of [undefined, "off", "", "ON"]) {
      const env = { METER, OUTBOX: ns } as unknown as Env;
      expect(meterFetch(new Request("http://x/emails"), env)).toBe(env);
      expect(meterScheduled(env)).toBe(env);
      const { batch, log } = (() => {
        const l: string[] = [];
        return {
          batch: {
            queue: "deliver",
            messages: [{ id: "0", body: {}, attempts: 1, ack: () => l.push("ack") }],
          } as unknown as MessageBatch<unknown>,
          log: l,
        };
      })();
      await meterQueue(batch, env, async (b, e) => {
        expect(b).toBe(batch);
        expect(e).toBe(env);
        b.messages[0]!.ack();
      });
      expect(log).toEqual(["ack"]);
    }
    expect(meterSnapshot()).toMatchObject({ worker_invocations: 0, do_requests: 0, queue_ops: 0 });
  });
});
