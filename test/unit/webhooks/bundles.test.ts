/**
 * makeBundles (webhooks/jobs.ts): one publication's jobs become one queue message per endpoint,
 * in order, each within one billed 64 KB operation.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  BUNDLE_BYTES,
  isWebhookBundle,
  JOB_BODY_LIMIT_BYTES,
  jobsOfBundle,
  makeBundles,
  makeJob,
  type WebhookJob,
} from "../../../worker/webhooks/jobs";

const job = (tenant: string, ep: string, id: string, body: string): WebhookJob =>
  makeJob(tenant, ep, { id, type: "email.sent", body });

describe("makeBundles", () => {
  it("groups a one-recipient email's two events for an endpoint into one bundle, per endpoint", () => {
    const jobs = [job("t", "ep1", "e1", "{}"), job("t", "ep2", "e1", "{}"), job("t", "ep1", "e2", "{}")];
    const bundles = makeBundles(jobs);
    expect(bundles.map((b) => [b.endpointId, b.events.map((e) => e.eventId)])).toEqual([
      ["ep1", ["e1", "e2"]],
      ["ep2", ["e1"]],
    ]);
    expect(bundles.every(isWebhookBundle)).toBe(true);
    expect(jobsOfBundle(bundles[0]!)).toEqual([jobs[0], jobs[2]]);
  });

  it("leaves out a body too large for a bundle (the consumer reads it from D1)", () => {
    const big = "x".repeat(BUNDLE_BYTES);
    const [b] = makeBundles([job("t", "ep", "e1", big)]);
    expect(b!.events[0]).toEqual({ eventId: "e1", type: "email.sent" });
    expect(JSON.stringify(b).length).toBeLessThan(BUNDLE_BYTES);
  });

  it("property: every job exactly once, in order per endpoint, every bundle within BUNDLE_BYTES", () => {
    const arb = fc.array(
      fc.record({
        tenant: fc.constantFrom("a", "b"),
        ep: fc.constantFrom("ep1", "ep2", "ep3"),
        size: fc.integer({ min: 0, max: 30_000 }),
      }),
      { maxLength: 60 },
    );
    fc.assert(
      fc.property(arb, (specs) => {
        const jobs = specs.map((s, i) => job(s.tenant, s.ep, `evt_${i}`, "é".repeat(s.size)));
        const bundles = makeBundles(jobs);
        for (const b of bundles)
          expect(new TextEncoder().encode(JSON.stringify(b)).length).toBeLessThanOrEqual(BUNDLE_BYTES);
        const back = bundles.flatMap(jobsOfBundle);
        expect(back.map((j) => j.eventId).sort()).toEqual(jobs.map((j) => j.eventId).sort());
        for (const key of new Set(jobs.map((j) => `${j.tenant}/${j.endpointId}`))) {
          const of = (list: WebhookJob[]) =>
            list.filter((j) => `${j.tenant}/${j.endpointId}` === key).map((j) => j.eventId);
          expect(of(back)).toEqual(of(jobs));
        }
        // A body is carried unless it alone would not fit.
        for (const j of back) {
          const orig = jobs.find((x) => x.eventId === j.eventId)!;
          if (orig.body !== undefined && new TextEncoder().encode(orig.body).length < BUNDLE_BYTES / 2)
            expect(j.body).toBe(orig.body);
        }
      }),
      { numRuns: 200 },
    );
  });

  it("refuses malformed bundles", () => {
    expect(isWebhookBundle({ v: 2, tenant: "t", endpointId: "e", events: [] })).toBe(false);
    expect(isWebhookBundle({ v: 2, tenant: "t", endpointId: "e", events: [{ eventId: 1, type: "x" }] })).toBe(false);
    expect(isWebhookBundle({ v: 1, tenant: "t", endpointId: "e", events: [{ eventId: "1", type: "x" }] })).toBe(false);
    expect(JOB_BODY_LIMIT_BYTES).toBeGreaterThan(BUNDLE_BYTES); // a job may carry what a bundle leaves out
  });
});
