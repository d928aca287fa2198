import { Validator } from "@seriousme/openapi-schema-validator";
import { describe, expect, it } from "vitest";
import { openApiDocument, ROUTES } from "../../../worker/api/openapi/document";

describe("the OpenAPI document", () => {
  it("is a valid OpenAPI 3.1 document according to an independent validator", async () => {
    const validator = new Validator();
    const result = await validator.validate(openApiDocument());
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
    // The validator does reject a broken document (so this test can fail).
    const broken = await new Validator().validate({ ...openApiDocument(), info: undefined });
    expect(broken.valid).toBe(false);
  });

  it("describes request bodies with the zod schemas that validate them", () => {
    type Obj = { required?: string[]; properties?: object };
    const doc = openApiDocument() as {
      paths: Record<
        string,
        Record<string, { requestBody?: { content: Record<string, { schema: { anyOf: Obj[] } }> } }>
      >;
    };
    // A send is an ordinary email or one naming a stored template (from and subject may come from it).
    const [send, templated] = doc.paths["/emails"]!.post!.requestBody!.content["application/json"]!.schema.anyOf;
    expect(send!.required).toEqual(["from", "to", "subject"]);
    expect(Object.keys(send!.properties ?? {})).toEqual(
      expect.arrayContaining([
        "cc",
        "bcc",
        "reply_to",
        "html",
        "text",
        "headers",
        "attachments",
        "tags",
        "scheduled_at",
        "topic_id",
      ]),
    );
    expect(templated!.required).toEqual(["to", "template"]);
    expect(ROUTES.filter((r) => r.auth === false).map((r) => r.path)).toEqual([
      "/unsubscribe/{token}",
      "/unsubscribe/{token}",
      "/health",
      "/files/{token}",
    ]);
  });
});
