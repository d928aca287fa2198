// Which delivery reports a destination's own Destination DO gets (durable-objects/transport/
// feedback-gate.ts): none while the destination only succeeds; from its first site failure on,
// every report, until it has been quiet for destination_idle_memory plus the margin.
import { describe, expect, it } from "vitest";
import { FEED_MARGIN_SEC, FeedbackGate } from "../../../durable-objects/transport/feedback-gate";

describe("FeedbackGate", () => {
  it("feeds nothing of a destination that only succeeds", () => {
    const g = new FeedbackGate(600);
    for (let t = 0; t < 5000; t += 7) expect(g.feed("a", false, t)).toBe(false);
  });

  it("feeds from the first site failure on, until the destination is quiet for memory + margin", () => {
    const g = new FeedbackGate(600);
    expect(g.feed("a", false, 10)).toBe(false);
    expect(g.feed("a", true, 20)).toBe(true);
    expect(g.feed("a", false, 21)).toBe(true);
    // Each fed report keeps it fed: quiet is counted from the last one.
    expect(g.feed("a", false, 21 + 600 + FEED_MARGIN_SEC - 1)).toBe(true);
    const last = 21 + 600 + FEED_MARGIN_SEC - 1;
    expect(g.feed("a", false, last + 600 + FEED_MARGIN_SEC)).toBe(false);
    // Another destination is its own.
    expect(g.feed("b", false, last)).toBe(false);
  });

  it("forgets destinations quiet long enough, oldest first, and keeps the others", () => {
    const g = new FeedbackGate(600);
    g.feed("old", true, 0);
    g.feed("new", true, 500);
    g.feed("x", false, 661); // old's time is up: dropped as the map is walked
    expect((g as unknown as { fed: Map<string, number> }).fed.has("old")).toBe(false);
    expect(g.feed("new", false, 662)).toBe(true);
  });

  it("with destination_idle_memory 0 (the DO keeps its record for ever) feeds every report", () => {
    const g = new FeedbackGate(0);
    expect(g.feed("a", false, 1)).toBe(true);
    expect(g.feed("a", false, 1_000_000)).toBe(true);
  });
});
