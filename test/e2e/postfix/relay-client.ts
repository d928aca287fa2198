/*
 * Drives the relay's own SMTP client (worker/smtp/socket.ts deliverSession, with the pure core
 * in worker/smtp/core/) from Node against a real server, for load: many messages, split into
 * sessions of a few messages each (RSET between them, as the client does), run with a bounded
 * number of sessions at a time.
 *
 * Assumptions
 *   Sockets come from test/unit/smtp/node-driver.ts (createNodeConnect), never from the
 *   platform. worker/smtp/socket.ts imports "cloudflare:sockets", which does not exist in Node:
 *   a vitest test importing this module must vi.mock("cloudflare:sockets") first (the mock is
 *   hoisted). Bodies are held in memory; this is for test-sized workloads.
 */

import { createSessionConfig, type SessionConfigInput } from "../../../worker/smtp/core/config";
import type { MessageEnvelope, RecipientResult, SessionOutcome } from "../../../worker/smtp/core/types";
import { deliverSession } from "../../../worker/smtp/socket";
import { createNodeConnect } from "../../unit/smtp/node-driver";

/** A message to send: its envelope and raw (CRLF, un-stuffed) body. */
export interface LoadMessage {
  envelope: MessageEnvelope;
  body: Uint8Array;
}

/** Options for deliverWithRelayClient. */
export interface RelayClientLoadOptions {
  host: string;
  port: number;
  messages: LoadMessage[];
  /** Sessions open at once. Default 10. */
  concurrency?: number;
  /** Messages per session (RSET between them). Default 25. */
  messagesPerSession?: number;
  /** Session settings beyond heloName/remoteHost (TLS policy, timeouts, …). */
  session?: Partial<SessionConfigInput>;
}

/** What a load run produced. */
export interface RelayClientLoadResult {
  /** One outcome per session, in the order sessions were formed. */
  outcomes: SessionOutcome[];
  /** Every recipient result, flattened. */
  recipients: RecipientResult[];
  /** Recipient results by status. */
  byStatus: Record<RecipientResult["status"], number>;
  sessions: number;
  elapsedMs: number;
}

/**
 * Sends `messages` through deliverSession in sessions of `messagesPerSession`, at most
 * `concurrency` at a time, and gathers every per-recipient result. Never rejects for SMTP
 * failures (those are results); rejects only for a bug (InvariantError) or a bad option.
 */
export async function deliverWithRelayClient(options: RelayClientLoadOptions): Promise<RelayClientLoadResult> {
  const concurrency = options.concurrency ?? 10;
  const perSession = options.messagesPerSession ?? 25;
  if (!(concurrency >= 1 && perSession >= 1)) throw new Error("concurrency and messagesPerSession must be >= 1");
  const bodies = new Map<string, Uint8Array>();
  for (const m of options.messages) {
    if (bodies.has(m.envelope.id)) throw new Error(`duplicate message id ${m.envelope.id}`);
    bodies.set(m.envelope.id, m.body);
  }
  const chunks: LoadMessage[][] = [];
  for (let i = 0; i < options.messages.length; i += perSession) {
    chunks.push(options.messages.slice(i, i + perSession));
  }
  const config = createSessionConfig({
    heloName: "client.cohort.test",
    remoteHost: options.host,
    ...options.session,
  });
  const connect = createNodeConnect();
  const outcomes: SessionOutcome[] = new Array<SessionOutcome>(chunks.length);
  let next = 0;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    // Bounded: each worker takes chunks until none are left.
    while (next < chunks.length) {
      const index = next++;
      const chunk = chunks[index] ?? [];
      outcomes[index] = await deliverSession({
        hostname: options.host,
        port: options.port,
        config,
        messages: chunk.map((m) => m.envelope),
        openBody: (id) => bodyStream(bodies.get(id)),
        connect,
      });
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, chunks.length) }, worker));
  const elapsedMs = performance.now() - started;
  const recipients = outcomes.flatMap((o) => o.transactions.flatMap((t) => t.recipients));
  const byStatus: Record<RecipientResult["status"], number> = { delivered: 0, deferred: 0, bounced: 0 };
  for (const r of recipients) byStatus[r.status]++;
  return { outcomes, recipients, byStatus, sessions: chunks.length, elapsedMs };
}

/** A one-chunk stream of the body (an error stream when the id is unknown). */
function bodyStream(body: Uint8Array | undefined): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    start(controller) {
      if (!body) {
        controller.error(new Error("unknown message id"));
        return;
      }
      controller.enqueue(body);
      controller.close();
    },
  });
}

/**
 * Builds `count` test messages: one recipient each (user<i>@<domain>), headers carrying
 * X-Cohort-Seq: <i> and a unique Message-ID, and a body with a line that starts with "." (to
 * exercise dot-stuffing) and a few lines of filler up to roughly `bodyBytes`.
 */
export function buildTestMessages(
  count: number,
  options: { domain?: string; run?: string; bodyBytes?: number } = {},
): LoadMessage[] {
  const domain = options.domain ?? "example.test";
  const run = options.run ?? Date.now().toString(36);
  const filler = "The quick brown fox jumps over the lazy dog 0123456789.";
  const encoder = new TextEncoder();
  const messages: LoadMessage[] = [];
  for (let i = 0; i < count; i++) {
    const rcpt = `user${i}@${domain}`;
    const lines = [
      "From: Cohort e2e <sender@cohort.test>",
      `To: <${rcpt}>`,
      `Subject: postfix e2e ${i}`,
      `Message-ID: <e2e-${run}-${i}@cohort.test>`,
      "Date: Thu, 01 Jan 2026 00:00:00 +0000",
      `X-Cohort-Seq: ${i}`,
      "",
      `Message ${i} of ${count}.`,
      ".a line that starts with a dot",
    ];
    let size = lines.join("\r\n").length;
    for (let n = 0; size < (options.bodyBytes ?? 512) && n < 10_000; n++) {
      lines.push(filler);
      size += filler.length + 2;
    }
    const body = encoder.encode(`${lines.join("\r\n")}\r\n`);
    messages.push({
      envelope: {
        id: `m${i}`,
        mailFrom: "sender@cohort.test",
        rcptTo: [rcpt],
        sizeBytes: body.byteLength,
        eightBitMime: false,
        smtpUtf8: false,
      },
      body,
    });
  }
  return messages;
}
