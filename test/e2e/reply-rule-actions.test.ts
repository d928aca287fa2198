/**
 * Reply-rule actions beyond suspension, against `wrangler dev` (issue 13, item 3), with rules
 * configured through SCHEDULER_CONFIG and an SMTP server (smtp-server) that answers by recipient:
 *   defer   Microsoft's "550 5.7.1 … block list (S3150)" once: the recipient is deferred (not
 *           bounced), blocked_by reply_rule:ms-blocklist, relay.destination.throttled says
 *           action "defer", and the retry is delivered;
 *   bounce  "452 4.2.2 mailbox full": bounced at the first attempt, with email.bounced and the
 *           event (action "bounce");
 *   rate    "421 4.7.0 Slow down" to MAIL FROM once: the destination is throttled to 1/h; of two
 *           later messages one goes and the other waits with blocked_by reply_rule:slow-down.
 * Observed through the API only.
 */
import type { AddressInfo } from "node:net";
import { SMTPServer } from "smtp-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevServer, type DevServer } from "../../scripts/lib/dev-server";
import { apiOf, until } from "./dev-api";

const RULES = [
  { name: "ms-blocklist", codes: [550], text: "\\(S3150\\)", action: { kind: "defer" } },
  { name: "full-is-gone", codes: [452], enhanced: "4.2.2", action: { kind: "bounce" } },
  {
    name: "slow-down",
    codes: [421],
    text: "slow down",
    action: { kind: "rate", scope: "destination", rate: "1/h", seconds: 3600 },
  },
];

let sink: SMTPServer;
let port = 0;
let server: DevServer;
const seen = new Map<string, number>();
let slowed = false;
const delivered: string[] = [];

beforeAll(async () => {
  sink = new SMTPServer({
    logger: false,
    disableReverseLookup: true,
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    hideENHANCEDSTATUSCODES: true,
    onMailFrom: (_a, session, cb) => {
      // The first message from the "slow" sender is refused as a provider does when throttling.
      if (!slowed && _a.address.startsWith("slow@")) {
        slowed = true;
        return cb(Object.assign(new Error("4.7.0 Slow down: too much mail from 127.0.0.1"), { responseCode: 421 }));
      }
      return cb();
    },
    onRcptTo: (rcpt, _s, cb) => {
      const n = (seen.get(rcpt.address) ?? 0) + 1;
      seen.set(rcpt.address, n);
      if (rcpt.address.startsWith("blocked@") && n === 1) {
        return cb(
          Object.assign(
            new Error(
              "5.7.1 Unfortunately, messages from [127.0.0.1] weren't sent. Please contact your " +
                "Internet service provider since part of their network is on our block list (S3150).",
            ),
            { responseCode: 550 },
          ),
        );
      }
      if (rcpt.address.startsWith("full@"))
        return cb(Object.assign(new Error("4.2.2 Mailbox full"), { responseCode: 452 }));
      return cb();
    },
    onData: (stream, session, cb) => {
      stream.resume();
      stream.on("end", () => {
        delivered.push(...session.envelope.rcptTo.map((r) => r.address));
        cb();
      });
    },
  });
  sink.on("error", () => {}); // a pooled connection cut when the relay stops
  await new Promise<void>((r) => sink.listen(0, "127.0.0.1", r));
  port = (sink.server.address() as AddressInfo).port;
  server = await startDevServer({
    tenant: "ruled",
    role: "operator",
    vars: {
      SMARTHOST: `[127.0.0.1]:${port}`,
      RELAY_TLS: "off",
      COHORT_ENV: "development",
      SCHEDULER_CONFIG: JSON.stringify({ minimal_backoff_time: 5, maximal_backoff_time: 6, reply_rules: RULES }),
    },
  });
}, 120_000);

afterAll(async () => {
  await server?.stop();
  await new Promise<void>((r) => (sink ? sink.close(() => r()) : r()));
});

const api = apiOf(() => server);

type Rcpt = {
  email: string;
  status: string;
  blocked_by: string | null;
  attempts?: number;
  last_response: { code?: number; text?: string } | null;
};
type Throttled = {
  type: string;
  data: { email_id: string; throttle?: { rule: string; action: string; rate?: string; policy_key: string } };
};
const recipient = async (id: string) => (await api<{ recipients: Rcpt[] }>("GET", `/emails/${id}`)).recipients[0]!;
const send = async (to: string, from = "news@shop.example") => {
  return (
    await api<{ id: string }>("POST", "/emails", { from: `Shop <${from}>`, to: [to], subject: "Hello", text: "Hi" })
  ).id;
};
const throttledOf = (id: string) =>
  until(async () => {
    const feed = await api<{ data: Throttled[] }>("GET", "/relay/events?type=relay.destination.throttled&limit=100");
    return feed.data.find((e) => e.data.email_id === id);
  }, `relay.destination.throttled of ${id}`);

describe("reply-rule actions against wrangler dev", () => {
  it("a defer rule retries a 5xx instead of bouncing it, and a bounce rule bounces a 4xx at once; each says so", async () => {
    const blocked = await send("blocked@outlook.example");
    const full = await send("full@outlook.example");
    // Deferred, not bounced: it waits out its back-off (5 s) with the rule as the reason.
    const deferred = await until(async () => {
      const r = await recipient(blocked);
      return r.blocked_by === "reply_rule:ms-blocklist" || ["deferred", "bounced", "delivered"].includes(r.status)
        ? r
        : undefined;
    }, "the 550 deferred by the rule");
    expect(deferred.blocked_by).toBe("reply_rule:ms-blocklist");
    expect(deferred.last_response).toMatchObject({ code: 550 });
    expect((await throttledOf(blocked)).data.throttle).toMatchObject({ rule: "ms-blocklist", action: "defer" });
    await until(
      async () => ((await recipient(blocked)).status === "delivered" ? true : undefined),
      "the retry delivered",
    );
    expect(seen.get("blocked@outlook.example")).toBe(2);

    const bounced = await until(async () => {
      const r = await recipient(full);
      return r.status === "bounced" ? r : undefined;
    }, "the 452 bounced by the rule");
    expect(bounced.last_response).toMatchObject({ code: 452 });
    expect(seen.get("full@outlook.example")).toBe(1);
    expect((await throttledOf(full)).data.throttle).toMatchObject({ rule: "full-is-gone", action: "bounce" });
    const events = await api<{ data: { type: string; data: { email_id: string } }[] }>(
      "GET",
      "/relay/events?type=email.bounced&limit=100",
    );
    expect(events.data.some((e) => e.data.email_id === full)).toBe(true);
  }, 90_000);

  it("a rate rule throttles the destination: one message goes, the next waits with blocked_by naming the rule", async () => {
    const first = await send("carol@yahoo.example", "slow@shop.example");
    expect((await throttledOf(first)).data.throttle).toMatchObject({
      rule: "slow-down",
      action: "rate",
      rate: "1/h",
      policy_key: `dest:smtp/[127.0.0.1]:${port}`,
    });
    // The refused message's retry takes the hour's one token; the next one waits for the next.
    await until(
      async () => ((await recipient(first)).status === "delivered" ? true : undefined),
      "the refused message delivered on retry",
    );
    const second = await send("dave@yahoo.example");
    const waiting = await until(async () => {
      const r = await recipient(second);
      return r.blocked_by === "reply_rule:slow-down" ? r : undefined;
    }, "blocked_by reply_rule:slow-down");
    expect(waiting.status).toBe("ready");
    expect(Date.parse(String((waiting as Rcpt & { blocked_until: string }).blocked_until))).toBeGreaterThan(
      Date.now() + 3_000_000,
    );
    await new Promise((r) => setTimeout(r, 2000));
    expect((await recipient(second)).status).toBe("ready");
    expect(delivered).not.toContain("dave@yahoo.example");
  }, 90_000);
});
