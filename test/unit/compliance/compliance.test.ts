// The compliance check's decisions (worker/compliance/core/): RFC 9989's tree walk and each rule.
import { describe, expect, it } from "vitest";
import {
  aligned,
  dmarcFacts,
  organizationalDomain,
  parseDmarc,
  policyFor,
  treeWalkNames,
  type DmarcRecord,
} from "../../../worker/compliance/core/dmarc";
import {
  checkCompliance,
  dkimSignatures,
  headerFields,
  type ComplianceInput,
} from "../../../worker/compliance/core/rules";

const rec = (txt: string) => parseDmarc([txt])!;

describe("DMARC records and the tree walk (RFC 9989)", () => {
  it("parses p, sp, np, adkim, aspf and psd; a record without p is none", () => {
    expect(parseDmarc(["v=DMARC1; p=reject; sp=none; adkim=s; psd=n; rua=mailto:a@b.test"])).toEqual({
      p: "reject",
      sp: "none",
      adkim: "s",
      aspf: "r",
      psd: "n",
      rua: "mailto:a@b.test",
    });
    expect(parseDmarc(["v=DMARC1; rua=mailto:a@b.test"])).toBeNull();
    expect(parseDmarc(["v=DMARC1; p=none", "v=DMARC1; p=reject"])).toBeNull();
  });

  it("walks from the name up to its top label, jumping from more than eight labels to the last seven", () => {
    expect(treeWalkNames("a.b.example.com")).toEqual(["a.b.example.com", "b.example.com", "example.com", "com"]);
    expect(treeWalkNames("1.2.3.4.5.6.7.8.9.com")).toEqual([
      "1.2.3.4.5.6.7.8.9.com",
      "4.5.6.7.8.9.com",
      "5.6.7.8.9.com",
      "6.7.8.9.com",
      "7.8.9.com",
      "8.9.com",
      "9.com",
      "com",
    ]);
  });

  it("finds the Organizational Domain: psd=n stops at its name, psd=y one label below, else the shortest name with a record", () => {
    const none = new Map<string, DmarcRecord | null>();
    expect(organizationalDomain("mail.example.com", none)).toBe("mail.example.com");
    expect(organizationalDomain("mail.example.com", new Map([["example.com", rec("v=DMARC1; p=none")]]))).toBe(
      "example.com",
    );
    expect(organizationalDomain("a.shop.example.co", new Map([["example.co", rec("v=DMARC1; p=none; psd=y")]]))).toBe(
      "shop.example.co",
    );
    expect(
      organizationalDomain(
        "a.b.example.com",
        new Map([
          ["b.example.com", rec("v=DMARC1; p=none; psd=n")],
          ["example.com", rec("v=DMARC1; p=reject")],
        ]),
      ),
    ).toBe("b.example.com");
  });

  it("applies a subdomain's own record, else its Organizational Domain's sp; aligns relaxed by Organizational Domain", () => {
    const records = new Map([["example.com", rec("v=DMARC1; p=reject; sp=quarantine")]]);
    expect(policyFor("news.example.com", records)).toMatchObject({ foundAt: "example.com", policy: "quarantine" });
    expect(policyFor("example.com", records)).toMatchObject({ policy: "reject" });
    expect(aligned("send.example.com", "example.com", "r", records)).toBe(true);
    expect(aligned("send.example.com", "example.com", "s", records)).toBe(false);
    expect(aligned("other.test", "example.com", "r", records)).toBe(false);
    expect(dmarcFacts("example.com", records, true, 5)).toMatchObject({
      policy: "reject",
      bimi: { record: true, enforcement: true, ready: true },
      checkedAt: 5,
    });
    expect(dmarcFacts("example.com", new Map([["example.com", rec("v=DMARC1; p=none")]]), true, 5).bimi.ready).toBe(
      false,
    );
  });
});

const signed = (extra: string) =>
  `DKIM-Signature: v=1; a=rsa-sha256; d=example.com; s=s1;\r\n h=from:to:subject:date:message-id:list-unsubscribe:list-unsubscribe-post; bh=x; b=y\r\n${extra}`;
const good = "From: a@example.com\r\nDate: Thu, 26 Nov 2026 20:00:00 +0000\r\nMessage-ID: <1@example.com>\r\n\r\nbody";
const facts = dmarcFacts("example.com", new Map([["example.com", rec("v=DMARC1; p=none")]]), false, 0);
const input = (o: Partial<ComplianceInput> = {}): ComplianceInput => ({
  fromDomain: "example.com",
  verified: true,
  dmarc: facts,
  returnPathDomain: "send.example.com",
  bulk: false,
  header: signed(good),
  size: 100,
  providers: [],
  ...o,
});
const rules = (o: Partial<ComplianceInput> = {}) =>
  checkCompliance(input(o)).map((w) => `${w.rule} ${w.code} ${w.enhanced}`);

describe("the rules", () => {
  it("a verified, signed, aligned message with a DMARC record and good headers draws none", () => {
    expect(rules()).toEqual([]);
  });

  it("each rule, with the reply a receiver would give", () => {
    expect(rules({ verified: false, dmarc: null })).toContain("auth.domain_not_verified 550 5.7.26");
    expect(rules({ header: good })).toContain("auth.dkim_not_aligned 550 5.7.30");
    expect(rules({ header: signed(good).replace("d=example.com", "d=other.test") })).toContain(
      "auth.dkim_not_aligned 550 5.7.32",
    );
    expect(rules({ dmarc: dmarcFacts("example.com", new Map(), false, 0) })).toContain("auth.dmarc_missing 550 5.7.40");
    expect(rules({ returnPathDomain: "bounces.other.test" })).toContain("auth.spf_not_aligned 550 5.7.32");
    expect(rules({ bulk: true })).toContain("bulk.one_click_missing 550 5.7.1");
    expect(rules({ header: signed(good.replace("<1@example.com>", "not-an-id")) })).toContain(
      "headers.message_id 550 5.7.1",
    );
    expect(rules({ header: signed(good.replace(/Date: [^\r]+/, "Date: tomorrow")) })).toContain(
      "headers.date 550 5.7.1",
    );
    expect(
      rules({ size: 5000, providers: [{ provider: "tiny", recipients: 3, maxMessageBytes: 1000, maxRecipients: 2 }] }),
    ).toEqual(["provider.size 552 5.3.4", "provider.recipients 452 4.5.3"]);
  });

  it("bulk mail with https one-click unsubscribe, both fields signed, passes; unsigned fields do not", () => {
    const lu =
      "List-Unsubscribe: <https://relay.test/unsubscribe/x>, <mailto:u@send.example.com>\r\nList-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n";
    expect(rules({ bulk: true, header: signed(lu + good) })).toEqual([]);
    expect(
      rules({ bulk: true, header: signed(lu + good).replace(":list-unsubscribe:list-unsubscribe-post", "") }),
    ).toEqual(["bulk.one_click_missing 550 5.7.1"]);
  });

  it("reads header fields unfolded and DKIM signatures' d= and h=", () => {
    const f = headerFields(signed(good));
    expect(f.get("from")).toEqual(["a@example.com"]);
    expect(dkimSignatures(f)).toEqual([
      {
        d: "example.com",
        h: ["from", "to", "subject", "date", "message-id", "list-unsubscribe", "list-unsubscribe-post"],
      },
    ]);
  });
});
