/**
 * The entries a delivery agent holds, and the step each waits in (worker/delivery/held-entries.ts):
 * what the agent answers the Transport DO's lease checks with, and what it logs of an entry held
 * in one step for long.
 */
import { describe, expect, it } from "vitest";
import { HeldEntries } from "../../../worker/delivery/held-entries";

describe("HeldEntries", () => {
  it("holds an entry taken twice until it is dropped twice", () => {
    const held = new HeldEntries(() => 0);
    held.take(7);
    held.take(7); // handed over again after a lost answer
    held.drop(7);
    expect(held.has(7)).toBe(true);
    held.drop(7);
    expect(held.has(7)).toBe(false);
    held.drop(7); // a drop too many changes nothing
    expect(held.has(7)).toBe(false);
  });

  it("names the step an entry has waited in for at least the given time, counted from when it entered it", () => {
    let now = 1_000;
    const held = new HeldEntries(() => now);
    held.take(1);
    held.take(2);
    held.take(3);
    held.step(1, "envelope");
    now += 60_000;
    held.step(2, "session"); // entered a step just now
    held.drop(3);
    now += 240_000;
    expect(held.stuck([1, 2, 3, 4], 300_000)).toEqual([{ entryId: 1, step: "envelope", ms: 300_000 }]);
    expect(held.stuck([1, 2], 200_000)).toEqual([
      { entryId: 1, step: "envelope", ms: 300_000 },
      { entryId: 2, step: "session", ms: 240_000 },
    ]);
    held.take(1); // a new run starts at "queued"
    expect(held.stuck([1], 1)).toEqual([]);
    now += 1;
    expect(held.stuck([1], 1)).toEqual([{ entryId: 1, step: "queued", ms: 1 }]);
  });
});
