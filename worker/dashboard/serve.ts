/**
 * Serves the operator dashboard's static files under /relay/dashboard (no API key: the files
 * hold no data; the page asks for the key and sends it with each API call).
 *
 * DESCRIPTION
 *   dashboardAssets()  Hono middleware for "/relay/dashboard/*": GET /relay/dashboard (and
 *                      /relay/dashboard/) → index.html, /relay/dashboard/app.js, /app.css, and
 *                      the modules app.js imports (lib.js, views-resend.js, views-settings.js); any
 *                      other path falls through (to the API key check and the 404).
 *   Responses carry a strict Content-Security-Policy (same-origin scripts, styles and API
 *   calls only), no-referrer and no caching beyond revalidation.
 */
import type { MiddlewareHandler } from "hono";
import { APP_CSS, APP_JS, INDEX_HTML, LIB_JS, VIEWS_RESEND_JS, VIEWS_SETTINGS_JS } from "./assets";

const FILES: Record<string, { body: string; type: string }> = {
  "/relay/dashboard": { body: INDEX_HTML, type: "text/html; charset=utf-8" },
  "/relay/dashboard/": { body: INDEX_HTML, type: "text/html; charset=utf-8" },
  "/relay/dashboard/app.js": { body: APP_JS, type: "text/javascript; charset=utf-8" },
  "/relay/dashboard/app.css": { body: APP_CSS, type: "text/css; charset=utf-8" },
  "/relay/dashboard/lib.js": { body: LIB_JS, type: "text/javascript; charset=utf-8" },
  "/relay/dashboard/views-resend.js": { body: VIEWS_RESEND_JS, type: "text/javascript; charset=utf-8" },
  "/relay/dashboard/views-settings.js": { body: VIEWS_SETTINGS_JS, type: "text/javascript; charset=utf-8" },
};

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; " +
  "form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/** The dashboard's static files (see header). */
export function dashboardAssets(): MiddlewareHandler {
  return async (c, next) => {
    const file = c.req.method === "GET" || c.req.method === "HEAD" ? FILES[c.req.path] : undefined;
    if (!file) return next();
    return new Response(c.req.method === "HEAD" ? null : file.body, {
      headers: {
        "content-type": file.type,
        "content-security-policy": CSP,
        "referrer-policy": "no-referrer",
        "x-content-type-options": "nosniff",
        "cache-control": "no-cache",
      },
    });
  };
}
