/**
 * Resend's suppression endpoints, over the same store as /relay/suppressions
 * (routes/suppressions.ts): an entry is (address, scope), and Resend's fields are mapped onto it.
 *
 * DESCRIPTION
 *   POST   /suppressions                  { email } → 201 { object: "suppression", id }: scope all.
 *   GET    /suppressions?limit=&after=&before=&origin=  { object: "list", has_more, data: [entry] }
 *                                         in (address, scope) order.
 *   GET    /suppressions/:id_or_email     { object: "suppression", ...entry }: by email, the
 *                                         address's entry of scope all if it has one, else its first.
 *   DELETE /suppressions/:id_or_email     → { object: "suppression", id, deleted: true }: by id that
 *                                         entry, by email every entry of the address.
 *   POST   /suppressions/batch/add        { emails } → { data: [{ object, id }] } (at most 1,000).
 *   POST   /suppressions/batch/remove     { emails } | { ids } → { data: [{ object, id, deleted }] }.
 *   An entry: { id, email, origin, source_id, created_at } (Resend's) and the relay's { scope (all,
 *   bulk, bulk:<topic>), reason, expires_at }. origin: bounce (reason bounce:<category>),
 *   complaint, or manual (a manual entry and an unsubscribe; its scope and reason say which).
 *   source_id is null: the store does not record which email caused an entry. The id names the
 *   entry: base64url of "<scope>\n<address>", so it stays the same for as long as the entry lives.
 *
 * ERRORS
 *   422 validation_error for a bad address, id or body; 404 not_found for an unknown entry.
 */
import { Hono } from "hono";
import { z } from "zod";
import {
  addSuppression,
  addSuppressions,
  listSuppressionEntries,
  removeSuppression,
  suppressionEntries,
  type SuppressionRow,
} from "../../db/suppressions";
import { type AppEnv } from "../http/context";
import { parseInput, readJson } from "../http/body";
import { ApiError } from "../../model/errors";
import { PageQuerySchema } from "../http/template-schemas";
import {
  BatchAddSuppressionsSchema,
  BatchRemoveSuppressionsSchema,
  ResendAddSuppressionSchema,
} from "../http/suppression-schemas";

const b64url = (s: string) =>
  btoa(String.fromCharCode(...new TextEncoder().encode(s)))
    .replace(/\+/g, "-")
    .replace(/\//g, "_")
    .replace(/=+$/, "");

/** The id of an entry (see the header). */
export function suppressionId(scope: string, address: string): string {
  return b64url(`${scope}\n${address}`);
}

/** The entry an id names, or null when it is not one of ours. */
export function entryOfId(id: string): { scope: string; address: string } | null {
  if (!/^[A-Za-z0-9_-]{4,800}$/.test(id)) return null;
  try {
    const bin = atob(id.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (id.length % 4)) % 4));
    const text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(
      Uint8Array.from(bin, (ch) => ch.charCodeAt(0)),
    );
    const nl = text.indexOf("\n");
    if (nl < 0) return null;
    const scope = text.slice(0, nl);
    const address = text.slice(nl + 1);
    return /^[^@\s]+@[^@\s]+$/.test(address) && /^(|bulk|bulk:[A-Za-z0-9_-]{1,256})$/.test(scope)
      ? { scope, address }
      : null;
  } catch {
    return null;
  }
}

function originOf(reason: string): "bounce" | "complaint" | "manual" {
  return reason.startsWith("bounce:") ? "bounce" : reason === "complaint" ? "complaint" : "manual";
}

/** An entry in Resend's shape plus the relay's fields. */
export function entryView(r: SuppressionRow) {
  return {
    id: suppressionId(r.scope, r.address),
    email: r.address,
    origin: originOf(r.reason),
    source_id: null,
    created_at: new Date(r.created_at).toISOString(),
    scope: r.scope === "" ? "all" : r.scope,
    reason: r.reason,
    expires_at: r.expires_at === null ? null : new Date(r.expires_at).toISOString(),
  };
}

function normalised(address: string, field = "email"): string {
  const a = address.trim().toLowerCase();
  if (a.length > 320 || !/^[^@\s]+@[^@\s]+$/.test(a))
    throw new ApiError(422, "validation_error", `Invalid \`${field}\`: expected local@domain.`);
  return a;
}

const notFound = () => new ApiError(404, "not_found", "Suppression not found.");

const ListQuery = z.object({ origin: z.enum(["bounce", "complaint", "manual"]).optional() });

function cursor(id: string | undefined, name: string): [string, string] | undefined {
  if (id === undefined) return undefined;
  const e = entryOfId(id);
  if (!e) throw new ApiError(422, "validation_error", `\`${name}\` is not a suppression id.`);
  return [e.address, e.scope];
}

/** The /suppressions routes (mounted behind the API key middleware). */
export function resendSuppressionRoutes() {
  const r = new Hono<AppEnv>();
  const manual = (tenant: string, address: string, now: number): SuppressionRow => ({
    tenant_id: tenant,
    address,
    scope: "",
    reason: "manual",
    created_at: now,
    expires_at: null,
  });

  r.post("/", async (c) => {
    const body = parseInput(ResendAddSuppressionSchema, (await readJson(c, 16 * 1024)).value);
    const row = manual(c.get("tenant"), normalised(body.email), Date.now());
    await addSuppression(c.env.DB, row);
    return c.json({ object: "suppression", id: suppressionId(row.scope, row.address) }, 201);
  });

  r.get("/", async (c) => {
    const q = parseInput(PageQuerySchema, c.req.query());
    const { origin } = parseInput(ListQuery, { origin: c.req.query("origin") });
    const page = await listSuppressionEntries(
      c.env.DB,
      c.get("tenant"),
      {
        limit: q.limit,
        ...(q.after ? { after: cursor(q.after, "after") } : {}),
        ...(q.before ? { before: cursor(q.before, "before") } : {}),
        ...(origin ? { origin } : {}),
      },
      Date.now(),
    );
    return c.json({ object: "list", has_more: page.hasMore, data: page.rows.map(entryView) });
  });

  r.post("/batch/add", async (c) => {
    const body = parseInput(BatchAddSuppressionsSchema, (await readJson(c, 512 * 1024)).value);
    const now = Date.now();
    const rows = [...new Set(body.emails.map((e, i) => normalised(e, `emails[${i}]`)))].map((a) =>
      manual(c.get("tenant"), a, now),
    );
    await addSuppressions(c.env.DB, rows);
    return c.json({ data: rows.map((row) => ({ object: "suppression", id: suppressionId(row.scope, row.address) })) });
  });

  r.post("/batch/remove", async (c) => {
    const body = parseInput(BatchRemoveSuppressionsSchema, (await readJson(c, 512 * 1024)).value);
    const tenant = c.get("tenant");
    const data = [];
    if ("emails" in body && body.emails) {
      for (const [i, e] of body.emails.entries()) {
        const address = normalised(e, `emails[${i}]`);
        data.push({
          object: "suppression",
          id: suppressionId("", address),
          deleted: (await removeSuppression(c.env.DB, tenant, address)) > 0,
        });
      }
    } else {
      for (const [i, id] of (body.ids ?? []).entries()) {
        const e = entryOfId(id);
        if (!e) throw new ApiError(422, "validation_error", `Invalid \`ids[${i}]\`: not a suppression id.`);
        data.push({
          object: "suppression",
          id,
          deleted: (await removeSuppression(c.env.DB, tenant, e.address, e.scope)) > 0,
        });
      }
    }
    return c.json({ data });
  });

  r.get("/:id_or_email", async (c) => {
    const ident = c.req.param("id_or_email");
    const byId = ident.includes("@") ? null : entryOfId(ident);
    if (!ident.includes("@") && !byId) throw notFound();
    const address = byId ? byId.address : normalised(ident);
    const entries = await suppressionEntries(c.env.DB, c.get("tenant"), address, Date.now());
    const hit = byId ? entries.find((e) => e.scope === byId.scope) : entries[0];
    if (!hit) throw notFound();
    return c.json({ object: "suppression", ...entryView(hit) });
  });

  r.delete("/:id_or_email", async (c) => {
    const ident = c.req.param("id_or_email");
    const byId = ident.includes("@") ? null : entryOfId(ident);
    if (!ident.includes("@") && !byId) throw notFound();
    const tenant = c.get("tenant");
    const n = byId
      ? await removeSuppression(c.env.DB, tenant, byId.address, byId.scope)
      : await removeSuppression(c.env.DB, tenant, normalised(ident));
    if (n === 0) throw notFound();
    return c.json({ object: "suppression", id: byId ? ident : suppressionId("", normalised(ident)), deleted: true });
  });
  return r;
}
