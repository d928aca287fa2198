import { describe, expect, it } from "vitest";
import { explainedByKill } from "../../chaos/core/duplicates";

const kill = { atMs: 10_000, killedMs: 10_120 };

describe("duplicates explained by a kill", () => {
  it.each([
    { name: "a kill between the copies", copies: [9_000, 35_000], want: true },
    { name: "the first copy reached the sink while the tree was being killed", copies: [10_040, 36_000], want: true },
    { name: "the first copy exactly when the last process died", copies: [10_120, 36_000], want: true },
    { name: "both copies before the kill", copies: [8_000, 9_999], want: false },
    { name: "both copies after the kill was over", copies: [10_121, 30_000], want: false },
    { name: "a single copy", copies: [10_050], want: false },
  ])("$name → $want", ({ copies, want }) => {
    expect(explainedByKill(copies, [kill])).toBe(want);
  });

  it("no kills explain nothing", () => {
    expect(explainedByKill([1, 2], [])).toBe(false);
  });
});
