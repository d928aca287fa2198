/**
 * Failures in the middle of delivery, in the Workers runtime against scripted smtp-server sinks
 * (scripted-sinks.ts): a connection lost in the middle of DATA (the recipient is deferred, then
 * delivered on the retry with the exact body bytes), and a 5xx greeting at the first MX host (the
 * next MX host is tried within the same attempt).
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { callWithKey, email, eventually, newKey, settle, storedBody } from "../helpers";
import { caught as sinkMessages, recipientsWhen as waitRecipients, type Rcpt } from "./observe";

const scripted = inject("scripted");
const sink = inject("sink");
let key: string;

type Stats = {
  connections: number;
  sessions: number;
  refused: number;
  drops: number;
  messages: { mailFrom: string; rcptTo: string[]; body: string }[];
};

beforeAll(async () => {
  key = await newKey("acme");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('drop', ?), ('mx', NULL)").bind(
      `[127.0.0.1]:${scripted.ports.drop}`,
    ),
    env.DB.prepare(
      "INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'drop.test', 'drop'), (NULL, 'mx-greet.test', 'mx')",
    ),
  ]);
});

async function stats(name: string): Promise<Stats> {
  return (await fetch(`${scripted.statsUrl}/${name}`)).json<Stats>();
}

async function send(body: Record<string, unknown>): Promise<string> {
  const res = await callWithKey(key, "POST", "/emails", email(body));
  expect(res.status).toBe(200);
  return (await res.json<{ id: string }>()).id;
}

const recipientsWhen = (id: string, done: (r: Rcpt) => boolean, what: string, timeoutMs?: number) =>
  waitRecipients(key, id, done, what, timeoutMs);

describe("a connection dropped in the middle of DATA", () => {
  it("defers the recipient, then delivers it on the retry with the exact body bytes", async () => {
    // A body of several KiB, with lines that need dot-stuffing, so the drop happens mid-stream.
    const text = Array.from({ length: 200 }, (_, i) =>
      i % 10 === 0 ? `.line ${i} starts with a dot` : `line ${i} of the body, long enough to matter`,
    ).join("\n");
    const id = await send({ to: ["dana@drop.test"], subject: "Dropped once", text, scheduled_at: "in 2 seconds" });
    const stored = await storedBody(id);
    const first = await recipientsWhen(
      id,
      (r) => r.status === "deferred" || r.status === "delivered",
      "the first attempt",
      15_000,
    );
    expect(first[0]).toMatchObject({ status: "deferred", attempts: 1 });
    expect(first[0]!.last_response?.enhanced).toMatch(/^4\./);
    expect(first[0]!.next_attempt_at).not.toBeNull();
    expect((await stats("drop")).drops).toBe(1);

    const done = await recipientsWhen(id, (r) => r.status === "delivered", "delivery on the retry", 15_000);
    expect(done[0]).toMatchObject({ attempts: 2, last_response: { code: 250 } });
    const got = (await stats("drop")).messages.filter((m) => m.rcptTo.includes("dana@drop.test"));
    expect(got).toHaveLength(1);
    expect(got[0]!.mailFrom).toBe("no-reply@acme.test");
    expect(Uint8Array.from(atob(got[0]!.body), (c) => c.charCodeAt(0))).toEqual(stored);
  });
});

describe("a 5xx greeting at the first MX host", () => {
  it("is a site failure of that host only: the next MX host is tried within the same attempt", async () => {
    const before = await stats("greet554");
    const id = await send({ to: ["gus@mx-greet.test"] });
    const rs = await recipientsWhen(
      id,
      (r) => r.status === "delivered" || r.status === "deferred" || r.status === "bounced",
      "an outcome",
      15_000,
    );
    expect(rs[0]).toMatchObject({ status: "delivered", attempts: 1, last_response: { code: 250, mx: "localhost" } });
    // The better host (127.0.0.3) was connected to and refused with 554; the sink got one copy.
    const after = await stats("greet554");
    expect(after.connections - before.connections).toBeGreaterThanOrEqual(1);
    expect(after.refused - before.refused).toBe(after.connections - before.connections);
    expect((await sinkMessages(sink.httpPort)).filter((m) => m.rcptTo.includes("gus@mx-greet.test"))).toHaveLength(1);
  });
});

describe("teardown", () => {
  it("lets the queues settle", async () => {
    await settle();
  });
});
