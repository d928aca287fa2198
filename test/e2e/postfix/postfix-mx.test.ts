/*
 * Postfix end to end: the relay's own SMTP client (worker/smtp/socket.ts deliverSession over
 * the Node socket driver) delivers 1,000 messages into a private Postfix acting as the
 * receiving MX (loopback only, catch-all virtual Maildir), and three independent counts must
 * agree: the client's per-recipient results, Postfix's log, and the Maildir.
 *
 * Assumptions
 *   Postfix is installed (scripts/postfix/install.sh; `npm run test:postfix` runs it first).
 *   Instances must be started as root: when not root the suite is skipped with a message;
 *   as root, a missing Postfix is a failure, not a skip. COHORT_POSTFIX_MESSAGES overrides
 *   the message count (default 1000).
 */

import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { isRoot, postfixUnavailableReason, postfixVersion, startReceivingMx, type PostfixInstance } from "./harness";
import { buildTestMessages, deliverWithRelayClient } from "./relay-client";

// The adapter must take its sockets from the injected factory, never from the platform.
vi.mock("cloudflare:sockets", () => ({
  connect: () => {
    throw new Error("cloudflare:sockets used in a Node test");
  },
}));

const MESSAGES = Number(process.env.COHORT_POSTFIX_MESSAGES ?? 1000);
const CONCURRENCY = 10;
const PER_SESSION = 25;

if (!isRoot()) {
  console.warn("postfix-mx.test.ts: SKIPPED: Postfix instances need root (CI runs as root).");
}

describe.skipIf(!isRoot())("relay SMTP client -> private Postfix MX", () => {
  let mx: PostfixInstance | null = null;

  beforeAll(async () => {
    const reason = postfixUnavailableReason();
    if (reason) throw new Error(reason);
    mx = await startReceivingMx();
  });

  afterAll(async () => {
    await mx?.stop();
  });

  it(`delivers ${MESSAGES} messages and the counts match Postfix's log and Maildir`, async () => {
    if (!mx) throw new Error("MX did not start");
    const version = await postfixVersion();
    const messages = buildTestMessages(MESSAGES);

    const result = await deliverWithRelayClient({
      host: mx.host,
      port: mx.port,
      messages,
      concurrency: CONCURRENCY,
      messagesPerSession: PER_SESSION,
      session: { timeouts: { connectTimeoutSec: 10, rsetTimeoutSec: 10 } },
    });

    // 1. The client: every recipient delivered, no site failure, no possible duplicate.
    expect(result.byStatus).toEqual({ delivered: MESSAGES, deferred: 0, bounced: 0 });
    expect(result.recipients).toHaveLength(MESSAGES);
    for (const outcome of result.outcomes) {
      expect(outcome.siteFailure).toBeNull();
      for (const t of outcome.transactions) expect(t.possibleDuplicate).toBe(false);
    }
    expect(result.recipients.every((r) => r.source === "remote" && r.code === 250)).toBe(true);

    // 2. Postfix's log: N accepted, N sent, nothing deferred/bounced/rejected.
    const counts = await mx.waitForLog((c) => c.sent + c.deferred + c.bounced >= MESSAGES && c.removed >= MESSAGES);
    expect(counts).toMatchObject({
      accepted: MESSAGES,
      recipients: MESSAGES,
      received: MESSAGES,
      sent: MESSAGES,
      deferred: 0,
      bounced: 0,
      expired: 0,
      rejected: 0,
      removed: MESSAGES,
    });
    expect(counts.problems.filter((p) => /fatal|panic|error/.test(p))).toEqual([]);
    expect(mx.countQueueFiles()).toBe(0);

    // 3. The Maildir: exactly one file per message, each for the right recipient, dot unstuffed.
    const files = mx.listMaildir();
    expect(files).toHaveLength(MESSAGES);
    const seqs = new Set<number>();
    for (const file of files) {
      const text = readFileSync(file, "latin1");
      const seq = Number(/^X-Cohort-Seq: (\d+)$/m.exec(text)?.[1] ?? Number.NaN);
      expect(Number.isInteger(seq)).toBe(true);
      expect(text).toMatch(new RegExp(`^Delivered-To: user${seq}@example\\.test$`, "m"));
      expect(text).toMatch(/^\.a line that starts with a dot$/m);
      seqs.add(seq);
    }
    expect(seqs.size).toBe(MESSAGES);

    console.log(
      `postfix ${version}: ${MESSAGES} messages in ${result.sessions} sessions ` +
        `(${CONCURRENCY} at a time, ${PER_SESSION} per session) in ${result.elapsedMs.toFixed(0)} ms ` +
        `(${((MESSAGES * 1000) / result.elapsedMs).toFixed(0)} msg/s); maillog: ` +
        `accepted=${counts.accepted} sent=${counts.sent} deferred=${counts.deferred} ` +
        `bounced=${counts.bounced} removed=${counts.removed}; maildir=${files.length}`,
    );
  });
});
