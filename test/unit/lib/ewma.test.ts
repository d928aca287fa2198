import { describe, expect, it } from "vitest";
import { IntervalMean } from "../../../worker/lib/ewma";

describe("IntervalMean", () => {
  it("is Infinity until two events, then follows the intervals between them", () => {
    const m = new IntervalMean(0.5, 1000);
    expect(m.mean(0)).toBe(Number.POSITIVE_INFINITY);
    m.note(0);
    expect(m.mean(0)).toBe(Number.POSITIVE_INFINITY);
    m.note(10);
    expect(m.mean(10)).toBe(10);
    m.note(40); // gap 30: 10 + 0.5 × 20
    expect(m.mean(40)).toBe(20);
  });

  it("rises at once in a quiet spell, and forgets the past after idleMs", () => {
    const m = new IntervalMean(0.2, 500);
    for (let t = 0; t <= 100; t += 10) m.note(t);
    expect(m.mean(100)).toBe(10);
    expect(m.mean(180)).toBe(80); // 80 ms without an event
    expect(m.mean(600)).toBe(Number.POSITIVE_INFINITY);
    m.note(700); // after an idle spell the gap starts the mean afresh
    m.note(900);
    expect(m.mean(900)).toBe(200);
  });
});
