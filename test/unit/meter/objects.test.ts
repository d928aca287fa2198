/**
 * The meter around Durable Object classes (worker/meter/objects.ts) and its clock of billed
 * duration (worker/meter/activity.ts), on plain classes with a fake state: requests counted where
 * they land, an object's calls on itself not counted, and the time an object is active — running
 * a request, holding a timer, waiting on waitUntil — summed by class.
 */
import { beforeEach, describe, expect, it } from "vitest";
import { meterClass, meterReset, meterSnapshot } from "../../../worker/meter";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function fakeState(name: string) {
  const waits: Promise<unknown>[] = [];
  const ctx = {
    id: { name, toString: () => name },
    storage: {
      sql: { exec: () => ({ rowsRead: 0, rowsWritten: 0, toArray: () => [] }), databaseSize: 4096 },
      setAlarm: async () => undefined,
      getAlarm: async () => null,
    },
    waitUntil: (p: Promise<unknown>) => {
      waits.push(p);
    },
    blockConcurrencyWhile: async <T>(f: () => Promise<T>) => f(),
  };
  return { ctx: ctx as unknown as DurableObjectState, waits };
}

class Box {
  timer: ReturnType<typeof setTimeout> | null = null;
  constructor(
    readonly ctx: DurableObjectState,
    readonly env: Env,
  ) {}
  async ping(): Promise<string> {
    return "pong";
  }
  async pingTwice(): Promise<string> {
    return `${await this.ping()} ${await this.ping()}`;
  }
  async holdTimer(ms: number): Promise<void> {
    this.timer = setTimeout(() => {
      this.timer = null;
    }, ms);
  }
  async dropTimer(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
  }
  async background(ms: number): Promise<void> {
    this.ctx.waitUntil(sleep(ms));
  }
  async alarm(): Promise<void> {
    await this.ping();
  }
  async devLook(): Promise<number> {
    return 1;
  }
}

const Metered = meterClass("Outbox", Box as unknown as new (ctx: DurableObjectState, env: Env) => Box);
const make = (name: string, METER = "on") => new Metered(fakeState(name).ctx, { METER } as Env);

beforeEach(() => meterReset());

describe("meterClass", () => {
  it("counts each call from outside as a request of its class and method, and a call the object makes on itself not at all", async () => {
    const box = make("a");
    expect(await box.pingTwice()).toBe("pong pong");
    await box.alarm();
    await box.devLook();
    const s = meterSnapshot();
    expect(s.do_requests_by_class).toEqual({ Outbox: 2 });
    expect(s.do_requests_by_method).toEqual({ "Outbox.pingTwice": 1, "Outbox.alarm": 1 });
    expect(s.do_alarms_by_class).toEqual({ Outbox: 1 });
  });

  it("hands the object the metered env and a state whose storage is metered", async () => {
    const box = make("b");
    expect(box.env).not.toBeUndefined();
    box.ctx.storage.sql.exec("SELECT 1");
    expect(meterSnapshot().do_sql_statements_by_class).toEqual({ Outbox: 1 });
  });

  it("makes the object as the class does, uncounted, where the meter is off", async () => {
    const { ctx } = fakeState("c");
    const env = { METER: "off" } as Env;
    const box = new Metered(ctx, env);
    await box.ping();
    expect(box.ctx).toBe(ctx);
    expect(box.env).toBe(env);
    expect(meterSnapshot().do_requests).toBe(0);
  });
});

describe("the clock of billed duration", () => {
  it("bills a request while it runs, and nothing once it is over", async () => {
    const box = make("d");
    await box.ping();
    await sleep(30);
    const s = meterSnapshot();
    expect(s.do_busy_now).toBe(0);
    expect(s.do_active_ms_by_class.Outbox ?? 0).toBeLessThan(20);
    expect(s.do_wakes_by_class).toEqual({ Outbox: 1 });
  });

  it("bills an object while a timer it set is pending, and stops when the timer fires", async () => {
    const box = make("e");
    await box.holdTimer(60);
    expect(meterSnapshot().do_busy_now).toBe(1);
    await sleep(120);
    const s = meterSnapshot();
    expect(s.do_busy_now).toBe(0);
    expect(s.do_active_ms_by_class.Outbox).toBeGreaterThanOrEqual(55);
    expect(s.do_active_ms_by_class.Outbox).toBeLessThan(115);
    expect(s.do_wakes_by_class).toEqual({ Outbox: 1 });
  });

  it("stops billing when the timer is cleared", async () => {
    const box = make("f");
    await box.holdTimer(10_000);
    await sleep(20);
    await box.dropTimer();
    const s = meterSnapshot();
    expect(s.do_busy_now).toBe(0);
    expect(s.do_active_ms_by_class.Outbox).toBeLessThan(1000);
  });

  it("bills an object while a waitUntil promise of it is pending", async () => {
    const box = make("g");
    await box.background(50);
    expect(meterSnapshot().do_busy_now).toBe(1);
    await sleep(100);
    expect(meterSnapshot().do_active_ms_by_class.Outbox).toBeGreaterThanOrEqual(45);
  });

  it("counts one interval for work that overlaps, and a new one after the object was idle", async () => {
    const box = make("h");
    await Promise.all([box.holdTimer(40), box.background(40)]);
    await sleep(80);
    await box.ping();
    const s = meterSnapshot();
    expect(s.do_wakes_by_class).toEqual({ Outbox: 2 });
    expect(s.do_active_objects_by_class).toEqual({ Outbox: 1 });
  });
});
