import { describe, expect, it } from "vitest";
import { readFileRef, signFileRef, type FileRef } from "../../../worker/lib/signed-links";

const env = { COHORT_ENV: "test" };
const ref: FileRef = {
  k: "received",
  t: "acme",
  e: "0190a1b2-0000-7000-8000-000000000001",
  p: "received/0001700000000000/x",
  a: 1,
  x: 2_000_000_000,
};

describe("signed download links", () => {
  it("read back what they name until they expire", async () => {
    const token = await signFileRef(env, ref);
    expect(await readFileRef(env, token, 1_900_000_000)).toEqual(ref);
    expect(await readFileRef(env, token, 2_000_000_000)).toBeNull();
  });

  it("refuse a token whose payload or mac was changed, or another secret's", async () => {
    const token = await signFileRef(env, ref);
    const [body, mac] = token.split(".") as [string, string];
    const other = await signFileRef(env, { ...ref, t: "other" });
    expect(await readFileRef(env, `${other.split(".")[0]}.${mac}`, 0)).toBeNull();
    expect(await readFileRef(env, `${body}.${mac.slice(0, -1)}${mac.endsWith("A") ? "B" : "A"}`, 0)).toBeNull();
    expect(await readFileRef(env, "not-a-token", 0)).toBeNull();
    const secret = btoa(String.fromCharCode(...new Uint8Array(32).fill(7)));
    expect(await readFileRef({ COHORT_ENV: "production", WEBHOOK_SECRETS_KEY: secret }, token, 0)).toBeNull();
  });
});
