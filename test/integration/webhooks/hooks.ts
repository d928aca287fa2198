/**
 * Helpers of the webhooks tests: drive the receivers (receiver.ts, through the control API that
 * setup.ts started), create endpoints, send mail, read the feed, wait with a deadline.
 */
import { inject } from "vitest";
import { callWithKey, email, eventually } from "../helpers";

const control = inject("receivers").url;

/** A delivery as the receiver recorded it. */
export type Delivery = { headers: Record<string, string>; body: string; status: number; at: number };

/** A receiver started for one test. */
export interface TestReceiver {
  id: string;
  url: string;
  script: (answers: { status: number; retryAfter?: string; headers?: Record<string, string> }[]) => Promise<void>;
  setDefault: (status: number, delayMs?: number) => Promise<void>;
  down: () => Promise<void>;
  up: () => Promise<void>;
  log: () => Promise<Delivery[]>;
}

async function ctl(path: string, method: string, body?: unknown): Promise<Response> {
  const res = await fetch(`${control}${path}`, {
    method,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (res.status >= 300) throw new Error(`receiver control ${method} ${path}: ${res.status} ${await res.text()}`);
  return res;
}

/** Starts a fresh receiver. */
export async function newReceiver(): Promise<TestReceiver> {
  const { id, port } = await (await ctl("/receivers", "POST")).json<{ id: string; port: number }>();
  return {
    id,
    url: `http://127.0.0.1:${port}/hook`,
    script: async (answers) => void (await ctl(`/receivers/${id}/script`, "PUT", answers)),
    setDefault: async (status, delayMs) => void (await ctl(`/receivers/${id}/default`, "PUT", { status, delayMs })),
    down: async () => void (await ctl(`/receivers/${id}/down`, "POST")),
    up: async () => void (await ctl(`/receivers/${id}/up`, "POST")),
    log: async () => (await ctl(`/receivers/${id}/log`, "GET")).json<Delivery[]>(),
  };
}

/** Creates a webhook endpoint; returns its id and secret. */
export async function createEndpoint(
  key: string,
  url: string,
  events: string[] = [
    "email.sent",
    "email.delivered",
    "email.delivery_delayed",
    "email.bounced",
    "email.failed",
    "email.suppressed",
    "email.canceled",
  ],
): Promise<{ id: string; secret: string }> {
  const res = await callWithKey(key, "POST", "/webhooks", { endpoint: url, events });
  if (res.status !== 201) throw new Error(`POST /webhooks: ${res.status} ${await res.text()}`);
  const body = await res.json<{ id: string; signing_secret: string }>();
  return { id: body.id, secret: body.signing_secret };
}

/** Sends one email; returns its id. */
export async function send(key: string, overrides: Record<string, unknown>): Promise<string> {
  const res = await callWithKey(key, "POST", "/emails", email(overrides));
  if (res.status !== 200) throw new Error(`POST /emails: ${res.status} ${await res.text()}`);
  return (await res.json<{ id: string }>()).id;
}

/** An envelope as pushed (parsed body). */
export type Pushed = {
  type: string;
  created_at: string;
  data: { email_id: string; recipient: string; [k: string]: unknown };
};

/** The parsed envelope of a delivery. */
export function envelopeOf(d: Delivery): Pushed {
  return JSON.parse(d.body) as Pushed;
}

/** Waits until the receiver's log satisfies `done`; returns the log. */
export function logWhen(
  r: TestReceiver,
  done: (log: Delivery[]) => boolean,
  what: string,
  timeoutMs = 30_000,
): Promise<Delivery[]> {
  return eventually(
    async () => {
      const log = await r.log();
      return done(log) ? log : undefined;
    },
    timeoutMs,
    what,
  );
}

/** Distinct webhook-ids among the successful (2xx) deliveries. */
export function deliveredIds(log: Delivery[]): Set<string> {
  return new Set(log.filter((d) => d.status >= 200 && d.status < 300).map((d) => d.headers["webhook-id"]!));
}

/** Every page of GET /relay/events for the key. */
export async function readFeed(
  key: string,
  query = "",
): Promise<{ id: string; type: string; created_at: string; data: Record<string, unknown> }[]> {
  const items: { id: string; type: string; created_at: string; data: Record<string, unknown> }[] = [];
  let after = "";
  for (;;) {
    const res = await callWithKey(key, "GET", `/relay/events?limit=100${after ? `&after=${after}` : ""}${query}`);
    if (res.status !== 200) throw new Error(`GET /relay/events: ${res.status} ${await res.text()}`);
    const page = await res.json<{
      has_more: boolean;
      data: { id: string; type: string; created_at: string; data: Record<string, unknown> }[];
    }>();
    items.push(...page.data);
    if (!page.has_more || page.data.length === 0) return items;
    after = page.data[page.data.length - 1]!.id;
  }
}
