/**
 * Migrations 0036 and 0040: an email's events written by one statement are one run of seqs, kept
 * in one row of event_runs (its rest holds all but the first) with an entry in event_log_by_source.
 * Every event stays reachable through event_of_email exactly once, a repeated or extended
 * publication stores nothing twice, runs written before in a row per event stay readable, and
 * retention deletes such a run's rows before its head.
 */
import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { newMessageId } from "../../worker/model/ids";
import { logInsertStatements, REST_MAX, type LogRow } from "../../worker/db/events";
import { IN_PAGE_BYTES } from "../../worker/db/event-inserts";
import { buildEvent } from "../../worker/webhooks/core/envelope";
import { compactBody, expandBody } from "../../worker/webhooks/core/stored-body";
import { feedBodyOf } from "../../worker/db/feed";
import { eventId } from "../../worker/webhooks/core/event-id";
import { PURGE_SQL } from "../../worker/db/retention";
import { deliveredRow } from "./log-rows";

const row = (email: string, sourceSeq: number, at: number): LogRow =>
  deliveredRow(
    sourceSeq,
    eventId({ emailId: email, recipient: "r@x.example", attempt: sourceSeq, type: "email.delivered" }),
    at,
  );

async function log(tenant: string, messages: { email: string; seqs: number[] }[]): Promise<number> {
  const rs = await env.DB.batch(
    logInsertStatements(
      env.DB,
      messages.map((m) => ({ tenant, emailId: m.email, rows: m.seqs.map((s) => row(m.email, s, 5_000)) })),
      6_000,
    ),
  );
  return rs.reduce((n, r) => n + r.meta.rows_written, 0);
}

async function eventsOf(email: string): Promise<number[]> {
  const r = await env.DB.prepare("SELECT source_seq FROM event_of_email WHERE of_email = ? ORDER BY seq")
    .bind(email)
    .all<{ source_seq: number }>();
  return r.results.map((x) => x.source_seq);
}

/** The email's rows as stored: first event, run, events in rest. */
async function rowsOf(email: string) {
  return (
    await env.DB.prepare(
      "SELECT source_seq, run, json_array_length(rest) AS rest FROM event_runs WHERE email_id = ? ORDER BY seq",
    )
      .bind(email)
      .all<{ source_seq: number; run: number; rest: number | null }>()
  ).results;
}

/** A query plan, checked to scan no table (json_each's rows are none). */
async function plan(sql: string, ...binds: unknown[]): Promise<string> {
  const rows = (
    await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
      .bind(...binds)
      .all<{ detail: string }>()
  ).results.map((x) => x.detail);
  // A view read as a co-routine is scanned as such; every table is searched through a key.
  for (const d of rows) if (/SCAN/.test(d)) expect(d).toMatch(/VIRTUAL TABLE|^SCAN event_of_email$/);
  return rows.join(" / ");
}

describe("runs of an email's events (migrations 0036, 0040)", () => {
  it("writes a run as one row with one index entry: two events of one email cost 2 rows, not 3", async () => {
    const email = newMessageId(0);
    expect(await log("runs-1", [{ email, seqs: [1, 2] }])).toBe(2);
    expect(await rowsOf(email)).toEqual([{ source_seq: 1, run: 0, rest: 1 }]);
    expect(await eventsOf(email)).toEqual([1, 2]);
    // Each event has a seq of its own, in order, and the view of the log gives both.
    const log2 = await env.DB.prepare("SELECT seq, head_seq, source_seq FROM event_log WHERE email_id = ? ORDER BY seq")
      .bind(email)
      .all<{ seq: number; head_seq: number; source_seq: number }>();
    const head = log2.results[0]!.seq;
    expect(log2.results).toEqual([
      { seq: head, head_seq: head, source_seq: 1 },
      { seq: head + 1, head_seq: head, source_seq: 2 },
    ]);
    // The second event is found by its id through its run.
    expect(await feedBodyOf(env.DB, row(email, 2, 0).event_id!)).toBe(JSON.stringify({ n: 2 }));
    const p = await plan("SELECT seq FROM event_of_email WHERE of_email = ?", email);
    expect(p).toContain("USING INDEX event_log_by_source");
    expect(p).toContain("USING PRIMARY KEY");
  });

  it("stores nothing twice: a repeat writes nothing, a longer publication only what is new, as a run of its own", async () => {
    const email = newMessageId(1);
    expect(await log("runs-2", [{ email, seqs: [1, 2] }])).toBe(2);
    expect(await log("runs-2", [{ email, seqs: [1, 2] }])).toBe(0);
    // An email with events stored gets a row per new event (the form before 0040), one index entry.
    expect(await log("runs-2", [{ email, seqs: [1, 2, 3, 4] }])).toBe(3);
    expect(await eventsOf(email)).toEqual([1, 2, 3, 4]);
    // The next email of the tenant starts after the seqs the first row's rest holds.
    const next = newMessageId(9);
    expect(await log("runs-2", [{ email: next, seqs: [1] }])).toBe(2);
    const seqs = await env.DB.prepare("SELECT seq FROM event_log WHERE tenant_id = 'runs-2' ORDER BY seq").all<{
      seq: number;
    }>();
    expect(new Set(seqs.results.map((r) => r.seq)).size).toBe(5);
  });

  it("stores a row given twice in one statement once (a message twice in a batch)", async () => {
    const email = newMessageId(8);
    expect(
      await log("runs-6", [
        { email, seqs: [1, 2] },
        { email, seqs: [2, 3] },
      ]),
    ).toBe(2);
    expect(await eventsOf(email)).toEqual([1, 2, 3]);
  });

  it("keeps each email's events apart when several emails' events interleave in one statement", async () => {
    const [a, b, c] = [newMessageId(2), newMessageId(3), newMessageId(4)];
    expect(
      await log("runs-3", [
        { email: a, seqs: [1] },
        { email: b, seqs: [1, 2] },
        { email: a, seqs: [2] },
        { email: c, seqs: [1] },
      ]),
    ).toBe(3 + 3);
    expect(await eventsOf(a)).toEqual([1, 2]);
    expect(await eventsOf(b)).toEqual([1, 2]);
    expect(await eventsOf(c)).toEqual([1]);
  });

  it("keeps two events that would pass a row's page in a row each, and packs three", async () => {
    const big = (email: string, s: number): LogRow => ({
      ...row(email, s, 5_000),
      body: "x".repeat(IN_PAGE_BYTES / 2),
    });
    const [two, three] = [newMessageId(11), newMessageId(12)];
    const write = async (email: string, seqs: number[]) =>
      (
        await env.DB.batch(
          logInsertStatements(
            env.DB,
            [{ tenant: "runs-8", emailId: email, rows: seqs.map((s) => big(email, s)) }],
            6_000,
          ),
        )
      ).reduce((n, r) => n + r.meta.rows_written, 0);
    // Two rows, one index entry: the first row's run spans the second.
    expect(await write(two, [1, 2])).toBe(3);
    expect(await rowsOf(two)).toEqual([
      { source_seq: 1, run: 1, rest: null },
      { source_seq: 2, run: -1, rest: null },
    ]);
    expect(await write(three, [1, 2, 3])).toBe(2);
    expect(await rowsOf(three)).toEqual([{ source_seq: 1, run: 0, rest: 2 }]);
    expect([await eventsOf(two), await eventsOf(three)]).toEqual([
      [1, 2],
      [1, 2, 3],
    ]);
  });

  it("keeps a one-recipient email's email.sent and email.delivered envelopes in one row within its page", async () => {
    const email = newMessageId(13);
    const to = "someone.0@mail-0.receiver-domain.example";
    const message = {
      emailId: email,
      createdAtMs: 1_796_612_624_900,
      from: "Acme Notifications <notifications@send.acme.example>",
      to: [to],
      subject: "Your weekly report is ready",
      messageId: `<${email}@send.acme.example>`,
      tags: { kind: "report" },
    };
    const fields = {
      id: email,
      created_at: message.createdAtMs,
      from_addr: message.from,
      to_json: JSON.stringify([to]),
      subject: message.subject,
    };
    const event = (sourceSeq: number, type: "email.sent" | "email.delivered", at: number, data: object): LogRow => {
      const built = buildEvent({
        type,
        message,
        recipient: to,
        attempt: type === "email.sent" ? 0 : 1,
        nowMs: at,
        delivery:
          type === "email.sent"
            ? null
            : {
                smtpCode: 250,
                enhancedCode: "2.0.0",
                response: "250 2.0.0 Ok: queued as 4XyZ12abc",
                mx: "mx.receiver-domain.example",
                tls: true,
              },
      });
      return {
        source_seq: sourceSeq,
        part: 0,
        type: type === "email.sent" ? "email.queued" : type,
        recipient: to,
        created_at: at,
        data: JSON.stringify(data),
        event_id: built.id,
        event_type: type,
        body: compactBody(JSON.stringify(built.envelope), fields, { type, created_at: at, recipient: to }),
      };
    };
    const rows = [
      event(1_796_612_624_945_000, "email.sent", 1_796_612_624_945, {
        transport: "smtp",
        nexthop: "mail-0.receiver-domain.example",
      }),
      event(1_796_612_624_966_000, "email.delivered", 1_796_612_624_966, {
        attempt: 1,
        response: {
          code: 250,
          enhanced: "2.0.0",
          text: "250 2.0.0 Ok: queued as 4XyZ12abc",
          mx: "mx.receiver-domain.example",
          tls: true,
        },
      }),
    ];
    // Its messages row, which the compact bodies take their email's fields from.
    await env.DB.prepare(
      "INSERT INTO messages (id, tenant_id, created_at, from_addr, to_json, subject, last_event, updated_at) VALUES (?, 'runs-9', ?, ?, ?, ?, 'delivered', 0)",
    )
      .bind(email, fields.created_at, fields.from_addr, fields.to_json, fields.subject)
      .run();
    await env.DB.batch(logInsertStatements(env.DB, [{ tenant: "runs-9", emailId: email, rows }], 1_796_612_625_000));
    expect((await rowsOf(email)).map((r) => r.rest)).toEqual([1]);
    // The row's text and blob columns, and its integers at 8 bytes: within the 1,002 bytes a page keeps.
    const size = await env.DB.prepare(
      "SELECT length(CAST(tenant_id AS BLOB)) + length(CAST(email_id AS BLOB)) + length(CAST(type AS BLOB)) + " +
        "length(CAST(recipient AS BLOB)) + length(CAST(data AS BLOB)) + length(CAST(event_id AS BLOB)) + " +
        "length(CAST(event_type AS BLOB)) + length(CAST(body AS BLOB)) + length(CAST(rest AS BLOB)) + 8 * 6 + 16 AS n " +
        "FROM event_runs WHERE email_id = ?",
    )
      .bind(email)
      .first<{ n: number }>();
    expect(size!.n).toBeLessThan(1002);
    // Read back as the rows were given, envelopes whole.
    const back = await env.DB.prepare(
      "SELECT source_seq, recipient, event_id, event_type FROM event_of_email WHERE of_email = ? ORDER BY seq",
    )
      .bind(email)
      .all();
    expect(back.results).toEqual(
      rows.map((r) => ({
        source_seq: r.source_seq,
        recipient: r.recipient,
        event_id: r.event_id,
        event_type: r.event_type,
      })),
    );
    for (const r of rows)
      expect(await feedBodyOf(env.DB, r.event_id!)).toBe(
        expandBody(r.body!, fields, { type: r.event_type, created_at: r.created_at, recipient: to }),
      );
  });

  it("keeps a large run in rows of at most 1 + REST_MAX events, one index entry for them all", async () => {
    const email = newMessageId(10);
    const seqs = Array.from({ length: 2 * (REST_MAX + 1) + 5 }, (_, i) => i + 1);
    expect(await log("runs-7", [{ email, seqs }])).toBe(3 + 1);
    expect((await rowsOf(email)).map((r) => [r.run === -1, r.rest])).toEqual([
      [false, REST_MAX],
      [true, REST_MAX],
      [true, 4],
    ]);
    expect(await eventsOf(email)).toEqual(seqs);
  });

  it("finds rows written before the migrations (run NULL, a row per event) as heads of their own", async () => {
    const email = newMessageId(5);
    await env.DB.prepare(
      "INSERT INTO event_runs (tenant_id, seq, email_id, source_seq, part, type, created_at) VALUES " +
        "('runs-4', 7000000, ?1, 1, 0, 'email.sent', 7000), ('runs-4', 7000001, ?1, 2, 0, 'email.delivered', 7000)",
    )
      .bind(email)
      .run();
    expect(await eventsOf(email)).toEqual([1, 2]);
    expect(await log("runs-4", [{ email, seqs: [2, 3] }])).toBe(2);
    expect(await eventsOf(email)).toEqual([1, 2, 3]);
  });

  it("retention deletes row by row, and an earlier run's rows before its head, so a delete cut short leaves every row reachable", async () => {
    const [a, b] = [newMessageId(6), newMessageId(7)];
    // a: a run written before 0040 (head, then a row per event); b: a run of today.
    await env.DB.prepare(
      "INSERT INTO event_runs (tenant_id, seq, email_id, source_seq, part, type, created_at, run) VALUES " +
        "('runs-5', 7000000, ?1, 1, 0, 'email.sent', 7000, 2), ('runs-5', 7000001, ?1, 2, 0, 'email.delivered', 7000, -1), " +
        "('runs-5', 7000002, ?1, 3, 0, 'email.opened', 7000, -1)",
    )
      .bind(a)
      .run();
    await log("runs-5", [{ email: b, seqs: [1, 2] }]);
    const ids = JSON.stringify([a, b]);
    const left = async () =>
      (await env.DB.prepare("SELECT count(*) AS n FROM event_runs WHERE email_id IN (SELECT value FROM json_each(?))")
        .bind(ids)
        .first<{ n: number }>())!.n;
    // Two deletes of one row each: the two rows that are not heads.
    for (let i = 0; i < 2; i++) await env.DB.prepare(PURGE_SQL.children[0]).bind(ids, 1).run();
    expect(await left()).toBe(2);
    expect(await eventsOf(a)).toEqual([1]);
    expect(await eventsOf(b)).toEqual([1, 2]);
    await env.DB.prepare(PURGE_SQL.children[0]).bind(ids, 500).run();
    expect(await left()).toBe(0);
  });
});
