/**
 * The OpenAPI rows (document.ts ROUTES) of a tenant's settings (default one-click unsubscribe,
 * daily quota of received mail) and of its complaint rate and the brake it can set.
 */
import { z } from "zod";
import type { Operation } from "./types";
import { SettingsBody, SettingsSchema } from "../routes/settings";
import { ComplaintRateBody, ComplaintRateQuerySchema } from "../routes/complaint-rate";

/** The tenant's settings and complaint rate. */
export const SETTINGS_ROUTES: Operation[] = [
  {
    method: "get",
    path: "/relay/settings",
    summary:
      "The tenant's defaults: one-click unsubscribe (true, {topic}, or null) and its daily quota of received mail",
    operationId: "getSettings",
    auth: true,
    ok: { status: 200, schema: SettingsBody },
    errors: [401],
  },
  {
    method: "patch",
    path: "/relay/settings",
    summary:
      "Set the tenant's default one-click unsubscribe (RFC 8058) for one-recipient emails, or its daily quota of received mail",
    operationId: "updateSettings",
    auth: true,
    body: SettingsSchema,
    ok: { status: 200, schema: SettingsBody },
    errors: [400, 401, 422],
  },
  {
    method: "get",
    path: "/relay/complaint-rate",
    summary:
      "The complaint rate (email.complained / email.delivered) of the tenant and of each sending domain over the last `days`, against COMPLAINT_RATE_THRESHOLD",
    operationId: "complaintRate",
    auth: true,
    query: ComplaintRateQuerySchema,
    ok: { status: 200, schema: ComplaintRateBody },
    errors: [401, 422],
  },
  {
    method: "delete",
    path: "/relay/complaint-rate/pause",
    summary: "Operator: lift the complaint-rate brake on a tenant's bulk mail",
    operationId: "liftComplaintBrake",
    auth: true,
    query: ComplaintRateQuerySchema,
    ok: {
      status: 200,
      schema: z.object({ object: z.literal("complaint_rate_pause"), tenant: z.string(), lifted: z.boolean() }),
    },
    errors: [401, 403, 422],
  },
];
