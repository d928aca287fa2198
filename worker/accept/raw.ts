/**
 * Prepares an already composed RFC 5322 message (POST /relay/messages/raw) for the queue.
 *
 * DESCRIPTION
 *   prepareRaw(env, input, ctx)  decodes the message (UTF-8 text or base64 octets), normalises
 *                                line ends to CRLF, checks it as RFC 5322 requires (no NUL octet,
 *                                no line over 998 octets, exactly one From field holding exactly
 *                                one valid mailbox), removes Bcc and Resent-Bcc fields (as Postfix's cleanup
 *                                does: the recipients are the envelope's), parses it with postal-mime, validates
 *                                the envelope (MAIL FROM, RCPT TO, de-duplicated), adds Date and
 *                                Message-ID when missing (as a submission server does, RFC 6409
 *                                §8), DKIM-signs when configured, applies the size and
 *                                recipient limits, and runs the compliance check as POST /emails
 *                                does. Every mailbox of From, Sender, Resent-From and
 *                                Resent-Sender, and the envelope sender, must be of a domain the
 *                                tenant may send from (domains/sender.ts authorize), not only the
 *                                first From mailbox.
 *
 * ERRORS
 *   ApiError 422 validation_error naming `message`, `mail_from` or `rcpt_to[i]`; 413 when too large.
 */
import PostalMime, { addressParser } from "postal-mime";
import { newMessageId } from "../model/ids";
import type { NewMessage } from "../model/message";
import { formatDate, parseMailbox, signDkim } from "../mail";
import { ApiError } from "../model/errors";
import { parseScheduledAt } from "./limits";
import { checkEnvelope, keepText, mailError, type PrepareContext, type PreparedMessage } from "./prepare";
import type { RawMessage } from "./schemas";
import { complianceWarnings, enforceCompliance } from "../compliance/check";

const bad = (issue: string) => new ApiError(422, "validation_error", `\`message\` ${issue}`);

/** The message as a "binary string" (one char per octet) with CRLF line ends. */
function decodeMessage(input: RawMessage): string {
  let bytes: Uint8Array;
  if (input.encoding === "base64") {
    try {
      bytes = Uint8Array.from(atob(input.message.replace(/\s+/g, "")), (c) => c.charCodeAt(0));
    } catch {
      throw bad("is not valid base64");
    }
  } else {
    bytes = new TextEncoder().encode(input.message);
  }
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  bin = bin.replace(/\r?\n/g, "\r\n");
  return bin.endsWith("\r\n") ? bin : bin + "\r\n";
}

/** Fields removed from a submitted header section: blind copies are the envelope's business. */
const STRIPPED = new Set(["bcc", "resent-bcc"]);

/**
 * Validates the message as RFC 5322 requires (see header) and removes the STRIPPED fields;
 * returns the message without them and the names of the fields present (lower case).
 */
function checkMessage(bin: string): { bin: string; names: Set<string> } {
  if (bin.includes("\0")) throw bad("contains a NUL octet (RFC 5322 §2.1 allows none)");
  const lines = bin.split("\r\n");
  const long = lines.findIndex((l) => l.length > 998);
  if (long >= 0) throw bad(`line ${long + 1} is longer than 998 octets (RFC 5322 §2.1.1)`);
  const end = bin.indexOf("\r\n\r\n");
  const head = end < 0 ? bin : bin.slice(0, end + 2);
  const names = new Set<string>();
  const kept: string[] = [];
  let from = 0;
  let dropping = false;
  head
    .split("\r\n")
    .slice(0, -1)
    .forEach((line, i) => {
      if (/^[ \t]/.test(line)) {
        if (i === 0) throw bad("starts with a continuation line");
        if (!dropping) kept.push(line);
        return;
      }
      const m = /^([\x21-\x39\x3b-\x7e]+):/.exec(line);
      if (!m) throw bad(`header line ${i + 1} is not a header field`);
      const name = m[1]!.toLowerCase();
      names.add(name);
      if (name === "from") from++;
      dropping = STRIPPED.has(name);
      if (!dropping) kept.push(line);
    });
  if (from === 0) throw bad("has no From header field");
  if (from > 1) throw bad("has more than one From header field (RFC 5322 §3.6 allows one)");
  for (const n of STRIPPED) names.delete(n);
  const rest = end < 0 ? "" : bin.slice(end + 2);
  return { bin: kept.map((l) => `${l}\r\n`).join("") + rest, names };
}

/** Fields that name who wrote or sent the message: each of their mailboxes must be the tenant's to use. */
const ORIGINATORS = new Set(["from", "sender", "resent-from", "resent-sender"]);

/** The mailbox addresses of an address field value, groups flattened. */
function mailboxesOf(value: string): string[] {
  return addressParser(value)
    .flatMap((a) => ("group" in a && a.group ? a.group : [a]))
    .map((a) => a.address ?? "")
    .filter((a) => a !== "");
}

function toBytes(bin: string): Uint8Array {
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

/** Parses, validates and completes one raw submission. */
export async function prepareRaw(env: Env, input: RawMessage, ctx: PrepareContext): Promise<PreparedMessage> {
  const id = newMessageId(ctx.shard);
  let mailFrom: string;
  let rcptTo: string[];
  try {
    mailFrom = input.mail_from === "" ? "" : parseMailbox("mail_from", input.mail_from).address;
    const list = typeof input.rcpt_to === "string" ? [input.rcpt_to] : input.rcpt_to;
    rcptTo = [...new Set(list.map((r, i) => parseMailbox(`rcpt_to[${i}]`, r).address))];
  } catch (e) {
    throw mailError(e);
  }
  const checked = checkMessage(decodeMessage(input));
  let bin = checked.bin;
  const names = checked.names;
  const parsed = await PostalMime.parse(toBytes(bin)).catch(() => {
    throw bad("could not be parsed as RFC 5322/MIME");
  });
  // The From field must name a sender: one valid address (a group or a bare phrase is none).
  let fromAddress: string;
  try {
    if (!parsed.from?.address) throw new Error("no address");
    fromAddress = parseMailbox("message", parsed.from.address).address;
  } catch {
    throw bad("has a From field without a valid address");
  }
  const originators = parsed.headers
    .filter((h) => ORIGINATORS.has(h.key))
    .map((h) => ({ field: h.originalKey, boxes: mailboxesOf(h.value) }));
  if ((originators.find((o) => o.field.toLowerCase() === "from")?.boxes.length ?? 0) > 1) {
    throw bad("has a From field with more than one mailbox; the relay takes one author per message");
  }
  const domains = new Set<string>();
  for (const o of originators) {
    for (const box of o.boxes) {
      try {
        const address = parseMailbox("message", box).address;
        domains.add(address.slice(address.lastIndexOf("@") + 1).toLowerCase());
      } catch {
        throw bad(`has a ${o.field} field with an invalid mailbox`);
      }
    }
  }
  // The domain as the relay writes domain names (A-labels, lower case: domains/core/names.ts).
  const domain = fromAddress.slice(fromAddress.lastIndexOf("@") + 1);
  const messageId = parsed.messageId ?? `<${id}@${domain}>`;
  const added = [
    names.has("date") ? "" : `Date: ${formatDate(new Date(ctx.nowMs))}\r\n`,
    names.has("message-id") ? "" : `Message-ID: ${messageId}\r\n`,
  ].join("");
  bin = added + bin;
  let body = toBytes(bin);
  checkEnvelope(rcptTo.length, body.length, ctx.limits);
  // The From domain signs; the envelope sender's domain must be the tenant's too (or null).
  const signers = await ctx.sender.authorize(domain.toLowerCase());
  if (mailFrom !== "") await ctx.sender.authorize(mailFrom.slice(mailFrom.lastIndexOf("@") + 1).toLowerCase());
  for (const d of domains) await ctx.sender.authorize(d);
  if (signers.length > 0) body = await signDkim(body, signers);
  checkEnvelope(rcptTo.length, body.length, ctx.limits);
  const warnings = await complianceWarnings(env, {
    sender: ctx.sender,
    fromDomain: domain,
    mailFrom,
    returnPath: null,
    bulk: false,
    body,
    rcptTo,
  });
  enforceCompliance(ctx.sender, warnings);
  const scheduledAt = input.scheduled_at === undefined ? null : parseScheduledAt(input.scheduled_at, ctx.nowMs);
  const addrs = (l: { address?: string }[] | undefined) => (l ?? []).flatMap((a) => (a.address ? [a.address] : []));
  const record: NewMessage = {
    id,
    createdAt: ctx.nowMs,
    scheduledAt: scheduledAt !== null && scheduledAt > ctx.nowMs ? scheduledAt : null,
    mailFrom,
    rcptTo,
    size: body.length,
    summary: {
      from: parsed.from?.address
        ? parsed.from.name
          ? `${parsed.from.name} <${parsed.from.address}>`
          : parsed.from.address
        : mailFrom,
      to: addrs(parsed.to),
      cc: parsed.cc ? addrs(parsed.cc) : null,
      bcc: rcptTo.filter((r) => ![...addrs(parsed.to), ...addrs(parsed.cc)].includes(r)),
      reply_to: parsed.replyTo ? addrs(parsed.replyTo) : null,
      subject: parsed.subject ?? null,
      ...keepText(parsed.html, parsed.text),
      tags: input.tags ?? null,
      message_id: messageId,
      ...(warnings.length > 0 ? { warnings } : {}),
    },
  };
  return { body, record };
}
