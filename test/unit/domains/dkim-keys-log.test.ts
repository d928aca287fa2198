import { afterEach, describe, expect, it, vi } from "vitest";
import { signersFor } from "../../../worker/domains/signing";

afterEach(() => vi.restoreAllMocks());

describe("a malformed DKIM_KEYS secret", () => {
  it.each([
    ["a bare base64 key (the parser's message would quote it)", "MIIEvSECRETKEYMATERIAL0123456789abcdef"],
    [
      "not JSON at all (a bare PEM)",
      "-----BEGIN PRIVATE KEY-----\nMIIEvSECRETKEYMATERIAL0123456789\n-----END PRIVATE KEY-----",
    ],
    [
      "JSON with the key text in it, cut short",
      '[{"domain":"a.test","selector":"s","algorithm":"rsa-sha256","private_key":"MIIEvSECRETKEYMATERIAL0123',
    ],
    ["JSON that is not an array", '{"private_key":"MIIEvSECRETKEYMATERIAL0123456789"}'],
  ])("%s: logged as an operator error without any of its text, and nothing signs", (_, value) => {
    const logged: string[] = [];
    vi.spyOn(console, "error").mockImplementation((...a: unknown[]) => {
      logged.push(a.map(String).join(" "));
    });
    vi.spyOn(console, "log").mockImplementation((...a: unknown[]) => {
      logged.push(a.map(String).join(" "));
    });
    expect(signersFor({ DKIM_KEYS: value } as unknown as Env, "a.test")).toEqual([]);
    expect(logged).toHaveLength(1);
    expect(logged[0]).toContain("DKIM_KEYS");
    expect(logged[0]).not.toMatch(/SECRET|MIIE|BEGIN|private_key/);
  });
});
