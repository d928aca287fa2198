/*
 * NAME
 *   http - the HTTP/1.1 request and response of an MTA-STS policy fetch (RFC 8461 3.3)
 *
 * SUMMARY
 *   The policy is fetched over a socket the shell opened and verified (worker/tls-policy/https.ts),
 *   so that the host is connected to at the address the SSRF guard checked and the certificate is
 *   verified against mta-sts.<domain>. This module writes the request and reads the answer.
 *
 * DESCRIPTION
 *   policyRequest(host)       the GET of /.well-known/mta-sts.txt, Connection: close.
 *   readPolicyResponse(bytes) the whole answer (read until the server closed) → { body } (its octets) for a
 *                             200 text/plain answer, else { error, kind }: a redirect is an error
 *                             (3.3: senders must not follow redirects), as is any other status, a
 *                             media type other than text/plain, or a malformed answer. Content-
 *                             Length and chunked bodies are read; a body over MAX_POLICY_BYTES is
 *                             an error.
 *
 * INVARIANTS
 *   No redirect is ever followed.
 *
 * ERRORS
 *   None thrown.
 */

/** The largest policy read (RFC 8461 3.3 suggests 64 KiB). */
export const MAX_POLICY_BYTES = 64 * 1024;

/** The request for a policy host. */
export function policyRequest(host: string): string {
  return `GET /.well-known/mta-sts.txt HTTP/1.1\r\nHost: ${host}\r\nUser-Agent: cohort-mta-sts\r\nAccept: text/plain\r\nConnection: close\r\n\r\n`;
}

/** What reading the answer gave. */
export type PolicyAnswer = { body: Uint8Array } | { error: string; kind: "fetch" | "invalid" };

const latin1 = (b: Uint8Array) => {
  let s = "";
  for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode(...b.subarray(i, i + 0x8000));
  return s;
};

/** Decodes a chunked body; null when malformed. */
function unchunk(raw: string): string | null {
  let out = "";
  let at = 0;
  for (;;) {
    const eol = raw.indexOf("\r\n", at);
    if (eol < 0) return null;
    const size = parseInt(raw.slice(at, eol).split(";")[0]!.trim(), 16);
    if (!Number.isFinite(size) || size < 0) return null;
    if (size === 0) return out;
    out += raw.slice(eol + 2, eol + 2 + size);
    if (out.length > MAX_POLICY_BYTES) return null;
    at = eol + 2 + size + 2;
  }
}

/** Reads a complete answer (see the header). */
export function readPolicyResponse(bytes: Uint8Array): PolicyAnswer {
  const text = latin1(bytes);
  const end = text.indexOf("\r\n\r\n");
  if (end < 0) return { error: "the policy server's answer has no header end", kind: "fetch" };
  const lines = text.slice(0, end).split("\r\n");
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "");
  if (!status) return { error: "the policy server did not answer HTTP/1.1", kind: "fetch" };
  const code = Number(status[1]);
  if (code >= 300 && code < 400)
    return { error: `the policy server redirected (HTTP ${code}); redirects are not followed`, kind: "fetch" };
  if (code !== 200) return { error: `the policy server answered HTTP ${code}`, kind: "fetch" };
  const headers = new Map<string, string>();
  for (const l of lines.slice(1)) {
    const c = l.indexOf(":");
    if (c > 0) headers.set(l.slice(0, c).trim().toLowerCase(), l.slice(c + 1).trim());
  }
  const type = (headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (type !== "text/plain")
    return { error: `the policy's media type is ${JSON.stringify(type)}, not text/plain`, kind: "invalid" };
  let body = text.slice(end + 4);
  if ((headers.get("transfer-encoding") ?? "").toLowerCase().includes("chunked")) {
    const plain = unchunk(body);
    if (plain === null) return { error: "the policy's chunked body is malformed or too large", kind: "fetch" };
    body = plain;
  } else if (headers.has("content-length")) {
    const n = Number(headers.get("content-length"));
    if (!Number.isInteger(n) || n < 0 || body.length < n)
      return { error: "the policy's body is shorter than its Content-Length", kind: "fetch" };
    body = body.slice(0, n);
  }
  if (body.length > MAX_POLICY_BYTES) return { error: `the policy is over ${MAX_POLICY_BYTES} bytes`, kind: "invalid" };
  return { body: Uint8Array.from(body, (ch) => ch.charCodeAt(0)) };
}
