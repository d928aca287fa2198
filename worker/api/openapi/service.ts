/**
 * The OpenAPI rows (document.ts ROUTES) of the service itself rather than of a resource: the
 * one-click unsubscribe page and its POST and the liveness probe (the only rows without an API
 * key, with GET /files/{token} in received.ts), the development-only /relay/dev endpoints, the
 * Prometheus metrics and this document.
 */
import { z } from "zod";
import type { Operation } from "./types";

const Health = z.object({ ok: z.boolean(), service: z.string() });

/** One-click unsubscribe (RFC 8058) and health: no API key. */
export const PUBLIC_ROUTES: Operation[] = [
  {
    method: "get",
    path: "/unsubscribe/{token}",
    summary: "One-click unsubscribe link (RFC 8058; signed, no API key): a confirmation page; nothing changes",
    operationId: "unsubscribePage",
    auth: false,
    ok: { status: 200, schema: z.string(), media: "text/html" },
    errors: [404],
  },
  {
    method: "post",
    path: "/unsubscribe/{token}",
    summary:
      "One-click unsubscribe (RFC 8058 List-Unsubscribe=One-Click; signed, no API key): " +
      "email.unsubscribed once, and the address suppressed for the tenant until removed",
    operationId: "unsubscribe",
    auth: false,
    rawBody: "application/x-www-form-urlencoded",
    ok: { status: 200, schema: z.string(), media: "text/html" },
    errors: [404],
  },
  {
    method: "get",
    path: "/health",
    summary: "Liveness (no API key)",
    operationId: "health",
    auth: false,
    ok: { status: 200, schema: Health },
    errors: [],
  },
];

/** Development and test only: the mailbox catcher, the meter, the MX cache and row counts. */
export const DEV_ROUTES: Operation[] = [
  {
    method: "get",
    path: "/relay/dev/mailbox",
    summary: "Local development only: what the local SMTP catcher received",
    operationId: "devMailbox",
    auth: true,
    ok: { status: 200, schema: z.object({}).passthrough() },
    errors: [401, 404, 502],
  },
  {
    method: "get",
    path: "/relay/dev/meter",
    summary: "Development and test only, operator: the meter's counters of billable operations",
    operationId: "devMeter",
    auth: true,
    ok: { status: 200, schema: z.object({}).passthrough() },
    errors: [401, 403, 404],
  },
  {
    method: "post",
    path: "/relay/dev/meter/reset",
    summary: "Development and test only, operator: zero the meter",
    operationId: "devMeterReset",
    auth: true,
    ok: { status: 200, schema: z.object({}).passthrough() },
    errors: [401, 403, 404],
  },
  {
    method: "get",
    path: "/relay/dev/dns",
    summary: "Development and test only, operator: the isolate's MX answer cache (entries, bytes, hits, misses)",
    operationId: "devDns",
    auth: true,
    ok: { status: 200, schema: z.object({}).passthrough() },
    errors: [401, 403, 404],
  },
  {
    method: "get",
    path: "/relay/dev/rows",
    summary: "Development and test only, operator: rows held now per D1 table and per Durable Object table",
    operationId: "devRows",
    auth: true,
    ok: { status: 200, schema: z.object({}).passthrough() },
    errors: [401, 403, 404],
  },
];

/** The relay's state in Prometheus' text format, and this document. */
export const SERVICE_ROUTES: Operation[] = [
  {
    method: "get",
    path: "/metrics",
    summary: "Operator: the relay's state in Prometheus' text format (docs/deliverability.md#metrics)",
    operationId: "metrics",
    auth: true,
    ok: { status: 200, schema: z.string(), media: "text/plain" },
    errors: [401, 403],
  },
  {
    method: "get",
    path: "/openapi.json",
    summary: "This document",
    operationId: "openapi",
    auth: true,
    ok: { status: 200, schema: z.object({ openapi: z.string() }).passthrough() },
    errors: [401],
  },
];
