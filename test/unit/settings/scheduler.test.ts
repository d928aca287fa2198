// The deployment's scheduler configuration (worker/settings/scheduler.ts): with
// SMARTHOST set, the default transport's window limit is 50 unless SCHEDULER_CONFIG says otherwise.
import { describe, expect, it } from "vitest";
import { schedulerConfigOf, SMARTHOST_CONCURRENCY_LIMIT } from "../../../worker/settings/scheduler";

const base = { DELIVERY: "agents", SCHEDULER_CONFIG: "", SMARTHOST: "", DEFAULT_TRANSPORT: "smtp" };

/** The window limit the named transport runs with. */
function limitOf(env: Partial<typeof base>, transport = "smtp"): number {
  const cfg = schedulerConfigOf({ ...base, ...env });
  return (cfg.transports[transport] ?? cfg.transportDefaults).concurrencyLimit;
}

describe("schedulerConfigOf", () => {
  it("keeps Postfix's 20 for every transport without a smarthost", () => {
    expect(limitOf({})).toBe(20);
    expect(schedulerConfigOf(base).transports).toEqual({});
  });

  it("lets the default transport's window grow to 200 when SMARTHOST is set, and only that transport's", () => {
    expect(SMARTHOST_CONCURRENCY_LIMIT).toBe(200);
    expect(limitOf({ SMARTHOST: "[smtp.example.net]:587" })).toBe(200);
    expect(limitOf({ SMARTHOST: "[smtp.example.net]:587" }, "bulk")).toBe(20);
    expect(limitOf({ SMARTHOST: "[smtp.example.net]:587", DEFAULT_TRANSPORT: "out" }, "out")).toBe(200);
    expect(limitOf({ SMARTHOST: "[smtp.example.net]:587", DEFAULT_TRANSPORT: "out" }, "smtp")).toBe(20);
    // The transport's process_limit follows unless set; the window still starts at Postfix's 5.
    expect(schedulerConfigOf({ ...base, SMARTHOST: "[smtp.example.net]:587" }).transports.smtp!.processLimit).toBe(200);
    expect(
      schedulerConfigOf({
        ...base,
        SMARTHOST: "[smtp.example.net]:587",
        SCHEDULER_CONFIG: JSON.stringify({ transports: { smtp: { process_limit: 30 } } }),
      }).transports.smtp!.processLimit,
    ).toBe(30);
    expect(
      schedulerConfigOf({
        ...base,
        SMARTHOST: "[smtp.example.net]:587",
        SCHEDULER_CONFIG: JSON.stringify({ default_process_limit: 40 }),
      }).transports.smtp!.processLimit,
    ).toBe(40);
    expect(schedulerConfigOf({ ...base, SMARTHOST: "[smtp.example.net]:587" }).transports.smtp!.concurrencyLimit).toBe(
      200,
    );
    expect(
      schedulerConfigOf({ ...base, SMARTHOST: "[smtp.example.net]:587" }).transports.smtp!.initialConcurrency,
    ).toBe(5);
  });

  it("gives way to SCHEDULER_CONFIG's own limits, global or the transport's", () => {
    const smarthost = { SMARTHOST: "[smtp.example.net]:587" };
    expect(
      limitOf({ ...smarthost, SCHEDULER_CONFIG: JSON.stringify({ default_destination_concurrency_limit: 30 }) }),
    ).toBe(30);
    expect(
      limitOf({
        ...smarthost,
        SCHEDULER_CONFIG: JSON.stringify({ transports: { smtp: { destination_concurrency_limit: 10 } } }),
      }),
    ).toBe(10);
    expect(
      limitOf({
        ...smarthost,
        SCHEDULER_CONFIG: JSON.stringify({ transports: { smtp: { destination_concurrency_limit: 0 } } }),
      }),
    ).toBe(0);
  });

  it("keeps the transport's other overrides beside the limit it adds", () => {
    const cfg = schedulerConfigOf({
      ...base,
      SMARTHOST: "[smtp.example.net]:587",
      SCHEDULER_CONFIG: JSON.stringify({
        transports: { smtp: { initial_destination_concurrency: 2 }, bulk: { destination_concurrency_limit: 3 } },
      }),
    });
    expect(cfg.transports.smtp).toMatchObject({ concurrencyLimit: 200, initialConcurrency: 2 });
    expect(cfg.transports.bulk!.concurrencyLimit).toBe(3);
  });

  it("leaves a malformed transports value for the parser to refuse", () => {
    expect(() =>
      schedulerConfigOf({
        ...base,
        SMARTHOST: "[smtp.example.net]:587",
        SCHEDULER_CONFIG: JSON.stringify({ transports: ["smtp"] }),
      }),
    ).toThrow();
  });
});
