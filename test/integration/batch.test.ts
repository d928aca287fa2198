/** POST /emails/batch: size bounds, strict and permissive validation, attachments. */
import { env } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callWithKey, email, getEmail, newKey, settle } from "./helpers";

let key: string;
beforeAll(async () => {
  key = await newKey("acme");
});
afterAll(() => settle());

type BatchBody = { data: { id: string }[]; errors?: { index: number; message: string }[] };

describe("POST /emails/batch", () => {
  it("accepts up to 100 emails with attachments and returns their ids in order", async () => {
    const items = Array.from({ length: 100 }, (_, i) =>
      email({
        to: `u${i}@example.com`,
        subject: `n${i}`,
        attachments: [{ filename: "a.txt", content: btoa(`file ${i}`) }],
      }),
    );
    const res = await callWithKey(key, "POST", "/emails/batch", items);
    expect(res.status).toBe(200);
    const body = await res.json<BatchBody>();
    expect(body.data).toHaveLength(100);
    expect(body.errors).toBeUndefined();
    const last = await getEmail(key, body.data[99]!.id);
    expect(last.body).toMatchObject({ subject: "n99", to: ["u99@example.com"] });
    expect(await env.BODIES.head(`mess/${body.data[0]!.id}`)).not.toBeNull();
  });

  it("rejects more than 100 emails and an empty batch with 422", async () => {
    for (const items of [Array.from({ length: 101 }, () => email()), []]) {
      const res = await callWithKey(key, "POST", "/emails/batch", items);
      expect(res.status).toBe(422);
      expect(await res.json()).toMatchObject({ statusCode: 422, name: "validation_error" });
    }
  });

  it("rejects a body that is not an array with 422", async () => {
    const res = await callWithKey(key, "POST", "/emails/batch", email());
    expect(res.status).toBe(422);
  });

  it("strict (default): one invalid email rejects the whole batch, naming its index", async () => {
    const res = await callWithKey(key, "POST", "/emails/batch", [email(), email({ from: "broken" })]);
    expect(res.status).toBe(422);
    const body = await res.json<{ name: string; message: string }>();
    expect(body.name).toBe("invalid_from_address");
    expect(body.message).toMatch(/^\[1\] /);
  });

  it("permissive: stores the valid emails and reports the invalid ones by index", async () => {
    const res = await callWithKey(
      key,
      "POST",
      "/emails/batch",
      [email({ subject: "ok-0" }), email({ to: 3 }), email({ subject: "ok-2" })],
      { "x-batch-validation": "permissive" },
    );
    expect(res.status).toBe(200);
    const body = await res.json<BatchBody>();
    expect(body.data).toHaveLength(2);
    expect(body.errors).toEqual([{ index: 1, message: expect.stringContaining("`to`") }]);
    expect((await getEmail(key, body.data[1]!.id)).body.subject).toBe("ok-2");
  });

  it("rejects an unknown x-batch-validation mode with 422", async () => {
    const res = await callWithKey(key, "POST", "/emails/batch", [email()], { "x-batch-validation": "lenient" });
    expect(res.status).toBe(422);
    expect(await res.json()).toMatchObject({
      name: "validation_error",
      message: expect.stringContaining("x-batch-validation"),
    });
  });
});
