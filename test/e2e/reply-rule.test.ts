/**
 * A reply rule against `wrangler dev` (issue 13, item 3): an SMTP server (smtp-server) that
 * answers the first MAIL FROM with Yahoo's throttling reply, "421 4.7.0 [TSS04] Messages from …
 * temporarily deferred due to unexpected volume or user complaints", sets off the shipped rule
 * yahoo-tss04. Observed through the API only: the suspension (GET /relay/suspensions, set by
 * the rule), the event (GET /relay/events, relay.destination.throttled), and blocked_by
 * (GET /emails/:id, reply_rule:yahoo-tss04) of a message sent while it holds; nothing reaches
 * the server until an operator lifts it, and then both messages are delivered.
 */
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { devFetch, startDevServer, type DevServer } from "../../scripts/lib/dev-server";
import { until } from "./dev-api";

const TSS04 =
  "4.7.0 [TSS04] Messages from 127.0.0.1 temporarily deferred due to unexpected volume or " +
  "user complaints - 4.16.55.1; see https://postmaster.yahooinc.com/error-codes";

let sink: SMTPServer;
let port = 0;
let mailFroms = 0;
const delivered: string[][] = [];
let server: DevServer;

beforeAll(async () => {
  sink = new SMTPServer({
    logger: false,
    disableReverseLookup: true,
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    // As Yahoo's MX hosts: the reply goes out as written, with no enhanced code added.
    hideENHANCEDSTATUSCODES: true,
    onMailFrom: (_a, _s, cb) => {
      mailFroms++;
      if (mailFroms > 1) return cb();
      return cb(Object.assign(new Error(TSS04), { responseCode: 421 }));
    },
    onData: (stream, session, cb) => {
      stream.resume();
      stream.on("end", () => {
        delivered.push(session.envelope.rcptTo.map((r) => r.address));
        cb();
      });
    },
  });
  await new Promise<void>((r) => sink.listen(0, "127.0.0.1", r));
  port = (sink.server.address() as AddressInfo).port;
  server = await startDevServer({
    tenant: "throttled",
    role: "operator",
    vars: {
      SMARTHOST: `[127.0.0.1]:${port}`,
      RELAY_TLS: "off",
      COHORT_ENV: "development",
      SCHEDULER_CONFIG: JSON.stringify({ minimal_backoff_time: 1, maximal_backoff_time: 2 }),
    },
  });
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await new Promise<void>((r) => (sink ? sink.close(() => r()) : r()));
});

async function api<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await devFetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${server.key}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as T };
}

type Rcpt = {
  email: string;
  status: string;
  blocked_by: string | null;
  last_response: { code?: number; text?: string } | null;
};
const recipient = async (id: string) => (await api<{ recipients: Rcpt[] }>("GET", `/emails/${id}`)).body.recipients[0]!;
const send = async (to: string) => {
  const r = await api<{ id: string }>("POST", "/emails", {
    from: "Shop <news@shop.example>",
    to: [to],
    subject: "Sale",
    text: "Hi",
  });
  expect(r.status).toBe(200);
  return r.body.id;
};

describe("a reply rule against wrangler dev", () => {
  it("Yahoo's TSS04 suspends the destination: the suspension, the event and blocked_by are observed, and nothing is sent until it is lifted", async () => {
    const first = await send("ann@yahoo.example");
    const deferred = await until(async () => {
      const r = await recipient(first);
      return r.status === "deferred" || r.blocked_by?.startsWith("reply_rule:") ? r : undefined;
    }, "the first attempt refused");
    expect(deferred.last_response).toMatchObject({ code: 421 });
    expect(deferred.last_response!.text).toContain("[TSS04]");

    // The suspension, set by the rule, on the destination.
    const nexthop = `[127.0.0.1]:${port}`;
    const suspensions = await api<{ data: { key: string; until: string; set_by: string | null }[] }>(
      "GET",
      "/relay/suspensions",
    );
    const held = suspensions.body.data.find((s) => s.key === `dest:smtp/${nexthop}`);
    expect(held).toMatchObject({ set_by: "reply_rule:yahoo-tss04" });
    expect(Date.parse(held!.until)).toBeGreaterThan(Date.now() + 3_500_000);

    // The event, in the feed (the same envelope webhooks get).
    const event = await until(async () => {
      const feed = await api<{
        data: {
          type: string;
          data: { email_id: string; throttle?: { rule: string; policy_key: string; suspended_until: string } };
        }[];
      }>("GET", "/relay/events?type=relay.destination.throttled");
      return feed.body.data.find((e) => e.data.email_id === first);
    }, "relay.destination.throttled in the feed");
    expect(event.data.throttle).toMatchObject({ rule: "yahoo-tss04", policy_key: `dest:smtp/${nexthop}` });

    // A message sent while it holds waits for it, and says so.
    const second = await send("bob@yahoo.example");
    const waiting = await until(async () => {
      const r = await recipient(second);
      return r.blocked_by === "reply_rule:yahoo-tss04" ? r : undefined;
    }, "blocked_by reply_rule:yahoo-tss04");
    expect(waiting.status).toBe("ready");
    await new Promise((r) => setTimeout(r, 3000)); // past the first message's retry time (1–2 s)
    expect((await recipient(first)).status).not.toBe("delivered");
    expect({ mailFroms, delivered: delivered.length }).toEqual({ mailFroms: 1, delivered: 0 });

    // Lifted by an operator: both go.
    const lifted = await api<{ deleted: boolean }>(
      "DELETE",
      `/relay/suspensions/destination/${encodeURIComponent(nexthop)}?transport=smtp`,
    );
    expect(lifted).toMatchObject({ status: 200, body: { deleted: true } });
    await until(
      async () =>
        (await recipient(first)).status === "delivered" && (await recipient(second)).status === "delivered"
          ? true
          : undefined,
      "both delivered once lifted",
    );
    expect(delivered.flat().sort()).toEqual(["ann@yahoo.example", "bob@yahoo.example"]);
  }, 90_000);
});
