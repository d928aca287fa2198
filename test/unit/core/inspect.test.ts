import { describe, expect, it } from "vitest";
import { admitMessage, destinationsView, dispatchAll, queueShape, reportDelivery } from "../../../durable-objects/core";
import { makeQmgr, rcpts } from "./harness";

describe("operator views of the in-core queue", () => {
  it("qshape counts in-core recipients by destination and age bucket, TOTAL first", () => {
    const { q, src } = makeQmgr({});
    src.files.set("old", rcpts(3, "gmail.example"));
    src.files.set("new", [...rcpts(2, "gmail.example", "smtp", 10), ...rcpts(4, "yahoo.example", "smtp", 20)]);
    admitMessage(q, { id: "old", createTime: 0, rcptTotal: 3 }, 0);
    admitMessage(q, { id: "new", createTime: 3000, rcptTotal: 6 }, 3000);
    dispatchAll(q, 3000, 1); // one entry in flight is still counted
    const shape = queueShape(q, 3060);
    expect(shape[0]).toEqual({ destination: "TOTAL", total: 9, buckets: [6, 0, 0, 0, 3, 0, 0, 0, 0, 0] });
    expect(shape.slice(1)).toEqual([
      { destination: "gmail.example", total: 5, buckets: [2, 0, 0, 0, 3, 0, 0, 0, 0, 0] },
      { destination: "yahoo.example", total: 4, buckets: [4, 0, 0, 0, 0, 0, 0, 0, 0, 0] },
    ]);
  });

  it("lists destinations with window, in-flight, todo and dead-until", () => {
    const { q, src } = makeQmgr({});
    src.files.set("m", rcpts(3, "down.example"));
    admitMessage(q, { id: "m", createTime: 0, rcptTotal: 3, singleRcpt: true }, 0);
    const sent = dispatchAll(q, 0);
    for (const e of sent)
      reportDelivery(q, e.id, { status: "defer", siteFailure: { dsnStatus: "4.4.1", reason: "refused" } }, 1);
    expect(destinationsView(q)).toEqual([
      expect.objectContaining({
        transport: "smtp",
        queue: "down.example",
        state: "dead",
        window: 0,
        busy: 0,
        todo: 0,
        until: 301,
        reason: "refused",
      }),
    ]);
  });
});
