import { describe, expect, it } from "vitest";
import fc from "fast-check";
import { countSetting, msSetting } from "../../../worker/settings/parse";

describe("msSetting", () => {
  it("is the default when unset, empty or invalid", () => {
    for (const raw of [undefined, "", "soon", "-1", "NaN", "Infinity", "-Infinity"])
      expect(msSetting(raw, 1000, 10_000)).toBe(1000);
  });

  it("takes 0 and any finite value up to the maximum", () => {
    expect(msSetting("0", 1000, 10_000)).toBe(0);
    expect(msSetting("200", 1000, 10_000)).toBe(200);
    expect(msSetting("60000", 1000, 10_000)).toBe(10_000);
  });

  it("is always within [0, max], or the default", () => {
    fc.assert(
      fc.property(fc.string(), fc.nat(5000), fc.nat(20_000), (raw, def, max) => {
        const v = msSetting(raw, def, max);
        expect(v === def || (v >= 0 && v <= max)).toBe(true);
      }),
    );
  });
});

describe("countSetting", () => {
  it("is the default when unset, empty, zero, negative or not an integer", () => {
    for (const raw of [undefined, "", "0", "-3", "2.5", "many", "Infinity"]) expect(countSetting(raw, 8)).toBe(8);
  });

  it("takes any integer of at least 1", () => {
    expect(countSetting("1", 8)).toBe(1);
    expect(countSetting("64", 8)).toBe(64);
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 ** 31 }), (n) => {
        expect(countSetting(String(n), 8)).toBe(n);
      }),
    );
  });
});
