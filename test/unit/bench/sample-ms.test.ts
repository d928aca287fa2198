import { describe, expect, it } from "vitest";
import { GAP_INTERVALS, sampleMs, type Profile } from "../../../scripts/lib/cdp";
import { cpuByClass } from "../../../bench/lib/cpu-by-class";

const profile = (deltasUs: number[], nodes: Profile["nodes"], samples: number[]): Profile => ({
  nodes,
  startTime: 0,
  endTime: deltasUs.reduce((a, b) => a + b, 0),
  samples,
  timeDeltas: deltasUs,
});

describe("sampleMs", () => {
  it("charges a sample its delta, but a gap in the sampling at most GAP_INTERVALS intervals", () => {
    const p = profile(
      [1000, 2200, 1_800_000],
      [{ id: 1, callFrame: { functionName: "f", url: "", lineNumber: 0 } }],
      [1, 1, 1],
    );
    expect(sampleMs(p, 1000)).toEqual([1, 2.2, GAP_INTERVALS]);
    expect(sampleMs(p, 500)).toEqual([1, GAP_INTERVALS / 2, GAP_INTERVALS / 2]);
  });

  it("keeps a class woken after a long idle gap from taking the gap (cpuByClass)", () => {
    // One module per class in a bundle of two "// path" sections; the Outbox sample follows a 2 s gap.
    const bundle = [
      "// durable-objects/outbox/a.ts",
      "function a() {}",
      "// worker/delivery/b.ts",
      "function b() {}",
    ].join("\n");
    const nodes: Profile["nodes"] = [
      { id: 1, callFrame: { functionName: "(root)", url: "", lineNumber: -1 }, children: [2, 3] },
      { id: 2, callFrame: { functionName: "a", url: "file:///x/index.js", lineNumber: 1 } },
      { id: 3, callFrame: { functionName: "b", url: "file:///x/index.js", lineNumber: 3 } },
    ];
    const ms = cpuByClass(profile([1000, 1000, 1000, 2_000_000], nodes, [3, 3, 3, 2]), bundle, 1000);
    expect(ms.Outbox).toBe(GAP_INTERVALS);
    expect(ms.DeliveryAgent).toBe(3);
  });
});
