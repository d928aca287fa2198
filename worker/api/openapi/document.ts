/**
 * The OpenAPI 3.1 document of the HTTP API, generated from the zod schemas that validate the
 * requests plus zod schemas of the responses declared beside the rows (one module per resource
 * in this folder).
 *
 * DESCRIPTION
 *   ROUTES            one row per operation: method, path, summary, request body / query
 *                     schema, and responses. A test checks it against the app's real routes,
 *                     both ways, so a route cannot be added without documenting it.
 *   openApiDocument() builds the document (OpenAPI 3.1, whose schemas are JSON Schema
 *                     2020-12 — what z.toJSONSchema produces).
 *
 * INVARIANTS
 *   Every operation but GET /health, the unsubscribe page and GET /files/{token} requires
 *   `Authorization: Bearer <key>`; every error response uses Resend's body {statusCode, name,
 *   message}. ROUTES's order is the document's: a path's key appears where its first row stands,
 *   so the modules' runs are spread here in that order rather than one module after another.
 */
import { z } from "zod";
import { ErrorBody, type Operation, type Schema } from "./types";
import { DEV_ROUTES, PUBLIC_ROUTES, SERVICE_ROUTES } from "./service";
import { EMAIL_METRICS_ROUTES, EMAIL_ROUTES } from "./emails";
import { MESSAGE_ROUTES } from "./messages";
import { RELAY_SUPPRESSION_ROUTES, SUPPRESSION_ROUTES } from "./suppressions";
import { API_KEY_UPDATE_ROUTES, DOMAIN_ROUTES } from "./domains";
import { WEBHOOK_ROUTES } from "./webhooks";
import { EGRESS_ROUTES, POLICY_ROUTES, QUEUE_ROUTES } from "./admin";
import { SETTINGS_ROUTES } from "./settings";
import { TEMPLATE_ROUTES } from "./templates";
import { TOPIC_ROUTES } from "./topics";
import { DOWNLOAD_ROUTES, RECEIVED_ROUTES } from "./received";

/** Every operation of the API, in the document's order (see the header). */
export const ROUTES: Operation[] = [
  ...PUBLIC_ROUTES,
  ...EMAIL_ROUTES,
  ...DEV_ROUTES,
  ...RELAY_SUPPRESSION_ROUTES,
  ...DOMAIN_ROUTES,
  ...WEBHOOK_ROUTES,
  ...QUEUE_ROUTES,
  ...SETTINGS_ROUTES,
  ...POLICY_ROUTES,
  ...MESSAGE_ROUTES,
  ...EGRESS_ROUTES,
  ...SERVICE_ROUTES,
  // Resend's newer resources.
  ...SUPPRESSION_ROUTES,
  ...TEMPLATE_ROUTES,
  ...TOPIC_ROUTES,
  ...RECEIVED_ROUTES,
  ...EMAIL_METRICS_ROUTES,
  ...API_KEY_UPDATE_ROUTES,
  ...DOWNLOAD_ROUTES,
];

function jsonSchema(s: Schema): Record<string, unknown> {
  const { $schema: _drop, ...rest } = z.toJSONSchema(s, { io: "input", unrepresentable: "any" }) as Record<
    string,
    unknown
  >;
  return rest;
}

const json = (s: Schema) => ({ "application/json": { schema: jsonSchema(s) } });

function operationOf(op: Operation) {
  const parameters: Record<string, unknown>[] = [];
  for (const m of op.path.matchAll(/\{(\w+)\}/g))
    parameters.push({ name: m[1], in: "path", required: true, schema: { type: "string" } });
  if (op.query) {
    for (const [name, schema] of Object.entries(op.query.shape))
      parameters.push({ name, in: "query", required: false, schema: jsonSchema(schema as Schema) });
  }
  for (const h of op.headers ?? [])
    parameters.push({
      name: h.name,
      in: "header",
      required: false,
      description: h.description,
      schema: jsonSchema(h.schema),
    });
  const media = op.ok.media ? { [op.ok.media]: { schema: { type: "string" } } } : null;
  const responses: Record<string, unknown> = {
    [String(op.ok.status)]: { description: "Success", content: media ?? json(op.ok.schema) },
  };
  for (const status of op.errors)
    responses[String(status)] =
      media && !op.ok.jsonErrors
        ? { description: "Error (a page)", content: media }
        : { description: "Error (Resend's error body)", content: json(ErrorBody) };
  return {
    operationId: op.operationId,
    summary: op.summary,
    ...(op.auth ? {} : { security: [] }),
    ...(parameters.length ? { parameters } : {}),
    ...(op.body ? { requestBody: { required: true, content: json(op.body) } } : {}),
    ...(op.rawBody
      ? { requestBody: { required: true, content: { [op.rawBody]: { schema: { type: "string" } } } } }
      : {}),
    responses,
  };
}

/** The OpenAPI 3.1 document. */
export function openApiDocument() {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of ROUTES) (paths[op.path] ??= {})[op.method] = operationOf(op);
  return {
    openapi: "3.1.0",
    info: {
      title: "Cohort mail relay API",
      version: "0.1.0",
      description: "Resend-compatible sending API; relay-only endpoints live under /relay/.",
    },
    servers: [{ url: "http://127.0.0.1:8787", description: "npm start" }],
    security: [{ bearer: [] }],
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer", description: "An API key (stored hashed)." } },
    },
    paths,
  };
}
