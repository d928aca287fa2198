/**
 * A feedback-loop complaint about a delivered recipient (POST /relay/messages/:id/complaint):
 * one email.complained event, pushed signed like every other and in the pull feed; the address
 * is suppressed for its tenant until removed (no expiry), so the next send to it is
 * email.suppressed. Once per recipient; only about a delivered recipient of the tenant's mail.
 * The same through POST /relay/complaints with an ARF report (RFC 5965) as a mailbox provider
 * sends it, the original found by the Message-ID the relay gave it.
 */
import { describe, expect, it } from "vitest";
import { callWithKey, eventually, newKey } from "../helpers";
import { recipientsWhen } from "../delivery/observe";
import { createEndpoint, envelopeOf, logWhen, newReceiver, readFeed, send } from "./hooks";

type SuppressionList = { data: { address: string; reason: string; created_at: string; expires_at: string | null }[] };

describe("complaints", () => {
  it("a complaint about a delivered recipient is email.complained once, and suppresses the address until removed", async () => {
    const key = await newKey("complaints");
    const receiver = await newReceiver();
    await createEndpoint(key, receiver.url, ["email.delivered", "email.complained", "email.suppressed"]);
    const first = await send(key, { to: ["fay@sink.test", "gus@sink.test"] });
    await recipientsWhen(key, first, (r) => r.status === "delivered", "delivery");

    const complain = (body: unknown, k = key, id = first) =>
      callWithKey(k, "POST", `/relay/messages/${id}/complaint`, body);
    const res = await complain({ recipient: "FAY@sink.test", feedback_type: "abuse" });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      object: "complaint",
      email_id: first,
      recipient: "FAY@sink.test",
      feedback_type: "abuse",
      duplicate: false,
    });
    const again = await complain({ recipient: "fay@sink.test" });
    expect(await again.json()).toMatchObject({ duplicate: true });

    const log = await logWhen(
      receiver,
      (l) => l.some((d) => envelopeOf(d).type === "email.complained"),
      "the complaint event",
    );
    const pushed = log.map(envelopeOf).filter((e) => e.type === "email.complained");
    expect(pushed).toHaveLength(1);
    expect(pushed[0]!.data).toMatchObject({
      email_id: first,
      recipient: "fay@sink.test",
      terminal: false,
      complaint: { feedback_type: "abuse" },
    });
    const feed = await readFeed(key, "&type=email.complained");
    expect(feed.map((e) => e.data.recipient)).toEqual(["fay@sink.test"]);
    // Resend's last_event, from the Outbox record and (once indexed) in the list.
    expect((await (await callWithKey(key, "GET", `/emails/${first}`)).json<{ last_event: string }>()).last_event).toBe(
      "complained",
    );
    await eventually(
      async () => {
        const list = await (
          await callWithKey(key, "GET", "/emails?limit=10")
        ).json<{ data: { id: string; last_event: string }[] }>();
        return list.data.find((e) => e.id === first)?.last_event === "complained" ? true : undefined;
      },
      30_000,
      "last_event complained in the index",
    ); // behind the classify queue: generous on a shared, busy machine

    const list = await (
      await callWithKey(key, "GET", "/relay/suppressions?address=fay@sink.test")
    ).json<SuppressionList>();
    expect(list.data).toEqual([
      expect.objectContaining({ address: "fay@sink.test", reason: "complaint", expires_at: null }),
    ]);
    expect(
      (await (await callWithKey(key, "GET", "/relay/suppressions?address=gus@sink.test")).json<SuppressionList>()).data,
    ).toEqual([]);

    const second = await send(key, { to: "fay@sink.test" });
    const rs = await recipientsWhen(key, second, (r) => r.status !== "incoming", "classification of the second send");
    expect(rs[0]!.status).toBe("suppressed");
  });

  it("refuses a complaint about someone who is not a recipient, about mail not delivered, or about another tenant's mail", async () => {
    const key = await newKey("complaints-refused");
    const id = await send(key, { to: ["hal@sink.test", "reject-ivy@sink.test"] });
    await recipientsWhen(key, id, (r) => r.status === "delivered" || r.status === "bounced", "the outcomes");
    const complain = (body: unknown, k = key) => callWithKey(k, "POST", `/relay/messages/${id}/complaint`, body);
    expect((await complain({ recipient: "stranger@sink.test" })).status).toBe(422);
    expect((await complain({ recipient: "reject-ivy@sink.test" })).status).toBe(422);
    expect((await complain({ recipient: "not an address" })).status).toBe(422);
    expect((await complain({ recipient: "hal@sink.test", feedback_type: "not-spam" })).status).toBe(422);
    expect((await complain({ recipient: "hal@sink.test" }, await newKey("someone-else"))).status).toBe(404);
  });

  it("an ARF report names the original by its Message-ID and the recipient by Original-Rcpt-To", async () => {
    const key = await newKey("complaints-arf");
    const id = await send(key, { to: ["kim@sink.test", "lou@sink.test"] });
    await recipientsWhen(key, id, (r) => r.status === "delivered", "delivery");
    const messageId =
      (await (await callWithKey(key, "GET", `/relay/messages/${id}`)).json<{ message_id?: string }>()).message_id ??
      `<${id}@acme.test>`;
    const arf = (type: string, mid = messageId) =>
      [
        "From: <fbl@isp.example>",
        "To: <abuse@acme.test>",
        "Subject: Abuse report",
        "MIME-Version: 1.0",
        'Content-Type: multipart/report; report-type=feedback-report; boundary="b1"',
        "",
        "--b1",
        "Content-Type: text/plain",
        "",
        "An abuse report.",
        "",
        "--b1",
        "Content-Type: message/feedback-report",
        "",
        `Feedback-Type: ${type}`,
        "User-Agent: FBL/1.0",
        "Version: 1",
        "Original-Rcpt-To: <kim@sink.test>",
        "",
        "--b1",
        "Content-Type: text/rfc822-headers",
        "",
        "From: <no-reply@acme.test>",
        "To: <kim@sink.test>, <lou@sink.test>",
        `Message-ID: ${mid}`,
        "Subject: Hi",
        "",
        "--b1--",
        "",
      ].join("\r\n");
    const post = (body: string, k = key) =>
      callWithKey(k, "POST", "/relay/complaints", body, { "content-type": "message/rfc822" });

    const res = await post(arf("abuse"));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      object: "complaint",
      email_id: id,
      feedback_type: "abuse",
      recipients: [{ recipient: "kim@sink.test", result: "ok" }],
    });
    expect(await (await post(arf("abuse"))).json()).toMatchObject({
      recipients: [{ recipient: "kim@sink.test", result: "duplicate" }],
    });
    const list = await eventually(
      async () => {
        const l = await (
          await callWithKey(key, "GET", "/relay/suppressions?address=kim@sink.test")
        ).json<SuppressionList>();
        return l.data.length > 0 ? l : undefined;
      },
      10_000,
      "the complaint's suppression",
    );
    expect(list.data).toEqual([expect.objectContaining({ reason: "complaint", expires_at: null })]);

    // A Message-ID the sender set is found through the index.
    const custom = await send(key, {
      to: ["kim@sink.test", "mo@sink.test"],
      headers: { "Message-ID": "<order-42@shop.acme.test>" },
    });
    await recipientsWhen(key, custom, (r) => r.status === "delivered" || r.status === "suppressed", "the outcomes");
    const viaIndex = await eventually(
      async () => {
        const r = await post(
          arf("fraud", "<order-42@shop.acme.test>").replace(
            "Original-Rcpt-To: <kim@sink.test>",
            "Original-Rcpt-To: <mo@sink.test>",
          ),
        );
        return r.status === 200 ? r.json() : undefined;
      },
      10_000,
      "the custom Message-ID in the index",
    );
    expect(viaIndex).toEqual({
      object: "complaint",
      email_id: custom,
      feedback_type: "fraud",
      recipients: [{ recipient: "mo@sink.test", result: "ok" }],
    });

    expect((await post(arf("not-spam"))).status).toBe(422);
    expect((await post(arf("abuse", "<someone-elses@isp.example>"))).status).toBe(422);
    expect((await post("Subject: not a report\r\n\r\nhello\r\n")).status).toBe(422);
    expect((await post(arf("abuse"), await newKey("another-tenant"))).status).toBe(404);
  });
});
