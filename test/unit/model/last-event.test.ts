import { describe, expect, it } from "vitest";
import { lastEventOf } from "../../../worker/model/status";

describe("Resend's last_event from the recipients' states", () => {
  it.each([
    { statuses: ["incoming"], scheduled: true, complained: false, want: "scheduled" },
    { statuses: ["ready", "delivered"], scheduled: false, complained: false, want: "queued" },
    { statuses: ["deferred", "delivered"], scheduled: false, complained: false, want: "delivery_delayed" },
    { statuses: ["delivered", "bounced"], scheduled: false, complained: false, want: "bounced" },
    { statuses: ["expired"], scheduled: false, complained: false, want: "failed" },
    { statuses: ["cancelled", "cancelled"], scheduled: false, complained: false, want: "canceled" },
    { statuses: ["suppressed"], scheduled: false, complained: false, want: "suppressed" },
    { statuses: ["delivered"], scheduled: false, complained: false, want: "delivered" },
    { statuses: ["delivered", "delivered"], scheduled: false, complained: true, want: "complained" },
  ] as const)("$statuses (complained: $complained) → $want", ({ statuses, scheduled, complained, want }) => {
    expect(lastEventOf([...statuses], scheduled, complained)).toBe(want);
  });
});
