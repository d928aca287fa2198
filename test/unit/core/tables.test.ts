import { describe, expect, it } from "vitest";
import {
  admitMessage,
  decideAfterAttempt,
  dispatchAll,
  drainEffects,
  extraGrant,
  findCandidate,
  initialWarnTime,
  maxCandidateSlots,
  mustParseSchedulerConfig,
  nextScanAt,
  obtainTransport,
  popJob,
  preemptAffordable,
  readBatchLimit,
  reportDelivery,
  selectEntry,
  selectTransport,
  tryPreempt,
  type Job,
} from "../../../durable-objects/core";
import { makeQmgr, rcpts } from "./harness";

/** A transport with hand-built jobs, linked in order, for unit checks of the formulas. */
function jobsFixture(specs: { total: number; queuedTime?: number }[], params: Record<string, number> = {}) {
  const { q, src } = makeQmgr({
    initial_destination_concurrency: 100000,
    default_destination_concurrency_limit: 0,
    transports: { smtp: { process_limit: 100000, ...params } },
  });
  specs.forEach((s, i) => {
    src.files.set(`m${i + 1}`, rcpts(s.total));
    admitMessage(q, { id: `m${i + 1}`, createTime: 0, rcptTotal: s.total, singleRcpt: true }, s.queuedTime ?? 0);
  });
  const t = obtainTransport(q, "smtp");
  const job = (i: number) => t.jobsByMessage.get(`m${i}`)!;
  return { q, t, job };
}

describe("unit checks U1–U7 (spec §9.1)", () => {
  it("U1: maxSlots = (read − selected + slotsAvailable) / cost", () => {
    const j = { readEntries: 10, selectedEntries: 3, slotsAvailable: 3 } as Job;
    expect(maxCandidateSlots(j, 2)).toBe(5);
  });

  it.each([
    { name: "needs 7: trunc(3/5) + 3 = 3 < 3.5 → no", expected: 7, want: false },
    { name: "needs 6: 3 ≥ 3.0 → preempt", expected: 6, want: true },
  ])("U2: $name", ({ expected, want }) => {
    expect(preemptAffordable(3, expected, { slotCost: 5, slotLoan: 3, slotDiscount: 50 })).toBe(want);
  });

  it("U3: no preemption while the current job's counter is zero or negative", () => {
    const { t, job } = jobsFixture([{ total: 40 }, { total: 1 }]);
    for (const avail of [0, -4]) {
      job(1).slotsAvailable = avail;
      expect(tryPreempt(t, job(1), 0)).toBe(job(1));
    }
  });

  it.each([
    { name: "14 < 15: never preempted", total: 14, want: "no" },
    { name: "15: allowed", total: 15, want: "yes" },
  ])("U4: maxEntries $name (cost 5, minSlots 3)", ({ total, want }) => {
    const { t, job } = jobsFixture([{ total }, { total: 1 }]);
    job(1).slotsAvailable = 100;
    expect(tryPreempt(t, job(1), 0) === job(2) ? "yes" : "no").toBe(want);
  });

  it("U5: the best delay/total score wins; ties go to the job earlier in the list", () => {
    // A: total 3, delay 101; B: total 1, delay 21 (now 100).
    const a = jobsFixture([{ total: 15 }, { total: 3, queuedTime: 0 }, { total: 1, queuedTime: 80 }]);
    a.job(1).slotsAvailable = 15;
    expect(findCandidate(a.t, a.job(1), 100)).toBe(a.job(2));
    const tie = jobsFixture([{ total: 15 }, { total: 2 }, { total: 2 }]);
    tie.job(1).slotsAvailable = 15;
    expect(findCandidate(tie.t, tie.job(1), 0)).toBe(tie.job(2));
  });

  it("U6: popping credits (E − A) × cost to the original parent only", () => {
    const { t, job } = jobsFixture([{ total: 20 }, { total: 4 }, { total: 1 }], { delivery_slot_cost: 2 });
    const parent = job(1);
    const child = job(2);
    parent.slotsAvailable = 0;
    child.stackParent = parent;
    parent.stackChildren.push(child);
    child.stackLevel = 1;
    child.slotsUsed = -3;
    popJob(child);
    expect(parent.slotsAvailable).toBe(6);
    // Adoptive parent: the level gap is not 1.
    const adopted = job(3);
    adopted.stackParent = parent;
    parent.stackChildren.push(adopted);
    adopted.stackLevel = 2;
    adopted.slotsUsed = -3;
    popJob(adopted);
    expect(parent.slotsAvailable).toBe(6);
    expect(t.candCacheCurrent).toBeNull();
  });

  it("U7: preempting with expected 6 at cost 2 charges the parent 12 and sets slotsUsed to −6", () => {
    const { t, job } = jobsFixture([{ total: 30 }, { total: 6 }], {
      delivery_slot_cost: 2,
      delivery_slot_loan: 0,
      delivery_slot_discount: 0,
      minimum_delivery_slots: 1,
    });
    job(1).slotsAvailable = 12;
    expect(tryPreempt(t, job(1), 0)).toBe(job(2));
    expect(job(1).slotsAvailable).toBe(0);
    expect(job(2).slotsUsed).toBe(-6);
    expect(job(2).stackLevel).toBe(1);
    expect(t.schedHead).toBe(job(2));
  });
});

describe("recipient-pool checks M1–M4 (spec §9.4)", () => {
  it("M1: successive grants to preempting unread jobs halve the extra pool", () => {
    let pool = 0;
    const grants: number[] = [];
    const pools: number[] = [];
    for (let i = 0; i < 8; i++) {
      const g = extraGrant(1000, pool);
      grants.push(g);
      pool -= g;
      pools.push(pool);
    }
    expect(grants).toEqual([500, 250, 125, 63, 31, 16, 8, 4]);
    expect(pools).toEqual([-500, -750, -875, -938, -969, -985, -993, -997]);
    expect(extraGrant(1000, 5000)).toBe(3000);
    expect(5000 - extraGrant(1000, 5000)).toBe(2000);
  });

  it("M2: the first read gets the global budget less what is in core, at least the minimum, at most 5000", () => {
    const { q } = makeQmgr({});
    const m = { wasRead: false, rcptLimit: 10, rcptCount: 0 } as Parameters<typeof readBatchLimit>[1];
    q.rcptCount = 19995;
    expect(readBatchLimit(q, m)).toBe(10);
    q.rcptCount = 0;
    expect(readBatchLimit(q, m)).toBe(5000);
  });

  it("M3: jobs (1,4), (5,5), (2,0) in core: the next read is 9 − 8 + minimum = 11", () => {
    const { q } = makeQmgr({});
    const m = { wasRead: true, rcptLimit: 10 + 4 + 5 + 0, rcptCount: 1 + 5 + 2 } as Parameters<
      typeof readBatchLimit
    >[1];
    expect(readBatchLimit(q, m)).toBe(11);
  });

  it("M4: a fully read job returns its surplus, and the next unread job grabs it", () => {
    const { q, src } = makeQmgr({ qmgr_message_active_limit: 10, qmgr_message_recipient_limit: 100 });
    src.files.set("A", rcpts(40));
    admitMessage(q, { id: "A", createTime: 0, rcptTotal: 40 }, 0);
    const t = obtainTransport(q, "smtp");
    const a = t.jobsByMessage.get("A")!;
    expect(a.rcptLimit).toBe(40);
    expect(t.rcptUnused).toBe(19960);
    src.files.set("B", rcpts(10000, "b.example"));
    admitMessage(q, { id: "B", createTime: 0, rcptTotal: 10000 }, 0);
    const b = t.jobsByMessage.get("B")!;
    expect(b.message.hasUnread).toBe(true);
    expect(b.rcptLimit).toBe(19960);
    expect(t.rcptUnused).toBe(0);
    expect(t.nextUnread).toBe(b);
  });
});

describe("dispatch checks D1–D3 (spec §9.5)", () => {
  function peersFixture() {
    const { q, src } = makeQmgr({
      transports: { smtp: { destination_recipient_limit: 1, process_limit: 1000 } },
      initial_destination_concurrency: 100,
    });
    // Recipient limit 1 makes per-recipient queues; three recipients a@, b@, c@ of one domain → queues a, b, c.
    const files = ["a", "b", "c"].flatMap((l) =>
      Array.from({ length: 4 }, () => ({ n: 0, address: `${l}@x.example`, transport: "smtp", nexthop: "x.example" })),
    );
    src.files.set("m", files);
    admitMessage(q, { id: "m", createTime: 0, rcptTotal: files.length }, 0);
    return { q, t: obtainTransport(q, "smtp") };
  }
  const letter = (e: { peer: { queue: { name: string } } }) => e.peer.queue.name[0];

  it("D1: peers are served round robin a, b, c, a, b, c", () => {
    const { q, t } = peersFixture();
    const got = Array.from({ length: 6 }, () => letter(selectEntry(q, t, 0)!)).join("");
    expect(got).toBe("abcabc");
  });

  it("D1: a full queue is skipped (a, c, a, c) and its completion releases the blockers", () => {
    const { q, t } = peersFixture();
    const b = t.queues.get("b@x.example")!;
    b.window = 1;
    const first = [selectEntry(q, t, 0)!, selectEntry(q, t, 0)!];
    expect(first.map(letter).join("")).toBe("ab");
    const more = Array.from({ length: 8 }, () => selectEntry(q, t, 0));
    expect(more.map((e) => (e ? letter(e) : "-")).join("")).toBe("cacacac-");
    // The job is now a blocker and queue b is tagged; b's delivery finishing releases everything.
    expect(t.current).toBeNull();
    expect(b.blockerTag).toBe(t.blockerTag);
    const tag = t.blockerTag;
    reportDelivery(q, first[1]!.id, { status: "ok" }, 0);
    expect(t.blockerTag).toBe(tag + 2);
    expect(t.current).toBe(t.schedHead);
    expect(letter(selectEntry(q, t, 0)!)).toBe("b");
  });

  it("D2: a transport with one pending request needs two units of ready work, then rotates to the back", () => {
    const { q, src } = makeQmgr({});
    src.files.set("m", [...rcpts(1, "one.example", "t1"), ...rcpts(1, "two.example", "t2")]);
    admitMessage(q, { id: "m", createTime: 0, rcptTotal: 2 }, 0);
    const t1 = obtainTransport(q, "t1");
    const t2 = obtainTransport(q, "t2");
    t1.pending = 1;
    t2.pending = 1;
    expect(t1.readyTotal).toBe(1);
    expect(selectTransport(q, 0)).toBeNull();
    src.files.set("m2", rcpts(1, "three.example", "t1"));
    admitMessage(q, { id: "m2", createTime: 0, rcptTotal: 1 }, 0);
    expect(t1.readyTotal).toBe(2);
    expect(selectTransport(q, 0)).toBe(t1);
    expect(q.transportOrder[q.transportOrder.length - 1]).toBe(t1);
  });

  it("D3: a destination killed with 3 deliveries in flight defers its 10 todo entries; the first success revives it at window 3", () => {
    const { q, src } = makeQmgr({ transports: { smtp: { destination_recipient_limit: 1 } } });
    // Recipient limit 1 needs one queue: use a single address repeated (per-recipient queue = that address).
    src.files.set(
      "m",
      Array.from({ length: 14 }, (_, i) => ({
        n: i,
        address: "rcpt@d.example",
        transport: "smtp",
        nexthop: "d.example",
      })),
    );
    admitMessage(q, { id: "m", createTime: 0, rcptTotal: 14 }, 0);
    const t = obtainTransport(q, "smtp");
    const queue = t.queues.get("rcpt@d.example")!;
    queue.window = 4;
    const busy = dispatchAll(q, 0);
    expect(busy).toHaveLength(4);
    expect(queue.todoCount).toBe(10);
    // Pre-charge the cohort count so that this one failure kills it.
    queue.failCohorts = 0.9;
    drainEffects(q);
    reportDelivery(q, busy[0]!.id, { status: "defer", siteFailure: { dsnStatus: "4.4.1", reason: "refused" } }, 10);
    expect(queue.window).toBe(0);
    expect(queue.todoCount).toBe(0);
    const deferred = drainEffects(q).filter((e) => e.kind === "deferred");
    expect(deferred.reduce((n, e) => n + (e.kind === "deferred" ? e.rcpts.length : 0), 0)).toBe(10);
    reportDelivery(q, busy[1]!.id, { status: "ok" }, 11);
    expect(queue.window).toBe(3);
    expect([queue.success, queue.failure, queue.failCohorts]).toEqual([0, 0, 0]);
  });
});

describe("back-off, expiry and warnings (spec §9.3)", () => {
  const cfg = mustParseSchedulerConfig({});
  const warnCfg = mustParseSchedulerConfig({ delay_warning_time: "4h" });

  it("reproduces Postfix's attempt table with deferred-queue scans every 300 s", () => {
    const rows: [number, number, number][] = [];
    let at = 0;
    while (rows.length < 8) {
      const d = decideAfterAttempt({ createTime: 0, nullSender: false, warnTime: 0 }, at, cfg.global);
      if (d.kind !== "deferred") throw new Error("expired early");
      rows.push([at, d.delaySec, d.nextAttemptAt]);
      at = nextScanAt(d.nextAttemptAt, cfg.global.queueRunDelay);
    }
    expect(rows).toEqual([
      [0, 300, 300],
      [300, 300, 600],
      [600, 600, 1200],
      [1200, 1200, 2400],
      [2400, 2400, 4800],
      [4800, 4000, 8800],
      [9000, 4000, 13000],
      [13200, 4000, 17200],
    ]);
  });

  it("returns the message at the end of the 108th attempt (t = 433200), and warns once at t = 17400 with a 4 h warning time", () => {
    let at = 0;
    let attempts = 0;
    let warnTime = initialWarnTime(0, false, warnCfg.global);
    const warnedAt: number[] = [];
    for (;;) {
      attempts += 1;
      const d = decideAfterAttempt({ createTime: 0, nullSender: false, warnTime }, at, warnCfg.global);
      if (d.kind === "expired") break;
      if (d.warn) warnedAt.push(at);
      warnTime = d.warnTime;
      at = nextScanAt(d.nextAttemptAt, warnCfg.global.queueRunDelay);
    }
    expect(at).toBe(433200);
    expect(attempts).toBe(108);
    expect(warnedAt).toEqual([17400]);
  });

  it("uses the minimal back-off when the arrival time is unknown, and the bounce lifetime for null senders", () => {
    expect(decideAfterAttempt({ createTime: null, nullSender: false, warnTime: 0 }, 99999, cfg.global)).toMatchObject({
      delaySec: 300,
    });
    const short = mustParseSchedulerConfig({ bounce_queue_lifetime: "1d" });
    expect(decideAfterAttempt({ createTime: 0, nullSender: true, warnTime: 0 }, 86400, short.global).kind).toBe(
      "expired",
    );
    expect(decideAfterAttempt({ createTime: 0, nullSender: false, warnTime: 0 }, 86400, short.global).kind).toBe(
      "deferred",
    );
    expect(initialWarnTime(0, true, warnCfg.global)).toBe(0);
  });
});
