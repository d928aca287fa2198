/**
 * Webhook endpoints, in the shape Resend's SDK expects (`resend.webhooks.*`).
 *
 * DESCRIPTION
 *   POST   /webhooks                           { endpoint, events[] } → { object, id, signing_secret }
 *   GET    /webhooks                           cursor pagination → { object: "list", has_more, data }
 *   GET    /webhooks/:id                       { object, id, created_at, status, endpoint, events }
 *   PATCH  /webhooks/:id                       { endpoint?, events?, status? } → { object, id }
 *   DELETE /webhooks/:id                       { object, id, deleted: true }
 *   POST   /webhooks/:id/signing-secret/rotate → { object, id, signing_secret }; the previous
 *                                              secret keeps signing for 24 h (two signatures).
 *   Endpoint URLs pass the SSRF guard (worker/net/core/ssrf.ts); http: and loopback are
 *   allowed only when COHORT_ENV is development or test. The signing secret (`whsec_…`) is shown
 *   only when created or rotated; it is stored encrypted (worker/lib/secrets.ts).
 *
 * ERRORS
 *   422 validation_error for a refused URL or unknown event type; 404 not_found for another
 *   tenant's or a missing endpoint.
 */
import { Hono, type Context } from "hono";
import {
  deleteEndpoint,
  getEndpoint,
  insertEndpoint,
  listEndpoints,
  rotateEndpointSecret,
  updateEndpoint,
  type EndpointRow,
} from "../../db/webhooks";
import { checkEndpointUrl, LOCAL_DEVELOPMENT } from "../../net/core/ssrf";
import { secretsKey, sealSecret } from "../../lib/secrets";
import { generateWebhookSecret } from "../../webhooks/sign";
import { type AppEnv } from "../http/context";
import { parseInput, readJson } from "../http/body";
import { ApiError } from "../../model/errors";
import { CreateWebhookSchema, UpdateWebhookSchema, WebhookListQuerySchema } from "../http/schemas";
import { settingsOf } from "../../settings/settings";

/** How long a rotated-out secret keeps signing. */
const ROTATION_OVERLAP_MS = 24 * 3600 * 1000;

const notFound = () => new ApiError(404, "not_found", "Webhook not found.");

/** The endpoint URL, normalised, or a 422 naming why it is refused. */
function checkedUrl(c: Context<AppEnv>, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ApiError(422, "validation_error", "Invalid `endpoint`: not a URL.");
  }
  const local = settingsOf(c.env).local;
  const verdict = checkEndpointUrl(url, local ? LOCAL_DEVELOPMENT : {});
  if (!verdict.ok) throw new ApiError(422, "validation_error", `Invalid \`endpoint\`: ${verdict.detail}.`);
  return url.toString();
}

function newSecret(): string {
  return generateWebhookSecret((n) => crypto.getRandomValues(new Uint8Array(n)));
}

function view(row: EndpointRow) {
  return {
    object: "webhook" as const,
    id: row.id,
    created_at: new Date(row.created_at).toISOString(),
    status: row.status,
    endpoint: row.endpoint,
    events: row.events === null ? null : (JSON.parse(row.events) as string[]),
  };
}

/** The /webhooks routes (mounted behind the API key middleware). */
export function webhookRoutes() {
  const r = new Hono<AppEnv>();

  r.post("/", async (c) => {
    const body = parseInput(CreateWebhookSchema, (await readJson(c, 64 * 1024)).value);
    const endpoint = checkedUrl(c, body.endpoint);
    const secret = newSecret();
    const id = crypto.randomUUID();
    const sealed = await sealSecret(await secretsKey(c.env), secret);
    await insertEndpoint(c.env.DB, {
      id,
      tenant_id: c.get("tenant"),
      endpoint,
      events: JSON.stringify(body.events),
      status: "enabled",
      secret_enc: sealed,
      created_at: Date.now(),
    });
    return c.json({ object: "webhook", id, signing_secret: secret }, 201);
  });

  r.get("/", async (c) => {
    const q = parseInput(WebhookListQuerySchema, c.req.query());
    if (q.after && q.before)
      throw new ApiError(422, "validation_error", "`after` and `before` cannot be used together.");
    const page = await listEndpoints(c.env.DB, c.get("tenant"), q);
    return c.json({ object: "list", has_more: page.hasMore, data: page.rows.map(view) });
  });

  r.get("/:id", async (c) => {
    const row = await getEndpoint(c.env.DB, c.get("tenant"), c.req.param("id"));
    if (!row) throw notFound();
    return c.json(view(row));
  });

  r.patch("/:id", async (c) => {
    const body = parseInput(UpdateWebhookSchema, (await readJson(c, 64 * 1024)).value);
    const patch = {
      ...(body.endpoint ? { endpoint: checkedUrl(c, body.endpoint) } : {}),
      ...(body.events ? { events: JSON.stringify(body.events) } : {}),
      ...(body.status ? { status: body.status } : {}),
    };
    if (!(await updateEndpoint(c.env.DB, c.get("tenant"), c.req.param("id"), patch, Date.now()))) throw notFound();
    return c.json({ object: "webhook", id: c.req.param("id") });
  });

  r.delete("/:id", async (c) => {
    if (!(await deleteEndpoint(c.env.DB, c.get("tenant"), c.req.param("id")))) throw notFound();
    return c.json({ object: "webhook", id: c.req.param("id"), deleted: true });
  });

  r.post("/:id/signing-secret/rotate", async (c) => {
    const secret = newSecret();
    const now = Date.now();
    const sealed = await sealSecret(await secretsKey(c.env), secret);
    if (
      !(await rotateEndpointSecret(
        c.env.DB,
        c.get("tenant"),
        c.req.param("id"),
        sealed,
        now + ROTATION_OVERLAP_MS,
        now,
      ))
    )
      throw notFound();
    return c.json({ object: "webhook", id: c.req.param("id"), signing_secret: secret });
  });

  return r;
}
