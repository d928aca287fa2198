/*
 * NAME
 *   reply - incremental SMTP reply parser and reply classification
 *
 * SUMMARY
 *   Bytes from the server in, complete replies out. Chunks may split anywhere,
 *   including inside CRLF or inside a multi-byte UTF-8 character. Plays the
 *   part of Postfix's smtp_chat_resp(), without the I/O.
 *
 * DESCRIPTION
 *   createReplyParser() returns an empty parser state (plain data).
 *
 *   feedReplyParser(parser, chunk) appends a chunk (bytes, or a string that is
 *   taken as UTF-8) and returns the new parser state, every reply completed by
 *   this chunk in order, and a protocol error if a line was invalid. A reply
 *   is a run of "NNN-text" lines ended by one "NNN text" (or bare "NNN") line
 *   (RFC 5321 §4.2.1). Lines end at LF; a CR before the LF is dropped.
 *
 *   hasBufferedInput(parser) says whether bytes of an unfinished reply are
 *   held. The adapter checks it before STARTTLS: data that arrived after the
 *   220 but before the handshake must not be trusted (command injection).
 *
 *   parseEnhancedCode(text, code) extracts an RFC 3463 "class.subject.detail"
 *   prefix (RFC 2034 puts it at the start of each reply line). The class digit
 *   must equal the reply code's first digit, else there is no enhanced code.
 *
 *   classifyReply(code) maps 2xx to "ok", 3xx to "intermediate", 4xx to
 *   "transient" and 5xx to "permanent".
 *
 *   deriveEnhancedCode(code) gives "c.0.0" for a reply without one, the way
 *   Postfix fills in a DSN status. formatReply(reply) renders a reply as one
 *   line for diagnostics ("550 5.1.1 text").
 *
 * INVARIANTS
 *   Every reply returned has 200 <= code <= 599 and at least one line.
 *   Once a parser has returned an error it is stuck: later feeds return the
 *   same error and no replies (the stream cannot be resynchronised).
 *
 * ERRORS
 *   Expected bad input is a ReplyProtocolError value, never an exception:
 *   "bad-line" (no 3-digit code, or a bad separator), "bad-code" (outside
 *   200-599), "code-mismatch" (lines of one multiline reply disagree),
 *   "line-too-long" (over MAX_REPLY_LINE_BYTES), "too-many-lines".
 */

import { decodeUtf8, encodeUtf8 } from "./codec";

/** Longest accepted reply line in bytes, CRLF excluded (RFC 5321 says 512; servers exceed it). */
export const MAX_REPLY_LINE_BYTES = 4096;
/** Most lines accepted in one multiline reply. */
export const MAX_REPLY_LINES = 1000;

/** One complete server reply. */
export interface SmtpReply {
  /** Three-digit reply code, 200..599. */
  code: number;
  /** RFC 3463 status "x.y.z" from the first line, when present and consistent with `code`. */
  enhanced?: string;
  /** Text of each line after "NNN-"/"NNN ", as sent. */
  lines: string[];
  /** Lines with their enhanced code prefix removed, joined by single spaces. */
  text: string;
}

/** Why the reply stream could not be parsed. */
export interface ReplyProtocolError {
  kind: "protocol-error";
  reason: "bad-line" | "bad-code" | "code-mismatch" | "line-too-long" | "too-many-lines";
  /** Human-readable explanation including the offending line (truncated). */
  text: string;
}

/** Parser state; plain data, replaced on every feed. */
export interface ReplyParser {
  /** Bytes after the last LF seen. */
  pending: Uint8Array;
  /** Code of the multiline reply in progress, or null between replies. */
  code: number | null;
  /** Raw texts of the lines of the reply in progress. */
  lines: string[];
  /** Sticky error; set once the stream is unparseable. */
  error: ReplyProtocolError | null;
}

/** What one feed produced. */
export interface ReplyFeedResult {
  parser: ReplyParser;
  replies: SmtpReply[];
  error: ReplyProtocolError | null;
}

/** Coarse meaning of a reply code. */
export type ReplyClass = "ok" | "intermediate" | "transient" | "permanent";

/** Returns an empty parser. */
export function createReplyParser(): ReplyParser {
  return { pending: new Uint8Array(0), code: null, lines: [], error: null };
}

/** Says whether the parser holds bytes of a reply that is not complete yet. */
export function hasBufferedInput(parser: ReplyParser): boolean {
  return parser.pending.length > 0 || parser.lines.length > 0;
}

/** Feeds one chunk and returns the replies it completed (see header). */
export function feedReplyParser(parser: ReplyParser, chunk: Uint8Array | string): ReplyFeedResult {
  if (parser.error) return { parser, replies: [], error: parser.error };
  const bytes = typeof chunk === "string" ? encodeUtf8(chunk) : chunk;
  const buf = concatBytes(parser.pending, bytes);
  const next: ReplyParser = { pending: buf, code: parser.code, lines: [...parser.lines], error: null };
  const replies: SmtpReply[] = [];
  let start = 0;
  for (let lf = buf.indexOf(0x0a); lf !== -1; lf = buf.indexOf(0x0a, start)) {
    const end = lf > start && buf[lf - 1] === 0x0d ? lf - 1 : lf;
    const error = acceptLine(next, buf.subarray(start, end), replies);
    start = lf + 1;
    if (error) return fail(replies, error);
  }
  next.pending = buf.slice(start);
  if (next.pending.length > MAX_REPLY_LINE_BYTES + 1) {
    return fail(replies, createProtocolError("line-too-long", next.pending.subarray(0, 80)));
  }
  return { parser: next, replies, error: null };
}

/** Marks the parser failed; replies completed before the bad line still count. */
function fail(replies: SmtpReply[], error: ReplyProtocolError): ReplyFeedResult {
  const stuck: ReplyParser = { pending: new Uint8Array(0), code: null, lines: [], error };
  return { parser: stuck, replies, error };
}

/** Validates one line (CRLF stripped) and completes a reply on its last line. */
function acceptLine(p: ReplyParser, line: Uint8Array, out: SmtpReply[]): ReplyProtocolError | null {
  if (line.length > MAX_REPLY_LINE_BYTES) return createProtocolError("line-too-long", line.subarray(0, 80));
  const d0 = readDigit(line, 0);
  const d1 = readDigit(line, 1);
  const d2 = readDigit(line, 2);
  const sep = line[3];
  if (d0 < 0 || d1 < 0 || d2 < 0 || (sep !== undefined && sep !== 0x20 && sep !== 0x2d)) {
    return createProtocolError("bad-line", line);
  }
  const code = d0 * 100 + d1 * 10 + d2;
  if (code < 200 || code > 599) return createProtocolError("bad-code", line);
  if (p.code !== null && p.code !== code) return createProtocolError("code-mismatch", line);
  if (p.lines.length >= MAX_REPLY_LINES) return createProtocolError("too-many-lines", line);
  p.lines.push(decodeUtf8(line.subarray(4)));
  if (sep === 0x2d) {
    p.code = code;
    return null;
  }
  out.push(buildReply(code, p.lines));
  p.code = null;
  p.lines = [];
  return null;
}

/** Assembles a reply from its code and raw line texts. */
function buildReply(code: number, lines: string[]): SmtpReply {
  const first = parseEnhancedCode(lines[0] ?? "", code);
  const texts = lines.map((l) => parseEnhancedCode(l, code).rest);
  const reply: SmtpReply = { code, lines, text: texts.join(" ").trim() };
  if (first.enhanced !== undefined) reply.enhanced = first.enhanced;
  return reply;
}

/** Returns the numeric value of an ASCII digit at `at`, or -1. */
function readDigit(line: Uint8Array, at: number): number {
  const b = line[at];
  return b !== undefined && b >= 0x30 && b <= 0x39 ? b - 0x30 : -1;
}

/** Builds a protocol error that quotes (a printable prefix of) the bad line. */
function createProtocolError(reason: ReplyProtocolError["reason"], line: Uint8Array): ReplyProtocolError {
  const quoted = decodeUtf8(line.subarray(0, 80)).replace(/[\x00-\x1f\x7f]/g, "?");
  return { kind: "protocol-error", reason, text: `invalid SMTP reply (${reason}): "${quoted}"` };
}

/** Concatenates two byte arrays. */
function concatBytes(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

const ENHANCED_PREFIX = /^([245])\.(\d{1,3})\.(\d{1,3})(?:[ \t]+|$)/;

/** Extracts an RFC 3463 status prefix whose class matches `code`; returns the rest of the text. */
export function parseEnhancedCode(text: string, code: number): { enhanced?: string; rest: string } {
  const m = ENHANCED_PREFIX.exec(text);
  if (!m || Number(m[1]) !== Math.floor(code / 100)) return { rest: text };
  return { enhanced: `${m[1]}.${Number(m[2])}.${Number(m[3])}`, rest: text.slice(m[0].length) };
}

/** Maps a reply code to ok / intermediate / transient / permanent. */
export function classifyReply(code: number): ReplyClass {
  if (code >= 500) return "permanent";
  if (code >= 400) return "transient";
  if (code >= 300) return "intermediate";
  return "ok";
}

/** Returns "c.0.0" for reply code class c (Postfix's default DSN status). */
export function deriveEnhancedCode(code: number): string {
  return `${Math.floor(code / 100)}.0.0`;
}

/** Renders a reply on one line for diagnostics, e.g. "550 5.1.1 No such user". */
export function formatReply(reply: SmtpReply): string {
  const parts = [String(reply.code)];
  if (reply.enhanced) parts.push(reply.enhanced);
  if (reply.text) parts.push(reply.text);
  return parts.join(" ");
}
