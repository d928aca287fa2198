/**
 * Shared helpers of the Workers-runtime integration tests: call the Worker directly (not through
 * SELF, which slows down quadratically within a file), create API keys, poll with a deadline.
 */
import { createExecutionContext, env, runInDurableObject, waitOnExecutionContext } from "cloudflare:test";
import { outboxName, shardOf } from "../../worker/model/ids";
import worker from "../../worker";
import { hashApiKey, insertApiKey } from "../../worker/db/api-keys";
import { setKeyRole } from "../../worker/db/admin";
import { settingsOf } from "../../worker/settings/settings";

/** Calls the Worker's fetch handler and waits for its waitUntil work. */
export async function call(path: string, init?: RequestInit): Promise<Response> {
  const ctx = createExecutionContext();
  const req = new Request(`http://relay.test${path}`, init) as Request<unknown, IncomingRequestCfProperties>;
  const res = await worker.fetch(req, env, ctx);
  await waitOnExecutionContext(ctx);
  return res;
}

/** Calls with a bearer key and, when given, a JSON body. */
export function callWithKey(
  key: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  const init: RequestInit = {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
  };
  if (body !== undefined) {
    const text = typeof body === "string" ? body : JSON.stringify(body);
    init.body = text;
    // As an HTTP client sends it (the send path reads a small body with its key: send-reads.ts).
    (init.headers as Record<string, string>)["content-length"] ??= String(new TextEncoder().encode(text).byteLength);
  }
  return call(path, init);
}

/** A new API key for `tenant`. */
export function newKey(tenant: string): Promise<string> {
  return insertApiKey(env.DB, tenant, "test");
}

/** A new operator key (the admin API's) for `tenant`. */
export async function newOperatorKey(tenant: string): Promise<string> {
  const key = await newKey(tenant);
  await setKeyRole(env.DB, await hashApiKey(key), "operator");
  return key;
}

/** Polls `probe` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function eventually<T>(
  probe: () => Promise<T | undefined>,
  timeoutMs = 5000,
  what = "condition",
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A minimal valid send request. */
export function email(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { from: "Acme <no-reply@acme.test>", to: "ann@example.com", subject: "Hello", text: "Hi there", ...overrides };
}

/** GET /emails/:id as JSON (status checked by the caller through `status`). */
export async function getEmail(
  key: string,
  id: string,
): Promise<{
  status: number;
  body: Record<string, unknown> & { recipients: { email: string; status: string; blocked_by: string | null }[] };
}> {
  const res = await callWithKey(key, "GET", `/emails/${id}`);
  return { status: res.status, body: await res.json() };
}

/** Waits until every recipient of the email has left `incoming`. */
export function classified(key: string, id: string, timeoutMs = 5000) {
  return eventually(
    async () => {
      const { body } = await getEmail(key, id);
      return body.recipients.every((r) => r.status !== "incoming") ? body : undefined;
    },
    timeoutMs,
    `classification of ${id}`,
  );
}

/** Rows of an Outbox shard's table matching `where` (test inspection of DO SQLite). */
export function outboxCount(shard: number, table: string, where = "1"): Promise<number> {
  return runInDurableObject(
    env.OUTBOX.getByName(outboxName(shard)),
    (_o, state) => state.storage.sql.exec<{ n: number }>(`SELECT count(*) AS n FROM ${table} WHERE ${where}`).one().n,
  );
}

/**
 * Waits until the classify consumer has caught up on every shard (no due unclassified message,
 * no unforwarded event), so no queue work is still running when the test file's runtime closes.
 */
export async function settle(timeoutMs = 15_000): Promise<void> {
  const shards = settingsOf(env).outboxShards;
  await eventually(
    async () => {
      for (let s = 0; s < shards; s++) {
        if ((await outboxCount(s, "event")) > 0) return undefined;
        if ((await outboxCount(s, "message", "waiting = 1 AND queued_event IS NOT NULL")) > 0) return undefined; // email.queued kept in the row
        if (
          (await outboxCount(
            s,
            "message",
            `unclassified = 1 AND state = 'open' AND (scheduled_at IS NULL OR scheduled_at <= ${Date.now()})`,
          )) > 0
        )
          return undefined;
      }
      return true;
    },
    timeoutMs,
    "the classify queue to settle",
  );
}

/** A stored message's exact bytes: kept in its Outbox row (small bodies) or in R2. */
export async function storedBody(id: string): Promise<Uint8Array> {
  const outbox = env.OUTBOX.getByName(outboxName(shardOf(id)));
  const inline = (await outbox.envelope(id))?.body;
  if (inline !== undefined)
    return typeof inline === "string" ? new TextEncoder().encode(inline) : new Uint8Array(inline);
  return new Uint8Array(await (await env.BODIES.get(`mess/${id}`))!.arrayBuffer());
}

/** Whether a message's body is gone: no R2 object, and none kept in its Outbox row. */
export async function bodyGone(id: string): Promise<boolean> {
  if ((await env.BODIES.head(`mess/${id}`)) !== null) return false;
  return (await env.OUTBOX.getByName(outboxName(shardOf(id))).envelope(id))?.body === undefined;
}
