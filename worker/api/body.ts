/**
 * Reading request bodies: size-checked before parsing, JSON errors as Resend errors.
 *
 * DESCRIPTION
 *   requestLimitBytes(limits)  the largest accepted request body: MAX_MESSAGE_BYTES × 1.4 plus
 *                              64 KiB, room for a maximal message whose attachments travel as
 *                              base64 inside JSON.
 *   readBody(c, maxBytes)      the body as bytes, within the limit.
 *   readJson(c, maxBytes)      the raw text and the parsed value.
 *   parseInput(schema, value)  zod validation with Resend's error names.
 *
 * ERRORS
 *   413 validation_error when Content-Length or the body exceeds the limit;
 *   400 validation_error for a body that is not JSON (with the parser's reason).
 */
import type { Context } from "hono";
import type { z } from "zod";
import { ApiError } from "./errors";
import type { Limits } from "./limits";
import { describeIssue } from "./schemas";

/** The request body limit derived from the message size limit. */
export function requestLimitBytes(limits: Limits): number {
  return Math.floor(limits.maxMessageBytes * 1.4) + 64 * 1024;
}

function tooLarge(size: number, max: number): ApiError {
  return new ApiError(413, "validation_error", `The request body is ${size} bytes; the limit is ${max} bytes.`);
}

/** Reads a body of at most `maxBytes` (413 beyond). */
export async function readBody(c: Context, maxBytes: number): Promise<ArrayBuffer> {
  const declared = Number(c.req.header("content-length") ?? "0");
  if (declared > maxBytes) throw tooLarge(declared, maxBytes);
  const buf = await c.req.arrayBuffer();
  if (buf.byteLength > maxBytes) throw tooLarge(buf.byteLength, maxBytes);
  return buf;
}

/** Reads and parses a JSON body of at most `maxBytes`. */
export async function readJson(c: Context, maxBytes: number): Promise<{ raw: string; value: unknown }> {
  const raw = new TextDecoder().decode(await readBody(c, maxBytes));
  if (raw.trim() === "") throw new ApiError(400, "validation_error", "The request body is empty; expected a JSON object.");
  try {
    return { raw, value: JSON.parse(raw) };
  } catch (e) {
    throw new ApiError(400, "validation_error", `The request body is not valid JSON: ${e instanceof Error ? e.message : "parse error"}.`);
  }
}

/** Validates `value` against a zod schema; a failure is a 422 naming the field (`prefix` first). */
export function parseInput<S extends z.ZodType>(schema: S, value: unknown, prefix = ""): z.infer<S> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const { name, message } = describeIssue(r.error, value);
  throw new ApiError(422, name, prefix ? `${prefix} ${message}` : message);
}
