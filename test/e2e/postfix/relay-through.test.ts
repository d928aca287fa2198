/*
 * Postfix end to end THROUGH the relay: 1,000 messages are POSTed to a real `wrangler dev`
 * (fresh state, free ports) and the relay delivers them as the `mx` transport kind to a private
 * Postfix acting as the receiving MX (loopback only, catch-all virtual Maildir). Three independent
 * counts must agree: the relay's API (every recipient delivered), Postfix's log (accepted and
 * sent, nothing deferred, bounced or rejected) and the Maildir (one file per message, each for
 * the right recipient).
 *
 * How the relay reaches Postfix
 *   Recipients are user<i>@loopback-mx.test. No route matches, so DEFAULT_TRANSPORT ("smtp")
 *   takes them with the recipient domain as nexthop: the mx kind. The fixture DoH resolver
 *   (test/integration/delivery/doh-server.ts, DOH_RESOLVER_URL) answers MX 10 127.0.0.1 for that
 *   domain; MX_PORT is Postfix's port and EGRESS is "direct".
 *
 * Assumptions
 *   As postfix-mx.test.ts: Postfix installed, run as root (skipped with a message otherwise).
 *   COHORT_POSTFIX_MESSAGES overrides the count (default 1000).
 */

import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevServer, type DevServer } from "../../../scripts/lib/dev-server";
import { startDohServer, type DohServer } from "../../integration/delivery/doh-server";
import { isRoot, postfixUnavailableReason, startReceivingMx, type PostfixInstance } from "./harness";
import { buildApiMessages, describeSample, recipientStates, submitMessages } from "./relay-api";

const MESSAGES = Number(process.env.COHORT_POSTFIX_MESSAGES ?? 1000);
const DOMAIN = "loopback-mx.test";

if (!isRoot()) {
  console.warn("relay-through.test.ts: SKIPPED: Postfix instances need root (CI runs as root).");
}

describe.skipIf(!isRoot())("POST /emails → relay (wrangler dev, mx kind) → private Postfix MX", () => {
  let mx: PostfixInstance | null = null;
  let doh: DohServer | null = null;
  let relay: DevServer | null = null;

  beforeAll(async () => {
    const reason = postfixUnavailableReason();
    if (reason) throw new Error(reason);
    mx = await startReceivingMx();
    doh = await startDohServer();
    relay = await startDevServer({
      tenant: "postfix-e2e",
      // Built once: edits to the source tree during the run must not restart the Worker.
      frozen: true,
      vars: {
        DOH_RESOLVER_URL: doh.url,
        MX_PORT: String(mx.port),
        EGRESS: "direct",
        SMARTHOST: "",
        DEFAULT_TRANSPORT: "smtp",
      },
    });
  }, 180_000);

  afterAll(async () => {
    await relay?.stop();
    await doh?.close();
    await mx?.stop();
  });

  it(`delivers ${MESSAGES} messages and the API, Postfix's log and the Maildir agree`, async () => {
    if (!mx || !relay) throw new Error("not started");
    const run = Date.now().toString(36);
    const started = performance.now();
    const ids = await submitMessages(relay, buildApiMessages(MESSAGES, DOMAIN, run));
    const acceptedMs = performance.now() - started;
    expect(ids).toHaveLength(MESSAGES);
    expect(new Set(ids).size).toBe(MESSAGES);

    // Postfix: every message accepted, sent (delivered to the Maildir) and removed.
    const counts = await mx
      .waitForLog((c) => c.sent + c.deferred + c.bounced >= MESSAGES && c.removed >= MESSAGES, 150_000)
      .catch(async (e: unknown) => {
        throw new Error(
          `${e instanceof Error ? e.message : String(e)}; the API says of the first messages: ${await describeSample(relay!, ids)}`,
        );
      });
    const deliveredMs = performance.now() - started;
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

    // The relay's API: every recipient delivered (outcomes are recorded just after the 250).
    let states = await recipientStates(relay, ids);
    for (const deadline = Date.now() + 30_000; (states.delivered ?? 0) < MESSAGES && Date.now() < deadline;) {
      await new Promise((r) => setTimeout(r, 1000));
      states = await recipientStates(relay, ids);
    }
    expect(states).toEqual({ delivered: MESSAGES });

    // The Maildir: exactly one file per message, each for its own recipient.
    const files = mx.listMaildir();
    expect(files).toHaveLength(MESSAGES);
    const seqs = new Set<number>();
    for (const file of files) {
      const text = readFileSync(file, "latin1");
      const seq = Number(/^X-Cohort-Seq: (\d+)$/m.exec(text)?.[1] ?? Number.NaN);
      expect(Number.isInteger(seq)).toBe(true);
      expect(text).toMatch(new RegExp(`^Delivered-To: user${seq}@loopback-mx\\.test$`, "m"));
      expect(text).toContain(`Subject: relay e2e ${run} ${seq}`);
      seqs.add(seq);
    }
    expect(seqs.size).toBe(MESSAGES);

    console.log(
      `relay → postfix: ${MESSAGES} messages accepted by the API in ${acceptedMs.toFixed(0)} ms, all in Postfix's Maildir after ` +
        `${deliveredMs.toFixed(0)} ms (${((MESSAGES * 1000) / deliveredMs).toFixed(1)} deliveries/s); maillog: accepted=${counts.accepted} ` +
        `sent=${counts.sent} deferred=${counts.deferred} bounced=${counts.bounced} ` +
        `removed=${counts.removed}; maildir=${files.length}; API: ${JSON.stringify(states)}`,
    );
  }, 240_000);
});
