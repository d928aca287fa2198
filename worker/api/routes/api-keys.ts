/**
 * Resend's API key endpoints.
 *
 * DESCRIPTION
 *   POST   /api-keys      { name, permission?: "full_access" | "sending_access", domain_id? }
 *                         → { id, token }: the token is shown this once; only its SHA-256 is kept.
 *                         A sending_access key may only send, and only from `domain_id` if given.
 *   GET    /api-keys      { object: "list", has_more, data: [{ id, name, created_at, last_used_at }] }.
 *   PATCH  /api-keys/:id  { name } renames the key → { object: "api_key", id }.
 *   DELETE /api-keys/:id  revokes the key: refused from its very next request (auth.ts reads D1
 *                         each time) → { object: "api_key", id, deleted: true }.
 *
 * ERRORS
 *   422 validation_error (bad name, permission, or a domain that is not the tenant's);
 *   404 not_found for another tenant's key.
 */
import { Hono } from "hono";
import { generateApiKey, hashApiKey } from "../../db/api-keys";
import { getDomain } from "../../db/domains";
import { type AppEnv } from "../http/context";
import { parseInput, readJson } from "../http/body";
import { ApiError } from "../../model/errors";
import { CreateApiKeySchema, UpdateApiKeySchema } from "../http/domain-schemas";

/** The /api-keys routes (mounted behind the API key middleware). */
export function apiKeyRoutes() {
  const r = new Hono<AppEnv>();

  r.post("/", async (c) => {
    const input = parseInput(CreateApiKeySchema, (await readJson(c, 16 * 1024)).value);
    const tenant = c.get("tenant");
    if (input.domain_id !== undefined && !(await getDomain(c.env.DB, tenant, input.domain_id))) {
      throw new ApiError(422, "validation_error", "`domain_id` is not one of your domains.");
    }
    const permission = input.permission ?? "full_access";
    if (input.domain_id !== undefined && permission !== "sending_access") {
      throw new ApiError(
        422,
        "validation_error",
        '`domain_id` restricts a sending_access key; give permission "sending_access".',
      );
    }
    const token = generateApiKey();
    const id = crypto.randomUUID();
    await c.env.DB.prepare(
      "INSERT INTO api_keys (id, tenant_id, key_hash, name, created_at, role, permission, domain_id) VALUES (?, ?, ?, ?, ?, 'tenant', ?, ?)",
    )
      .bind(id, tenant, await hashApiKey(token), input.name, Date.now(), permission, input.domain_id ?? null)
      .run();
    return c.json({ id, token }, 201);
  });

  r.get("/", async (c) => {
    const rows = (
      await c.env.DB.prepare(
        "SELECT id, name, created_at FROM api_keys WHERE tenant_id = ? AND revoked_at IS NULL ORDER BY created_at DESC, id",
      )
        .bind(c.get("tenant"))
        .all<{ id: string; name: string; created_at: number }>()
    ).results;
    return c.json({
      object: "list",
      has_more: false,
      data: rows.map((k) => ({
        id: k.id,
        name: k.name,
        created_at: new Date(k.created_at).toISOString(),
        last_used_at: null,
      })),
    });
  });

  r.patch("/:id", async (c) => {
    const id = c.req.param("id");
    const input = parseInput(UpdateApiKeySchema, (await readJson(c, 16 * 1024)).value);
    const res = await c.env.DB.prepare(
      "UPDATE api_keys SET name = ? WHERE id = ? AND tenant_id = ? AND revoked_at IS NULL",
    )
      .bind(input.name, id, c.get("tenant"))
      .run();
    if ((res.meta.changes ?? 0) === 0) throw new ApiError(404, "not_found", "API key not found.");
    return c.json({ object: "api_key", id });
  });

  r.delete("/:id", async (c) => {
    const id = c.req.param("id");
    const res = await c.env.DB.prepare(
      "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND tenant_id = ? AND revoked_at IS NULL",
    )
      .bind(Date.now(), id, c.get("tenant"))
      .run();
    if ((res.meta.changes ?? 0) === 0) throw new ApiError(404, "not_found", "API key not found.");
    return c.json({ object: "api_key", id, deleted: true });
  });
  return r;
}
