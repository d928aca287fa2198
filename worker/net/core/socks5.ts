/*
 * NAME
 *   socks5 - SOCKS5 client messages (RFC 1928) and username/password
 *            authentication (RFC 1929), as bytes and as errors
 *
 * SUMMARY
 *   Encodes what a SOCKS5 client sends and parses what the server answers.
 *   No I/O: socks5-handshake.ts sequences these, worker/net/socks5.ts moves
 *   the bytes.
 *
 * DESCRIPTION
 *   encodeGreeting(methods) is the version/method-selection message.
 *   encodeUserPassAuth(username, password) is the RFC 1929 request; both are
 *   sent as UTF-8. encodeConnectRequest(target) is the CONNECT request: an
 *   IPv4 or IPv6 literal goes as ATYP 1 or 4 (an IPv6 literal may be written
 *   in brackets), anything else as a domain name (ATYP 3), so the proxy does
 *   the DNS lookup.
 *
 *   parseServerMessage(expect, bytes) reads one server message of the kind
 *   the client is waiting for from the front of `bytes`. It returns null
 *   while the message is incomplete, so callers can feed input split at any
 *   byte. A CONNECT reply with a non-zero REP is returned as soon as its
 *   first two bytes are in: servers often close right after a failure reply.
 *   The auth reply's version byte may be 1 (RFC 1929) or 5 (seen in the wild).
 *
 *   describeReplyCode(rep) maps a REP code to a Socks5ErrorCode, a text and
 *   who is to blame: REP 3..6 are about the target ("target"), the others
 *   about the proxy or our request ("proxy").
 *
 * INVARIANTS
 *   Messages never contain the password except encodeUserPassAuth's output;
 *   error texts never contain it.
 *
 * ERRORS
 *   The encoders throw Socks5Error "bad-request" for input that cannot be
 *   encoded (empty or over-long names, a port outside 1..65535).
 *   parseServerMessage throws Socks5Error "protocol" for a wrong version byte
 *   or an unknown address type.
 */

import { decodeUtf8, encodeUtf8 } from "../../smtp/core/codec";
import { formatIPv4, formatIPv6, parseIPv4, parseIPv6 } from "./ip-literal";

/** Authentication method numbers (RFC 1928 section 3). */
export const SOCKS5_METHOD = Object.freeze({ none: 0x00, userPass: 0x02, noAcceptable: 0xff });

/** What went wrong, as a stable word. */
export type Socks5ErrorCode =
  | "bad-request"
  | "proxy-unreachable"
  | "protocol"
  | "no-acceptable-method"
  | "auth-failed"
  | "general-failure"
  | "not-allowed"
  | "network-unreachable"
  | "host-unreachable"
  | "connection-refused"
  | "ttl-expired"
  | "command-not-supported"
  | "address-type-not-supported"
  | "unknown-reply"
  | "closed"
  | "timeout";

/** "target": the destination could not be reached; "proxy": the proxy or our use of it failed. */
export type Socks5Blame = "proxy" | "target";

const SOCKS5_BRAND = "cohort.net.Socks5Error";

/** A failed SOCKS5 exchange; `reply` is the server's REP code when there was one. */
export class Socks5Error extends Error {
  readonly brand = SOCKS5_BRAND;
  constructor(
    readonly code: Socks5ErrorCode,
    message: string,
    readonly blame: Socks5Blame = "proxy",
    readonly reply: number | null = null,
  ) {
    super(message);
    this.name = "Socks5Error";
  }
}

/** Brand check for Socks5Error that works across realms. */
export function isSocks5Error(e: unknown): e is Socks5Error {
  return typeof e === "object" && e !== null && (e as { brand?: unknown }).brand === SOCKS5_BRAND;
}

/** A host and port to CONNECT to. */
export interface Socks5Target {
  hostname: string;
  port: number;
}

/** The bound address a successful CONNECT reply carries. */
export interface Socks5BoundAddress {
  host: string;
  port: number;
}

/** One server message. */
export type Socks5ServerMessage =
  | { kind: "method"; method: number }
  | { kind: "auth"; ok: boolean; status: number }
  | { kind: "connect"; reply: number; bound: Socks5BoundAddress | null };

/** The kind of server message the client is waiting for. */
export type Socks5Expect = Socks5ServerMessage["kind"];

const REPLY_CODES: Readonly<Record<number, readonly [Socks5ErrorCode, string, Socks5Blame]>> = {
  1: ["general-failure", "general SOCKS server failure", "proxy"],
  2: ["not-allowed", "connection not allowed by ruleset", "proxy"],
  3: ["network-unreachable", "network unreachable", "target"],
  4: ["host-unreachable", "host unreachable", "target"],
  5: ["connection-refused", "connection refused", "target"],
  6: ["ttl-expired", "TTL expired", "target"],
  7: ["command-not-supported", "command not supported", "proxy"],
  8: ["address-type-not-supported", "address type not supported", "proxy"],
};

/** Maps a non-zero REP code to its error code, text and blame. */
export function describeReplyCode(rep: number): { code: Socks5ErrorCode; text: string; blame: Socks5Blame } {
  const known = REPLY_CODES[rep];
  if (known) return { code: known[0], text: known[1], blame: known[2] };
  return { code: "unknown-reply", text: `unknown reply code ${rep}`, blame: "proxy" };
}

/** Encodes the greeting: version 5 and the offered method numbers. */
export function encodeGreeting(methods: readonly number[]): Uint8Array {
  if (methods.length < 1 || methods.length > 255 || methods.some((m) => !isByte(m))) {
    throw new Socks5Error("bad-request", "SOCKS5 greeting needs 1..255 method numbers 0..255");
  }
  return Uint8Array.from([5, methods.length, ...methods]);
}

/** Encodes an RFC 1929 username/password request (UTF-8; each 1..255 bytes). */
export function encodeUserPassAuth(username: string, password: string): Uint8Array {
  const user = encodeUtf8(username);
  const pass = encodeUtf8(password);
  if (user.length < 1 || user.length > 255) {
    throw new Socks5Error("bad-request", `SOCKS5 username must be 1..255 bytes, got ${user.length}`);
  }
  if (pass.length < 1 || pass.length > 255) {
    throw new Socks5Error("bad-request", `SOCKS5 password must be 1..255 bytes, got ${pass.length}`);
  }
  return Uint8Array.from([1, user.length, ...user, pass.length, ...pass]);
}

/** Encodes a CONNECT request; IP literals go as ATYP 1 or 4, names as ATYP 3. */
export function encodeConnectRequest(target: Socks5Target): Uint8Array {
  const { hostname, port } = target;
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new Socks5Error("bad-request", `SOCKS5 CONNECT port must be 1..65535, got ${port}`);
  }
  const portBytes = [port >> 8, port & 0xff];
  const v4 = parseIPv4(hostname);
  if (v4) return Uint8Array.from([5, 1, 0, 1, ...v4, ...portBytes]);
  const v6 = parseIPv6(hostname.replace(/^\[(.*)\]$/, "$1"));
  if (v6) return Uint8Array.from([5, 1, 0, 4, ...v6, ...portBytes]);
  if (!/^[\x21-\x7e]{1,255}$/.test(hostname)) {
    throw new Socks5Error(
      "bad-request",
      `SOCKS5 CONNECT needs an ASCII host name of 1..255 characters, got ${JSON.stringify(hostname)}`,
    );
  }
  return Uint8Array.from([5, 1, 0, 3, hostname.length, ...encodeUtf8(hostname), ...portBytes]);
}

/**
 * Reads one `expect` message from the front of `bytes`: the message and how
 * many bytes it used, or null when more bytes are needed.
 */
export function parseServerMessage(
  expect: Socks5Expect,
  bytes: Uint8Array,
): { message: Socks5ServerMessage; consumed: number } | null {
  if (bytes.length < 2) return null;
  const version = bytes[0] ?? 0;
  const second = bytes[1] ?? 0;
  switch (expect) {
    case "method":
      checkVersion(version, [5], "method selection");
      return { message: { kind: "method", method: second }, consumed: 2 };
    case "auth":
      checkVersion(version, [1, 5], "authentication reply");
      return { message: { kind: "auth", ok: second === 0, status: second }, consumed: 2 };
    case "connect":
      checkVersion(version, [5], "CONNECT reply");
      if (second !== 0) return { message: { kind: "connect", reply: second, bound: null }, consumed: 2 };
      return parseBoundAddress(bytes);
  }
}

/** Parses a successful CONNECT reply's bound address, or null if incomplete. */
function parseBoundAddress(bytes: Uint8Array): { message: Socks5ServerMessage; consumed: number } | null {
  if (bytes.length < 5) return null;
  const atyp = bytes[3];
  let start = 4;
  let length: number;
  if (atyp === 1) length = 4;
  else if (atyp === 4) length = 16;
  else if (atyp === 3) {
    length = bytes[4] ?? 0;
    start = 5;
  } else {
    throw new Socks5Error("protocol", `SOCKS5 proxy sent unknown address type ${atyp ?? "?"} in the CONNECT reply`);
  }
  const end = start + length + 2;
  if (bytes.length < end) return null;
  const addr = bytes.subarray(start, start + length);
  const host = atyp === 1 ? formatIPv4(addr) : atyp === 4 ? formatIPv6(addr) : decodeUtf8(addr);
  const port = ((bytes[end - 2] ?? 0) << 8) | (bytes[end - 1] ?? 0);
  return { message: { kind: "connect", reply: 0, bound: { host, port } }, consumed: end };
}

/** Throws a protocol error unless `version` is one of `allowed`. */
function checkVersion(version: number, allowed: readonly number[], what: string): void {
  if (!allowed.includes(version)) {
    throw new Socks5Error(
      "protocol",
      `SOCKS5 proxy sent version ${version} in its ${what}, expected ${allowed.join(" or ")}`,
    );
  }
}

/** True for an integer 0..255. */
function isByte(n: number): boolean {
  return Number.isInteger(n) && n >= 0 && n <= 255;
}
