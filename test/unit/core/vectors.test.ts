import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  admitMessage,
  createWindowState,
  obtainTransport,
  onNegativeFeedback,
  onPositiveFeedback,
  parseFeedback,
  selectEntry,
  type WindowParams,
} from "../../../durable-objects/core";
import { makeQmgr, rcpts } from "./harness";

interface PreemptionVector {
  id: string;
  jobs: number[];
  queuedTime: number[];
  now: number;
  params: { cost: number; loan: number; discount: number; min_slots: number };
  expect: string;
}
interface FeedbackEvent {
  event: "S" | "F";
  busy: number;
  window: number;
  success: number;
  failure: number;
  failCohorts: number;
  dead: boolean;
}
interface FeedbackVector {
  id: string;
  note: string;
  events: FeedbackEvent[];
}

const vectorsPath = fileURLToPath(new URL("../../../../shared/spec/vectors.json", import.meta.url));
const vectors = JSON.parse(readFileSync(vectorsPath, "utf8")) as {
  preemption: PreemptionVector[];
  feedback: FeedbackVector[];
};

/** Runs a preemption scenario: one transport, one unlimited destination, one recipient per entry. */
function runPreemption(
  jobs: number[],
  queuedTime: number[],
  now: number,
  params: PreemptionVector["params"],
  extra: Record<string, number> = {},
  arrivals: { after: number; size: number; at: number }[] = [],
): string {
  const { q, src } = makeQmgr({
    initial_destination_concurrency: 100000,
    default_destination_concurrency_limit: 0,
    transports: {
      smtp: {
        delivery_slot_cost: params.cost,
        delivery_slot_loan: params.loan,
        delivery_slot_discount: params.discount,
        minimum_delivery_slots: params.min_slots,
        process_limit: 100000,
      },
    },
    ...extra,
  });
  const order = new Map<string, number>();
  const add = (size: number, at: number) => {
    const id = `m${order.size + 1}`;
    order.set(id, order.size + 1);
    src.files.set(id, rcpts(size));
    admitMessage(q, { id, createTime: at, rcptTotal: size, singleRcpt: true }, at);
  };
  jobs.forEach((size, i) => add(size, queuedTime[i] ?? 0));
  const t = obtainTransport(q, "smtp");
  let out = "";
  for (;;) {
    for (const a of arrivals)
      if (a.after === out.length && !order.has(`m${order.size + 1}`) && out.length > 0) add(a.size, a.at);
    const e = selectEntry(q, t, now);
    if (!e) break;
    out += String(order.get(e.peer.job.message.id));
  }
  return out;
}

describe("preemption vectors from shared/spec/vectors.json", () => {
  it.each(vectors.preemption.map((v) => ({ name: v.id, v })))("$name", ({ v }) => {
    expect(runPreemption(v.jobs, v.queuedTime, v.now, v.params)).toBe(v.expect);
  });

  it("has every P* vector the file holds", () => {
    expect(vectors.preemption.length).toBeGreaterThanOrEqual(10);
  });
});

describe("preemption vectors from the spec's table (§9.1) that the file does not hold", () => {
  it("P4: never 12131415 for any cost ≥ 2", () => {
    for (const cost of [2, 3, 4, 5, 10]) {
      for (const [loan, discount, minSlots] of [
        [0, 0, 1],
        [3, 50, 1],
        [10, 100, 0],
      ] as const) {
        expect(
          runPreemption([4, 1, 1, 1, 1], [0, 0, 0, 0, 0], 0, { cost, loan, discount, min_slots: minSlots }),
        ).not.toBe("12131415");
      }
    }
  });

  it("P4: cost below 2 disables preemption", () => {
    expect(runPreemption([4, 1, 1, 1, 1], [0, 0, 0, 0, 0], 0, { cost: 1, loan: 3, discount: 50, min_slots: 0 })).toBe(
      "11112345",
    );
  });

  it("P12: nested preemption when job 3 arrives after 13 selections", () => {
    const got = runPreemption([40, 6], [0, 0], 0, { cost: 2, loan: 0, discount: 0, min_slots: 3 }, {}, [
      { after: 13, size: 1, at: 0 },
    ]);
    expect(got).toBe("11111111111122322221111111111111111111111111111");
  });

  it("P13: a stalled preempting job credits its parent on pop", () => {
    const { q, src } = makeQmgr({
      qmgr_message_active_limit: 2,
      qmgr_message_recipient_limit: 21,
      qmgr_message_recipient_minimum: 1,
      initial_destination_concurrency: 100000,
      default_destination_concurrency_limit: 0,
      transports: {
        smtp: {
          delivery_slot_cost: 2,
          delivery_slot_loan: 0,
          delivery_slot_discount: 0,
          minimum_delivery_slots: 3,
          process_limit: 100000,
        },
      },
    });
    src.files.set("m1", rcpts(20));
    src.files.set("m2", [...rcpts(1), ...rcpts(3, "other.example", "other", 1)]);
    admitMessage(q, { id: "m1", createTime: 0, rcptTotal: 20, singleRcpt: true }, 0);
    admitMessage(q, { id: "m2", createTime: 0, rcptTotal: 4, singleRcpt: true }, 0);
    const t = obtainTransport(q, "smtp");
    let out = "";
    const counters: number[] = [];
    for (let e = selectEntry(q, t, 0); e; e = selectEntry(q, t, 0)) {
      out += e.peer.job.message.id.slice(1);
      counters.push(t.jobsByMessage.get("m1")!.slotsAvailable);
    }
    expect(out).toBe("111111112111111111111");
    expect(counters[7]).toBe(8); // 8 selections earned 8 slots: trunc(8 / 2) = 4 = expected
    expect(counters[8]).toBe(6); // paid 4 × 2 at the preemption, credited (4 − 1) × 2 when job 2 stalled
    expect(counters[9]).toBe(7); // the next selection of job 1
  });
});

const FEEDBACK_PARAMS: Record<
  string,
  Partial<{ g: string; f: string; cohort: number; limit: number; initial: number }>
> = {
  F1: {},
  F2: { g: "1/concurrency" },
  F3: {},
  F4: { f: "1/concurrency", cohort: 1 },
  F5: { f: "1/concurrency", cohort: 0 },
  F6: {},
  F7: { g: "1/concurrency", f: "1/concurrency" },
  F8: {},
  F9: {},
  F10: { limit: 3, initial: 5 },
  F11: { g: "0.3" },
  F12: { g: "1/4", f: "1/4" },
};

function windowParams(id: string): WindowParams {
  const spec = FEEDBACK_PARAMS[id];
  if (!spec) throw new Error(`no parameters known for ${id}`);
  const fb = (s: string | undefined) => {
    const r = parseFeedback(s ?? "1", "postfix");
    if (!r.ok) throw new Error(r.error);
    return r.feedback;
  };
  const limit = spec.limit ?? 20;
  const initial = spec.initial ?? 5;
  return {
    initialConcurrency: limit > 0 && limit < initial ? limit : initial,
    concurrencyLimit: limit,
    positiveFeedback: fb(spec.g),
    negativeFeedback: fb(spec.f),
    failedCohortLimit: spec.cohort ?? 1,
  };
}

describe("concurrency feedback vectors from shared/spec/vectors.json", () => {
  it.each(vectors.feedback.map((v) => ({ name: `${v.id} (${v.note})`, v })))("$name", ({ v }) => {
    const p = windowParams(v.id);
    const s = createWindowState(p);
    v.events.forEach((ev, i) => {
      if (ev.event === "S") onPositiveFeedback(s, ev.busy, p);
      else if (s.window > 0) onNegativeFeedback(s, p);
      const got = {
        window: s.window,
        success: s.success,
        failure: s.failure,
        failCohorts: s.failCohorts,
        dead: s.window === 0,
      };
      const want = {
        window: ev.window,
        success: ev.success,
        failure: ev.failure,
        failCohorts: ev.failCohorts,
        dead: ev.dead,
      };
      const where = `${v.id} event ${i + 1}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`;
      expect(got.window, where).toBe(want.window);
      expect(got.dead, where).toBe(want.dead);
      expect(got.success, where).toBeCloseTo(want.success, 5);
      expect(got.failure, where).toBeCloseTo(want.failure, 5);
      expect(got.failCohorts, where).toBeCloseTo(want.failCohorts, 5);
    });
  });

  it("covers every F* vector id the file holds", () => {
    for (const v of vectors.feedback) expect(FEEDBACK_PARAMS[v.id], v.id).toBeDefined();
  });
});
