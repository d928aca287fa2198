import fc from "fast-check";
import { dkimVerify } from "mailauth/lib/dkim/verify.js";
import { beforeAll, describe, expect, it } from "vitest";
import { compose } from "../../../worker/mail/compose";
import { importDkimKey, signDkim, type DkimAlgorithm, type DkimSigner } from "../../../worker/mail/dkim";
import { isDkimError } from "../../../worker/mail/errors";
import { unicodeText } from "./arbitraries";

const DOMAIN = "example.com";
const SIGN_TIME = new Date(Date.UTC(2026, 7, 5, 11, 52, 1));

type TestKey = { pem: string; seed?: string; dnsRecord: string };
const keys = {} as Record<DkimAlgorithm, TestKey>;

const b64 = (buf: ArrayBuffer | Uint8Array) => Buffer.from(buf as ArrayBuffer).toString("base64");
const toPem = (der: ArrayBuffer) =>
  `-----BEGIN PRIVATE KEY-----\n${b64(der).replace(/.{64}/g, "$&\n")}\n-----END PRIVATE KEY-----\n`;

beforeAll(async () => {
  const rsa = (await crypto.subtle.generateKey(
    { name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" },
    true,
    ["sign", "verify"],
  )) as CryptoKeyPair;
  keys["rsa-sha256"] = {
    pem: toPem((await crypto.subtle.exportKey("pkcs8", rsa.privateKey)) as ArrayBuffer),
    dnsRecord: `v=DKIM1; k=rsa; p=${b64((await crypto.subtle.exportKey("spki", rsa.publicKey)) as ArrayBuffer)}`,
  };
  const ed = (await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"])) as CryptoKeyPair;
  const edPkcs8 = (await crypto.subtle.exportKey("pkcs8", ed.privateKey)) as ArrayBuffer;
  keys["ed25519-sha256"] = {
    pem: toPem(edPkcs8),
    seed: b64(new Uint8Array(edPkcs8).slice(16)),
    dnsRecord: `v=DKIM1; k=ed25519; p=${b64((await crypto.subtle.exportKey("raw", ed.publicKey)) as ArrayBuffer)}`,
  };
});

const selectorOf = (alg: DkimAlgorithm) => (alg === "rsa-sha256" ? "rsa2026" : "ed2026");

/** A DNS resolver that only knows the two test selectors. */
async function resolver(name: string, type: string): Promise<string[][]> {
  for (const alg of ["rsa-sha256", "ed25519-sha256"] as const) {
    if (type === "TXT" && name === `${selectorOf(alg)}._domainkey.${DOMAIN}`) return [[keys[alg].dnsRecord]];
  }
  throw Object.assign(new Error(`NXDOMAIN ${name}`), { code: "ENOTFOUND" });
}

function signer(alg: DkimAlgorithm, extra: Partial<DkimSigner> = {}): DkimSigner {
  return {
    domain: DOMAIN,
    selector: selectorOf(alg),
    algorithm: alg,
    privateKey: keys[alg].pem,
    signTime: SIGN_TIME,
    ...extra,
  };
}

async function verify(message: string | Uint8Array) {
  const res = await dkimVerify(typeof message === "string" ? message : Buffer.from(message), {
    resolver: resolver as never,
    curTime: SIGN_TIME,
  });
  return res.results.map((r) => ({
    result: r.status.result,
    algo: r.status.header?.a as string,
    comment: r.status.comment,
  }));
}

function sampleMessage(text: string): string {
  return compose(
    {
      from: "Zoë Ünicode 📮 <sender@example.com>",
      to: ["Bob <bob@bücher.example>", "carol@example.org"],
      cc: "dave@example.net",
      bcc: "eve@example.net",
      reply_to: "replies@example.com",
      subject: "Grüße, 世界! " + "a very long subject ".repeat(8) + "🚀",
      text,
      html: `<p>${text}</p><img src="cid:logo">`,
      headers: { "X-Entity-Ref-ID": "ref-123", "List-Unsubscribe": "<mailto:unsub@example.com>" },
      attachments: [
        { content: Buffer.from([0, 1, 2, 255, 254]).toString("base64"), filename: "rapport été.pdf" },
        { content: Buffer.from("png-bytes").toString("base64"), filename: "logo.png", content_id: "logo" },
      ],
    },
    { now: SIGN_TIME, messageId: "6f1d7f8e-0000-4000-8000-000000000001" },
  ).raw;
}

const cases = [
  { name: "plain text with attachments", text: "Hello,\nthis is the body.\n" },
  { name: "trailing blank lines in the body", text: "Body with trailing blank lines\n\n\n\n" },
  {
    name: "whitespace runs and dot-leading lines",
    text: ".leading dot\nspaces   in \t the middle   \n" + "z".repeat(1500),
  },
];

describe("signDkim", () => {
  for (const alg of ["rsa-sha256", "ed25519-sha256"] as const) {
    it.each(cases)(`produces a ${alg} signature that mailauth verifies: $name`, async ({ text }) => {
      const signed = await signDkim(sampleMessage(text), signer(alg));
      expect(await verify(signed)).toEqual([{ result: "pass", algo: alg, comment: undefined }]);
    });

    // mailauth 4.13.3 reports a body-hash mismatch as "neutral (body hash did not verify)" and
    // keeps "fail" for a bad header signature; both cases are asserted.
    it(`makes ${alg} verification fail when the body is tampered with`, async () => {
      const signed = await signDkim(sampleMessage("original body\n"), signer(alg));
      const tampered = signed.replace("original body", "original bodY");
      expect(tampered).not.toBe(signed);
      const [res] = await verify(tampered);
      expect(res).toMatchObject({ result: "neutral", comment: "body hash did not verify" });

      // An attacker who also rewrites bh= to match the new body breaks the header signature instead.
      const unsignedTampered = tampered.slice(tampered.indexOf("\r\nFrom:") + 2);
      const forgedBh = /bh=([^;]+);/.exec(await signDkim(unsignedTampered, signer(alg)))![1]!;
      const forged = tampered.replace(/bh=[^;]+;/, `bh=${forgedBh};`);
      expect((await verify(forged))[0]).toMatchObject({ result: "fail", comment: "bad signature" });
    });

    it(`makes ${alg} verification fail when a signed header is changed`, async () => {
      const signed = await signDkim(sampleMessage("x\n"), signer(alg));
      const tampered = signed
        .replace("X-Entity-Ref-ID: ref-123", "X-Entity-Ref-ID: ref-124")
        .replace(/^Reply-To: .*$/m, "Reply-To: evil@example.com");
      expect((await verify(tampered))[0]?.result).toBe("fail");
    });
  }

  it("adds RSA and Ed25519 signatures side by side, both verifying", async () => {
    const signed = await signDkim(sampleMessage("two signatures\n"), [signer("rsa-sha256"), signer("ed25519-sha256")]);
    expect(signed.match(/^DKIM-Signature:/gm)).toHaveLength(2);
    const results = await verify(signed);
    expect(results.map((r) => [r.algo, r.result]).sort()).toEqual([
      ["ed25519-sha256", "pass"],
      ["rsa-sha256", "pass"],
    ]);
  });

  it("oversigns From so that a prepended second From breaks the signature", async () => {
    const signed = await signDkim(sampleMessage("body\n"), signer("rsa-sha256"));
    expect(signed).toMatch(/h=from:from:/);
    const sep = signed.indexOf("\r\nFrom:");
    const injected = signed.slice(0, sep) + "\r\nFrom: attacker@evil.example" + signed.slice(sep);
    expect((await verify(injected))[0]?.result).toBe("fail");
  });

  it("accepts a raw 32-byte Ed25519 seed and an imported CryptoKey", async () => {
    const msg = sampleMessage("seed\n");
    const fromSeed = await signDkim(msg, signer("ed25519-sha256", { privateKey: keys["ed25519-sha256"].seed! }));
    const key = await importDkimKey(keys["ed25519-sha256"].pem, "ed25519-sha256");
    const fromKey = await signDkim(msg, signer("ed25519-sha256", { privateKey: key }));
    expect(fromSeed).toBe(fromKey);
    expect((await verify(fromSeed))[0]?.result).toBe("pass");
  });

  it("signs byte input and returns bytes, normalising bare LF to CRLF", async () => {
    const lfMessage = sampleMessage("bytes\n").replace(/\r\n/g, "\n");
    const signed = await signDkim(new TextEncoder().encode(lfMessage), signer("rsa-sha256"));
    expect(signed).toBeInstanceOf(Uint8Array);
    const text = new TextDecoder().decode(signed);
    expect(text.replace(/\r\n/g, "")).not.toMatch(/\n/);
    expect((await verify(signed))[0]?.result).toBe("pass");
  });

  it("folds the DKIM-Signature field so no line exceeds 78 characters", async () => {
    const signed = await signDkim(sampleMessage("fold\n"), [signer("rsa-sha256"), signer("ed25519-sha256")]);
    const head = signed.slice(0, signed.indexOf("\r\nFrom:"));
    for (const line of head.split("\r\n")) expect(line.length).toBeLessThanOrEqual(78);
  });

  it("includes t= and x= when a sign time and lifetime are given", async () => {
    const signed = await signDkim(sampleMessage("t\n"), signer("ed25519-sha256", { expiresInSec: 86_400 }));
    const t = Math.floor(SIGN_TIME.getTime() / 1000);
    expect(signed).toContain(`t=${t};`);
    expect(signed).toContain(`x=${t + 86_400};`);
    expect((await verify(signed))[0]?.result).toBe("pass");
  });

  it.each([
    {
      name: "a PKCS#1 RSA PEM",
      key: "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----",
      alg: "rsa-sha256" as const,
    },
    { name: "garbage", key: "not a key!", alg: "rsa-sha256" as const },
    { name: "an Ed25519 key used for RSA", key: "ed", alg: "rsa-sha256" as const },
  ])("rejects $name with a DkimError", async ({ key, alg }) => {
    const pem = key === "ed" ? keys["ed25519-sha256"].pem : key;
    const err = await importDkimKey(pem, alg).catch((e: unknown) => e);
    expect(isDkimError(err)).toBe(true);
  });

  it("rejects a selector that is not a DNS label", async () => {
    const err = await signDkim(
      "From: a@b.com\r\n\r\nx\r\n",
      signer("ed25519-sha256", { selector: "bad;selector" }),
    ).catch((e: unknown) => e);
    expect(isDkimError(err)).toBe(true);
  });

  it("verifies for arbitrary raw messages with folded headers, whitespace runs and trailing blank lines", async () => {
    const asciiChar = fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c));
    const line = fc.oneof(unicodeText(60), fc.constantFrom("", " ", "\t", "a  \t b \t", "."));
    const raw = fc
      .record({
        // Headers stay 7-bit as RFC 5322 requires: mailauth collapses byte 0xA0 in 8-bit headers as if
        // it were whitespace (JS \s), which RFC 6376 relaxed canonicalisation does not do.
        subject: fc.array(fc.string({ unit: fc.oneof(asciiChar, fc.constant("\t")), maxLength: 30 }), {
          minLength: 1,
          maxLength: 4,
        }),
        fold: fc.constantFrom("\r\n ", "\r\n\t", "\r\n  \t"),
        lines: fc.array(line, { maxLength: 10 }),
        trailing: fc.constantFrom("", "\r\n", "\r\n\r\n\r\n", " \r\n\t\r\n"),
      })
      .map(
        ({ subject, fold, lines, trailing }) =>
          `From: Sender <s@example.com>\r\nTo: r@example.org\r\nSubject: ${subject.join(fold)}\r\n` +
          `Date: Wed, 05 Aug 2026 11:52:01 +0000\r\n\r\n${lines.join("\r\n")}${trailing}`,
      );
    await fc.assert(
      fc.asyncProperty(raw, async (message) => {
        const signed = await signDkim(message, [signer("rsa-sha256"), signer("ed25519-sha256")]);
        expect((await verify(signed)).map((r) => r.result)).toEqual(["pass", "pass"]);
      }),
      { numRuns: Number(process.env.MAIL_FC_RUNS ?? 60) },
    );
  }, 60_000);
});
