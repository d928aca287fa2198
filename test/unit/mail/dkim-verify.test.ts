/**
 * worker/mail/dkim-verify.ts against signatures another implementation made: mailauth's signer
 * (RSA-SHA256 and Ed25519-SHA256, every canonicalisation, l=), and the relay's own signer.
 * Tampering with a signed header or the body, a revoked key, a key of the wrong type, a look-up
 * that fails and an unsupported algorithm each give their verdict; nothing throws.
 */
import { generateKeyPairSync } from "node:crypto";
import { dkimSign } from "mailauth/lib/dkim/sign.js";
import { describe, expect, it } from "vitest";
import { signDkim } from "../../../worker/mail/dkim";
import { verifyDkim, type TxtLookup } from "../../../worker/mail/dkim-verify";

const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 });
const ed = generateKeyPairSync("ed25519");
const rsaPem = rsa.privateKey.export({ format: "pem", type: "pkcs8" }).toString();
const edPem = ed.privateKey.export({ format: "pem", type: "pkcs8" }).toString();
const rsaSpki = rsa.publicKey.export({ format: "der", type: "spki" }).toString("base64");
const rsaPkcs1 = rsa.publicKey.export({ format: "der", type: "pkcs1" }).toString("base64");
const edRaw = (ed.publicKey.export({ format: "der", type: "spki" }) as Buffer).subarray(12).toString("base64");

const RECORDS: Record<string, string[]> = {
  "r1._domainkey.mx.example.net": [`v=DKIM1; k=rsa; p=${rsaSpki}`],
  "bare._domainkey.mx.example.net": [`v=DKIM1; p=${rsaPkcs1}`],
  "e1._domainkey.mx.example.net": [`v=DKIM1; k=ed25519; p=${edRaw}`],
  "gone._domainkey.mx.example.net": ["v=DKIM1; k=rsa; p="],
  "wrong._domainkey.mx.example.net": [`v=DKIM1; k=ed25519; p=${edRaw}`],
  "test._domainkey.mx.example.net": [`v=DKIM1; k=rsa; t=y; p=${rsaSpki}`],
};
const lookup: TxtLookup = async (name) => (name.startsWith("down.") ? null : (RECORDS[name.toLowerCase()] ?? []));

const MESSAGE = [
  "From: Mail Delivery System <MAILER-DAEMON@mx.example.net>",
  "To: bounces+abc@send.acme.test",
  "Subject: Undelivered Mail Returned to Sender",
  "Date: Thu, 26 Nov 2026 20:00:00 +0000",
  "Message-ID: <dsn-1@mx.example.net>",
  "MIME-Version: 1.0",
  "Content-Type: text/plain",
  "",
  "This is the mail system at host mx.example.net.  ",
  "",
  "<nobody@example.net>: host said 550 5.1.1 unknown user",
  "",
  "",
].join("\r\n");

async function mailauthSigned(
  selector: string,
  algorithm: string,
  canonicalization: string,
  key: string,
  extra: object = {},
): Promise<Uint8Array> {
  const r = await dkimSign(MESSAGE, {
    canonicalization,
    algorithm,
    signTime: new Date(),
    signatureData: [
      { signingDomain: "mx.example.net", selector, privateKey: key, algorithm, canonicalization, ...extra },
    ],
  } as never);
  expect(r.errors).toEqual([]);
  return new TextEncoder().encode(r.signatures + MESSAGE);
}

describe("verifyDkim against mailauth's signatures", () => {
  it.each(["relaxed/relaxed", "relaxed/simple", "simple/relaxed", "simple/simple"])(
    "passes RSA-SHA256 with %s canonicalisation",
    async (c) => {
      const msg = await mailauthSigned("r1", "rsa-sha256", c, rsaPem);
      expect(await verifyDkim(msg, lookup)).toEqual([
        { domain: "mx.example.net", selector: "r1", result: "pass", why: "" },
      ]);
    },
  );

  it("passes Ed25519-SHA256 (RFC 8463) and a key published as a bare PKCS#1 RSAPublicKey", async () => {
    expect(
      (await verifyDkim(await mailauthSigned("e1", "ed25519-sha256", "relaxed/relaxed", edPem), lookup))[0]!.result,
    ).toBe("pass");
    expect(
      (await verifyDkim(await mailauthSigned("bare", "rsa-sha256", "relaxed/relaxed", rsaPem), lookup))[0]!.result,
    ).toBe("pass");
  });

  it("honours l= (a body length): text added after the signed length still passes", async () => {
    const msg = await mailauthSigned("r1", "rsa-sha256", "relaxed/relaxed", rsaPem, { maxBodyLength: 20 });
    const appended = new Uint8Array([...msg, ...new TextEncoder().encode("appended by a list\r\n")]);
    expect((await verifyDkim(appended, lookup))[0]!.result).toBe("pass");
  });

  it("fails a changed signed header and a changed body, each with its reason", async () => {
    const msg = new TextDecoder().decode(await mailauthSigned("r1", "rsa-sha256", "relaxed/relaxed", rsaPem));
    const header = await verifyDkim(
      new TextEncoder().encode(msg.replace("To: bounces+abc", "To: bounces+xyz")),
      lookup,
    );
    expect(header[0]).toMatchObject({ result: "fail", why: "the signature does not verify" });
    const body = await verifyDkim(new TextEncoder().encode(msg.replace("5.1.1", "5.1.2")), lookup);
    expect(body[0]).toMatchObject({ result: "fail", why: "the body hash does not match" });
  });

  it("a revoked key fails, a key of another type is a permerror, a failed look-up a temperror, testing mode neutral", async () => {
    const sign = (s: string) => mailauthSigned(s, "rsa-sha256", "relaxed/relaxed", rsaPem);
    expect((await verifyDkim(await sign("gone"), lookup))[0]).toMatchObject({
      result: "fail",
      why: "the key is revoked",
    });
    expect((await verifyDkim(await sign("wrong"), lookup))[0]!.result).toBe("permerror");
    expect((await verifyDkim(await sign("down"), lookup))[0]!.result).toBe("temperror");
    expect((await verifyDkim(await sign("test"), lookup))[0]!.result).toBe("neutral");
    expect((await verifyDkim(await sign("absent"), lookup))[0]).toMatchObject({
      result: "permerror",
      why: "no key record",
    });
  });

  it("rsa-sha1 is neutral (not supported), a malformed field a permerror, and an unsigned message has no verdict", async () => {
    const sha1 = (await mailauthSigned("r1", "rsa-sha256", "relaxed/relaxed", rsaPem)).slice();
    const text = new TextDecoder().decode(sha1).replace("a=rsa-sha256", "a=rsa-sha1");
    expect((await verifyDkim(new TextEncoder().encode(text), lookup))[0]!.result).toBe("neutral");
    expect(
      (await verifyDkim(new TextEncoder().encode(`DKIM-Signature: garbage\r\n${MESSAGE}`), lookup))[0]!.result,
    ).toBe("permerror");
    expect(await verifyDkim(new TextEncoder().encode(MESSAGE), lookup)).toEqual([]);
  });

  it("verifies the relay's own signature, also when the message travels with bare LF line ends", async () => {
    const signed = await signDkim(MESSAGE, {
      domain: "mx.example.net",
      selector: "r1",
      algorithm: "rsa-sha256",
      privateKey: rsaPem,
    });
    expect((await verifyDkim(new TextEncoder().encode(signed), lookup))[0]!.result).toBe("pass");
    expect((await verifyDkim(new TextEncoder().encode(signed.replace(/\r\n/g, "\n")), lookup))[0]!.result).toBe("pass");
  });
});
