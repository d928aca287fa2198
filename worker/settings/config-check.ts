/**
 * Fail closed: what a production worker refuses to run without.
 *
 * DESCRIPTION
 *   configProblems(env)  the problems with the deployment's secrets, by name only (never a value):
 *                        outside COHORT_ENV development and test, WEBHOOK_SECRETS_KEY must be set
 *                        and be 32 bytes of base64 (it seals webhook signing secrets at rest; the
 *                        key written in the source serves development and tests only), and
 *                        DKIM_KEYS, when set, must be a JSON array. Empty when all is well.
 *   notConfigured(problems)  the 503 every request gets meanwhile (Resend's error shape).
 *   servedFromEdge(request, env)  the 503 a development or test Worker answers a request that came
 *                        through Cloudflare's edge (it carries CF-Ray, which the edge sets and
 *                        wrangler dev does not; CF-Connecting-IP is no sign, wrangler dev sets it
 *                        too): a plain `wrangler deploy` of the top-level configuration runs in
 *                        development mode, with the operator's DKIM keys for any tenant,
 *                        unverified senders and the source's own sealing key. Null otherwise.
 *   developmentMailProblem(head, env)  the same for mail: why a development Worker takes no
 *                        message whose first header field is Email Routing's Received line
 *                        (the caller throws, so the sender tries again), or null.
 *
 * INVARIANTS
 *   Development and test have no required secret (npm start runs on embedded defaults), and
 *   never serve the world.
 */
import { settingsOf } from "./settings";

type SecretsEnv = { COHORT_ENV: string; WEBHOOK_SECRETS_KEY?: string; DKIM_KEYS?: string };

/** Whether `env` runs with development defaults (see header). */
export function isLocal(env: object): boolean {
  return settingsOf(env).local;
}

function base64Bytes(text: string): number | null {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text.trim())) return null;
  try {
    return atob(text.trim()).length;
  } catch {
    return null;
  }
}

/** The deployment's configuration problems (see header). */
export function configProblems(env: Env): string[] {
  const e = env as unknown as SecretsEnv;
  if (isLocal(e)) return [];
  const out: string[] = [];
  if (!e.WEBHOOK_SECRETS_KEY)
    out.push(
      "WEBHOOK_SECRETS_KEY is not set (npm run setup:cloudflare, or: wrangler secret put WEBHOOK_SECRETS_KEY --env production)",
    );
  else if (base64Bytes(e.WEBHOOK_SECRETS_KEY) !== 32)
    out.push("WEBHOOK_SECRETS_KEY must be 32 random bytes in base64 (openssl rand -base64 32)");
  if (e.DKIM_KEYS) {
    let ok = false;
    try {
      ok = Array.isArray(JSON.parse(e.DKIM_KEYS));
    } catch {
      ok = false;
    }
    if (!ok) out.push("DKIM_KEYS is set but is not a JSON array of keys");
  }
  return out;
}

/** The answer to every request while the deployment is misconfigured. */
export function notConfigured(problems: string[]): Response {
  const message = `The relay is not configured: ${problems.join("; ")}.`;
  return Response.json(
    { statusCode: 503, name: "application_error", message },
    { status: 503, headers: { "x-content-type-options": "nosniff" } },
  );
}

/** What a development Worker answers to the world (see the header). */
const AT_THE_EDGE =
  'This relay runs in development mode (COHORT_ENV is not "production") and does not serve requests through Cloudflare\'s edge: ' +
  "deploy it with `wrangler deploy --env production` (npm run deploy), which fails closed without its secrets.";

/** See the header. */
export function servedFromEdge(request: Request, env: object): Response | null {
  if (!isLocal(env) || !request.headers.has("cf-ray")) return null;
  return Response.json(
    { statusCode: 503, name: "application_error", message: AT_THE_EDGE },
    { status: 503, headers: { "x-content-type-options": "nosniff" } },
  );
}

/** See the header. */
export function developmentMailProblem(head: string, env: object): string | null {
  if (!isLocal(env)) return null;
  const first = head.replace(/\r\n[ \t]+/g, " ").split(/\r?\n/, 1)[0] ?? "";
  if (!/^received:.*\bby [a-z0-9.-]*(cloudflare-email\.net|email\.cloudflare\.net)\b/i.test(first)) return null;
  return "this relay runs in development mode and takes no mail from Email Routing; deploy it with wrangler deploy --env production";
}
