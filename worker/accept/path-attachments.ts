/**
 * Attachments given by `path` (a URL), as Resend takes them: fetched at accept time, through
 * the webhook SSRF guard, within the message size limit.
 *
 * DESCRIPTION
 *   fetchPathAttachments(env, attachments, maxBytes, deps?)  the attachments with every `path`
 *                        one fetched into `content` (bytes): the URL must pass checkEndpointUrl
 *                        (https only, no internal names or addresses) and its host must resolve
 *                        only to public addresses (fetch-guard.ts), in development as in
 *                        production; under COHORT_ENV development or test, an origin the local
 *                        stack declares in DEV_PATH_ORIGINS (the catcher, test receivers) is
 *                        reached as it is, and no other loopback or private port is. Redirects
 *                        are not followed; the
 *                        body is read up to `maxBytes` in all; the content type comes from the
 *                        response unless `content_type` is given; the file name from `filename`
 *                        or the URL's last path segment.
 *
 * ERRORS
 *   ApiError 422 invalid_attachment naming attachments[i].path: refused by the guard,
 *   unreachable, timed out, not 2xx, a redirect, or larger than the limit.
 */
import type { AttachmentInput } from "../mail/mime";
import { checkEndpointUrl } from "../net/core/ssrf";
import { resolvedTarget, type ResolveDeps } from "../net/fetch-guard";
import { ApiError } from "../model/errors";
import { settingsOf } from "../settings/settings";

/** How long one fetch may take. */
export const PATH_FETCH_TIMEOUT_MS = 10_000;

const bad = (i: number, why: string) => new ApiError(422, "invalid_attachment", `\`attachments[${i}].path\` ${why}`);

/** See the header. */
export async function fetchPathAttachments(
  env: { COHORT_ENV: string; DOH_RESOLVER_URL?: string; DEV_PATH_ORIGINS?: string },
  attachments: readonly AttachmentInput[] | undefined,
  maxBytes: number,
  deps: ResolveDeps = {},
): Promise<AttachmentInput[] | undefined> {
  if (!attachments || !attachments.some((a) => a.path !== undefined && a.content === undefined))
    return attachments as AttachmentInput[] | undefined;
  const doFetch = deps.fetch ?? globalThis.fetch;
  const declared = settingsOf(env).local ? new Set(settingsOf(env).devPathOrigins) : new Set<string>();
  let budget = maxBytes;
  const out: AttachmentInput[] = [];
  for (const [i, att] of attachments.entries()) {
    if (att.path === undefined || att.content !== undefined) {
      out.push(att);
      continue;
    }
    let url: URL;
    try {
      url = new URL(att.path);
    } catch {
      throw bad(i, "is not a URL");
    }
    if (!declared.has(url.origin.toLowerCase())) {
      const guard = checkEndpointUrl(url, {});
      const dev = settingsOf(env).local
        ? " (in development, only the origins in DEV_PATH_ORIGINS besides public https)"
        : "";
      if (!guard.ok) throw bad(i, `is refused: ${guard.detail}${dev}`);
      const resolved = await resolvedTarget(env, url.href, deps, true);
      if (resolved.kind !== "ok") throw bad(i, `is refused: ${resolved.reason}`);
    }
    let res: Response;
    try {
      res = await doFetch(url.href, { redirect: "manual", signal: AbortSignal.timeout(PATH_FETCH_TIMEOUT_MS) });
    } catch (e) {
      throw bad(
        i,
        `could not be fetched (${e instanceof Error && e.name === "TimeoutError" ? `no answer within ${PATH_FETCH_TIMEOUT_MS} ms` : "network error"})`,
      );
    }
    if (res.status >= 300 && res.status < 400) {
      await res.body?.cancel().catch(() => undefined);
      throw bad(i, `answered a redirect (HTTP ${res.status}); redirects are not followed`);
    }
    if (!res.ok) {
      await res.body?.cancel().catch(() => undefined);
      throw bad(i, `answered HTTP ${res.status}`);
    }
    const bytes = await readCapped(res, budget);
    if (bytes === null) throw bad(i, `is larger than the ${maxBytes} bytes a message may have`);
    budget -= bytes.byteLength;
    const type = att.content_type ?? simpleType(res.headers.get("content-type"));
    const filename = att.filename ?? lastSegment(url);
    out.push({ ...att, content: bytes, ...(type ? { content_type: type } : {}), ...(filename ? { filename } : {}) });
  }
  return out;
}

/** A response's media type when it is a plain type/subtype (parameters dropped), else undefined. */
function simpleType(header: string | null): string | undefined {
  const t = header?.split(";")[0]?.trim().toLowerCase();
  return t && /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+$/.test(t) ? t : undefined;
}

function lastSegment(url: URL): string | undefined {
  const seg = url.pathname.split("/").filter(Boolean).pop();
  if (!seg) return undefined;
  try {
    return decodeURIComponent(seg).slice(0, 255);
  } catch {
    return seg.slice(0, 255);
  }
}

async function readCapped(res: Response, limit: number): Promise<Uint8Array | null> {
  const declared = Number(res.headers.get("content-length") ?? "0");
  if (declared > limit) {
    await res.body?.cancel().catch(() => undefined);
    return null;
  }
  if (!res.body) return new Uint8Array(0);
  const reader = res.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      return null;
    }
    parts.push(value);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}
