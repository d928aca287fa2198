/**
 * A send request's key, its recipients' suppressions and (in development) its sender domain's
 * owners are read in one D1 batch (api/http/send-reads.ts), and answer as the reads one after
 * another did: a suppressed address is suppressed, an address the prefetch did not cover is read
 * from D1, a bad key is refused before a bad body, and a request without Content-Length reads as
 * before.
 */
import { createExecutionContext, env, runInDurableObject, waitOnExecutionContext } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import worker from "../../worker";
import { outboxName, shardOf } from "../../worker/model/ids";
import { readView } from "../../durable-objects/outbox/store";
import { email, newKey } from "./helpers";

const TENANT = "sreads";
let key: string;
beforeAll(async () => {
  key = await newKey(TENANT);
  await env.DB.batch(
    ["gone@example.com", "xn--bcher-kva.example", "left@xn--bcher-kva.example"].map((a) =>
      env.DB.prepare(
        "INSERT INTO suppressions (tenant_id, address, reason, created_at, expires_at) VALUES (?1, ?2, 'hard_bounce', ?3, NULL)",
      ).bind(TENANT, a, Date.now()),
    ),
  );
});

/** D1 calls the worker made (each the SQL of its statements), through a DB that records them. */
function recordingDb(): { db: D1Database; calls: string[][] } {
  const calls: string[][] = [];
  const sqlOf = new WeakMap<object, string>();
  const watch = (st: D1PreparedStatement, sql: string): D1PreparedStatement => {
    sqlOf.set(st, sql);
    const bind = st.bind.bind(st);
    st.bind = (...args: unknown[]) => watch(bind(...args), sql);
    for (const m of ["first", "all", "run", "raw"] as const) {
      const f = (st[m] as (...a: unknown[]) => unknown).bind(st);
      (st as unknown as Record<string, unknown>)[m] = (...a: unknown[]) => {
        calls.push([sql]);
        return f(...a);
      };
    }
    return st;
  };
  const db = new Proxy(env.DB, {
    get(t, p) {
      if (p === "prepare") return (sql: string) => watch(t.prepare(sql), sql);
      if (p === "batch")
        return (sts: D1PreparedStatement[]) => {
          calls.push(sts.map((s) => sqlOf.get(s) ?? "?"));
          return t.batch(sts);
        };
      const v = Reflect.get(t, p) as unknown;
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(t) : v;
    },
  });
  return { db, calls };
}

async function send(body: unknown, opts: { length?: boolean; key?: string } = {}) {
  const { db, calls } = recordingDb();
  const text = typeof body === "string" ? body : JSON.stringify(body);
  const headers: Record<string, string> = {
    authorization: `Bearer ${opts.key ?? key}`,
    "content-type": "application/json",
  };
  if (opts.length !== false) headers["content-length"] = String(new TextEncoder().encode(text).byteLength);
  const ctx = createExecutionContext();
  const res = await worker.fetch(
    new Request("http://relay.test/emails", { method: "POST", headers, body: text }) as Request<
      unknown,
      IncomingRequestCfProperties
    >,
    { ...env, DB: db } as Env,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return { status: res.status, json: (await res.json()) as Record<string, unknown>, calls };
}

const statuses = (id: string) =>
  runInDurableObject(env.OUTBOX.getByName(outboxName(shardOf(id))), (_o, state) =>
    Object.fromEntries((readView(state.storage.sql, id, Date.now())?.recipients ?? []).map((r) => [r.email, r.status])),
  );

/** The calls that read one of the send path's questions: the key, suppressions, domain owners. */
const asking = (calls: string[][]) =>
  calls
    .map((c) =>
      c
        .map((sql) =>
          /FROM api_keys k/.test(sql)
            ? "key"
            : /FROM suppressions/.test(sql)
              ? "suppressions"
              : /FROM domains WHERE verified_at/.test(sql)
                ? "owners"
                : null,
        )
        .filter((x) => x !== null),
    )
    .filter((c) => c.length > 0);

describe("a send request's reads in one batch", () => {
  it("reads the key, the suppressions and the sender's owners in one call, and suppresses as before", async () => {
    const r = await send(email({ to: ["ann@example.com", "Gone <GONE@example.com>"] }));
    expect(r.status).toBe(200);
    expect(asking(r.calls)).toEqual([["key", "suppressions", "owners"]]);
    expect(await statuses(r.json.id as string)).toEqual({
      "ann@example.com": expect.stringMatching(/^(incoming|ready)$/),
      "GONE@example.com": "suppressed",
    });
  });

  it("reads from D1 what the prefetch did not cover: an address the body named in another form", async () => {
    const r = await send(email({ to: ["left@bücher.example"] }));
    expect(r.status).toBe(200);
    expect(asking(r.calls)).toEqual([["key", "suppressions", "owners"], ["suppressions"]]);
    expect(Object.values(await statuses(r.json.id as string))).toEqual(["suppressed"]);
  });

  it("without Content-Length reads one after another, with the same answers", async () => {
    const r = await send(email({ to: ["ann@example.com", "gone@example.com"] }), { length: false });
    expect(r.status).toBe(200);
    expect(asking(r.calls)).toEqual([["key"], ["owners"], ["suppressions"]]);
    expect(await statuses(r.json.id as string)).toEqual({
      "ann@example.com": expect.stringMatching(/^(incoming|ready)$/),
      "gone@example.com": "suppressed",
    });
  });

  it("refuses a bad key before a bad body, and a bad body with a good key", async () => {
    const bad = await send("{not json", { key: "re_not_a_key_at_all_000000000000" });
    expect([bad.status, bad.json.name]).toEqual([403, "invalid_api_key"]);
    const notJson = await send("{not json");
    expect([notJson.status, notJson.json.name]).toEqual([400, "validation_error"]);
    expect(asking(notJson.calls)).toEqual([["key", "suppressions"]]); // no From read: no owners asked
  });
});
