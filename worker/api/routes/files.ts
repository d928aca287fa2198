/**
 * Download links (Resend's `download_url`): an attachment of a sent or received email, or a
 * received email's raw bytes. No API key: the signed token is the authority (lib/signed-links.ts).
 *
 * DESCRIPTION
 *   GET /files/:token   the file: the kept message from R2 (model/files.ts), as it is for "raw"
 *                       (message/rfc822), else parsed and its attachment at the token's index
 *                       (its content type, Content-Disposition attachment with its filename).
 *   fileLink(env, origin, ref)  the URL and expires_at of a link valid FILE_LINK_SECONDS.
 *
 * ERRORS
 *   404 not_found for a token that does not verify or has expired, or a file no longer kept.
 */
import { Hono } from "hono";
import PostalMime from "postal-mime";
import { readFileRef, signFileRef, type FileRef } from "../../lib/signed-links";
import { type AppEnv } from "../http/context";
import { ApiError } from "../../model/errors";
import { settingsOf } from "../../settings/settings";

/** A signed link to a kept file (see the header). */
export async function fileLink(
  env: Env,
  origin: string,
  ref: Omit<FileRef, "x">,
  nowMs = Date.now(),
): Promise<{ download_url: string; expires_at: string }> {
  const x = Math.floor(nowMs / 1000) + settingsOf(env).fileLinkSeconds;
  return {
    download_url: `${origin}/files/${await signFileRef(env, { ...ref, x })}`,
    expires_at: new Date(x * 1000).toISOString(),
  };
}

const gone = () =>
  new ApiError(404, "not_found", "This download link is not valid, has expired, or its file is no longer kept.");

/** The /files routes (no API key). */
export function fileRoutes() {
  const r = new Hono<AppEnv>();
  r.get("/:token", async (c) => {
    const ref = await readFileRef(c.env, c.req.param("token"), Math.floor(Date.now() / 1000));
    if (!ref) throw gone();
    const obj = await c.env.BODIES.get(ref.p);
    if (!obj) throw gone();
    // Served as downloads, sandboxed: a received file is whatever its sender made it.
    const headers = {
      "cache-control": "private, no-store",
      "x-content-type-options": "nosniff",
      "content-security-policy": "default-src 'none'; sandbox",
    };
    if (ref.k === "raw")
      return new Response(obj.body, {
        headers: {
          ...headers,
          "content-type": "message/rfc822",
          "content-disposition": `attachment; filename="${ref.e}.eml"`,
        },
      });
    const parsed = await PostalMime.parse(await obj.arrayBuffer(), { attachmentEncoding: "arraybuffer" });
    const a = parsed.attachments[ref.a ?? -1];
    if (!a) throw gone();
    const name = (a.filename ?? "attachment").replace(/["\\\r\n]/g, "_");
    return new Response(a.content as ArrayBuffer, {
      headers: { ...headers, "content-type": a.mimeType, "content-disposition": `attachment; filename="${name}"` },
    });
  });
  return r;
}
