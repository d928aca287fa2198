import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { retryDueMs } from "../../../durable-objects/transport/retries";

describe("retryDueMs", () => {
  it("counts the back-off the core chose from the moment the attempt ended, not from the start of its second", () => {
    // The attempt ended at 10.9 s; the core (whole seconds) saw 10 and chose 10 + 5.
    expect(retryDueMs(15, 10, 10_900)).toBe(15_900);
  });

  it("is never earlier than the configured back-off after the attempt, nor than the core's own time (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2e12 }), fc.integer({ min: 1, max: 86_400 }), (nowMs, delaySec) => {
        const now = Math.floor(nowMs / 1000);
        const due = retryDueMs(now + delaySec, now, nowMs);
        expect(due - nowMs).toBeGreaterThanOrEqual(delaySec * 1000);
        expect(due - nowMs).toBeLessThan(delaySec * 1000 + 1);
        expect(due).toBeGreaterThanOrEqual((now + delaySec) * 1000);
      }),
    );
  });
});
