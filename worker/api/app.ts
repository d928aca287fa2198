/**
 * The HTTP API: a Hono app with Resend's error shape on every failure.
 *
 * DESCRIPTION
 *   createApp()  GET /health and /unsubscribe/:token (RFC 8058 one-click links; no key), /emails (routes/emails.ts), /relay (routes/relay.ts,
 *                routes/suppressions.ts, routes/events.ts: the event feed, dead letters, replay),
 *                /webhooks (routes/webhooks.ts), Resend's /domains, /api-keys, /suppressions, /templates, /topics and
 *                /contacts/:id/topics, GET /openapi.json (openapi/document.ts) and GET /metrics (operator; routes/prometheus.ts)
 *                behind `Authorization: Bearer <key>`; one
 *                onError and one notFound build every error body through errors.ts.
 *
 *                Every answer carries X-Content-Type-Options: nosniff (a JSON error echoing input
 *                is never sniffed into HTML).
 *
 * ERRORS
 *   Unknown errors are logged with the request id and answered as a bare 500
 *   internal_server_error; no stack trace or secret ever reaches a response.
 */
import { Hono } from "hono";
import { requireApiKey } from "./http/auth";
import type { AppEnv } from "./http/context";
import { apiKeyRoutes } from "./routes/api-keys";
import { domainRotationRoutes, domainRoutes } from "./routes/domains";
import { isApiError, toErrorBody } from "../model/errors";
import { openApiDocument } from "./openapi/document";
import { complaintRoutes } from "./routes/complaints";
import { controlRoutes } from "./routes/control";
import { emailRoutes } from "./routes/emails";
import { eventRoutes, webhookDeliveryRoutes } from "./routes/events";
import { relayRoutes } from "./routes/relay";
import { adminRoutes } from "./routes/admin";
import { dashboardAssets } from "../dashboard/serve";
import { suppressionRoutes } from "./routes/suppressions";
import { webhookRoutes } from "./routes/webhooks";
import { unsubscribeRoutes } from "./routes/unsubscribe";
import { settingsRoutes } from "./routes/settings";
import { complaintRateRoutes } from "./routes/complaint-rate";
import { resendSuppressionRoutes } from "./routes/resend-suppressions";
import { templatePreviewRoutes, templateRoutes } from "./routes/templates";
import { contactTopicRoutes, topicRoutes } from "./routes/topics";
import { receivingRoutes } from "./routes/receiving";
import { emailAttachmentRoutes } from "./routes/email-attachments";
import { emailMetricsRoutes } from "./routes/email-metrics";
import { fileRoutes } from "./routes/files";
import { prometheusRoutes } from "./routes/prometheus";
import { countRefusals, flushRefusals } from "./http/refusals";

/** The HTTP API. Routes are added per resource with `app.route()`. */
export function createApp() {
  const app = new Hono<AppEnv>();
  const auth = requireApiKey();

  app.use("*", async (c, next) => {
    c.set("requestId", crypto.randomUUID());
    await next();
    try {
      c.res.headers.set("X-Content-Type-Options", "nosniff");
    } catch {
      // A response whose headers are immutable (passed through from a fetch): copied once.
      c.res = new Response(c.res.body, c.res);
      c.res.headers.set("X-Content-Type-Options", "nosniff");
    }
  });

  app.get("/health", (c) => c.json({ ok: true, service: "cohort" }));
  // One-click unsubscribe links (RFC 8058) are signed: no key.
  app.route("/unsubscribe", unsubscribeRoutes());
  // Download links (attachments, raw received mail) are signed: no key.
  app.route("/files", fileRoutes());

  // The dashboard's static files need no key (they hold no data; the page asks for one).
  app.use("/relay/dashboard/*", dashboardAssets());
  // "/x/*" also matches "/x" itself.
  const keyed = [
    "/emails/*",
    "/relay/*",
    "/webhooks/*",
    "/domains/*",
    "/api-keys/*",
    "/suppressions/*",
    "/templates/*",
    "/topics/*",
    "/contacts/*",
  ];
  for (const prefix of [...keyed, "/openapi.json", "/metrics"]) app.use(prefix, auth);
  // Refused send requests are counted for GET /metrics (http/refusals.ts).
  app.use("*", flushRefusals());
  for (const path of ["/emails", "/emails/batch", "/relay/messages/raw"]) app.use(path, countRefusals());
  app.route("/metrics", prometheusRoutes());
  app.get("/openapi.json", (c) => c.json(openApiDocument()));
  // Before /emails, whose /:id would take these paths.
  app.route("/emails/receiving", receivingRoutes());
  app.route("/emails/metrics", emailMetricsRoutes());
  app.route("/emails", emailAttachmentRoutes());
  app.route("/emails", emailRoutes());
  app.route("/relay/suppressions", suppressionRoutes());
  app.route("/relay/messages", controlRoutes());
  app.route("/relay/complaints", complaintRoutes());
  app.route("/relay/settings", settingsRoutes());
  app.route("/relay/complaint-rate", complaintRateRoutes());
  app.route("/relay/events", eventRoutes());
  app.route("/relay/webhooks", webhookDeliveryRoutes());
  app.route("/relay", relayRoutes());
  app.route("/relay", adminRoutes());
  app.route("/relay", domainRotationRoutes());
  app.route("/relay", templatePreviewRoutes());
  app.route("/webhooks", webhookRoutes());
  app.route("/domains", domainRoutes());
  app.route("/api-keys", apiKeyRoutes());
  app.route("/suppressions", resendSuppressionRoutes());
  app.route("/templates", templateRoutes());
  app.route("/topics", topicRoutes());
  app.route("/contacts", contactTopicRoutes());

  app.notFound((c) => c.json(toErrorBody(404, "not_found", "The requested endpoint was not found."), 404));

  app.onError((err, c) => {
    if (isApiError(err)) {
      return c.json(toErrorBody(err.statusCode, err.errorName, err.message), err.statusCode as 400);
    }
    console.error(JSON.stringify({ request_id: c.get("requestId"), error: String(err) }));
    return c.json(toErrorBody(500, "internal_server_error", "An unexpected error occurred."), 500);
  });

  return app;
}
