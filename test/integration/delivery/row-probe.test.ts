/**
 * Rows written per one-recipient message through the whole path in workerd (accept, classify,
 * dispatch, SMTP to the sink, outcomes, index, webhooks off), counted from every DO
 * `sql.exec` cursor (rowsWritten) and every D1 result's meta, by patching the runtime's
 * prototypes for the duration of the test. A probe for the lean data path: it prints the
 * figures per object and per statement, and asserts a ceiling so that a regression fails: 23.8
 * DO rows per message when it was set (46.75 at 3da0cee). `npm run bench:cost` is the referee for
 * the whole bill (D1, queues, R2, retention); this shows where the DO rows come from.
 */
import { env, runInDurableObject } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { outboxName } from "../../../worker/model/ids";
import { callWithKey, email, eventually, newKey } from "../helpers";

const sink = inject("sink");
let key: string;

type Cursorish = { rowsWritten: number; rowsRead: number };
const cursors: { sql: unknown; c: Cursorish; q: string }[] = [];
const names = new Map<unknown, string>();
let restore: () => void = () => undefined;

beforeAll(async () => {
  key = await newKey("probe");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('probe', ?)").bind(`[127.0.0.1]:${sink.smtpPort}`),
    env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'probe.test', 'probe')"),
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('tiny', ?)").bind(`[127.0.0.1]:${sink.smtpPort}`),
    env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'tiny.test', 'tiny')"),
  ]);
  const sqlOf = (stub: DurableObjectStub) => runInDurableObject(stub, (_i, s) => s.storage.sql);
  const proto = Object.getPrototypeOf(await sqlOf(env.OUTBOX.getByName(outboxName(0)))) as {
    exec: (...a: unknown[]) => Cursorish;
  };
  const orig = proto.exec;
  proto.exec = function (this: unknown, ...a: unknown[]) {
    const c = orig.apply(this, a);
    cursors.push({ sql: this, c, q: String(a[0]).slice(0, 60) });
    return c;
  };
  restore = () => {
    proto.exec = orig;
  };
  for (let s = 0; s < 4; s++) names.set(await sqlOf(env.OUTBOX.getByName(outboxName(s))), "outbox");
  names.set(await sqlOf(env.TRANSPORT_QUEUE.getByName("probe")), "transport");
});

afterAll(() => restore());

async function send(n: number, domain = "probe.test"): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await callWithKey(
      key,
      "POST",
      "/emails",
      email({ from: "Acme <no-reply@acme.test>", to: [`r${i}@${domain}`] }),
    );
    ids.push((await res.json<{ id: string }>()).id);
  }
  return ids;
}

async function indexedDelivered(ids: string[]): Promise<void> {
  await eventually(
    async () => {
      const r = await env.DB.prepare(
        "SELECT count(*) AS n FROM messages WHERE id IN (SELECT value FROM json_each(?)) AND last_event = 'delivered'",
      )
        .bind(JSON.stringify(ids))
        .first<{ n: number }>();
      return r?.n === ids.length ? true : undefined;
    },
    20_000,
    "delivered in the index",
  );
  await new Promise((r) => setTimeout(r, 500));
}

describe("rows written per one-recipient email", () => {
  it("stays within 7.5 DO rows, printed by object and statement", async () => {
    await indexedDelivered(await send(2));
    cursors.length = 0;
    const n = 20;
    await indexedDelivered(await send(n));
    const by = new Map<string, number>();
    const byQ = new Map<string, number>();
    let total = 0;
    for (const { sql, c, q } of cursors) {
      const who = names.get(sql) ?? "destination";
      by.set(who, (by.get(who) ?? 0) + c.rowsWritten);
      if (c.rowsWritten > 0) byQ.set(`${who}: ${q}`, (byQ.get(`${who}: ${q}`) ?? 0) + c.rowsWritten);
      total += c.rowsWritten;
    }
    console.log(
      JSON.stringify({ per_message: total / n, by: Object.fromEntries([...by].map(([k, v]) => [k, v / n])) }),
    );
    console.log(
      [...byQ]
        .sort((a, b) => b[1] - a[1])
        .map(([q, v]) => `${(v / n).toFixed(2)}  ${q}`)
        .join("\n"),
    );
    expect(total / n).toBeLessThanOrEqual(7.5);
    // A one-recipient message keeps its recipient in its own row (durable-objects/outbox/rcpt.ts).
    expect([...byQ.keys()].filter((q) => /\brcpt\b/.test(q))).toEqual([]);
    // ...and is marked ready by its outcome's write, not by a write of its own (outbox/unmarked.ts),
    // unless its outcome came after the index lag (2 s here; a loaded machine can be that slow).
    const marks = [...byQ].filter(([q]) => /SET unclassified = 0/.test(q)).reduce((a, [, v]) => a + v, 0);
    expect(marks / n).toBeLessThanOrEqual(0.5);
  }, 60_000);

  it("journals nothing in a transport with a tiny core: every flush is a snapshot in its meta row, and a done attempt leaves no finished row and no admission row", async () => {
    // One message after another, to a transport of their own, as mail that comes alone does.
    for (let i = 0; i < 3; i++) await indexedDelivered(await send(1, "tiny.test"));
    const tables = await runInDurableObject(env.TRANSPORT_QUEUE.getByName("tiny"), (_i, state) => {
      const sql = state.storage.sql;
      const count = (t: string) => sql.exec<{ n: number }>(`SELECT count(*) AS n FROM ${t}`).one().n;
      const meta = sql.exec<{ parts: number; data: string | null }>("SELECT parts, data FROM snapshot_meta").toArray();
      return {
        ring: count("journal_ring"),
        chunks: count("snapshot_chunk"),
        finished: count("finished"),
        admission: count("admission"),
        meta: meta.map((m) => ({ parts: m.parts, inline: m.data !== null && m.data.length <= 16_384 })),
      };
    });
    // Their admission records are kept with the snapshot (admissions.ts), not as rows.
    expect(tables).toEqual({ ring: 0, chunks: 0, finished: 0, admission: 0, meta: [{ parts: 0, inline: true }] });
  }, 60_000);
});
