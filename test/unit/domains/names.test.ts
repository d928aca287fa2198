/**
 * domains/core/names.ts: one way to write a domain name (a fixed point for every name it takes),
 * public suffixes refused, the lineage of a name, and which verified domain stands in a claim's way.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { claimProblem, domainName, lineage } from "../../../worker/domains/core/names";

describe("domain names", () => {
  it("normalises case, one trailing dot and IDN labels, and is a fixed point", () => {
    expect(domainName(" Mail.Example.COM. ")).toEqual({ ok: true, name: "mail.example.com" });
    expect(domainName("bücher.example")).toEqual({ ok: true, name: "xn--bcher-kva.example" });
    const label = fc.stringMatching(/^[a-zA-Z0-9]([a-zA-Z0-9-]{0,8}[a-zA-Z0-9])?$/);
    fc.assert(
      fc.property(
        fc.array(label, { minLength: 1, maxLength: 3 }),
        fc.constantFrom("com", "co.uk", "example", "dev"),
        fc.boolean(),
        (labels, tld, dot) => {
          const r = domainName(`${labels.join(".")}.${tld}${dot ? "." : ""}`);
          if (!r.ok) return true;
          expect(domainName(r.name)).toEqual(r);
          expect(r.name).toBe(r.name.toLowerCase());
          return true;
        },
      ),
    );
  });

  it("refuses public suffixes of both sections of the list, and what is not a name", () => {
    for (const n of ["co.uk", "github.io", "s3.amazonaws.com", "com"]) expect(domainName(n).ok, n).toBe(false);
    for (const n of ["a b.com", "-x.com", "x..com", ""]) expect(domainName(n).ok, n).toBe(false);
    expect(domainName("user.github.io")).toEqual({ ok: true, name: "user.github.io" });
  });

  it("the lineage stops above the registrable name", () => {
    expect(lineage("a.mail.acme.co.uk")).toEqual(["a.mail.acme.co.uk", "mail.acme.co.uk", "acme.co.uk"]);
    expect(lineage("user.github.io")).toEqual(["user.github.io"]);
  });

  it("the nearest verified name decides", () => {
    const v = new Map([
      ["acme.com", "a"],
      ["send.acme.com", "b"],
    ]);
    expect(claimProblem("acme.com", "b", v)).toBe("The domain acme.com is verified by another account.");
    expect(claimProblem("mail.acme.com", "b", v)).toBe(
      "The domain mail.acme.com is under acme.com, which another account verified.",
    );
    expect(claimProblem("x.send.acme.com", "b", v)).toBeNull();
    expect(claimProblem("mail.acme.com", "a", v)).toBeNull();
    expect(claimProblem("other.com", "b", v)).toBeNull();
  });
});
