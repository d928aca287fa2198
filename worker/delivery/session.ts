/**
 * One SMTP session of the delivery stage: the entries of one batch to one nexthop, sent over a
 * single connection (RSET between messages), bodies streamed from R2.
 *
 * DESCRIPTION
 *   sessionConfigOf(env, target)   the `relay` transport kind's session settings: EHLO name,
 *                                  TLS policy (RELAY_TLS), implicit TLS (RELAY_IMPLICIT_TLS),
 *                                  AUTH from the secrets RELAY_USERNAME / RELAY_PASSWORD, and
 *                                  Postfix's default timeouts.
 *   readEnvelopes(env, ids)        the messages' envelopes, one request per Outbox shard.
 *   prepareJobs(env, jobs, known)  matches the entries' recipients with their envelopes (read
 *                                  for the batch, or here): the ones final there are not sent
 *                                  again.
 *   hasWork(prepared)              whether any prepared entry has a recipient to send.
 *   unsentParts(prepared)          the parts of entries no session ran for.
 *   runSession(env, target, prepared, options)  sends the recipients not yet final, and
 *                                  returns per entry what the session produced (deliverSession
 *                                  never rejects for network or protocol failures). options
 *                                  name the session config, the socket factory and the TLS
 *                                  name (the `mx` kind); the default is the relay kind's. With
 *                                  options.cache the session comes from (and goes back to) the
 *                                  delivery agent's connection cache.
 */
import { bodyKey, byOutbox } from "../model/ids";
import type { DeliveryEnvelope } from "../model/message";
import type { DeliverJob } from "../model/delivery";
import { createSessionConfig, type SessionConfig, type TlsPolicy } from "../smtp/core/config";
import type { MessageEnvelope, SiteFailure, TransactionResult } from "../smtp/core/types";
import { CachedSmtpSession, deliverSession, type ConnectSocket } from "../smtp/socket";
import type { SessionCache } from "./session-cache";
import type { SiteShape } from "../../durable-objects/core/site-shape";
import { sendableRcpts, type MatchedRcpt, type RelayTarget } from "./plan";
import type { PendingAcks } from "../indexing/pending-acks";
import { tokenAddress } from "../mail/verp";
import { addressTokenKey } from "../inbound/tokens";
import { settingsOf } from "../settings/settings";

/** What the session produced for one entry. */
export interface SessionPart {
  job: DeliverJob;
  matched: MatchedRcpt[];
  txn: TransactionResult | undefined;
  site: SiteFailure | null;
  /** The provider rule the destination's MX hosts matched, as the Transport DO is told of it, and the egress it went out through. */
  provider?: SiteShape | null;
  egress?: string;
  /** The MX address the session connected to, when known. */
  remoteip?: string;
  /** Why its deferred recipients wait, when a policy of the delivery stage deferred them (mta_sts, egress:<id>). */
  blockedBy?: string;
}

/** An entry with its Outbox envelope and matched recipients, ready to send. */
export interface PreparedJob {
  job: DeliverJob;
  envelope: DeliveryEnvelope | null;
  matched: MatchedRcpt[];
}

/** How a session is run besides its target (defaults: the relay kind's). */
export interface SessionOptions {
  config?: SessionConfig;
  connect?: ConnectSocket;
  tlsServerName?: string;
  /** The delivery agent's connection cache: the session is taken from it and left in it. */
  cache?: SessionCache;
  /** A provider rule's bounds (worker/net/core/providers.ts): recipients per transaction, and messages a cached connection carries. */
  rcptsPerMessage?: number;
  messagesPerSession?: number;
  /** The egress the connection leaves by, when not the deployment's: cached connections are kept apart per egress. */
  egress?: string;
}

type Secrets = { RELAY_USERNAME?: string; RELAY_PASSWORD?: string };

/** Session settings of the relay transport kind. */
export function sessionConfigOf(env: Env, target: RelayTarget): SessionConfig {
  const secrets = env as unknown as Secrets;
  const settings = settingsOf(env);
  const credentials = secrets.RELAY_USERNAME
    ? { username: secrets.RELAY_USERNAME, password: secrets.RELAY_PASSWORD ?? "" }
    : null;
  return createSessionConfig({
    heloName: settings.heloName,
    remoteHost: target.host,
    implicitTls: settings.relayImplicitTls,
    tlsPolicy: settings.relayTls satisfies TlsPolicy,
    credentials,
    timeouts: settings.smtpTimeouts,
  });
}

/** A body kept in the Outbox row, as the stream the session reads. */
function bytesStream(body: string | ArrayBuffer): ReadableStream<Uint8Array> {
  const bytes = typeof body === "string" ? new TextEncoder().encode(body) : new Uint8Array(body);
  return new ReadableStream({
    start: (c) => {
      c.enqueue(bytes);
      c.close();
    },
  });
}

function missingBody(id: string): ReadableStream<Uint8Array> {
  return new ReadableStream({ start: (c) => c.error(new Error(`body of ${id} is missing`)) });
}

/** The envelopes of messages `ids`, by id: one request per Outbox shard, each message once (carrying the shard's held `acks`). */
export async function readEnvelopes(
  env: Env,
  ids: string[],
  acks?: PendingAcks,
): Promise<Map<string, DeliveryEnvelope | null>> {
  const found = new Map<string, DeliveryEnvelope | null>();
  await Promise.all(
    [...byOutbox(new Set(ids), (id) => id)].map(async ([name, inShard]) => {
      const envelopes = await env.OUTBOX.getByName(name).envelopes(inShard, acks?.take(name));
      inShard.forEach((id, i) => found.set(id, envelopes[i] ?? null));
    }),
  );
  return found;
}

/** Matches the recipients of `jobs` with their envelopes (`known`: read for the whole batch already). */
export async function prepareJobs(
  env: Env,
  jobs: DeliverJob[],
  known?: Map<string, DeliveryEnvelope | null>,
): Promise<PreparedJob[]> {
  const missing = jobs.map((j) => j.messageId).filter((id) => !known?.has(id));
  const read = missing.length > 0 ? await readEnvelopes(env, missing) : new Map<string, DeliveryEnvelope | null>();
  return jobs.map((job) => {
    const envelope = known?.get(job.messageId) ?? read.get(job.messageId) ?? null;
    return { job, envelope, matched: sendableRcpts(job, envelope) };
  });
}

/**
 * The SMTP transactions of the prepared entries: one per entry with something to send, from the
 * message's sender (`<entry id>/r<k>` for each `rcptsPerMessage` of them when a provider rule
 * bounds recipients per message); or, when the message has a VERP return path, one per recipient
 * (`<entry id>/<idx>`), each from the recipient's own signed bounce address (mail/verp.ts).
 */
async function messagesOf(env: Env, prepared: PreparedJob[], rcptsPerMessage = 0): Promise<MessageEnvelope[]> {
  const key = prepared.some((p) => p.envelope?.returnPath) ? await addressTokenKey(env) : null;
  const out: MessageEnvelope[] = [];
  for (const { job, envelope, matched } of prepared) {
    const open = matched.filter((m) => !m.final);
    if (!envelope || open.length === 0) continue;
    const base = { sizeBytes: envelope.size, eightBitMime: true, smtpUtf8: false };
    if (!envelope.returnPath || key === null) {
      if (rcptsPerMessage <= 0 || open.length <= rcptsPerMessage) {
        out.push({ id: String(job.entryId), mailFrom: envelope.mailFrom, rcptTo: open.map((m) => m.address), ...base });
        continue;
      }
      for (let k = 0; k * rcptsPerMessage < open.length; k++) {
        out.push({
          id: `${job.entryId}/r${k}`,
          mailFrom: envelope.mailFrom,
          rcptTo: open.slice(k * rcptsPerMessage, (k + 1) * rcptsPerMessage).map((m) => m.address),
          ...base,
        });
      }
      continue;
    }
    for (const m of open) {
      const mailFrom = await tokenAddress(key, "bounces", envelope.id, m.outboxIdx!, envelope.returnPath);
      out.push({ id: `${job.entryId}/${m.outboxIdx}`, mailFrom, rcptTo: [m.address], ...base });
    }
  }
  return out;
}

/** The entry id a transaction belongs to (see messagesOf). */
function entryOf(txnId: string): string {
  const slash = txnId.indexOf("/");
  return slash < 0 ? txnId : txnId.slice(0, slash);
}

/** An entry's transactions as one (VERP sends one per recipient). */
function mergeTxns(txns: TransactionResult[]): TransactionResult | undefined {
  if (txns.length <= 1) return txns[0];
  return {
    ...txns[0]!,
    recipients: txns.flatMap((t) => t.recipients),
    possibleDuplicate: txns.some((t) => t.possibleDuplicate),
  };
}

/** Whether any prepared entry has a recipient to send. */
export function hasWork(prepared: PreparedJob[]): boolean {
  return prepared.some(({ envelope, matched }) => envelope !== null && matched.some((m) => !m.final));
}

/** The parts of entries that were not sent (no session ran). */
export function unsentParts(prepared: PreparedJob[]): SessionPart[] {
  return prepared.map(({ job, matched }) => ({ job, matched, txn: undefined, site: null }));
}

/** Runs one session for the prepared entries of one nexthop. */
export async function runSession(
  env: Env,
  target: RelayTarget,
  prepared: PreparedJob[],
  options: SessionOptions = {},
): Promise<SessionPart[]> {
  const messages = await messagesOf(env, prepared, options.rcptsPerMessage);
  if (messages.length === 0) return unsentParts(prepared);
  const byEntry = new Map(prepared.map(({ job, envelope }) => [String(job.entryId), { job, body: envelope?.body }]));
  // An entry sent as several transactions (VERP) reads its body from R2 once.
  const shared = new Map<string, Promise<ArrayBuffer | null>>();
  const txnsOf = new Map<string, number>();
  for (const m of messages) txnsOf.set(entryOf(m.id), (txnsOf.get(entryOf(m.id)) ?? 0) + 1);
  const openBody = async (id: string) => {
    const entry = byEntry.get(entryOf(id));
    if (entry?.body !== undefined) return bytesStream(entry.body);
    if (!entry) return missingBody(id);
    if ((txnsOf.get(entryOf(id)) ?? 0) > 1) {
      let p = shared.get(entryOf(id));
      if (!p)
        shared.set(
          entryOf(id),
          (p = env.BODIES.get(bodyKey(entry.job.messageId)).then((o) => (o ? o.arrayBuffer() : null))),
        );
      const bytes = await p;
      return bytes ? bytesStream(bytes) : missingBody(id);
    }
    const obj = await env.BODIES.get(bodyKey(entry.job.messageId));
    return obj ? obj.body : missingBody(id);
  };
  const request = {
    hostname: target.host,
    port: target.port,
    config: options.config ?? sessionConfigOf(env, target),
    ...(options.connect ? { connect: options.connect } : {}),
    ...(options.tlsServerName ? { tlsServerName: options.tlsServerName } : {}),
  };
  const cache = options.cache;
  const key = `${target.host}:${target.port}/${options.tlsServerName ?? ""}/${request.config.tlsPolicy}/${options.egress ?? ""}`;
  const outcome = cache
    ? await cache.run(key, () => new CachedSmtpSession(request), messages, openBody, options.messagesPerSession)
    : await deliverSession({ ...request, messages, openBody });
  return prepared.map(({ job, matched }) => ({
    job,
    matched,
    txn: mergeTxns(outcome.transactions.filter((t) => entryOf(t.messageId) === String(job.entryId))),
    site: outcome.siteFailure,
  }));
}
