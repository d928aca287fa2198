/**
 * Reply rules end to end in the Workers runtime (durable-objects/core/reply-rules.ts): a sink
 * that answers MAIL FROM with Yahoo's throttling reply ("421 4.7.0 [TSS04] … temporarily
 * deferred due to unexpected volume or user complaints", once, scripted-sinks.ts) sets off the
 * shipped rule yahoo-tss04. The destination is suspended for an hour; the recipient's blocked_by
 * says reply_rule:yahoo-tss04; relay.destination.throttled is in the event log (and published to
 * webhooks); the destination's history names the rule; and nothing more reaches the server until
 * an operator lifts the suspension.
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { callWithKey, email, eventually, getEmail, newKey, newOperatorKey } from "../helpers";
import { recipientsWhen } from "./observe";
import { feedBodyOf } from "../../../worker/db/feed";

const scripted = inject("scripted");
let key: string;
let operator: string;

beforeAll(async () => {
  key = await newKey("acme");
  operator = await newOperatorKey("ops-rr");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('tss04', ?)").bind(
      `[127.0.0.1]:${scripted.ports.tss04}`,
    ),
    env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, 'tss04.test', 'tss04')"),
  ]);
});

type Stats = { sessions: number; messages: unknown[] };
const stats = async () => (await fetch(`${scripted.statsUrl}/tss04`)).json<Stats>();

describe("a reply rule", () => {
  it("suspends the destination on Yahoo's TSS04, with the event, blocked_by and the history, until lifted", async () => {
    const res = await callWithKey(key, "POST", "/emails", email({ to: ["a@tss04.test"], subject: "throttled" }));
    expect(res.status).toBe(200);
    const { id } = await res.json<{ id: string }>();
    const [r] = await recipientsWhen(key, id, (x) => x.status === "deferred", "deferred by the 421");
    expect(r!.last_response!.code).toBe(421);
    expect(`${r!.last_response!.enhanced} ${r!.last_response!.text}`).toMatch(/^4\.7\.0 .*\[TSS04\] Messages from/);

    // The event: in the log with the rule, the key it suspended and until when, and as a webhook envelope.
    const row = await eventually(
      async () =>
        (await env.DB.prepare(
          "SELECT data FROM event_log WHERE email_id = ? AND type = 'relay.destination.throttled' AND data IS NOT NULL",
        )
          .bind(id)
          .first<{ data: string }>()) ?? undefined,
      10_000,
      "relay.destination.throttled",
    );
    const queue = `[127.0.0.1]:${scripted.ports.tss04}`;
    const data = JSON.parse(row.data) as { rule: string; policy_key: string; suspended_until: number };
    expect(data).toMatchObject({ rule: "yahoo-tss04", policy_key: `dest:tss04/${queue}` });
    expect(data.suspended_until).toBeGreaterThan(Date.now() + 3500_000);
    const envelope = await eventually(
      async () =>
        (await env.DB.prepare(
          "SELECT event_id FROM event_log WHERE email_id = ? AND event_type = 'relay.destination.throttled'",
        )
          .bind(id)
          .first<{ event_id: string }>()) ?? undefined,
      10_000,
      "webhook envelope",
    );
    expect(JSON.parse((await feedBodyOf(env.DB, envelope.event_id))!)).toMatchObject({
      type: "relay.destination.throttled",
      data: {
        email_id: id,
        recipient: "a@tss04.test",
        throttle: { rule: "yahoo-tss04", policy_key: `dest:tss04/${queue}` },
      },
    });

    // Back in the queue after the retry time (1–2 s here), it waits for the rule's suspension.
    const waiting = await eventually(
      async () => {
        const rcpt = (await getEmail(key, id)).body.recipients[0]!;
        return rcpt.blocked_by === "reply_rule:yahoo-tss04" ? rcpt : undefined;
      },
      10_000,
      "blocked_by reply_rule:yahoo-tss04",
    );
    expect(waiting.status).not.toBe("delivered");

    // The destination's history names the rule (a refusal of MAIL FROM is not a site failure:
    // the session worked, so the window's feedback is Postfix's).
    const dest = await (
      await callWithKey(operator, "GET", `/relay/destinations/tss04/${encodeURIComponent(queue)}`)
    ).json<{ history: { kind: string; reason: string | null; reply_rule: string | null }[] }>();
    expect(dest.history.filter((h) => h.reply_rule !== null)).toEqual([
      expect.objectContaining({ reply_rule: "yahoo-tss04" }),
    ]);

    // Nothing more was tried: one session, refused at MAIL FROM.
    await new Promise((done) => setTimeout(done, 2500));
    expect(await stats()).toMatchObject({ sessions: 1, messages: [] });

    // An operator lifts it: delivered on the next try (the sink refused only the first MAIL FROM).
    await env.TRANSPORT_QUEUE.getByName("tss04").setPolicy(`dest:tss04/${queue}`, null);
    await recipientsWhen(key, id, (x) => x.status === "delivered", "delivered once lifted", 20_000);
  }, 45_000);
});
