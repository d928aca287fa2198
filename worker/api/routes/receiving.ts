/**
 * Resend's emails.receiving: mail received by a tenant's receiving domains (worker/receiving/).
 *
 * DESCRIPTION
 *   GET /emails/receiving?limit=&after=&before=   { object: "list", has_more, data }, newest first
 *                         (Resend's received email without html, text, headers and raw).
 *   GET /emails/receiving/:id?html_format=        { object: "email", id, to, from, created_at,
 *                         subject, bcc, cc, reply_to, received_for, html, text, headers,
 *                         message_id, raw: { download_url, expires_at }, attachments }. html and
 *                         text come from the raw message (one R2 read); with html_format
 *                         "data_uri" (the default) inline images are data: URIs, with "cid" the
 *                         cid: references stay.
 *   GET /emails/receiving/:id/attachments         { object: "list", has_more, data: [{ id,
 *                         filename, size, content_type, content_disposition, content_id,
 *                         download_url, expires_at }] }.
 *   GET /emails/receiving/:id/attachments/:aid    { object: "attachment", ... } one of them.
 *   Download links are signed (routes/files.ts) and valid FILE_LINK_SECONDS.
 *   `forward` is the SDK's own: it reads the email, downloads `raw` and sends it on with POST
 *   /emails, through the relay.
 *
 * ERRORS
 *   404 not_found for an unknown (or another tenant's) email or attachment; 422 for a bad query.
 */
import { Hono, type Context } from "hono";
import PostalMime from "postal-mime";
import { z } from "zod";
import { getReceived, listReceived, type ReceivedRow } from "../../db/received";
import { withDataUris, type ReceivedAttachment } from "../../receiving/core/received";
import { publicOrigin } from "../../accept/prepare";
import { type AppEnv } from "../http/context";
import { parseInput } from "../http/body";
import { ApiError } from "../../model/errors";
import { PageQuerySchema } from "../http/template-schemas";
import { fileLink } from "./files";

const parse = (s: string | null) => (s === null ? null : (JSON.parse(s) as string[]));
const notFound = (what = "Email") => new ApiError(404, "not_found", `${what} not found.`);
const GetQuery = z.object({ html_format: z.enum(["data_uri", "cid"]).default("data_uri") });

/** A list item (Resend's ListReceivingEmail). */
export function receivedListItem(r: ReceivedRow) {
  return {
    id: r.id,
    to: parse(r.to_json) ?? [],
    from: r.from_addr,
    created_at: new Date(r.created_at).toISOString(),
    subject: r.subject,
    bcc: parse(r.bcc_json),
    cc: parse(r.cc_json),
    reply_to: parse(r.reply_to_json),
    received_for: parse(r.received_for_json) ?? [],
    message_id: r.message_id ?? "",
    attachments: JSON.parse(r.attachments_json) as ReceivedAttachment[],
  };
}

async function mine(c: Context<AppEnv>): Promise<ReceivedRow> {
  const row = await getReceived(c.env.DB, c.get("tenant"), c.req.param("id") ?? "");
  if (!row) throw notFound();
  return row;
}

async function attachmentData(c: Context<AppEnv>, row: ReceivedRow, a: ReceivedAttachment, index: number) {
  const link = await fileLink(c.env, publicOrigin(c.env, c.req.url), {
    k: "received",
    t: row.tenant_id,
    e: row.id,
    p: row.raw_key,
    a: index,
  });
  return {
    id: a.id,
    filename: a.filename ?? undefined,
    size: a.size,
    content_type: a.content_type,
    content_disposition: a.content_disposition === "inline" ? ("inline" as const) : ("attachment" as const),
    content_id: a.content_id ?? undefined,
    ...link,
  };
}

/** The /emails/receiving routes (mounted behind the API key middleware, before /emails). */
export function receivingRoutes() {
  const r = new Hono<AppEnv>();
  r.get("/", async (c) => {
    const q = parseInput(PageQuerySchema, c.req.query());
    const page = await listReceived(c.env.DB, c.get("tenant"), q);
    return c.json({ object: "list", has_more: page.hasMore, data: page.rows.map(receivedListItem) });
  });

  r.get("/:id", async (c) => {
    const { html_format } = parseInput(GetQuery, c.req.query());
    const row = await mine(c);
    const obj = await c.env.BODIES.get(row.raw_key);
    const parsed = obj ? await PostalMime.parse(await obj.arrayBuffer(), { attachmentEncoding: "base64" }) : null;
    const atts = JSON.parse(row.attachments_json) as ReceivedAttachment[];
    const inline = (parsed?.attachments ?? []).map((a, i) => ({
      content_id: atts[i]?.content_id ?? null,
      content_type: a.mimeType,
      base64: String(a.content),
    }));
    const html = parsed?.html ?? null;
    return c.json({
      object: "email",
      ...receivedListItem(row),
      html: html !== null && html_format === "data_uri" ? withDataUris(html, inline) : html,
      text: parsed?.text ?? null,
      headers: JSON.parse(row.headers_json) as Record<string, string>,
      raw: obj
        ? await fileLink(c.env, publicOrigin(c.env, c.req.url), {
            k: "raw",
            t: row.tenant_id,
            e: row.id,
            p: row.raw_key,
          })
        : null,
    });
  });

  r.get("/:id/attachments", async (c) => {
    const q = parseInput(PageQuerySchema, c.req.query());
    const row = await mine(c);
    const atts = (JSON.parse(row.attachments_json) as ReceivedAttachment[]).map((a, i) => ({ a, i }));
    const from = q.after !== undefined ? atts.findIndex((x) => x.a.id === q.after) + 1 : 0;
    const to = q.before !== undefined ? atts.findIndex((x) => x.a.id === q.before) : atts.length;
    const window = atts.slice(from, to < 0 ? 0 : to);
    const page = q.before !== undefined ? window.slice(-q.limit) : window.slice(0, q.limit);
    return c.json({
      object: "list",
      has_more: window.length > page.length,
      data: await Promise.all(page.map(({ a, i }) => attachmentData(c, row, a, i))),
    });
  });

  r.get("/:id/attachments/:aid", async (c) => {
    const row = await mine(c);
    const atts = JSON.parse(row.attachments_json) as ReceivedAttachment[];
    const i = atts.findIndex((a) => a.id === c.req.param("aid"));
    if (i < 0) throw notFound("Attachment");
    return c.json({ object: "attachment", ...(await attachmentData(c, row, atts[i]!, i)) });
  });
  return r;
}
