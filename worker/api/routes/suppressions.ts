/**
 * Suppressions of the caller's tenant, under /relay/suppressions.
 *
 * DESCRIPTION
 *   GET    /relay/suppressions?limit=&after=&address=  live entries in (address, scope) order,
 *                                                      at most `limit` addresses with all their
 *                                                      entries → { object: "list", has_more, data }
 *   POST   /relay/suppressions  { address, scope?, reason?, expires_at? } → 201 the entry (manual
 *                               suppression; addresses are stored lower-case). scope: "all" (the
 *                               default) holds back every email to the address, "bulk" only
 *                               emails with one-click unsubscribe, "bulk:<topic>" only those of
 *                               the topic (what an unsubscribe records).
 *   DELETE /relay/suppressions/:address?scope=  → { object: "suppression", address, deleted: true,
 *                               count }: every entry of the address, or only the scope's.
 *   Entries for every tenant ('*') are not visible or removable through a tenant's key.
 *
 * ERRORS
 *   422 validation_error for a bad address or date; 404 not_found for an unknown entry.
 */
import { Hono } from "hono";
import { addSuppression, listSuppressions, removeSuppression, type SuppressionRow } from "../../db/suppressions";
import { type AppEnv } from "../http/context";
import { parseInput, readJson } from "../http/body";
import { ApiError } from "../../model/errors";
import { AddSuppressionSchema, RemoveSuppressionQuerySchema, SuppressionListQuerySchema } from "../http/schemas";

function view(r: SuppressionRow) {
  return {
    object: "suppression" as const,
    address: r.address,
    scope: r.scope === "" ? "all" : r.scope,
    reason: r.reason,
    created_at: new Date(r.created_at).toISOString(),
    expires_at: r.expires_at === null ? null : new Date(r.expires_at).toISOString(),
  };
}

/** The stored form of an API scope ("all" is ''). */
function storedScope(scope: string): string {
  return scope === "all" ? "" : scope;
}

function normalised(address: string): string {
  const a = address.trim().toLowerCase();
  if (a.length > 320 || !/^[^@\s]+@[^@\s]+$/.test(a))
    throw new ApiError(422, "validation_error", "Invalid `address`: expected local@domain.");
  return a;
}

/** The /relay/suppressions routes (mounted behind the API key middleware). */
export function suppressionRoutes() {
  const r = new Hono<AppEnv>();

  r.get("/", async (c) => {
    const q = parseInput(SuppressionListQuerySchema, c.req.query());
    const page = await listSuppressions(
      c.env.DB,
      c.get("tenant"),
      { ...q, ...(q.address ? { address: normalised(q.address) } : {}) },
      Date.now(),
    );
    return c.json({ object: "list", has_more: page.hasMore, data: page.rows.map(view) });
  });

  r.post("/", async (c) => {
    const body = parseInput(AddSuppressionSchema, (await readJson(c, 16 * 1024)).value);
    const expires = body.expires_at === undefined ? null : Date.parse(body.expires_at);
    if (expires !== null && !Number.isFinite(expires))
      throw new ApiError(422, "validation_error", "Invalid `expires_at`: expected an ISO 8601 date.");
    const row: SuppressionRow = {
      tenant_id: c.get("tenant"),
      address: normalised(body.address),
      scope: storedScope(body.scope),
      reason: body.reason,
      created_at: Date.now(),
      expires_at: expires,
    };
    await addSuppression(c.env.DB, row);
    return c.json(view(row), 201);
  });

  r.delete("/:address", async (c) => {
    // Hono has already decoded the path parameter once; decoding again would turn "%25" into a
    // lone "%" and throw (a 500), or make "%2540" mean "@".
    const address = normalised(c.req.param("address"));
    const q = parseInput(RemoveSuppressionQuerySchema, c.req.query());
    const count = await removeSuppression(
      c.env.DB,
      c.get("tenant"),
      address,
      q.scope === undefined ? undefined : storedScope(q.scope),
    );
    if (count === 0) throw new ApiError(404, "not_found", "Suppression not found.");
    return c.json({ object: "suppression", address, deleted: true, count });
  });

  return r;
}
