// Pure SOCKS5 (worker/net/core/socks5.ts, socks5-handshake.ts, ip-literal.ts): encodings byte
// for byte, server replies split at every byte boundary, every REP code, auth and method failures.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { formatIPv4, formatIPv6, parseIPv4, parseIPv6 } from "../../../worker/net/core/ip-literal";
import {
  Socks5Error,
  describeReplyCode,
  encodeConnectRequest,
  encodeGreeting,
  encodeUserPassAuth,
  isSocks5Error,
  parseServerMessage,
  type Socks5Expect,
} from "../../../worker/net/core/socks5";
import {
  endSocks5Handshake,
  feedSocks5Handshake,
  startSocks5Handshake,
  type Socks5Credentials,
  type Socks5Step,
} from "../../../worker/net/core/socks5-handshake";

const bytes = (...b: number[]) => Uint8Array.from(b);
const ascii = (s: string) => [...s].map((c) => c.charCodeAt(0));

describe("SOCKS5 encodings", () => {
  it.each([
    ["no auth", [0x00], [5, 1, 0]],
    ["no auth and username/password", [0x00, 0x02], [5, 2, 0, 2]],
  ])("greeting offering %s", (_name, methods, want) => {
    expect(encodeGreeting(methods)).toEqual(bytes(...want));
  });

  it.each([
    ["ASCII", "relay", "s3cret", [1, 5, ...ascii("relay"), 6, ...ascii("s3cret")]],
    ["UTF-8", "jö", "pä ss", [1, 3, 0x6a, 0xc3, 0xb6, 6, 0x70, 0xc3, 0xa4, 0x20, 0x73, 0x73]],
    [
      "255-byte fields",
      "u".repeat(255),
      "p".repeat(255),
      [1, 255, ...ascii("u".repeat(255)), 255, ...ascii("p".repeat(255))],
    ],
  ])("RFC 1929 request with %s", (_name, user, pass, want) => {
    expect(encodeUserPassAuth(user, pass)).toEqual(bytes(...want));
  });

  it.each([
    ["a domain name (ATYP 3)", "mx.example.net", 25, [5, 1, 0, 3, 14, ...ascii("mx.example.net"), 0, 25]],
    ["an IPv4 literal (ATYP 1)", "192.0.2.10", 25, [5, 1, 0, 1, 192, 0, 2, 10, 0, 25]],
    [
      "an IPv6 literal (ATYP 4)",
      "2001:db8::1",
      587,
      [5, 1, 0, 4, 0x20, 0x01, 0x0d, 0xb8, ...new Array(11).fill(0), 1, 2, 0x4b],
    ],
    [
      "a bracketed IPv6 literal",
      "[::ffff:192.0.2.1]",
      65535,
      [5, 1, 0, 4, ...new Array(10).fill(0), 255, 255, 192, 0, 2, 1, 255, 255],
    ],
    ["a numeric-looking name that is not IPv4", "1.2.3", 25, [5, 1, 0, 3, 5, ...ascii("1.2.3"), 0, 25]],
    ["a port above 255", "localhost", 2525, [5, 1, 0, 3, 9, ...ascii("localhost"), 9, 221]],
  ])("CONNECT to %s", (_name, hostname, port, want) => {
    expect(encodeConnectRequest({ hostname, port })).toEqual(bytes(...want));
  });

  it.each([
    ["no methods", () => encodeGreeting([])],
    ["a method over 255", () => encodeGreeting([256])],
    ["an empty username", () => encodeUserPassAuth("", "x")],
    ["a 256-byte password", () => encodeUserPassAuth("u", "p".repeat(256))],
    ["a 128-character non-ASCII username (256 bytes)", () => encodeUserPassAuth("é".repeat(128), "p")],
    ["port 0", () => encodeConnectRequest({ hostname: "mx.example", port: 0 })],
    ["port 65536", () => encodeConnectRequest({ hostname: "mx.example", port: 65536 })],
    ["an empty host", () => encodeConnectRequest({ hostname: "", port: 25 })],
    ["a 256-character host", () => encodeConnectRequest({ hostname: "a".repeat(256), port: 25 })],
    ["a non-ASCII host", () => encodeConnectRequest({ hostname: "bücher.example", port: 25 })],
    ["a host with a space", () => encodeConnectRequest({ hostname: "a b", port: 25 })],
  ])("refuses to encode %s", (_name, fn) => {
    expect(fn).toThrow(Socks5Error);
    try {
      fn();
    } catch (e) {
      expect(isSocks5Error(e) && e.code).toBe("bad-request");
    }
  });
});

describe("SOCKS5 server replies", () => {
  const replies: [string, Socks5Expect, number[], unknown][] = [
    ["method: no auth", "method", [5, 0], { kind: "method", method: 0 }],
    ["method: no acceptable", "method", [5, 0xff], { kind: "method", method: 0xff }],
    ["auth ok", "auth", [1, 0], { kind: "auth", ok: true, status: 0 }],
    ["auth ok, version byte 5", "auth", [5, 0], { kind: "auth", ok: true, status: 0 }],
    ["auth failed", "auth", [1, 1], { kind: "auth", ok: false, status: 1 }],
    [
      "connect ok, IPv4",
      "connect",
      [5, 0, 0, 1, 127, 0, 0, 1, 0x04, 0x38],
      { kind: "connect", reply: 0, bound: { host: "127.0.0.1", port: 1080 } },
    ],
    [
      "connect ok, domain",
      "connect",
      [5, 0, 0, 3, 5, ...ascii("proxy"), 0, 80],
      { kind: "connect", reply: 0, bound: { host: "proxy", port: 80 } },
    ],
    [
      "connect ok, IPv6",
      "connect",
      [5, 0, 0, 4, ...new Array(15).fill(0), 1, 0, 25],
      { kind: "connect", reply: 0, bound: { host: "0:0:0:0:0:0:0:1", port: 25 } },
    ],
    ["connect failed (short)", "connect", [5, 5], { kind: "connect", reply: 5, bound: null }],
  ];

  it.each(replies)("parses %s from input split at every byte boundary", (_name, expect_, wire, want) => {
    const full = bytes(...wire, 0xaa, 0xbb);
    for (let cut = 0; cut < wire.length; cut++) {
      expect(parseServerMessage(expect_, full.subarray(0, cut))).toBeNull();
    }
    expect(parseServerMessage(expect_, full)).toEqual({
      message: want,
      consumed: want && (want as { bound?: unknown }).bound === null ? 2 : wire.length,
    });
  });

  it.each([
    ["method", [4, 0], "version 4 in its method selection"],
    ["auth", [2, 0], "version 2 in its authentication reply"],
    ["connect", [4, 0], "version 4 in its CONNECT reply"],
    ["connect", [5, 0, 0, 9, 0, 0], "unknown address type 9"],
  ] as const)("refuses a bad %s reply", (kind, wire, text) => {
    expect(() => parseServerMessage(kind, bytes(...wire))).toThrow(text);
  });

  it.each([
    [1, "general-failure", "general SOCKS server failure", "proxy"],
    [2, "not-allowed", "connection not allowed by ruleset", "proxy"],
    [3, "network-unreachable", "network unreachable", "target"],
    [4, "host-unreachable", "host unreachable", "target"],
    [5, "connection-refused", "connection refused", "target"],
    [6, "ttl-expired", "TTL expired", "target"],
    [7, "command-not-supported", "command not supported", "proxy"],
    [8, "address-type-not-supported", "address type not supported", "proxy"],
    [9, "unknown-reply", "unknown reply code 9", "proxy"],
    [255, "unknown-reply", "unknown reply code 255", "proxy"],
  ])("REP %i → %s", (rep, code, text, blame) => {
    expect(describeReplyCode(rep)).toEqual({ code, text, blame });
    const failed = runHandshake(null, [
      [5, 0],
      [5, rep, 0, 1, 0, 0, 0, 0, 0, 0],
    ]);
    expect(failed.result).toMatchObject({ kind: "failed", error: { code, blame, reply: rep } });
    expect(failed.error?.message).toBe(`SOCKS5 proxy could not connect to mx.example.net:25: ${text} (REP ${rep})`);
  });
});

const TARGET = { hostname: "mx.example.net", port: 25 };
const CREDS: Socks5Credentials = { username: "relay", password: "s3cret" };

/** Runs a handshake, feeding each server message as one chunk; collects what the client sent. */
function runHandshake(creds: Socks5Credentials | null, serverChunks: number[][]) {
  let step: Socks5Step = startSocks5Handshake(TARGET, creds);
  const sent: number[][] = step.send ? [[...step.send]] : [];
  const tunnel: number[] = [];
  for (const chunk of serverChunks) {
    if (step.result) {
      tunnel.push(...chunk);
      continue;
    }
    step = feedSocks5Handshake(step.state, bytes(...chunk));
    if (step.send) sent.push([...step.send]);
    if (step.result?.kind === "established") tunnel.push(...step.result.rest);
  }
  const error = step.result?.kind === "failed" ? step.result.error : null;
  /** What the tunnel carried: bytes that came with the CONNECT reply, then later chunks. */
  return { step, sent, result: step.result, error, tunnel };
}

const CONNECT_OK = [5, 0, 0, 1, 10, 0, 0, 1, 0x9c, 0x40];
const CONNECT_REQ = [5, 1, 0, 3, 14, ...ascii("mx.example.net"), 0, 25];

describe("SOCKS5 handshake", () => {
  it("connects without authentication", () => {
    const run = runHandshake(null, [[5, 0], CONNECT_OK]);
    expect(run.sent).toEqual([[5, 1, 0], CONNECT_REQ]);
    expect(run.result).toEqual({ kind: "established", bound: { host: "10.0.0.1", port: 40000 }, rest: bytes() });
  });

  it("authenticates with username/password when the proxy picks it", () => {
    const run = runHandshake(CREDS, [[5, 2], [1, 0], CONNECT_OK]);
    expect(run.sent).toEqual([[5, 2, 0, 2], [1, 5, ...ascii("relay"), 6, ...ascii("s3cret")], CONNECT_REQ]);
    expect(run.result?.kind).toBe("established");
  });

  it("skips authentication when a proxy with credentials configured picks no auth", () => {
    const run = runHandshake(CREDS, [[5, 0], CONNECT_OK]);
    expect(run.sent).toEqual([[5, 2, 0, 2], CONNECT_REQ]);
    expect(run.result?.kind).toBe("established");
  });

  it("fails on rejected credentials without echoing them", () => {
    const run = runHandshake(CREDS, [
      [5, 2],
      [1, 1],
    ]);
    expect(run.error).toMatchObject({
      code: "auth-failed",
      message: "SOCKS5 proxy rejected the username/password (status 1)",
    });
    expect(run.error?.message).not.toContain("s3cret");
  });

  it("fails on method 0xFF (no acceptable method)", () => {
    expect(runHandshake(null, [[5, 0xff]]).error).toMatchObject({
      code: "no-acceptable-method",
      message: "SOCKS5 proxy accepts none of the offered methods (no authentication)",
    });
    expect(runHandshake(CREDS, [[5, 0xff]]).error?.message).toContain("no authentication, username/password");
  });

  it("fails when the proxy picks a method that was not offered", () => {
    expect(runHandshake(null, [[5, 2]]).error).toMatchObject({
      code: "protocol",
      message: expect.stringContaining("method 2"),
    });
    expect(runHandshake(null, [[5, 1]]).error?.code).toBe("protocol");
  });

  it("keeps tunnelled bytes that arrive with the CONNECT reply", () => {
    const run = runHandshake(null, [
      [5, 0],
      [...CONNECT_OK, ...ascii("220 hi\r\n")],
    ]);
    expect(run.result).toMatchObject({ kind: "established", rest: bytes(...ascii("220 hi\r\n")) });
  });

  it("refuses bytes the proxy sends before it was asked", () => {
    expect(runHandshake(null, [[5, 0, 1]]).error).toMatchObject({
      code: "protocol",
      message: expect.stringContaining("1 unexpected bytes after its method selection reply"),
    });
  });

  it("gives the same steps for server messages split at any byte boundaries", () => {
    const messages = [
      [5, 2],
      [1, 0],
      [...CONNECT_OK, ...ascii("220 x")],
    ];
    const whole = runHandshake(CREDS, messages);
    const cutsOf = (m: number[]) => fc.uniqueArray(fc.integer({ min: 1, max: m.length - 1 }), { maxLength: m.length });
    fc.assert(
      fc.property(fc.tuple(...messages.map(cutsOf)), (cutsPerMessage) => {
        const chunks = messages.flatMap((m, i) => {
          const points = [0, ...[...(cutsPerMessage[i] ?? [])].sort((a, b) => a - b), m.length];
          return points.slice(1).map((end, j) => m.slice(points[j], end));
        });
        const split = runHandshake(CREDS, chunks);
        expect(split.sent).toEqual(whole.sent);
        expect(split.result).toMatchObject({ kind: "established", bound: { host: "10.0.0.1", port: 40000 } });
        expect(split.tunnel).toEqual(ascii("220 x"));
      }),
    );
    expect(whole.result).toMatchObject({ kind: "established", rest: bytes(...ascii("220 x")) });
  });

  it("fails up front on a target that cannot be encoded", () => {
    const step = startSocks5Handshake({ hostname: "mx.example", port: 0 }, null);
    expect(step.send).toBeNull();
    expect(step.result).toMatchObject({ kind: "failed", error: { code: "bad-request" } });
  });

  it("refuses input after the end and names the phase when cut short", () => {
    const done = runHandshake(null, [[5, 0], CONNECT_OK]).step;
    expect(feedSocks5Handshake(done.state, bytes(1)).result).toMatchObject({
      kind: "failed",
      error: { code: "protocol" },
    });
    const mid = runHandshake(CREDS, [[5, 2]]).step;
    expect(endSocks5Handshake(mid.state, "closed").message).toBe(
      "SOCKS5 proxy closed the connection during authentication (target mx.example.net:25)",
    );
    expect(
      endSocks5Handshake(startSocks5Handshake({ hostname: "::1", port: 25 }, null).state, "timeout"),
    ).toMatchObject({
      code: "timeout",
      message: "SOCKS5 handshake timed out during method selection (target [::1]:25)",
    });
  });
});

describe("IP literals", () => {
  it.each([
    ["192.0.2.1", [192, 0, 2, 1]],
    ["0.0.0.0", [0, 0, 0, 0]],
    ["255.255.255.255", [255, 255, 255, 255]],
    ["256.0.0.1", null],
    ["010.0.0.1", null],
    ["1.2.3", null],
    ["1.2.3.4.5", null],
    ["a.b.c.d", null],
    ["", null],
  ])("parseIPv4(%j)", (text, want) => {
    expect(parseIPv4(text)).toEqual(want === null ? null : bytes(...want));
  });

  it.each([
    ["::", "0:0:0:0:0:0:0:0"],
    ["::1", "0:0:0:0:0:0:0:1"],
    ["2001:DB8::25", "2001:db8:0:0:0:0:0:25"],
    ["1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8"],
    ["1::", "1:0:0:0:0:0:0:0"],
    ["::ffff:192.0.2.1", "0:0:0:0:0:ffff:c000:201"],
    ["1:2:3:4:5:6:192.0.2.1", "1:2:3:4:5:6:c000:201"],
    ["1:2:3:4:5:6:7:8:9", null],
    ["1::2::3", null],
    ["12345::", null],
    ["1:2:3:4:5:6:7", null],
    ["1:2:3:4:5:6:7:8::", null],
    ["fe80::1%eth0", null],
    ["[::1]", null],
    ["mx.example", null],
  ])("parseIPv6(%j)", (text, want) => {
    const got = parseIPv6(text);
    expect(got === null ? null : formatIPv6(got)).toBe(want);
  });

  it("round-trips any address through format and parse", () => {
    const same = (a: Uint8Array | null, b: Uint8Array) =>
      a !== null && a.length === b.length && a.every((x, i) => x === b[i]);
    fc.assert(fc.property(fc.uint8Array({ minLength: 4, maxLength: 4 }), (b) => same(parseIPv4(formatIPv4(b)), b)));
    fc.assert(fc.property(fc.uint8Array({ minLength: 16, maxLength: 16 }), (b) => same(parseIPv6(formatIPv6(b)), b)));
    fc.assert(fc.property(fc.ipV6(), (text) => parseIPv6(text) !== null));
  });
});
