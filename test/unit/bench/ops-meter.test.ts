import { describe, expect, it } from "vitest";
import { opsOf, type MeterSnapshot } from "../../../bench/world/ops-meter";

const snap = (over: Partial<MeterSnapshot>): MeterSnapshot => ({
  worker_invocations: 0,
  do_requests: 0,
  do_requests_by_class: {},
  do_names: {},
  do_rows_read: 0,
  do_rows_written: 0,
  d1_rows_read: 0,
  d1_rows_written: 0,
  queue_ops: 0,
  r2_class_a: 0,
  r2_class_b: 0,
  ...over,
});

describe("opsOf", () => {
  const after = snap({
    do_requests: 30,
    do_requests_by_class: { Outbox: 20, TransportQueue: 10 },
    do_requests_by_method: { "Outbox.accept": 4, "Outbox.envelopes": 16, "TransportQueue.reportAndTake": 10 },
    do_rows_read: 12,
    do_rows_read_by_class: { Outbox: 12 },
    do_rows_written: 6,
    do_rows_written_by_class: { Outbox: 2, TransportQueue: 4 },
    do_sql_statements_by_class: { Outbox: 40, TransportQueue: 8 },
    d1_rows_read: 100,
    d1_rows_written: 8,
    d1_statements: 6,
    rows_read_by_statement: Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`D1: q${i}`, i + 1])),
    runs_by_statement: { "Outbox: SELECT a": 8, "D1: SELECT b": 2 },
  });
  const o = opsOf(snap({}), after, 4);

  it("gives requests per email by method, the most first", () => {
    expect(Object.entries(o.do_requests_by_method)).toEqual([
      ["Outbox.envelopes", 4],
      ["TransportQueue.reportAndTake", 2.5],
      ["Outbox.accept", 1],
    ]);
  });

  it("splits rows and statements per email by store, D1 and each DO class", () => {
    expect(o.by_store).toEqual({
      D1: { rows_read: 25, rows_written: 2, statements: 1.5 },
      Outbox: { rows_read: 3, rows_written: 0.5, statements: 10 },
      TransportQueue: { rows_read: 0, rows_written: 1, statements: 2 },
    });
    expect(o.rows_read).toBe(28);
  });

  it("names the ten statements reading the most rows and those run the most, per email", () => {
    const read = Object.entries(o.top_statements.rows_read);
    expect(read).toHaveLength(10);
    expect(read[0]).toEqual(["D1: q11", 3]);
    expect(read[9]).toEqual(["D1: q2", 0.75]);
    expect(o.top_statements.runs).toEqual({ "Outbox: SELECT a": 2, "D1: SELECT b": 0.5 });
    expect(o.top_statements.d1_runs).toEqual({ "D1: SELECT b": 0.5 });
  });
});
