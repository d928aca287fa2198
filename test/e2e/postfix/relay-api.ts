/*
 * Driving a running relay (wrangler dev) over its HTTP API for the Postfix end-to-end test and
 * bench:e2e: submit many one-recipient messages with POST /emails/batch, and read back what
 * happened to them with GET /emails/:id.
 *
 * What it does
 *   buildApiMessages(n, domain, run)  n Resend-style send requests, one recipient each
 *                                     (user<i>@<domain>), header X-Cohort-Seq: <i>, a text body
 *                                     with a line that starts with "." (dot-stuffing).
 *   submitMessages(relay, messages, o)  POST /emails/batch in chunks of 100, `parallel` requests
 *                                     at a time; returns the ids in message order.
 *   recipientStates(relay, ids, o)    GET /emails/:id of every id (`parallel` at a time); returns
 *                                     the count of recipients per status.
 *   describeSample(relay, ids)        the recipients of the first few ids as JSON, for a failure
 *                                     message (never rejects).
 *
 * Errors
 *   Rejects on a non-2xx answer, with the status and body.
 */
import { pool } from "../../../worker/lib/pool";
import { devFetch } from "../../../scripts/lib/dev-server";

/** Where the relay answers and with which key. */
export interface RelayApi {
  url: string;
  key: string;
}

/** A Resend-style send request. */
export type ApiMessage = Record<string, unknown>;

/** Builds `n` one-recipient messages (see header). */
export function buildApiMessages(n: number, domain: string, run: string): ApiMessage[] {
  return Array.from({ length: n }, (_, i) => ({
    from: "Cohort e2e <sender@cohort.test>",
    to: [`user${i}@${domain}`],
    subject: `relay e2e ${run} ${i}`,
    headers: { "X-Cohort-Seq": String(i) },
    text: `Message ${i} of ${n}.\n.a line that starts with a dot\nThe quick brown fox jumps over the lazy dog.\n`,
  }));
}

/** One API call with the relay's key; throws with the status and the start of the body unless 2xx. */
export async function relayCall<T = unknown>(
  relay: RelayApi,
  method: string,
  path: string,
  body?: unknown,
): Promise<T> {
  const res = await devFetch(`${relay.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${relay.key}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path} answered ${res.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text) as T;
}

/** Submits the messages in batches of 100; returns their ids in order. */
export async function submitMessages(
  relay: RelayApi,
  messages: ApiMessage[],
  o: { parallel?: number } = {},
): Promise<string[]> {
  const chunks: ApiMessage[][] = [];
  for (let i = 0; i < messages.length; i += 100) chunks.push(messages.slice(i, i + 100));
  const answers = await pool(
    chunks.map((c) => () => relayCall(relay, "POST", "/emails/batch", c) as Promise<{ data: { id: string }[] }>),
    o.parallel ?? 2,
  );
  return answers.flatMap((a) => a.data.map((d) => d.id));
}

/** Counts the recipients of `ids` by status (GET /emails/:id each). */
export async function recipientStates(
  relay: RelayApi,
  ids: string[],
  o: { parallel?: number } = {},
): Promise<Record<string, number>> {
  const emails = await pool(
    ids.map((id) => () => relayCall(relay, "GET", `/emails/${id}`) as Promise<{ recipients: { status: string }[] }>),
    o.parallel ?? 8,
  );
  const counts: Record<string, number> = {};
  for (const e of emails) for (const r of e.recipients) counts[r.status] = (counts[r.status] ?? 0) + 1;
  return counts;
}

/** The recipients of the first three ids as JSON text (for diagnostics; never rejects). */
export async function describeSample(relay: RelayApi, ids: string[]): Promise<string> {
  try {
    const emails = await Promise.all(
      ids.slice(0, 3).map((id) => relayCall(relay, "GET", `/emails/${id}`) as Promise<{ recipients: unknown[] }>),
    );
    return JSON.stringify(emails.map((e) => e.recipients));
  } catch (e) {
    return `(could not read the API: ${e instanceof Error ? e.message : String(e)})`;
  }
}
