/**
 * One SMTP session of the delivery stage: the entries of one batch to one nexthop, sent over a
 * single connection (RSET between messages), bodies streamed from R2.
 *
 * DESCRIPTION
 *   sessionConfigOf(env, target)   the `relay` transport kind's session settings: EHLO name,
 *                                  TLS policy (RELAY_TLS), implicit TLS (RELAY_IMPLICIT_TLS),
 *                                  AUTH from the secrets RELAY_USERNAME / RELAY_PASSWORD, and
 *                                  Postfix's default timeouts.
 *   runSession(env, target, items) reads each entry's envelope from its Outbox, sends the
 *                                  recipients not yet final there, and returns per entry what
 *                                  the session produced (deliverSession never rejects for
 *                                  network or protocol failures).
 */
import { bodyKey } from "../../durable-objects/storage/outbox-ids";
import type { DeliverJob } from "../../durable-objects/transport-queue";
import { createSessionConfig, type SessionConfig, type TlsPolicy } from "../smtp/core/config";
import type { MessageEnvelope, SiteFailure, TransactionResult } from "../smtp/core/types";
import { deliverSession } from "../smtp/socket";
import { outboxOf } from "./classify-message";
import { sendableRcpts, type MatchedRcpt, type RelayTarget } from "./deliver-plan";

/** What the session produced for one entry. */
export interface SessionPart {
  job: DeliverJob;
  matched: MatchedRcpt[];
  txn: TransactionResult | undefined;
  site: SiteFailure | null;
}

type Secrets = { RELAY_USERNAME?: string; RELAY_PASSWORD?: string };

/** Session settings of the relay transport kind. */
export function sessionConfigOf(env: Env, target: RelayTarget): SessionConfig {
  const secrets = env as unknown as Secrets;
  const policy = (["off", "opportunistic", "required"] as const).find((p) => p === env.RELAY_TLS) ?? "opportunistic";
  const credentials = secrets.RELAY_USERNAME ? { username: secrets.RELAY_USERNAME, password: secrets.RELAY_PASSWORD ?? "" } : null;
  return createSessionConfig({
    heloName: env.HELO_NAME || "cohort.localhost",
    remoteHost: target.host,
    implicitTls: env.RELAY_IMPLICIT_TLS === "true",
    tlsPolicy: policy satisfies TlsPolicy,
    credentials,
  });
}

function missingBody(id: string): ReadableStream<Uint8Array> {
  return new ReadableStream({ start: (c) => c.error(new Error(`body of ${id} is missing`)) });
}

/** Runs one session for the jobs of one nexthop. */
export async function runSession(env: Env, target: RelayTarget, jobs: DeliverJob[]): Promise<SessionPart[]> {
  const envelopes = await Promise.all(jobs.map((j) => outboxOf(env, j.messageId).envelope(j.messageId)));
  const parts = jobs.map((job, i) => ({ job, envelope: envelopes[i] ?? null, matched: sendableRcpts(job, envelopes[i] ?? null) }));
  const messages: MessageEnvelope[] = parts.flatMap(({ job, envelope, matched }) => {
    const rcptTo = matched.filter((m) => !m.final).map((m) => m.address);
    if (!envelope || rcptTo.length === 0) return [];
    return [{ id: String(job.entryId), mailFrom: envelope.mailFrom, rcptTo, sizeBytes: envelope.size, eightBitMime: true, smtpUtf8: false }];
  });
  if (messages.length === 0) return parts.map(({ job, matched }) => ({ job, matched, txn: undefined, site: null }));
  const byEntry = new Map(jobs.map((j) => [String(j.entryId), j]));
  const outcome = await deliverSession({
    hostname: target.host,
    port: target.port,
    config: sessionConfigOf(env, target),
    messages,
    openBody: async (id) => {
      const job = byEntry.get(id);
      const obj = job ? await env.BODIES.get(bodyKey(job.messageId)) : null;
      return obj ? obj.body : missingBody(id);
    },
  });
  return parts.map(({ job, matched }) => ({
    job, matched, txn: outcome.transactions.find((t) => t.messageId === String(job.entryId)), site: outcome.siteFailure,
  }));
}
