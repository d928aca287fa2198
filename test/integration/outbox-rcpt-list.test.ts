/**
 * A message of more than one recipient keeps them as a JSON list in its Outbox row (schema 9,
 * durable-objects/outbox/rcpt.ts): the same outcomes, late reports and operator actions give the
 * same views and events as on rcpt rows, and a ten-recipient email's accept and finishing report
 * write 2 rows each, where its rcpt rows added 10 and 9.
 */
import { describe, expect, it } from "vitest";
import { applyOutcomes } from "../../durable-objects/outbox/outcomes";
import { cancelWithEvents } from "../../durable-objects/outbox/finish";
import { readmitMessage, recordLateBounce } from "../../durable-objects/outbox/control";
import { insertMessage, readView } from "../../durable-objects/outbox/store";
import { markReady } from "../../durable-objects/outbox/classify-state";
import { readEvents } from "../../durable-objects/outbox/events";
import { explodeRcpts } from "../../durable-objects/outbox/rcpt";
import type { OutcomeReport } from "../../worker/model/message";
import { T0, inOutbox, message } from "./outbox-messages";

const to = ["a@one.example", "b@two.example", "c@three.example"];
const deferred = (idx: number, attempt: number): OutcomeReport => ({
  idx,
  status: "deferred",
  attempt,
  nextAttemptAt: T0 + 60_000,
  response: { code: 451, text: "try later" },
});
const delivered = (idx: number, attempt: number): OutcomeReport => ({
  idx,
  status: "delivered",
  attempt,
  response: { code: 250 },
});

/** What a reader sees of message `id`: its recipients and its events, without the id itself. */
function seen(sql: SqlStorage, id: string, at: number) {
  const v = readView(sql, id, at)!;
  return {
    state: v.state,
    recipients: v.recipients,
    events: readEvents(sql, id).map(({ message_id: _m, ...e }) => e),
  };
}

describe("a message's recipients as a list in its Outbox row", () => {
  it("gives the same views and events as rcpt rows through outcomes, a late bounce and a delay notice", async () => {
    const got = await inOutbox("rcpt-list-same", (sql) => {
      insertMessage(sql, "acme", message("m-list", to));
      insertMessage(sql, "acme", message("m-rows", to));
      const moved = explodeRcpts(sql, "m-rows"); // the same message, in the form of rows
      const forms = () => {
        const list = sql.exec<{ n: number }>("SELECT count(*) AS n FROM rcpt WHERE message_id = 'm-list'").one().n;
        const rows = sql.exec<{ n: number }>("SELECT count(*) AS n FROM rcpt WHERE message_id = 'm-rows'").one().n;
        return [list, rows];
      };
      const steps: [unknown, unknown][] = [];
      const step = (at: number, f: (id: string) => unknown) => {
        const a = f("m-list");
        const b = f("m-rows");
        steps.push([
          { r: a, ...seen(sql, "m-list", at) },
          { r: b, ...seen(sql, "m-rows", at) },
        ]);
      };
      step(T0, (id) => markReady(sql, id, [0, 1, 2], T0));
      step(T0 + 1, (id) => applyOutcomes(sql, id, [deferred(1, 1), delivered(0, 1)], T0 + 1).applied.length);
      step(T0 + 2, (id) => applyOutcomes(sql, id, [delivered(0, 1)], T0 + 2).applied.length); // a repeat: nothing
      step(T0 + 3, (id) => applyOutcomes(sql, id, [delivered(1, 2), delivered(2, 1)], T0 + 3).done);
      step(T0 + 4, (id) => recordLateBounce(sql, id, { address: to[2]! }, { code: 550, message: "gone" }, T0 + 4));
      step(T0 + 5, (id) =>
        recordLateBounce(sql, id, { address: to[0]! }, { code: 250, message: "delayed" }, T0 + 5, [], "delayed"),
      );
      return { moved, steps, forms: forms() };
    });
    expect(got.moved).toBe(4); // three rcpt rows and the row that drops the list
    for (const [list, rows] of got.steps) expect(list).toEqual(rows);
    const last = got.steps[got.steps.length - 1]![0] as ReturnType<typeof seen>;
    expect(last.state).toBe("done");
    expect(last.recipients.map((r) => [r.email, r.status, r.attempts])).toEqual([
      [to[0], "delivered", 1],
      [to[1], "delivered", 2],
      [to[2], "bounced", 1],
    ]);
    expect(got.forms).toEqual([0, 3]); // the late reports wrote the list, not rows
  });

  it("writes a ten-recipient email's recipients as parts of its row's writes", async () => {
    const got = await inOutbox("rcpt-list-rows", (sql, rows) => {
      const ten = Array.from({ length: 10 }, (_, i) => `r${i}@d${i}.example`);
      insertMessage(sql, "acme", message("m-ten", ten));
      const insert = rows();
      markReady(sql, "m-ten", [...ten.keys()], T0);
      rows();
      const first = applyOutcomes(sql, "m-ten", [delivered(0, 1)], T0 + 1);
      const one = rows();
      const rest = applyOutcomes(
        sql,
        "m-ten",
        ten.slice(1).map((_, i) => delivered(i + 1, 1)),
        T0 + 2,
      );
      const finish = rows();
      return { insert, one, finish, done: [first.done, rest.done] };
    });
    // The message row and its entry in the index of waiting messages (rcpt rows: 10 more).
    expect(got.insert).toBe(2);
    // A report that does not finish: the row, and its email.delivered as an event row.
    expect(got.one).toBe(2);
    // The finishing report of nine: the row and its entry in the index of finished messages (rows: 9 more).
    expect(got.finish).toBe(2);
    expect(got.done).toEqual([false, true]);
  });

  it("moves the list to rcpt rows for an operator's readmission and cancel, which then work as on rows", async () => {
    const got = await inOutbox("rcpt-list-ops", (sql) => {
      insertMessage(sql, "acme", message("m-re", to));
      markReady(sql, "m-re", [0, 1, 2], T0);
      applyOutcomes(sql, "m-re", [deferred(0, 1), deferred(1, 1), delivered(2, 1)], T0 + 1);
      const readmitted = readmitMessage(sql, "m-re", false, T0 + 2);
      const afterReadmit = readView(sql, "m-re", T0 + 2)!.recipients.map((r) => r.status);
      insertMessage(sql, "acme", message("m-cancel", to, false));
      const cancelled = cancelWithEvents(sql, "m-cancel", "acme", null, T0 + 3);
      const listLeft = sql
        .exec<{ n: number }>("SELECT count(*) AS n FROM message WHERE rcpts IS NOT NULL AND id IN ('m-re', 'm-cancel')")
        .one().n;
      return {
        readmitted,
        afterReadmit,
        cancelled,
        cancelledView: readView(sql, "m-cancel", T0 + 3)!,
        listLeft,
      };
    });
    expect(got.readmitted).toBe(2);
    expect(got.afterReadmit).toEqual(["incoming", "incoming", "delivered"]);
    expect(got.cancelled).toBe(3);
    expect(got.cancelledView.state).toBe("done");
    expect(got.cancelledView.recipients.map((r) => r.status)).toEqual(["cancelled", "cancelled", "cancelled"]);
    expect(got.listLeft).toBe(0);
  });
});
