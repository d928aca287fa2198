/**
 * Reading request bodies: size-checked before parsing, JSON errors as Resend errors.
 *
 * DESCRIPTION
 *   requestLimitBytes(limits)  the largest accepted request body: MAX_MESSAGE_BYTES × 1.4 plus
 *                              64 KiB, room for a maximal message whose attachments travel as
 *                              base64 inside JSON.
 *   readBody(c, maxBytes)      the body as bytes, within the limit, whatever its framing
 *                              (Content-Length or chunked): the stream is read and cut off at the
 *                              limit, so an oversized body is never held in full. A body read
 *                              before (holdBody: send-reads.ts reads it with the key) is given
 *                              back instead, checked against the limit the same way.
 *   readJson(c, maxBytes)      the raw text and the parsed value.
 *   readOptionalJson(c, maxBytes)  as readJson, but an empty body (none sent) is `undefined`.
 *   parseInput(schema, value)  zod validation with Resend's error names.
 *
 * ERRORS
 *   413 validation_error when Content-Length or the body exceeds the limit;
 *   400 validation_error for a body that is not JSON (with the parser's reason).
 */
import type { Context } from "hono";
import type { z } from "zod";
import { ApiError } from "../../model/errors";
import type { Limits } from "../../accept/limits";
import { describeIssue } from "./schemas";

/** The request body limit derived from the message size limit. */
export function requestLimitBytes(limits: Limits): number {
  return Math.floor(limits.maxMessageBytes * 1.4) + 64 * 1024;
}

function tooLarge(size: number, max: number): ApiError {
  return new ApiError(413, "validation_error", `The request body is ${size} bytes; the limit is ${max} bytes.`);
}

/** The bodies read before their route, by request. */
const HELD = new WeakMap<Request, ArrayBuffer>();

/** Keeps the body read from `c`'s stream for the route's readBody. */
export function holdBody(c: Context, bytes: ArrayBuffer): void {
  HELD.set(c.req.raw, bytes);
}

/** Reads a body of at most `maxBytes` (413 beyond), from its stream, whatever the framing. */
export async function readBody(c: Context, maxBytes: number): Promise<ArrayBuffer> {
  const declared = Number(c.req.header("content-length") ?? "0");
  if (declared > maxBytes) throw tooLarge(declared, maxBytes);
  const held = HELD.get(c.req.raw);
  if (held !== undefined) {
    if (held.byteLength > maxBytes) throw tooLarge(held.byteLength, maxBytes);
    return held;
  }
  const stream = c.req.raw.body;
  if (stream === null) return new ArrayBuffer(0);
  const reader = stream.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(size, maxBytes);
    }
    parts.push(value);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out.buffer;
}

function parseJsonText(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch (e) {
    throw new ApiError(
      400,
      "validation_error",
      `The request body is not valid JSON: ${e instanceof Error ? e.message : "parse error"}.`,
    );
  }
}

/** Reads and parses a JSON body of at most `maxBytes`. */
export async function readJson(c: Context, maxBytes: number): Promise<{ raw: string; value: unknown }> {
  const raw = new TextDecoder().decode(await readBody(c, maxBytes));
  if (raw.trim() === "")
    throw new ApiError(400, "validation_error", "The request body is empty; expected a JSON object.");
  return { raw, value: parseJsonText(raw) };
}

/** Reads and parses a JSON body that may be absent: `undefined` when nothing (or only whitespace) was sent. */
export async function readOptionalJson(c: Context, maxBytes: number): Promise<unknown> {
  const raw = new TextDecoder().decode(await readBody(c, maxBytes));
  return raw.trim() === "" ? undefined : parseJsonText(raw);
}

/** Validates `value` against a zod schema; a failure is a 422 naming the field (`prefix` first). */
export function parseInput<S extends z.ZodType>(schema: S, value: unknown, prefix = ""): z.infer<S> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const { name, message } = describeIssue(r.error, value);
  throw new ApiError(422, name, prefix ? `${prefix} ${message}` : message);
}
