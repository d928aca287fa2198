/**
 * inbound/core/trust.ts: which reports may change anything. A bounce from a stranger, from a
 * co-recipient's mailbox, or authenticated only as someone unrelated to the recipient's domain
 * does not act; one from the null sender authenticated as the recipient domain, its MX or a
 * configured reporting MTA does. A complaint acts only from a DKIM-aligned configured
 * feedback-loop sender. A report to a VERP address acts only when what it names is the signed
 * recipient. The Email Routing verdicts are read only from the trusted authserv-id's field.
 */
import { describe, expect, it } from "vitest";
import {
  arfVerdict,
  covers,
  dsnVerdict,
  orgDomain,
  sameOrg,
  tokenNames,
  type Evidence,
} from "../../../worker/inbound/core/trust";
import { parseAuthResults, passedIdentities } from "../../../worker/mail/auth-results";
import { routingVerdicts } from "../../../worker/inbound/evidence";

const ev = (e: Partial<Evidence>): Evidence => ({ dkim: [], spf: [], envelopeFrom: "", fromDomain: null, ...e });

describe("organisational domains (Public Suffix List)", () => {
  it("takes the registrable name, private suffixes included", () => {
    expect(orgDomain("mail.acme.co.uk")).toBe("acme.co.uk");
    expect(orgDomain("gmail-smtp-in.l.google.com.")).toBe("google.com");
    expect(orgDomain("user.github.io")).toBe("user.github.io");
    expect(sameOrg("a.github.io", "b.github.io")).toBe(false);
    expect(sameOrg("feedback.yahoo.com", "YAHOO.com")).toBe(true);
    expect(covers(["yahoo.com"], "feedback.yahoo.com")).toBe(true);
    expect(covers(["yahoo.com"], "notyahoo.com")).toBe(false);
  });
});

describe("dsnVerdict: a bounce that came to no VERP address", () => {
  const mx = ["gmail-smtp-in.l.google.com", "alt1.gmail-smtp-in.l.google.com"];
  it("acts when the null sender is authenticated as the recipient domain's MX (SPF HELO) or the domain itself (DKIM)", () => {
    expect(dsnVerdict(ev({ spf: ["mail-sor-f69.google.com"] }), "gmail.com", mx, [])).toEqual({
      act: true,
      by: "SPF mail-sor-f69.google.com, of its MX host gmail-smtp-in.l.google.com",
    });
    expect(dsnVerdict(ev({ dkim: ["sink.test"] }), "sink.test", [], [])).toMatchObject({ act: true });
    expect(
      dsnVerdict(ev({ dkim: ["relay.example"], envelopeFrom: "MAILER-DAEMON@relay.example" }), "gmail.com", mx, [
        "relay.example",
      ]),
    ).toEqual({ act: true, by: "DKIM relay.example, a configured reporting MTA" });
  });

  it("does not act for a co-recipient's mailbox, an unauthenticated notice, or an unrelated reporter", () => {
    expect(dsnVerdict(ev({ dkim: ["gmail.com"], envelopeFrom: "carol@gmail.com" }), "gmail.com", mx, [])).toMatchObject(
      { act: false, why: expect.stringMatching(/not from the null sender/) },
    );
    expect(dsnVerdict(ev({}), "gmail.com", mx, [])).toEqual({
      act: false,
      why: "unauthenticated: no DKIM signature verified and SPF did not pass",
    });
    expect(
      dsnVerdict(ev({ dkim: ["attacker.example"], spf: ["mx.attacker.example"] }), "gmail.com", mx, []),
    ).toMatchObject({
      act: false,
      why: expect.stringMatching(
        /authenticated as attacker\.example, mx\.attacker\.example, which is neither gmail\.com/,
      ),
    });
  });
});

describe("arfVerdict: a complaint that came to no VERP address", () => {
  it("acts only from a configured feedback-loop sender whose From a verified DKIM signature aligns with", () => {
    expect(arfVerdict(ev({ dkim: ["yahoo.com"], fromDomain: "feedback.yahoo.com" }), ["yahoo.com"])).toMatchObject({
      act: true,
    });
    expect(arfVerdict(ev({ dkim: ["isp.example"], fromDomain: "isp.example" }), ["yahoo.com"])).toMatchObject({
      act: false,
      why: expect.stringMatching(/not a configured feedback-loop sender/),
    });
    expect(arfVerdict(ev({ dkim: ["other.example"], fromDomain: "isp.example" }), ["isp.example"])).toMatchObject({
      act: false,
      why: expect.stringMatching(/no verified DKIM signature aligns/),
    });
    expect(arfVerdict(ev({ spf: ["isp.example"], fromDomain: "isp.example" }), ["isp.example"])).toMatchObject({
      act: false,
    });
  });
});

describe("tokenNames: a report to a VERP address", () => {
  it("acts when it names nothing or the signed recipient, and not when it names another", () => {
    expect(tokenNames("ann@sink.test", [null])).toMatchObject({ act: true });
    expect(tokenNames("ann@sink.test", ["ANN@sink.test", null])).toMatchObject({ act: true });
    expect(tokenNames("ann@sink.test", ["bob@sink.test"])).toEqual({
      act: false,
      why: "names bob@sink.test, but the VERP address it came to was signed for another recipient",
    });
  });
});

describe("Email Routing's verdicts", () => {
  const top = [
    "Received: from mx.example.net (192.0.2.7) by cloudflare-email.net (unknown) id abc for <x@bounces.test>",
    "Received-SPF: pass (mx.cloudflare.net: domain of postmaster@mx.example.net designates 192.0.2.7 as permitted sender)",
    "Authentication-Results: mx.cloudflare.net;",
    "\tdkim=pass header.d=example.net header.s=s1 header.b=AbCd;",
    "\tspf=pass (mx.cloudflare.net: domain of postmaster@mx.example.net designates 192.0.2.7; as permitted sender) smtp.helo=mx.example.net;",
    '\tspf=none smtp.mailfrom=""; arc=none smtp.remote-ip=192.0.2.7',
  ].join("\r\n");
  it("reads the authserv-id, the methods and their properties, comments with ';' and all", () => {
    const p = parseAuthResults(
      "i=1; mx.cloudflare.net; dkim=pass (good; really) header.d=Example.NET; spf=fail smtp.mailfrom=a@b.example",
    );
    expect(p).toMatchObject({
      instance: 1,
      authservId: "mx.cloudflare.net",
      results: [
        { method: "dkim", result: "pass", props: { "header.d": "Example.NET" } },
        { method: "spf", result: "fail" },
      ],
    });
    expect(passedIdentities(p!)).toEqual({ dkim: ["example.net"], spf: [] });
  });

  it("believes the first field of the trusted authserv-id from the top, and none when ROUTING_AUTHSERV_ID is empty", () => {
    const forged =
      "Authentication-Results: mx.cloudflare.net; dkim=pass header.d=gmail.com; spf=pass smtp.helo=gmail-smtp-in.l.google.com";
    const head = `${top}\r\n${forged}\r\nFrom: x@y.example\r\n\r\nbody`;
    expect(routingVerdicts(head, "mx.cloudflare.net")).toEqual({ dkim: ["example.net"], spf: ["mx.example.net"] });
    expect(routingVerdicts(head, "")).toBeNull();
    expect(routingVerdicts(`${forged}\r\n\r\n`, "mx.other.example")).toBeNull();
  });
});
