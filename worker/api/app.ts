import { Hono } from "hono";
import { isApiError, toErrorBody } from "./errors";

export type Vars = { requestId: string };

/** The HTTP API. Routes are added per resource with `app.route()`. */
export function createApp() {
  const app = new Hono<{ Bindings: Env; Variables: Vars }>();

  app.use("*", async (c, next) => {
    c.set("requestId", crypto.randomUUID());
    await next();
  });

  app.get("/health", (c) => c.json({ ok: true, service: "cohort" }));

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
