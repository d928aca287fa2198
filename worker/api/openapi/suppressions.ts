/**
 * The OpenAPI rows (document.ts ROUTES) of suppressions, both views of one store: the relay's
 * /relay/suppressions (scopes all, bulk and bulk:<topic>, optional expiry) and Resend's
 * /suppressions (by id or address, and batches of up to 1,000).
 */
import { z } from "zod";
import type { Operation } from "./types";
import { deleted, list, Page, ref } from "./shapes";
import { AddSuppressionSchema, RemoveSuppressionQuerySchema, SuppressionListQuerySchema } from "../http/schemas";
import {
  BatchAddSuppressionsSchema,
  BatchRemoveSuppressionsSchema,
  ResendAddSuppressionSchema,
} from "../http/suppression-schemas";

/** A suppression as /relay/suppressions answers it. */
const RelaySuppression = z.object({
  object: z.literal("suppression"),
  address: z.string(),
  scope: z.string(),
  reason: z.string(),
  created_at: z.string(),
  expires_at: z.string().nullable(),
});
/** A suppression as Resend's /suppressions answers it. */
const Suppression = z.object({
  id: z.string(),
  email: z.string(),
  origin: z.enum(["bounce", "complaint", "manual"]),
  source_id: z.string().nullable(),
  created_at: z.string(),
  scope: z.string().describe("relay: all, bulk or bulk:<topic>"),
  reason: z.string().describe("relay: manual, bounce:<category>, complaint, unsubscribe[:<topic>]"),
  expires_at: z.string().nullable().describe("relay: when a bounce's entry lapses"),
});

/** The relay's suppressions by address and scope. */
export const RELAY_SUPPRESSION_ROUTES: Operation[] = [
  {
    method: "get",
    path: "/relay/suppressions",
    summary: "The tenant's suppressions in address order, each address's entries (one per scope) on one page",
    operationId: "listSuppressions",
    auth: true,
    query: SuppressionListQuerySchema,
    ok: {
      status: 200,
      schema: z.object({ object: z.literal("list"), has_more: z.boolean(), data: z.array(RelaySuppression) }),
    },
    errors: [401, 422],
  },
  {
    method: "post",
    path: "/relay/suppressions",
    summary:
      "Suppress an address (manually) for all the tenant's mail, its bulk mail, or one topic's, optionally until a date",
    operationId: "addSuppression",
    auth: true,
    body: AddSuppressionSchema,
    ok: { status: 201, schema: RelaySuppression },
    errors: [400, 401, 422],
  },
  {
    method: "delete",
    path: "/relay/suppressions/{address}",
    summary: "Remove an address's suppressions (every scope, or the `scope` given)",
    operationId: "removeSuppression",
    auth: true,
    query: RemoveSuppressionQuerySchema,
    ok: {
      status: 200,
      schema: z.object({
        object: z.literal("suppression"),
        address: z.string(),
        deleted: z.boolean(),
        count: z.number().int(),
      }),
    },
    errors: [401, 404, 422],
  },
];

/** Resend's suppressions (the relay's store). */
export const SUPPRESSION_ROUTES: Operation[] = [
  {
    method: "post",
    path: "/suppressions",
    operationId: "resendAddSuppression",
    auth: true,
    summary: "Suppress an address for all the tenant's mail (Resend-compatible; the relay's store)",
    body: ResendAddSuppressionSchema,
    ok: { status: 201, schema: ref("suppression") },
    errors: [400, 401, 422],
  },
  {
    method: "get",
    path: "/suppressions",
    operationId: "resendListSuppressions",
    auth: true,
    summary: "List suppressions, in address order, optionally of one origin",
    query: Page.extend({ origin: z.enum(["bounce", "complaint", "manual"]).optional() }),
    ok: { status: 200, schema: list(Suppression) },
    errors: [401, 422],
  },
  {
    method: "get",
    path: "/suppressions/{id_or_email}",
    operationId: "resendGetSuppression",
    auth: true,
    summary: "A suppression by id, or an address's (scope all first)",
    ok: { status: 200, schema: Suppression.extend({ object: z.literal("suppression") }) },
    errors: [401, 404, 422],
  },
  {
    method: "delete",
    path: "/suppressions/{id_or_email}",
    operationId: "resendRemoveSuppression",
    auth: true,
    summary: "Remove a suppression by id, or every entry of an address",
    ok: { status: 200, schema: deleted("suppression") },
    errors: [401, 404, 422],
  },
  {
    method: "post",
    path: "/suppressions/batch/add",
    operationId: "resendBatchAddSuppressions",
    auth: true,
    summary: "Suppress up to 1,000 addresses",
    body: BatchAddSuppressionsSchema,
    ok: { status: 200, schema: z.object({ data: z.array(ref("suppression")) }) },
    errors: [400, 401, 422],
  },
  {
    method: "post",
    path: "/suppressions/batch/remove",
    operationId: "resendBatchRemoveSuppressions",
    auth: true,
    summary: "Remove up to 1,000 suppressions by address or by id",
    body: BatchRemoveSuppressionsSchema,
    ok: { status: 200, schema: z.object({ data: z.array(deleted("suppression")) }) },
    errors: [400, 401, 422],
  },
];
