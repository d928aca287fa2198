/**
 * VERP token addresses (worker/mail/verp.ts): they name the email and the recipient, verify only
 * with the key that signed them, survive case folding, and fit RFC 5321's 64-octet local part.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { readTokenAddress, tokenAddress, tokenKey } from "../../../worker/mail/verp";

const key = await tokenKey(new Uint8Array(32).fill(7));
const other = await tokenKey(new Uint8Array(32).fill(8));
const ID = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";

describe("token addresses", () => {
  it("round-trips the email id and recipient index, in any case", async () => {
    const a = await tokenAddress(key, "bounces", ID, 3, "Send.Acme.Test");
    expect(a).toMatch(/^bounces\+0a1b2c3d4e5f4a6b8c7d9e0f1a2b3c4d-3-[0-9a-f]{12}@send\.acme\.test$/);
    expect(await readTokenAddress(key, a)).toEqual({ kind: "bounces", emailId: ID, idx: 3 });
    expect(await readTokenAddress(key, a.toUpperCase())).toEqual({ kind: "bounces", emailId: ID, idx: 3 });
    expect(await readTokenAddress(key, `<${a}>`)).toEqual({ kind: "bounces", emailId: ID, idx: 3 });
  });

  it("refuses another key's token, a changed recipient or kind, and addresses that are not tokens", async () => {
    const a = await tokenAddress(key, "bounces", ID, 3, "send.acme.test");
    expect(await readTokenAddress(other, a)).toBeNull();
    expect(await readTokenAddress(key, a.replace("-3-", "-4-"))).toBeNull();
    expect(await readTokenAddress(key, a.replace("bounces+", "unsubscribe+"))).toBeNull();
    expect(await readTokenAddress(key, "bounces@send.acme.test")).toBeNull();
    expect(await readTokenAddress(key, "postmaster@send.acme.test")).toBeNull();
  });

  it("property: any email id and index round-trips; the local part is at most 64 octets; a flipped digit of the mac fails", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uuid(),
        fc.integer({ min: 0, max: 36 ** 4 - 1 }),
        fc.constantFrom("bounces", "unsubscribe" as const),
        fc.nat(11),
        async (id, idx, kind, flip) => {
          const a = await tokenAddress(key, kind, id, idx, "b.example");
          expect(a.slice(0, a.indexOf("@")).length).toBeLessThanOrEqual(64);
          expect(await readTokenAddress(key, a)).toEqual({ kind, emailId: id.toLowerCase(), idx });
          const at = a.indexOf("@") - 12 + flip;
          const flipped = a.slice(0, at) + (a[at] === "0" ? "1" : "0") + a.slice(at + 1);
          expect(await readTokenAddress(key, flipped)).toBeNull();
        },
      ),
      { numRuns: 200 },
    );
  });
});
