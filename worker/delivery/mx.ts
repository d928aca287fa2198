/**
 * The `mx` transport kind of the delivery stage: a nexthop that is a plain domain. Its mail
 * hosts come from an MX lookup over DNS-over-HTTPS (worker/net/mx.ts); the hosts are tried in
 * preference order within the same attempt, and the first one that gets past the connection,
 * greeting, EHLO and TLS (no site failure) decides the entries' outcome.
 *
 * DESCRIPTION
 *   egressPathOf(value, secrets)   EGRESS "direct" (or empty) | "socks5://host:port" → the
 *                                  EgressPath for createEgressConnect (credentials from the
 *                                  secrets EGRESS_USERNAME / EGRESS_PASSWORD); throws otherwise.
 *   mxSettingsOf(env, owner?)      resolver URL (DOH_RESOLVER_URL), port (MX_PORT, default 25)
 *                                  and socket factory (EGRESS) of the mx kind; `owner` (the
 *                                  delivery stage) shares its DNS look-ups under way, never
 *                                  another's (lib/shared-cache.ts).
 *   createMxLookup(settings)       resolveMx through the isolate's cache (mx-cache.ts): an answer
 *                                  is reused until its DNS TTL runs out, across invocations.
 *   egressIdOf(env)                the egress's id for pickup policies and warm-up plans.
 *   runMxSessions(env, hosts, prepared, settings, cache?, rule?)  the sessions to each host in
 *                                  turn, until one has no site failure (or the last one has
 *                                  failed), within a provider rule's bounds; each host is
 *                                  connected to at its A record's address when the resolver
 *                                  gives one (cached 5 minutes), which the parts report as
 *                                  `remoteip`; else by name.
 *   With an MTA-STS policy (sts: worker/tls-policy/) in `enforce`, only the MX hosts its mx
 *                                  patterns allow are tried, each with STARTTLS required and the
 *                                  certificate verified for the host name; a delivery that cannot
 *                                  meet it is deferred with blocked_by mta_sts, never sent in clear.
 *                                  In `testing` delivery goes on as usual. Every session to a
 *                                  domain with a TLS-RPT record is counted (success, or the
 *                                  failure's result type) in the stage's tally.
 *   lookupFailureParts(prepared, resolution)  the parts of a lookup that ended in `bounce` (null
 *                                  MX 5.1.10, NXDOMAIN 5.1.2, no address 5.4.4: every sendable
 *                                  recipient bounced) or `defer` (DNS trouble: deferred).
 *
 * INVARIANTS
 *   A failed lookup is never a site failure: a `defer` from the resolver is a plain deferral
 *   without negative feedback (the destination's hosts were never tried, so nothing is known
 *   about them; Postfix's smtp(8) likewise defers a DNS failure per message, not per site).
 *   AUTH credentials are never offered to MX hosts; TLS is opportunistic and verified against
 *   the MX host name (a failed handshake falls back to plaintext, as in Postfix's "may" level).
 */
import { createEgressConnect, type EgressPath } from "../net/socks5";
import { DEFAULT_DOH_URL, resolveAddress, resolveMx } from "../net/mx";
import type { MxResolution } from "../net/core/mx";
import type { MxHost } from "../net/core/mx-hosts";
import { mxCache } from "./mx-cache";
import { SharedCache } from "../lib/shared-cache";
import { createSessionConfig, type SessionConfig } from "../smtp/core/config";
import type { TransactionResult } from "../smtp/core/types";
import type { ConnectSocket } from "../smtp/socket";
import { runSession, unsentParts, type PreparedJob, type SessionPart } from "./session";
import type { SessionCache } from "./session-cache";
import type { ProviderRule } from "../net/core/providers";
import { settingsOf } from "../settings/settings";
import { planDelivery } from "../tls-policy/core/mta-sts";
import { resultTypeOf } from "../tls-policy/core/tlsrpt";
import type { StsInfo } from "../tls-policy/sts";
import type { TlsRptTally } from "../tls-policy/tlsrpt";

/** The SMTP port of MX hosts (RFC 5321). */
export const DEFAULT_MX_PORT = 25;

/** How the mx kind resolves and connects. */
export interface MxSettings {
  resolverUrl: string;
  port: number;
  connect: ConnectSocket;
  /** The egress the connections leave by, when it is not the deployment's one (an egress pool's member): part of the connection cache's key. */
  egress?: string;
  /** Whose look-ups under way its own callers share (a delivery agent; lib/shared-cache.ts). */
  owner: object;
}

/** Resolves a domain's mail hosts (cached by the answer's TTL, mx-cache.ts). */
export type MxLookup = (domain: string) => Promise<MxResolution>;

type EgressSecrets = { EGRESS_USERNAME?: string; EGRESS_PASSWORD?: string };

/** The egress path an EGRESS value names; throws for a value it cannot read. */
export function egressPathOf(value: string | undefined, secrets: EgressSecrets): EgressPath {
  const v = (value ?? "").trim();
  if (v === "" || v === "direct") return { kind: "direct" };
  const m = /^socks5:\/\/(?:\[([^\]]+)\]|([^\s:/[\]]+)):(\d{1,5})\/?$/.exec(v);
  const port = m ? Number(m[3]) : 0;
  if (!m || !(port > 0 && port < 65536))
    throw new Error(`EGRESS must be "direct" or "socks5://host:port", not ${JSON.stringify(v)}`);
  const credentials = secrets.EGRESS_USERNAME
    ? { username: secrets.EGRESS_USERNAME, password: secrets.EGRESS_PASSWORD ?? "" }
    : null;
  return { kind: "socks5", hostname: (m[1] ?? m[2])!, port, credentials };
}

/** The egress's id, as pickup policies and warm-up plans name it: "direct", or the SOCKS5 bridge's "host:port". */
export function egressIdOf(env: Pick<Env, "EGRESS">): string {
  const path = egressPathOf(settingsOf(env).egress, {} as EgressSecrets);
  return path.kind === "direct" ? "direct" : `${path.hostname}:${path.port}`;
}

/** The mx kind's settings from the environment; `owner` shares its look-ups under way (a new one by default). */
export function mxSettingsOf(env: Env, owner: object = {}): MxSettings {
  const settings = settingsOf(env);
  const port = settings.mxPort;
  if (port === null) throw new Error(`MX_PORT must be a TCP port, not ${JSON.stringify(env.MX_PORT)}`);
  const connect = createEgressConnect(egressPathOf(settings.egress, env as unknown as EgressSecrets));
  return { resolverUrl: settings.dohResolverUrl, port, connect, owner };
}

/** A lookup function answering from the isolate's cache while the answer's TTL lasts. */
export function createMxLookup(settings: Pick<MxSettings, "resolverUrl" | "owner">): MxLookup {
  return (domain) =>
    mxCache.lookup(
      `${settings.resolverUrl} ${domain.toLowerCase()}`,
      settings.owner,
      () => resolveMx(domain, { resolverUrl: settings.resolverUrl }),
      Date.now(),
    );
}

/** How long an MX host's address is reused (ms). */
const ADDRESS_TTL_MS = 300_000;
/** MX hosts' addresses (null: unknown), per isolate. */
const addresses = new SharedCache<string | null>();

/** An MX host's IPv4 address (resolveAddress), cached per isolate for ADDRESS_TTL_MS; null when unknown. */
function addressOf(settings: Pick<MxSettings, "resolverUrl" | "owner">, host: string): Promise<string | null> {
  const { resolverUrl } = settings;
  const now = Date.now();
  return addresses.lookup(
    `${resolverUrl ?? ""} ${host.toLowerCase()}`,
    settings.owner,
    () => resolveAddress(host, { ...(resolverUrl ? { resolverUrl } : {}) }).catch(() => null),
    now,
    () => now + ADDRESS_TTL_MS,
  );
}

/** Session settings for one MX host: no AUTH, opportunistic STARTTLS (required when a provider rule says so). */
function mxConfigOf(env: Env, host: string, requireTls: boolean): SessionConfig {
  return createSessionConfig({
    heloName: settingsOf(env).heloName,
    remoteHost: host,
    implicitTls: false,
    tlsPolicy: requireTls ? "required" : "opportunistic",
    credentials: null,
    timeouts: settingsOf(env).smtpTimeouts,
  });
}

/** What MTA-STS and TLS-RPT need of a delivery to a domain. */
export interface StsContext {
  info: StsInfo | null;
  tally: TlsRptTally;
}

/** The TLS failure of an enforced session (STARTTLS missing or refused, a handshake or certificate failure), or null. */
function enforcedTlsFailure(parts: SessionPart[]): string | null {
  const site = parts.find((p) => p.site)?.site;
  if (site && /^4\.7\./.test(site.dsnStatus)) return site.reason;
  const local = parts
    .flatMap((p) => p.txn?.recipients ?? [])
    .find((r) => r.source === "local" && /^4\.7\.[45]$/.test(r.enhanced ?? ""));
  return local?.text ?? null;
}

/** The parts of an enforced delivery that failed: deferred, blocked_by mta_sts, saying why. */
function stsDeferred(parts: SessionPart[], domain: string, why: string): SessionPart[] {
  const text = `MTA-STS policy of ${domain} (enforce): ${why}; not sent in clear`;
  return parts.map((p) => ({
    ...p,
    blockedBy: "mta_sts",
    ...(p.site ? { site: { ...p.site, reason: text } } : {}),
    ...(p.txn
      ? { txn: { ...p.txn, recipients: p.txn.recipients.map((r) => (r.status === "deferred" ? { ...r, text } : r)) } }
      : {}),
  }));
}

/** Parts for a delivery the policy forbids before any connection: every open recipient deferred. */
function stsRefusedParts(prepared: PreparedJob[], domain: string, why: string): SessionPart[] {
  return stsDeferred(
    lookupFailureParts(prepared, { kind: "defer", code: 451, enhanced: "4.7.5", text: why, expiresAtMs: 0 } as never),
    domain,
    why,
  );
}

/** Tries the hosts in order; the first without a site failure decides (see header). A provider rule's bounds apply to each session. */
export async function runMxSessions(
  env: Env,
  hosts: MxHost[],
  prepared: PreparedJob[],
  settings: MxSettings,
  cache?: SessionCache,
  rule?: ProviderRule,
  sts?: StsContext,
): Promise<SessionPart[]> {
  let last: SessionPart[] | null = null;
  const bounds = {
    ...(rule?.recipients_per_message ? { rcptsPerMessage: rule.recipients_per_message } : {}),
    ...(rule?.messages_per_session ? { messagesPerSession: rule.messages_per_session } : {}),
  };
  const info = sts?.info ?? null;
  const plan = planDelivery(
    info?.entry.policy ?? null,
    hosts.map((h) => h.host),
  );
  if (plan.mode === "enforce" && plan.hosts.length === 0) {
    for (const h of plan.excluded) sts?.tally.add(info, "validation-failure", h);
    return stsRefusedParts(
      prepared,
      info!.domain,
      `none of its MX hosts (${plan.excluded.join(", ")}) matches the policy's mx patterns (${info!.entry.policy!.mx.join(", ")})`,
    );
  }
  for (const { host } of hosts.filter((h) => plan.hosts.includes(h.host))) {
    const requireTls = rule?.require_tls === true || plan.requireTls;
    const options = {
      config: mxConfigOf(env, host, requireTls),
      connect: settings.connect,
      tlsServerName: host,
      ...(cache ? { cache } : {}),
      ...bounds,
      ...(settings.egress ? { egress: settings.egress } : {}),
    };
    // Connected by its address when the resolver gives one, so the report can name it (remoteip);
    // TLS is still verified against the host name.
    const ip = await addressOf(settings, host);
    const sent = await runSession(env, { host: ip ?? host, port: settings.port }, prepared, options);
    let parts = ip ? sent.map((p) => ({ ...p, remoteip: ip })) : sent;
    if (info?.rua || plan.mode !== "none") {
      const txn = parts.find((p) => p.txn)?.txn;
      const failure = plan.mode === "enforce" ? enforcedTlsFailure(parts) : (txn?.tlsProblem ?? null);
      if (failure) sts?.tally.add(info, resultTypeOf(failure), host, ip ?? "");
      else if (txn?.tls)
        sts?.tally.add(info, plan.excluded.includes(host) ? "validation-failure" : "success", host, ip ?? "");
      if (plan.mode === "enforce" && failure) parts = stsDeferred(parts, info!.domain, `${host}: ${failure}`);
    }
    const site = parts.find((p) => p.site)?.site;
    if (!site) return parts;
    console.warn(JSON.stringify({ warning: "deliver: MX host failed, trying the next", host, reason: site.reason }));
    last = parts;
  }
  return last ?? unsentParts(prepared);
}

/** The parts of a lookup that ended in a bounce or a deferral (no site failure). */
export function lookupFailureParts(
  prepared: PreparedJob[],
  resolution: Exclude<MxResolution, { kind: "hosts" }>,
): SessionPart[] {
  const status = resolution.kind === "bounce" ? "bounced" : "deferred";
  return prepared.map(({ job, matched }) => {
    const recipients = matched
      .filter((m) => !m.final && m.outboxIdx !== null)
      .map(
        (m) =>
          ({
            rcpt: m.address,
            code: resolution.code,
            enhanced: resolution.enhanced,
            text: resolution.text,
            status,
            source: "local",
          }) as const,
      );
    const txn: TransactionResult = {
      messageId: String(job.entryId),
      recipients,
      remoteHost: "",
      tls: false,
      possibleDuplicate: false,
    };
    return { job, matched, txn, site: null };
  });
}
