import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ADMIT_AT_ONCE, ADMIT_BATCH_MAX, AdmissionBatch } from "../../../durable-objects/outbox/admission-batch";
import { settingsOf } from "../../../worker/settings/settings";

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** An AdmissionBatch whose admissions are recorded (and each held until released, when `hold`). */
function recorder(delayMs: number, opts: { hold?: boolean; fail?: boolean } = {}) {
  const runs: string[][] = [];
  const releases: (() => void)[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const batch = new AdmissionBatch(delayMs, async (ids) => {
    runs.push(ids);
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    if (opts.hold) await new Promise<void>((r) => releases.push(r));
    inFlight--;
    if (opts.fail) throw new Error("transport down");
  });
  return { batch, runs, releases, maxInFlight: () => maxInFlight };
}

describe("AdmissionBatch: no delay when idle, runs together under load (Nagle's rule)", () => {
  it("an idle shard admits at once, with no timer", async () => {
    const { batch, runs } = recorder(1000);
    void batch.add(["a"]);
    await vi.advanceTimersByTimeAsync(0);
    expect(runs).toEqual([["a"]]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("what arrives within the gap after a run began waits, and goes together one gap after it", async () => {
    const { batch, runs } = recorder(1000);
    void batch.add(["a"]);
    await vi.advanceTimersByTimeAsync(400);
    void batch.add(["b", "c"]);
    await vi.advanceTimersByTimeAsync(300);
    void batch.add(["d"]);
    await vi.advanceTimersByTimeAsync(299);
    expect(runs).toEqual([["a"]]);
    expect(batch.waiting).toBe(3);
    await vi.advanceTimersByTimeAsync(1);
    expect(runs).toEqual([["a"], ["b", "c", "d"]]);
    expect(batch.waiting).toBe(0);
  });

  it("after a quiet gap, the next message is admitted at once again", async () => {
    const { batch, runs } = recorder(100);
    void batch.add(["a"]);
    await vi.advanceTimersByTimeAsync(150);
    void batch.add(["b"]);
    await vi.advanceTimersByTimeAsync(0);
    expect(runs).toEqual([["a"], ["b"]]);
  });

  it("a message accepted twice (a retried accept) is admitted once per run", async () => {
    const { batch, runs } = recorder(100);
    void batch.add(["x"]);
    await vi.advanceTimersByTimeAsync(0);
    void batch.add(["a", "b"]);
    void batch.add(["a"]);
    await vi.advanceTimersByTimeAsync(100);
    expect(runs).toEqual([["x"], ["a", "b"]]);
  });

  it(`a request of ${ADMIT_AT_ONCE} messages or more starts a run at once, taking what waited with it`, async () => {
    const { batch, runs } = recorder(1000);
    void batch.add(["first"]);
    await vi.advanceTimersByTimeAsync(100);
    void batch.add(["early"]);
    await vi.advanceTimersByTimeAsync(100);
    const big = Array.from({ length: ADMIT_AT_ONCE }, (_, i) => `b${i}`);
    void batch.add(big);
    await vi.advanceTimersByTimeAsync(0);
    expect(runs).toEqual([["first"], ["early", ...big]]);
    // The next small one waits a gap after that run.
    void batch.add(["late"]);
    await vi.advanceTimersByTimeAsync(999);
    expect(runs).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(runs).toEqual([["first"], ["early", ...big], ["late"]]);
  });

  it("with no gap, an accept admits its own messages before it returns", async () => {
    const { batch, runs } = recorder(0);
    await batch.add(["a"]);
    expect(runs).toEqual([["a"]]);
    await batch.add([]);
    expect(runs).toEqual([["a"]]);
  });

  it("an accept's add returns once the run that takes its messages ended, failed or not (it answers after its admission)", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const { batch, releases } = recorder(100, { hold: true, fail: true });
    const ended: string[] = [];
    void batch.add(["a"]).then(() => ended.push("a"));
    await vi.advanceTimersByTimeAsync(0);
    void batch.add(["b"]).then(() => ended.push("b"));
    await vi.advanceTimersByTimeAsync(200);
    expect(ended).toEqual([]);
    releases.shift()!();
    await vi.advanceTimersByTimeAsync(0);
    expect(ended).toEqual(["a"]);
    releases.shift()!();
    await vi.advanceTimersByTimeAsync(0);
    expect(ended).toEqual(["a", "b"]);
    errors.mockRestore();
  });

  it("runs never overlap: messages accepted during a run wait for it", async () => {
    const { batch, runs, releases, maxInFlight } = recorder(100, { hold: true });
    void batch.add(["a"]);
    await vi.advanceTimersByTimeAsync(0);
    expect(runs).toEqual([["a"]]);
    void batch.add(["b"]);
    await vi.advanceTimersByTimeAsync(500); // b's gap ended while a's run still holds
    expect(runs).toEqual([["a"]]);
    releases.shift()!();
    await vi.advanceTimersByTimeAsync(0);
    expect(runs).toEqual([["a"], ["b"]]);
    releases.shift()!();
    await vi.advanceTimersByTimeAsync(0);
    expect(maxInFlight()).toBe(1);
  });

  it("a slow run does not queue runs up: what arrived meanwhile is one run after it", async () => {
    const { batch, runs, releases } = recorder(100, { hold: true });
    void batch.add(["a"]);
    await vi.advanceTimersByTimeAsync(0);
    for (const id of ["b", "c", "d"]) {
      void batch.add([id]);
      await vi.advanceTimersByTimeAsync(300);
    }
    expect(runs).toEqual([["a"]]);
    releases.shift()!();
    await vi.advanceTimersByTimeAsync(0);
    expect(runs).toEqual([["a"], ["b", "c", "d"]]);
    releases.shift()!();
    await vi.advanceTimersByTimeAsync(0);
    expect(runs).toHaveLength(2);
  });

  it(`takes at most ${ADMIT_BATCH_MAX} messages a run and runs again at once for the rest`, async () => {
    vi.useRealTimers();
    const { batch, runs } = recorder(20);
    const ids = Array.from({ length: ADMIT_BATCH_MAX + 20 }, (_, i) => `m${i}`);
    void batch.add(ids);
    await vi.waitFor(() => expect(runs.length).toBe(2), { timeout: 2000 });
    expect(runs.map((r) => r.length)).toEqual([ADMIT_BATCH_MAX, 20]);
    expect(runs.flat()).toEqual(ids);
  });

  it("a failed run is logged and does not stop later runs (its messages stay for the sweeper)", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const { batch, runs } = recorder(100, { fail: true });
    void batch.add(["a"]);
    await vi.advanceTimersByTimeAsync(100);
    void batch.add(["b"]);
    await vi.advanceTimersByTimeAsync(0);
    expect(runs).toEqual([["a"], ["b"]]);
    expect(errors).toHaveBeenCalledTimes(2);
    expect(String(errors.mock.calls[0]![0])).toContain("coalesced admission failed");
    errors.mockRestore();
  });

  it("ADMIT_BATCH_MS: default 50, 0 allowed, at most 10000, anything invalid the default", () => {
    expect(settingsOf({}).admitBatchMs).toBe(50);
    expect(settingsOf({ ADMIT_BATCH_MS: "" }).admitBatchMs).toBe(50);
    expect(settingsOf({ ADMIT_BATCH_MS: "0" }).admitBatchMs).toBe(0);
    expect(settingsOf({ ADMIT_BATCH_MS: "250" }).admitBatchMs).toBe(250);
    expect(settingsOf({ ADMIT_BATCH_MS: "60000" }).admitBatchMs).toBe(10_000);
    expect(settingsOf({ ADMIT_BATCH_MS: "-1" }).admitBatchMs).toBe(50);
    expect(settingsOf({ ADMIT_BATCH_MS: "soon" }).admitBatchMs).toBe(50);
  });
});
