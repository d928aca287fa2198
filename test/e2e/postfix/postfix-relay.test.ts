/*
 * The relaying half of the harness, as bench:e2e uses it: the relay's SMTP client submits
 * messages to a private Postfix whose relayhost is Postfix's smtp-sink; the sink's counter and
 * Postfix's log must both show every message. Skipped (with a message) when not root.
 */

import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  isRoot,
  postfixUnavailableReason,
  startRelayingPostfix,
  startSmtpSink,
  type PostfixInstance,
  type SmtpSink,
} from "./harness";
import { buildTestMessages, deliverWithRelayClient } from "./relay-client";

vi.mock("cloudflare:sockets", () => ({
  connect: () => {
    throw new Error("cloudflare:sockets used in a Node test");
  },
}));

const MESSAGES = 200;

if (!isRoot()) {
  console.warn("postfix-relay.test.ts: SKIPPED: Postfix instances need root (CI runs as root).");
}

describe.skipIf(!isRoot())("relay SMTP client -> private Postfix -> smtp-sink", () => {
  let sink: SmtpSink | null = null;
  let relay: PostfixInstance | null = null;

  beforeAll(async () => {
    const reason = postfixUnavailableReason();
    if (reason) throw new Error(reason);
    sink = await startSmtpSink();
    relay = await startRelayingPostfix({ relayhost: { host: sink.host, port: sink.port } });
  });

  afterAll(async () => {
    await relay?.stop();
    await sink?.stop();
  });

  it(`relays ${MESSAGES} messages and the sink and Postfix's log agree`, async () => {
    if (!sink || !relay) throw new Error("sink or relay did not start");
    const result = await deliverWithRelayClient({
      host: relay.host,
      port: relay.port,
      messages: buildTestMessages(MESSAGES, { domain: "example.net" }),
      concurrency: 5,
      messagesPerSession: 20,
    });
    expect(result.byStatus).toEqual({ delivered: MESSAGES, deferred: 0, bounced: 0 });
    expect(await sink.waitForMessages(MESSAGES, 60_000)).toBe(MESSAGES);
    const counts = await relay.waitForLog((c) => c.sent + c.deferred + c.bounced >= MESSAGES);
    expect(counts).toMatchObject({ accepted: MESSAGES, received: MESSAGES, sent: MESSAGES, deferred: 0, bounced: 0 });
    // Nothing arrives twice.
    expect(sink.messages()).toBe(MESSAGES);
  });
});
