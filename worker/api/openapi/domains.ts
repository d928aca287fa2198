/**
 * The OpenAPI rows (document.ts ROUTES) of sending domains (each with its own DKIM key and the
 * DNS records to publish, and the key rotation) and of API keys.
 */
import { z } from "zod";
import type { Operation } from "./types";
import { ref } from "./shapes";
import { CreateApiKeySchema, CreateDomainSchema, UpdateApiKeySchema, UpdateDomainSchema } from "../http/domain-schemas";

const DomainRecordBody = z.object({
  record: z.string(),
  name: z.string(),
  type: z.string(),
  value: z.string(),
  ttl: z.string(),
  status: z.string(),
  priority: z.number().optional(),
});
const DomainSummary = z.object({
  id: z.string(),
  name: z.string(),
  status: z.string(),
  created_at: z.string(),
  region: z.string(),
  capabilities: z.object({ sending: z.string(), receiving: z.string() }),
  open_tracking: z.boolean(),
  click_tracking: z.boolean(),
});
const DomainBody = DomainSummary.extend({ object: z.literal("domain").optional(), records: z.array(DomainRecordBody) });

/** Sending domains, DKIM rotation, and creating, listing and revoking API keys. */
export const DOMAIN_ROUTES: Operation[] = [
  {
    method: "post",
    path: "/domains",
    summary: "Add a sending domain: its own DKIM key and the DNS records to publish (Resend-compatible)",
    operationId: "createDomain",
    auth: true,
    body: CreateDomainSchema,
    ok: { status: 201, schema: DomainBody },
    errors: [400, 401, 409, 422],
  },
  {
    method: "get",
    path: "/domains",
    summary: "List the tenant's sending domains",
    operationId: "listDomains",
    auth: true,
    ok: {
      status: 200,
      schema: z.object({ object: z.literal("list"), has_more: z.boolean(), data: z.array(DomainSummary) }),
    },
    errors: [401],
  },
  {
    method: "get",
    path: "/domains/{id}",
    summary: "A sending domain with its records and their verification status",
    operationId: "getDomain",
    auth: true,
    ok: { status: 200, schema: DomainBody },
    errors: [401, 404],
  },
  {
    method: "patch",
    path: "/domains/{id}",
    summary:
      "Change a domain's settings (every field of domains.update; receiving on or off; what the relay does not do is a 422 naming it)",
    operationId: "updateDomain",
    auth: true,
    body: UpdateDomainSchema,
    ok: { status: 200, schema: z.object({ object: z.literal("domain"), id: z.string() }) },
    errors: [400, 401, 404, 422],
  },
  {
    method: "delete",
    path: "/domains/{id}",
    summary: "Remove a sending domain and its keys",
    operationId: "removeDomain",
    auth: true,
    ok: { status: 200, schema: z.object({ object: z.literal("domain"), id: z.string(), deleted: z.boolean() }) },
    errors: [401, 404],
  },
  {
    method: "post",
    path: "/domains/{id}/verify",
    summary: "Look the domain's records up now (DNS over HTTPS)",
    operationId: "verifyDomain",
    auth: true,
    ok: { status: 200, schema: z.object({ object: z.literal("domain"), id: z.string() }) },
    errors: [401, 404],
  },
  {
    method: "post",
    path: "/relay/domains/{id}/rotate-dkim",
    summary: "Publish a second DKIM selector; it signs once verified and the old one is retired",
    operationId: "rotateDomainKey",
    auth: true,
    ok: { status: 201, schema: z.object({}).passthrough() },
    errors: [401, 404, 422],
  },
  {
    method: "post",
    path: "/api-keys",
    summary: "Create an API key (the token is shown once)",
    operationId: "createApiKey",
    auth: true,
    body: CreateApiKeySchema,
    ok: { status: 201, schema: z.object({ id: z.string(), token: z.string() }) },
    errors: [400, 401, 422],
  },
  {
    method: "get",
    path: "/api-keys",
    summary: "List the tenant's API keys (without tokens)",
    operationId: "listApiKeys",
    auth: true,
    ok: {
      status: 200,
      schema: z.object({
        object: z.literal("list"),
        has_more: z.boolean(),
        data: z.array(
          z.object({ id: z.string(), name: z.string(), created_at: z.string(), last_used_at: z.string().nullable() }),
        ),
      }),
    },
    errors: [401],
  },
  {
    method: "delete",
    path: "/api-keys/{id}",
    summary: "Revoke an API key (refused from its next request)",
    operationId: "removeApiKey",
    auth: true,
    ok: { status: 200, schema: z.object({ object: z.literal("api_key"), id: z.string(), deleted: z.boolean() }) },
    errors: [401, 404],
  },
];

/** Renaming an API key (Resend's apiKeys.update). */
export const API_KEY_UPDATE_ROUTES: Operation[] = [
  {
    method: "patch",
    path: "/api-keys/{id}",
    operationId: "updateApiKey",
    auth: true,
    summary: "Rename an API key",
    body: UpdateApiKeySchema,
    ok: { status: 200, schema: ref("api_key") },
    errors: [400, 401, 404, 422],
  },
];
