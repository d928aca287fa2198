/**
 * The MTA-STS policy fetch (RFC 8461 3.3) through the SSRF guard, over a socket.
 *
 * DESCRIPTION
 *   fetchStsPolicy(env, domain)  GET https://mta-sts.<domain>/.well-known/mta-sts.txt: the URL
 *       passes checkEndpointUrl (core/ssrf.ts), the host is resolved over DoH (DOH_RESOLVER_URL)
 *       and its address passes checkResolvedAddress, then the socket goes to that very address
 *       and TLS is started with expectedServerHostname mta-sts.<domain>: the address checked is
 *       the address used (no DNS rebinding between the two, which fetch() cannot promise), and
 *       the certificate must be valid for the policy host (3.3: "PKIX-validated"). The port is
 *       MTA_STS_PORT (443; other values for local runs and tests). Answers { policy } or
 *       { error, kind }: "webpki" when TLS failed, "invalid" for a policy that does not parse,
 *       "fetch" for everything else (no address, refused by the guard, HTTP errors, redirects,
 *       timeouts). Workers may not open sockets to Cloudflare's own addresses (a policy host behind
 *       Cloudflare, common for mta-sts.<domain>): when the socket cannot connect, the policy is
 *       fetched with fetch() instead, through the same guard as webhooks (checkEndpointUrl, then
 *       resolvedTarget's DoH check of every address), redirects not followed; Cloudflare's edge
 *       then verifies the certificate (WebPKI) as fetch() always does.
 *
 * INVARIANTS
 *   Nothing is fetched from an address the guard refused; redirects are never followed; the read
 *   stops at MAX_POLICY_BYTES (core/http.ts) and after FETCH_TIMEOUT_MS.
 */
import { connect } from "cloudflare:sockets";
import { checkEndpointUrl, checkResolvedAddress, LOCAL_DEVELOPMENT } from "../net/core/ssrf";
import { resolveAddress } from "../net/mx";
import { resolvedTarget } from "../net/fetch-guard";
import { MAX_POLICY_BYTES, policyRequest, readPolicyResponse } from "./core/http";
import { parsePolicy, type StsPolicy } from "./core/mta-sts";
import { settingsOf } from "../settings/settings";

/** The whole fetch's time limit (RFC 8461 3.3 suggests a short one). */
export const FETCH_TIMEOUT_MS = 10_000;

export type FetchResult = { policy: StsPolicy } | { error: string; kind: "fetch" | "invalid" | "webpki" };

const describe = (e: unknown) => (e instanceof Error ? e.message || e.name : String(e));

async function readAll(readable: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const reader = readable.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > MAX_POLICY_BYTES + 16 * 1024) {
      void reader.cancel().catch(() => undefined);
      break;
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out.subarray(0, Math.min(total, at));
}

async function fetchOver(ip: string, port: number, host: string): Promise<FetchResult> {
  const tcp = connect({ hostname: ip, port }, { secureTransport: "starttls", allowHalfOpen: false });
  try {
    await tcp.opened;
  } catch (e) {
    return { error: `connect to ${host} (${ip}:${port}): ${describe(e)}`, kind: "fetch" };
  }
  const tls = tcp.startTls({ expectedServerHostname: host });
  try {
    await tls.opened;
    const writer = tls.writable.getWriter();
    await writer.write(new TextEncoder().encode(policyRequest(host)));
    writer.releaseLock();
  } catch (e) {
    void tls.close().catch(() => undefined);
    return { error: `TLS with ${host}: ${describe(e)}`, kind: "webpki" };
  }
  let bytes: Uint8Array;
  try {
    bytes = await readAll(tls.readable);
  } catch (e) {
    void tls.close().catch(() => undefined);
    // workerd reports a certificate it refused on the first read after the handshake.
    const text = describe(e);
    return {
      error: `TLS with ${host}: ${text}`,
      kind: /tls|ssl|certificate|handshake/i.test(text) ? "webpki" : "fetch",
    };
  }
  void tls.close().catch(() => undefined);
  const answer = readPolicyResponse(bytes);
  if ("error" in answer) return answer;
  const policy = parsePolicy(new TextDecoder().decode(answer.body));
  return "error" in policy ? { error: policy.error, kind: "invalid" } : { policy };
}

/** The fetch() path (see the header), for a host the socket could not reach. */
async function fetchViaFetch(env: Env, url: URL): Promise<FetchResult> {
  const resolved = await resolvedTarget(env, url.href);
  if (resolved.kind !== "ok") return { error: resolved.reason, kind: "fetch" };
  const res = await fetch(url.href, { redirect: "manual", headers: { accept: "text/plain" } });
  const head = `HTTP/1.1 ${res.status} x\r\n${[...res.headers].map(([k, v]) => `${k}: ${v}`).join("\r\n")}\r\n\r\n`;
  const body = new Uint8Array(await res.arrayBuffer());
  const bytes = new Uint8Array(head.length + body.length);
  bytes.set(
    Uint8Array.from(head, (ch) => ch.charCodeAt(0)),
    0,
  );
  bytes.set(body, head.length);
  const answer = readPolicyResponse(bytes);
  if ("error" in answer) return answer;
  const policy = parsePolicy(new TextDecoder().decode(answer.body));
  return "error" in policy ? { error: policy.error, kind: "invalid" } : { policy };
}

/** See the header. */
export async function fetchStsPolicy(env: Env, domain: string): Promise<FetchResult> {
  const s = settingsOf(env);
  const host = `mta-sts.${domain}`;
  const guard = s.local ? { ...LOCAL_DEVELOPMENT, allowedPorts: [s.mtaStsPort] } : { allowedPorts: [s.mtaStsPort] };
  let url: URL;
  try {
    url = new URL(`https://${host}:${s.mtaStsPort}/.well-known/mta-sts.txt`);
  } catch {
    return { error: `${host} is not a host name`, kind: "fetch" };
  }
  const verdict = checkEndpointUrl(url, guard);
  if (!verdict.ok) return { error: `refused by the SSRF guard: ${verdict.detail}`, kind: "fetch" };
  const ip = await resolveAddress(host, { resolverUrl: s.dohResolverUrl });
  if (ip === null) return { error: `${host} has no address`, kind: "fetch" };
  const checked = checkResolvedAddress(ip, guard);
  if (!checked.ok) return { error: `refused by the SSRF guard: ${checked.detail}`, kind: "fetch" };
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<FetchResult>((resolve) => {
    timer = setTimeout(
      () =>
        resolve({ error: `fetching the policy of ${domain} timed out after ${FETCH_TIMEOUT_MS} ms`, kind: "fetch" }),
      FETCH_TIMEOUT_MS,
    );
  });
  const attempt = async (): Promise<FetchResult> => {
    const got = await fetchOver(ip, url.port === "" ? 443 : Number(url.port), host);
    return "error" in got && got.kind === "fetch" && got.error.startsWith("connect to ")
      ? fetchViaFetch(env, url)
      : got;
  };
  try {
    return await Promise.race([
      attempt().catch((e: unknown) => ({ error: describe(e), kind: "fetch" as const })),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
