import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  acquireSlot,
  deadPeriodMs,
  DEFAULT_HEALTH_CONFIG,
  initialHealth,
  isBlocked,
  onDeliveryFailure,
  onDeliverySuccess,
  type EndpointHealth,
  type HealthConfig,
} from "../../../worker/webhooks/core/endpoint-health";

const NOW = 1_700_000_000_000;
const cfg: HealthConfig = {
  ...DEFAULT_HEALTH_CONFIG,
  initialWindow: 2,
  maxWindow: 4,
  minDeadMs: 1_000,
  maxDeadMs: 8_000,
};

/** Takes n slots, asserting each is granted. */
function take(state: EndpointHealth, n: number, nowMs = NOW): EndpointHealth {
  let s = state;
  for (let i = 0; i < n; i++) {
    const r = acquireSlot(s, nowMs);
    expect(r.decision).toEqual({ kind: "send" });
    s = r.state;
  }
  return s;
}

describe("endpoint window", () => {
  it("starts at the initial window and refuses a slot beyond it", () => {
    const s = take(initialHealth(cfg), 2);
    expect(acquireSlot(s, NOW).decision).toEqual({ kind: "full" });
  });

  it("opens by one per window's worth of successes with the window in use, up to the maximum", () => {
    let s = initialHealth(cfg);
    const trace: number[] = [];
    for (let i = 0; i < 12; i++) {
      s = onDeliverySuccess(take(s, s.window - s.inflight), cfg);
      trace.push(s.window);
    }
    expect(trace).toEqual([2, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4]);
  });

  it("does not open while the window limits nothing: one event at a time leaves the state as it was", () => {
    const first = onDeliverySuccess(take(initialHealth(cfg), 1), cfg);
    let s = first;
    for (let i = 0; i < 20; i++) s = onDeliverySuccess(take(s, 1), cfg);
    expect(s).toEqual(first);
    expect(s).toMatchObject({ window: 2, success: 0, inflight: 0 });
  });

  it("closes on failures but never below 1", () => {
    let s = initialHealth({ ...cfg, failCohortLimit: 100 });
    for (let i = 0; i < 10; i++) s = onDeliveryFailure(take(s, 1), NOW, { ...cfg, failCohortLimit: 100 });
    expect(s.window).toBe(1);
    expect(s.blockedUntilMs).toBeNull();
  });
});

describe("dead endpoint", () => {
  it("is dead after a whole window of failures (one failed cohort), then probes with one slot", () => {
    let s = take(initialHealth(cfg), 2);
    s = onDeliveryFailure(s, NOW, cfg);
    expect(isBlocked(s, NOW)).toBe(false);
    s = onDeliveryFailure(s, NOW, cfg);
    expect(s).toMatchObject({ dead: true, blockedUntilMs: NOW + 1_000, window: 1, inflight: 0 });
    expect(acquireSlot(s, NOW + 999).decision).toEqual({ kind: "wait", untilMs: NOW + 1_000 });
    const probe = take(s, 1, NOW + 1_000);
    expect(acquireSlot(probe, NOW + 1_000).decision).toEqual({ kind: "full" });
  });

  it.each([
    { name: "first period", periods: 0, want: 1_000 },
    { name: "second doubles", periods: 1, want: 2_000 },
    { name: "third doubles again", periods: 2, want: 4_000 },
    { name: "capped", periods: 5, want: 8_000 },
    { name: "capped for huge counts", periods: 10_000, want: 8_000 },
  ])("dead period: $name", ({ periods, want }) => {
    expect(deadPeriodMs(periods, cfg)).toBe(want);
  });

  it("doubles the dead period when the probe fails, and a success resets it", () => {
    let s = take(initialHealth(cfg), 2);
    s = onDeliveryFailure(onDeliveryFailure(s, NOW, cfg), NOW, cfg);
    let t = NOW + 1_000;
    s = onDeliveryFailure(take(s, 1, t), t, cfg);
    expect(s.blockedUntilMs).toBe(t + 2_000);
    t += 2_000;
    s = onDeliverySuccess(take(s, 1, t), cfg);
    expect(s).toMatchObject({ deadPeriods: 0, failCohorts: 0, dead: false });
  });

  it("honours a Retry-After throttle without calling the endpoint dead", () => {
    const s = onDeliveryFailure(take(initialHealth({ ...cfg, initialWindow: 4 }), 1), NOW, cfg, NOW + 30_000);
    expect(s).toMatchObject({ dead: false, blockedUntilMs: NOW + 30_000 });
    expect(acquireSlot(s, NOW + 29_999).decision.kind).toBe("wait");
    expect(acquireSlot(s, NOW + 30_000).decision.kind).toBe("send");
  });

  it("keeps endpoints independent: a dead one does not block another", () => {
    let dead = take(initialHealth(cfg), 2);
    dead = onDeliveryFailure(onDeliveryFailure(dead, NOW, cfg), NOW, cfg);
    const healthy = initialHealth(cfg);
    expect(acquireSlot(dead, NOW).decision.kind).toBe("wait");
    expect(acquireSlot(healthy, NOW).decision.kind).toBe("send");
  });

  it("survives a JSON round trip", () => {
    let s = take(initialHealth(cfg), 2);
    s = onDeliveryFailure(s, NOW, cfg);
    expect(JSON.parse(JSON.stringify(s))).toEqual(s);
    expect(s.v).toBe(1);
  });
});

describe("endpoint health: invariants under random outcomes", () => {
  type Step =
    { kind: "acquire" } | { kind: "ok" } | { kind: "fail"; throttleMs: number | null } | { kind: "tick"; ms: number };
  const step: fc.Arbitrary<Step> = fc.oneof(
    fc.constant<Step>({ kind: "acquire" }),
    fc.constant<Step>({ kind: "ok" }),
    fc.option(fc.nat({ max: 60_000 })).map<Step>((throttleMs) => ({ kind: "fail", throttleMs })),
    fc.nat({ max: 10_000 }).map<Step>((ms) => ({ kind: "tick", ms })),
  );

  it("keeps 1 <= window <= max, inflight within the window, and never sends while blocked", () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 200 }), (steps) => {
        let s = initialHealth(cfg);
        let now = NOW;
        for (const st of steps) {
          if (st.kind === "tick") now += st.ms;
          else if (st.kind === "acquire") {
            const r = acquireSlot(s, now);
            if (r.decision.kind === "send") {
              expect(isBlocked(s, now)).toBe(false);
              expect(s.inflight).toBeLessThan(s.window);
            }
            s = r.state;
          } else if (s.inflight > 0) {
            s =
              st.kind === "ok"
                ? onDeliverySuccess(s, cfg)
                : onDeliveryFailure(s, now, cfg, st.throttleMs === null ? undefined : now + st.throttleMs);
          }
          expect(s.window).toBeGreaterThanOrEqual(1);
          expect(s.window).toBeLessThanOrEqual(cfg.maxWindow);
          expect(s.inflight).toBeGreaterThanOrEqual(0);
        }
      }),
    );
  });
});
