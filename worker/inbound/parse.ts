/**
 * An inbound message's bytes as mail/inbound.ts reads them.
 *
 * DESCRIPTION
 *   parseInbound(bytes, envelopeFrom)  parses the MIME with postal-mime (attached messages kept
 *       as parts, every part as text) and returns the header block's bytes (the first 64 KiB),
 *       the envelope sender ("" for a null sender, `<>`), the parts and the text.
 */
import PostalMime from "postal-mime";
import type { InboundMail } from "../mail/inbound";

/** See the header. */
export async function parseInbound(bytes: Uint8Array, envelopeFrom: string): Promise<InboundMail> {
  const parsed = await PostalMime.parse(bytes, { forceRfc822Attachments: true, attachmentEncoding: "utf8" });
  const head = new TextDecoder("latin1").decode(bytes.subarray(0, 65536));
  const parts = parsed.attachments.map((a) => ({
    mimeType: a.mimeType,
    text: typeof a.content === "string" ? a.content : new TextDecoder().decode(a.content),
  }));
  return { head, envelopeFrom: /^<?>?$/.test(envelopeFrom.trim()) ? "" : envelopeFrom, parts, text: parsed.text ?? "" };
}
