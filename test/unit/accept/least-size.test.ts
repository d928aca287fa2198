import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { leastComposedBytes } from "../../../worker/accept/prepare";
import { compose } from "../../../worker/mail";

const b64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes));

describe("the size bound checked before composing", () => {
  it("never exceeds the composed message's real size, so nothing that fits is refused early", () => {
    fc.assert(
      fc.property(
        fc.option(fc.string({ maxLength: 3000 }), { nil: undefined }),
        fc.option(fc.string({ maxLength: 3000 }), { nil: undefined }),
        fc.array(fc.uint8Array({ maxLength: 6000 }), { maxLength: 3 }),
        (text, html, files) => {
          const input = {
            from: "a@acme.test",
            to: "b@example.com",
            subject: "s",
            text: text ?? (html === undefined ? "x" : undefined),
            html,
            attachments: files.map((f, i) => ({ filename: `f${i}.bin`, content: b64(f) })),
          };
          const raw = compose(input as Parameters<typeof compose>[0], { now: new Date(0), messageId: "m" }).raw;
          expect(leastComposedBytes(input as Parameters<typeof leastComposedBytes>[0])).toBeLessThanOrEqual(raw.length);
        },
      ),
      { numRuns: 300 },
    );
  });
});
