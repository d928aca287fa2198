// MTA-STS (RFC 8461) and TLS-RPT (RFC 8460) decisions: worker/tls-policy/core/.
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import {
  afterDiscovery,
  mxMatches,
  needsFetch,
  nextLookup,
  parsePolicy,
  parseStsRecord,
  planDelivery,
  policyStrings,
  type StsCacheEntry,
} from "../../../worker/tls-policy/core/mta-sts";
import { buildReport, parseTlsRptRecord, reportFileName, resultTypeOf } from "../../../worker/tls-policy/core/tlsrpt";
import { readPolicyResponse } from "../../../worker/tls-policy/core/http";

const enc = (s: string) => new TextEncoder().encode(s);
const policy = { mode: "enforce" as const, mx: ["*.example.net", "mx.example.com"], maxAge: 86400 };

describe("the _mta-sts TXT record", () => {
  it("is one record starting v=STSv1 with an id of 1–32 letters and digits", () => {
    expect(parseStsRecord(["v=STSv1; id=20160831085700Z;"])).toEqual({ id: "20160831085700Z" });
    expect(parseStsRecord(["v=spf1 -all", "v=STSv1;id=abc"])).toEqual({ id: "abc" });
    expect(parseStsRecord(["v=STSv1; id=a", "v=STSv1; id=b"])).toBeNull();
    expect(parseStsRecord(["v=STSv1; id=not-alnum"])).toBeNull();
    expect(parseStsRecord(["v=STSv1;"])).toBeNull();
    expect(parseStsRecord([])).toBeNull();
  });
});

describe("the policy file", () => {
  it("reads version, mode, mx and max_age with LF or CRLF, ignoring unknown keys", () => {
    expect(
      parsePolicy(
        "version: STSv1\r\nmode: enforce\r\nmx: *.Example.net\r\nmx: mx.example.com.\r\nmax_age: 86400\r\nextension: x\r\n",
      ),
    ).toEqual(policy);
    expect(parsePolicy("version: STSv1\nmode: none\nmax_age: 0\n")).toEqual({ mode: "none", mx: [], maxAge: 0 });
  });

  it("refuses a wrong version, mode, max_age, missing mx or a malformed pattern", () => {
    expect(parsePolicy("version: STSv2\nmode: enforce\nmx: a.b\nmax_age: 1")).toMatchObject({
      error: expect.stringMatching(/version/),
    });
    expect(parsePolicy("version: STSv1\nmode: strict\nmx: a.b\nmax_age: 1")).toMatchObject({
      error: expect.stringMatching(/mode/),
    });
    expect(parsePolicy("version: STSv1\nmode: enforce\nmx: a.b\nmax_age: 31557601")).toMatchObject({
      error: expect.stringMatching(/max_age/),
    });
    expect(parsePolicy("version: STSv1\nmode: testing\nmax_age: 10")).toMatchObject({
      error: expect.stringMatching(/no mx/),
    });
    expect(parsePolicy("version: STSv1\nmode: testing\nmx: *.*.b\nmax_age: 10")).toMatchObject({
      error: expect.stringMatching(/malformed/),
    });
  });
});

describe("mx patterns (4.1)", () => {
  it("match a literal name, or one leftmost label under a wildcard", () => {
    expect(mxMatches("mx.example.com", "MX.example.com.")).toBe(true);
    expect(mxMatches("*.example.net", "mx1.example.net")).toBe(true);
    expect(mxMatches("*.example.net", "a.b.example.net")).toBe(false);
    expect(mxMatches("*.example.net", "example.net")).toBe(false);
  });

  it("a wildcard never matches a host of another domain (property)", () => {
    fc.assert(
      fc.property(fc.domain(), fc.domain(), (a, b) => {
        fc.pre(!b.endsWith(`.${a}`));
        return !mxMatches(`*.${a}`, b);
      }),
    );
  });

  it("enforce allows only the hosts the patterns list and requires TLS; testing and none allow all", () => {
    expect(planDelivery(policy, ["mx1.example.net", "evil.test"])).toEqual({
      mode: "enforce",
      hosts: ["mx1.example.net"],
      excluded: ["evil.test"],
      requireTls: true,
    });
    expect(planDelivery({ ...policy, mode: "testing" }, ["evil.test"])).toEqual({
      mode: "testing",
      hosts: ["evil.test"],
      excluded: ["evil.test"],
      requireTls: false,
    });
    expect(planDelivery(null, ["a.test"])).toMatchObject({ mode: "none", hosts: ["a.test"], requireTls: false });
    expect(policyStrings(policy)).toEqual([
      "version: STSv1",
      "mode: enforce",
      "mx: *.example.net",
      "mx: mx.example.com",
      "max_age: 86400",
    ]);
  });
});

describe("the cache (5.1)", () => {
  const cached: StsCacheEntry = { id: "a1", policy, fetchedAt: 1000, expiresAt: 1000 + 86400, checkedAt: 1000 };

  it("uses a fresh entry, checks it again in the background after a day, and looks up once it expired", () => {
    expect(nextLookup(null, 5)).toBe("lookup");
    const week = { ...cached, expiresAt: 1000 + 7 * 86_400 };
    expect(nextLookup(week, 2000)).toBe("use");
    expect(nextLookup(week, 1000 + 86_400)).toBe("use-and-refresh");
    expect(nextLookup(week, 1000 + 7 * 86_400)).toBe("lookup");
  });

  it("fetches only for a record whose id is not the cached policy's", () => {
    expect(needsFetch(cached, { id: "a1" }, 2000)).toBe(false);
    expect(needsFetch(cached, { id: "b2" }, 2000)).toBe(true);
    expect(needsFetch(null, { id: "a1" }, 2000)).toBe(true);
    expect(needsFetch(cached, null, 2000)).toBe(false);
  });

  it("keeps an unexpired policy when the record disappears, the lookup fails or the new policy cannot be fetched", () => {
    expect(afterDiscovery(cached, { record: null }, 2000)).toEqual({ ...cached, checkedAt: 2000 });
    expect(afterDiscovery(cached, { record: "failed" }, 2000)).toEqual({ ...cached, checkedAt: 2000 });
    expect(afterDiscovery(cached, { record: { id: "b2" }, fetched: { error: "HTTP 500" } }, 2000)).toEqual({
      ...cached,
      checkedAt: 2000,
    });
  });

  it("takes a new policy, and without a policy at all delivers as if there were none", () => {
    const next = { ...policy, maxAge: 600 };
    expect(afterDiscovery(cached, { record: { id: "b2" }, fetched: next }, 2000)).toEqual({
      id: "b2",
      policy: next,
      fetchedAt: 2000,
      expiresAt: 2600,
      checkedAt: 2000,
    });
    expect(afterDiscovery(null, { record: { id: "b2" }, fetched: { error: "no" } }, 2000)).toMatchObject({
      id: null,
      policy: null,
    });
    expect(afterDiscovery(null, { record: null }, 2000)).toEqual({
      id: null,
      policy: null,
      fetchedAt: 2000,
      expiresAt: 5600,
      checkedAt: 2000,
    });
  });
});

describe("the policy answer (3.3)", () => {
  it("takes a 200 text/plain body by Content-Length or chunked, and no redirect or other type", () => {
    expect(
      readPolicyResponse(
        enc("HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 5\r\n\r\nhello+extra"),
      ),
    ).toEqual({ body: enc("hello") });
    expect(
      readPolicyResponse(
        enc(
          "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        ),
      ),
    ).toEqual({ body: enc("abcde") });
    expect(readPolicyResponse(enc("HTTP/1.1 301 Moved\r\nLocation: https://x/\r\n\r\n"))).toMatchObject({
      kind: "fetch",
      error: expect.stringMatching(/not followed/),
    });
    expect(readPolicyResponse(enc("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<html>"))).toMatchObject({
      kind: "invalid",
    });
    expect(readPolicyResponse(enc("garbage"))).toMatchObject({ kind: "fetch" });
  });
});

describe("TLS-RPT", () => {
  it("reads the record's mailto and https rua, and nothing else", () => {
    expect(parseTlsRptRecord(["v=TLSRPTv1; rua=mailto:r@example.com,https://rep.example.com/v1"])).toEqual({
      rua: ["mailto:r@example.com", "https://rep.example.com/v1"],
    });
    expect(parseTlsRptRecord(["v=TLSRPTv1; rua=http://insecure.example.com"])).toBeNull();
    expect(parseTlsRptRecord(["v=TLSRPTv1;"])).toBeNull();
  });

  it("names result types from what the session saw", () => {
    expect(resultTypeOf("STARTTLS not offered by host mx")).toBe("starttls-not-supported");
    expect(resultTypeOf("TLS is required, but was not offered by host mx")).toBe("starttls-not-supported");
    expect(resultTypeOf("TLS handshake failed: certificate has expired")).toBe("certificate-expired");
    expect(resultTypeOf("TLS handshake failed: Hostname mismatch")).toBe("certificate-host-mismatch");
    expect(resultTypeOf("TLS handshake failed: self signed certificate")).toBe("certificate-not-trusted");
    expect(resultTypeOf("lost connection while performing the TLS handshake: internal error; reference = x")).toBe(
      "validation-failure",
    );
  });

  it("builds the RFC 8460 report: totals that add up, failure details, the policy; and 5.3's file name", () => {
    const r = buildReport({
      organization: "cohort.test",
      contact: "tls@cohort.test",
      reportId: "id1",
      day: "2026-11-28",
      domain: "example.net",
      policyType: "sts",
      policyStrings: policyStrings(policy),
      mxHosts: policy.mx,
      rows: [
        { result: "success", mx: "", ip: "", n: 7 },
        { result: "starttls-not-supported", mx: "mx1.example.net", ip: "192.0.2.1", n: 2 },
        { result: "validation-failure", mx: "mx2.example.net", ip: "", n: 1 },
      ],
    });
    expect(r["date-range"]).toEqual({
      "start-datetime": "2026-11-28T00:00:00Z",
      "end-datetime": "2026-11-28T23:59:59Z",
    });
    expect(r.policies[0]!.summary).toEqual({ "total-successful-session-count": 7, "total-failure-session-count": 3 });
    expect(r.policies[0]!["failure-details"]).toEqual([
      {
        "result-type": "starttls-not-supported",
        "sending-mta-ip": "192.0.2.1",
        "receiving-mx-hostname": "mx1.example.net",
        "failed-session-count": 2,
      },
      { "result-type": "validation-failure", "receiving-mx-hostname": "mx2.example.net", "failed-session-count": 1 },
    ]);
    expect(reportFileName("cohort.test", "example.net", "2026-11-28", "id1")).toBe(
      "cohort.test!example.net!1795824000!1795910399!id1.json.gz",
    );
  });
});
