/**
 * A domain's status from its records' (worker/domains/records.ts, pure): a verified domain keeps
 * sending while a DKIM rotation waits for its new record, and when a lookup fails for a moment.
 */
import { describe, expect, it } from "vitest";
import { domainStatus, recordsFor, type DomainRecord, type RecordStatus } from "../../../worker/domains/records";

const options = {
  selector: "cohort1",
  publicKey: "AAAA",
  keyType: "rsa" as const,
  returnPath: "send",
  mxHost: "feedback.relay.test",
  spf: "v=spf1 ~all",
};

/** The four published records with the given statuses (DKIM, SPF MX, SPF TXT, DMARC). */
function withStatuses(...s: RecordStatus[]): DomainRecord[] {
  return recordsFor("acme.test", options).map((r, i) => ({ ...r, status: s[i]! }));
}

/** A rotation's second DKIM record (selector cohort2) with `status`. */
const rotation = (status: RecordStatus): DomainRecord => ({
  ...recordsFor("acme.test", { ...options, selector: "cohort2", publicKey: "BBBB" })[0]!,
  status,
});

describe("domainStatus", () => {
  it("verified when DKIM and both SPF records are; DMARC never decides", () => {
    expect(domainStatus(withStatuses("verified", "verified", "verified", "failed"))).toBe("verified");
    expect(domainStatus(withStatuses("verified", "failed", "verified", "verified"))).toBe("partially_verified");
    expect(domainStatus(withStatuses("failed", "failed", "failed", "verified"))).toBe("failed");
    expect(domainStatus(withStatuses("not_started", "not_started", "not_started", "not_started"))).toBe("not_started");
    expect(domainStatus(withStatuses("temporary_failure", "failed", "failed", "failed"))).toBe("pending");
  });

  it("a rotation's record not yet published does not demote the domain (the old selector still signs)", () => {
    const records = [...withStatuses("verified", "verified", "verified", "verified"), rotation("failed")];
    expect(domainStatus(records, { rotating: "cohort2._domainkey" })).toBe("verified");
    expect(
      domainStatus([...withStatuses("verified", "verified", "verified", "verified"), rotation("not_started")], {
        rotating: "cohort2._domainkey",
      }),
    ).toBe("verified");
    // The old record gone before the new one is there: no DKIM record verifies.
    expect(
      domainStatus([...withStatuses("failed", "verified", "verified", "verified"), rotation("failed")], {
        rotating: "cohort2._domainkey",
      }),
    ).toBe("partially_verified");
  });

  it("a lookup that failed proves nothing: a verified domain stays verified; a record found missing still demotes it", () => {
    const flaky = withStatuses("temporary_failure", "verified", "temporary_failure", "verified");
    expect(domainStatus(flaky, { previous: "verified" })).toBe("verified");
    expect(domainStatus(flaky, { previous: "not_started" })).toBe("partially_verified");
    expect(
      domainStatus(withStatuses("temporary_failure", "failed", "verified", "verified"), { previous: "verified" }),
    ).toBe("partially_verified");
  });
});
