/**
 * GET /metrics (operator key) in Prometheus' text format, parsed by a Prometheus text parser from
 * npm (parse-prometheus-text-format), after real traffic: deliveries through the sink, a refused
 * send, the egress pools of this project. Every label set is bounded (the busiest destinations
 * and "other", configured egresses, statuses and reply classes, error names).
 */
import { beforeAll, describe, expect, it } from "vitest";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { callWithKey, email, newKey, newOperatorKey, settle } from "../helpers";
import { recipientsWhen } from "./observe";

let key: string;
let operator: string;

beforeAll(async () => {
  key = await newKey("metrics");
  operator = await newOperatorKey("metrics-operator");
});

describe("GET /metrics", () => {
  it("needs an operator key", async () => {
    expect((await callWithKey(key, "GET", "/metrics")).status).toBe(403);
  });

  it("parses as Prometheus text with queues, outcomes by reply class, egress health, webhook backlog and accept refusals", async () => {
    const sent = await Promise.all(
      ["m1@mx-one.test", "m2@mx-two.test"].map(
        async (to) =>
          (await (await callWithKey(key, "POST", "/emails", email({ to: [to] }))).json<{ id: string }>()).id,
      ),
    );
    for (const id of sent) await recipientsWhen(key, id, (r) => r.status === "delivered", "delivered", 15_000);
    expect((await callWithKey(key, "POST", "/emails", { from: "x@acme.test" })).status).toBe(422);
    const res = await callWithKey(operator, "GET", "/metrics");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const families = new Map(parsePrometheusTextFormat(await res.text()).map((f) => [f.name, f]));
    expect([...families.keys()]).toEqual(
      expect.arrayContaining([
        "cohort_queue_recipients",
        "cohort_queue_messages",
        "cohort_outcomes_total",
        "cohort_egress_up",
        "cohort_webhook_unclaimed_events",
        "cohort_webhook_endpoints_blocked",
        "cohort_accept_refusals_total",
      ]),
    );
    expect(families.get("cohort_outcomes_total")!.type).toBe("COUNTER");
    const delivered = families
      .get("cohort_outcomes_total")!
      .metrics.filter((m) => m.labels?.status === "delivered" && m.labels.code_class === "2");
    expect(delivered.reduce((n, m) => n + Number(m.value), 0)).toBeGreaterThanOrEqual(2);
    expect(families.get("cohort_accept_refusals_total")!.metrics).toContainEqual({
      labels: { reason: "missing_required_field", status: "422" },
      value: expect.stringMatching(/^[1-9]\d*$/),
    });
    const egress = families.get("cohort_egress_up")!.metrics.map((m) => m.labels!.pool);
    expect(new Set(egress)).toEqual(new Set(["failover", "solo", "smarthost", "cf", "direct"]));
    expect(families.get("cohort_queue_messages")!.metrics.map((m) => m.labels!.state)).toEqual(
      expect.arrayContaining(["incoming", "deferred"]),
    );
    // Bounded labels: per transport at most METRICS_TOP_N (20) destinations and "other".
    const dest = families.get("cohort_destination_recipients")?.metrics ?? [];
    const perTransport = new Map<string, Set<string>>();
    for (const m of dest)
      perTransport.set(
        m.labels!.transport!,
        (perTransport.get(m.labels!.transport!) ?? new Set()).add(m.labels!.destination!),
      );
    for (const names of perTransport.values()) expect(names.size).toBeLessThanOrEqual(21);
    for (const m of families.get("cohort_outcomes_total")!.metrics) {
      expect(["delivered", "deferred", "bounced", "expired"]).toContain(m.labels!.status);
      expect(m.labels!.enhanced_class).toMatch(/^(none|[245]\.\d{1,3})$/);
    }
  });
});

describe("teardown", () => {
  it("lets the queues settle", async () => {
    await settle();
  });
});
