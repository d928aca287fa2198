/**
 * Resend's emails.attachments: the attachments of a sent email.
 *
 * DESCRIPTION
 *   GET /emails/:id/attachments?limit=&after=&before=  { object: "list", has_more, data: [{ id,
 *                          filename, size, content_type, content_disposition, content_id,
 *                          download_url, expires_at }] }, in the composed message's order (from
 *                          the email's record in its Outbox: summary.attachments).
 *   GET /emails/:id/attachments/:aid   { object: "attachment", ... } one of them.
 *   The bytes come from the copy of the message kept at accept for these links (`sent/…`,
 *   model/files.ts), until retention deletes it with the email (routes/files.ts serves them).
 *
 * ERRORS
 *   404 not_found for an unknown (or another tenant's) email or attachment.
 */
import { Hono, type Context } from "hono";
import { isMessageId, outboxOf } from "../../model/ids";
import type { MessageView, SentAttachment } from "../../model/message";
import { keptKey } from "../../model/files";
import { publicOrigin } from "../../accept/prepare";
import { type AppEnv } from "../http/context";
import { parseInput } from "../http/body";
import { ApiError } from "../../model/errors";
import { PageQuerySchema } from "../http/template-schemas";
import { fileLink } from "./files";

async function viewOf(c: Context<AppEnv>): Promise<MessageView> {
  const id = c.req.param("id") ?? "";
  const view = isMessageId(id) ? await outboxOf(c.env, id).view(id, c.get("tenant")) : null;
  if (!view) throw new ApiError(404, "not_found", "Email not found.");
  return view;
}

async function data(c: Context<AppEnv>, v: MessageView, a: SentAttachment, index: number) {
  const link = await fileLink(c.env, publicOrigin(c.env, c.req.url), {
    k: "sent",
    t: c.get("tenant"),
    e: v.id,
    p: keptKey("sent", v.created_at, v.id),
    a: index,
  });
  return {
    id: a.id,
    filename: a.filename ?? undefined,
    size: a.size,
    content_type: a.content_type,
    content_disposition: a.content_disposition,
    content_id: a.content_id ?? undefined,
    ...link,
  };
}

/** The /emails/:id/attachments routes (mounted behind the API key middleware). */
export function emailAttachmentRoutes() {
  const r = new Hono<AppEnv>();
  r.get("/:id/attachments", async (c) => {
    const q = parseInput(PageQuerySchema, c.req.query());
    const v = await viewOf(c);
    const atts = (v.summary.attachments ?? []).map((a, i) => ({ a, i }));
    const from = q.after !== undefined ? atts.findIndex((x) => x.a.id === q.after) + 1 : 0;
    const to =
      q.before !== undefined
        ? Math.max(
            0,
            atts.findIndex((x) => x.a.id === q.before),
          )
        : atts.length;
    const window = atts.slice(from, to);
    const page = q.before !== undefined ? window.slice(-q.limit) : window.slice(0, q.limit);
    return c.json({
      object: "list",
      has_more: window.length > page.length,
      data: await Promise.all(page.map(({ a, i }) => data(c, v, a, i))),
    });
  });
  r.get("/:id/attachments/:aid", async (c) => {
    const v = await viewOf(c);
    const atts = v.summary.attachments ?? [];
    const i = atts.findIndex((a) => a.id === c.req.param("aid"));
    if (i < 0) throw new ApiError(404, "not_found", "Attachment not found.");
    return c.json({ object: "attachment", ...(await data(c, v, atts[i]!, i)) });
  });
  return r;
}
