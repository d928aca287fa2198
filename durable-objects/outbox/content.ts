/**
 * A message's text and HTML as the Outbox keeps them for GET /emails/:id until its retention
 * ends: compressed in the row's `content` column (schema 8), not as JSON in its summary.
 *
 * DESCRIPTION
 *   packSummary(summary)   the summary's JSON and its content: when the text and HTML together
 *                          come to CONTENT_MIN_CHARS or more, the JSON has them null (in their
 *                          places) and `content` holds them, deflated; else the JSON has them
 *                          and `content` is null.
 *   unpackSummary(json, content, whole)  the summary back: with its text and HTML when `whole`
 *                          (the status API), else as the JSON has them (the index and the
 *                          publication, which never read them: no inflate, and no HTML carried
 *                          back to the worker per publication).
 *
 *   Why: a transactional email's HTML is commonly 10 to 50 KB of markup with inline styles, kept
 *   for the retention (30 days by default) in a WITHOUT ROWID row, whose bytes past about 1,000
 *   go to overflow pages. Storage is billed per GB-month: a 19 KB receipt kept whole cost more
 *   than all the rows written for its email (bench:cost `html`). Deflated, such markup is a
 *   fifth to a tenth of its size. Small ones are left as they are (the bench's text bodies).
 *
 * INVARIANTS
 *   unpackSummary(packSummary(s).summary, packSummary(s).content, true) deep-equals s, its keys in
 *   the same order.
 */
import { deflateRawSync, inflateRawSync } from "node:zlib";
import type { MessageSummary } from "../../worker/model/message";

/** Text and HTML below this many characters together stay in the summary's JSON. */
export const CONTENT_MIN_CHARS = 1024;

/** The summary's JSON and its deflated text and HTML (see the header). */
export function packSummary(s: MessageSummary): { summary: string; content: ArrayBuffer | null } {
  if ((s.html?.length ?? 0) + (s.text?.length ?? 0) < CONTENT_MIN_CHARS)
    return { summary: JSON.stringify(s), content: null };
  const packed = deflateRawSync(JSON.stringify({ html: s.html, text: s.text }));
  return {
    summary: JSON.stringify({ ...s, html: null, text: null }),
    content: packed.buffer.slice(packed.byteOffset, packed.byteOffset + packed.byteLength) as ArrayBuffer,
  };
}

/** The summary from its JSON and content (see the header). */
export function unpackSummary(json: string, content: ArrayBuffer | null, whole: boolean): MessageSummary {
  const s = JSON.parse(json) as MessageSummary;
  if (content === null || !whole) return s;
  const c = JSON.parse(inflateRawSync(new Uint8Array(content)).toString("utf8")) as Pick<
    MessageSummary,
    "html" | "text"
  >;
  s.html = c.html;
  s.text = c.text;
  return s;
}
