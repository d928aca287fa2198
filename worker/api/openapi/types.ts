/**
 * What one row of the OpenAPI table (document.ts ROUTES) says about an operation, and Resend's
 * error body every error response uses.
 */
import { z } from "zod";

export type Schema = z.ZodType;
export interface Operation {
  method: "get" | "post" | "put" | "patch" | "delete";
  path: string;
  summary: string;
  operationId: string;
  auth: boolean;
  body?: Schema;
  /** A body that is not JSON: its media type (sent as a string). */
  rawBody?: string;
  query?: z.ZodObject;
  headers?: { name: string; schema: Schema; description: string }[];
  /** `media`: a response that is not JSON (its errors are the same media type, unless `jsonErrors`). */
  ok: { status: number; schema: Schema; media?: string; jsonErrors?: boolean };
  errors: number[];
}

/** Resend's error body. */
export const ErrorBody = z.object({ statusCode: z.number().int(), name: z.string(), message: z.string() });
