/**
 * A hard bounce suppresses the address for its tenant (expiry per bounce category), and the
 * next submission to it ends `suppressed` with an email.suppressed event instead of a delivery.
 */
import { describe, expect, it } from "vitest";
import { callWithKey, newKey } from "../helpers";
import { recipientsWhen } from "../delivery/observe";
import { createEndpoint, envelopeOf, logWhen, newReceiver, send } from "./hooks";

type SuppressionList = { data: { address: string; reason: string; created_at: string; expires_at: string | null }[] };

describe("suppressions from hard bounces", () => {
  it("adds a 550 5.1.1 recipient for 30 days, and the next send to it is email.suppressed", async () => {
    const key = await newKey("bouncy");
    const receiver = await newReceiver();
    await createEndpoint(key, receiver.url, ["email.bounced", "email.suppressed", "email.delivered"]);
    const first = await send(key, { to: ["reject-dan@sink.test", "eve@sink.test"] });
    await recipientsWhen(key, first, (r) => r.status === "bounced" || r.status === "delivered", "the bounce");
    await logWhen(receiver, (l) => l.some((d) => envelopeOf(d).type === "email.bounced"), "the bounce event");

    const list = await (
      await callWithKey(key, "GET", "/relay/suppressions?address=reject-dan@sink.test")
    ).json<SuppressionList>();
    expect(list.data).toHaveLength(1);
    const entry = list.data[0]!;
    expect(entry).toMatchObject({ address: "reject-dan@sink.test", reason: "bounce:invalid_recipient" });
    const ttlDays = (Date.parse(entry.expires_at!) - Date.parse(entry.created_at)) / 86_400_000;
    expect(ttlDays).toBeCloseTo(30, 5);
    // Only the bounced address, and only for this tenant.
    expect(
      (await (await callWithKey(key, "GET", "/relay/suppressions?address=eve@sink.test")).json<SuppressionList>()).data,
    ).toEqual([]);
    expect(
      (await (await callWithKey(await newKey("elsewhere"), "GET", "/relay/suppressions")).json<SuppressionList>()).data,
    ).toEqual([]);

    const second = await send(key, { to: "reject-dan@sink.test" });
    const rs = await recipientsWhen(key, second, (r) => r.status !== "incoming", "classification of the second send");
    expect(rs[0]!.status).toBe("suppressed");
    const log = await logWhen(
      receiver,
      (l) => l.some((d) => envelopeOf(d).type === "email.suppressed"),
      "the email.suppressed event",
    );
    const suppressed = log.map(envelopeOf).find((e) => e.type === "email.suppressed")!;
    expect(suppressed.data).toMatchObject({ email_id: second, recipient: "reject-dan@sink.test", terminal: true });
  });
});
