/**
 * One-click unsubscribe (RFC 8058): the signed link a send request's `unsubscribe` puts in
 * List-Unsubscribe. No API key: the token is the authority (mail/verp.ts, kind "unsubscribe",
 * naming the email and its one recipient).
 *
 * DESCRIPTION
 *   GET  /unsubscribe/:token   a small confirmation page with a button that POSTs to the same URL.
 *                              Nothing changes on GET: link scanners follow links.
 *   POST /unsubscribe/:token   what a mailbox provider sends (`List-Unsubscribe=One-Click`), or
 *                              the page's button: records the unsubscribe once
 *                              (Outbox.afterDelivery), which emits email.unsubscribed (webhooks,
 *                              feed, the message's history) and suppresses the address for the
 *                              tenant until removed. Again: the same answer, nothing new.
 *
 * ERRORS
 *   404 (a page) for a token whose signature does not verify or an email that no longer exists.
 */
import { Hono, type Context } from "hono";
import { outboxOf } from "../../model/ids";
import { addressTokenKey } from "../../inbound/tokens";
import { readTokenAddress } from "../../mail/verp";
import { type AppEnv } from "../http/context";

const HEADERS = {
  "content-type": "text/html; charset=utf-8",
  "cache-control": "no-store",
  "x-robots-tag": "noindex",
  "referrer-policy": "no-referrer",
  "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
};

function page(c: Context<AppEnv>, status: 200 | 404, title: string, body: string): Response {
  const html =
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">` +
    `<title>${title}</title><style>body{font:16px system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem}</style></head>` +
    `<body><h1>${title}</h1>${body}</body></html>`;
  return c.body(html, status, HEADERS);
}

async function target(env: Env, token: string): Promise<{ emailId: string; idx: number } | null> {
  const t = await readTokenAddress(await addressTokenKey(env), `unsubscribe+${token}`);
  return t?.kind === "unsubscribe" ? t : null;
}

const GONE = "<p>This unsubscribe link is not valid, or the email it belongs to is no longer kept.</p>";

/** The one-click unsubscribe routes, mounted at /unsubscribe (no API key). */
export function unsubscribeRoutes() {
  const r = new Hono<AppEnv>();
  r.get("/:token", async (c) => {
    if (!(await target(c.env, c.req.param("token")))) return page(c, 404, "Link not valid", GONE);
    return page(
      c,
      200,
      "Unsubscribe",
      `<p>Stop receiving these emails?</p>` +
        `<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click"><button type="submit">Unsubscribe</button></form>`,
    );
  });
  r.post("/:token", async (c) => {
    const t = await target(c.env, c.req.param("token"));
    if (!t) return page(c, 404, "Link not valid", GONE);
    const res = await outboxOf(c.env, t.emailId).afterDelivery(t.emailId, null, {
      kind: "unsubscribe",
      idx: t.idx,
      method: "one-click",
    });
    if (res.result !== "ok" && res.result !== "duplicate") return page(c, 404, "Link not valid", GONE);
    return page(c, 200, "You are unsubscribed", "<p>You will not receive these emails any more.</p>");
  });
  return r;
}
