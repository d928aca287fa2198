import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { Ewma } from "../../../worker/lib/ewma";

describe("Ewma", () => {
  it("is Infinity before a sample, the first sample itself, then moves a weight's share toward each new one", () => {
    const m = new Ewma(0.5);
    expect(m.value()).toBe(Number.POSITIVE_INFINITY);
    m.add(100);
    expect(m.value()).toBe(100);
    m.add(200);
    expect(m.value()).toBe(150);
  });

  it("stays between the smallest and the largest sample (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.double({ min: 0, max: 1e6, noNaN: true }), { minLength: 1, maxLength: 50 }), (xs) => {
        const m = new Ewma();
        for (const x of xs) m.add(x);
        expect(m.value()).toBeGreaterThanOrEqual(Math.min(...xs) - 1e-6);
        expect(m.value()).toBeLessThanOrEqual(Math.max(...xs) + 1e-6);
      }),
    );
  });
});
