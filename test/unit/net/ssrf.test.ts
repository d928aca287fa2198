import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { classifyIp, formatIpv4, IPV4_RANGES, parseIpv4Loose, parseIpv6 } from "../../../worker/net/core/ip-address";
import {
  checkEndpointUrl,
  checkResolvedAddress,
  LOCAL_DEVELOPMENT,
  type SsrfConfig,
  type SsrfReason,
} from "../../../worker/net/core/ssrf";

/** Parses like the shell does (WHATWG URL), then guards. */
function guard(raw: string, cfg: SsrfConfig = {}): true | SsrfReason {
  const v = checkEndpointUrl(new URL(raw), cfg);
  return v.ok ? true : v.reason;
}

/** Guards raw parts without a WHATWG parser in between (defence in depth). */
function guardParts(hostname: string, cfg: SsrfConfig = {}): true | SsrfReason {
  const v = checkEndpointUrl({ protocol: "https:", username: "", password: "", hostname, port: "" }, cfg);
  return v.ok ? true : v.reason;
}

describe("checkEndpointUrl: production configuration", () => {
  it.each<{ name: string; url: string; want: true | SsrfReason }>([
    { name: "plain https", url: "https://hooks.example.com/cohort", want: true },
    { name: "https on 8443", url: "https://hooks.example.com:8443/x", want: true },
    { name: "explicit default port", url: "https://hooks.example.com:443/x", want: true },
    { name: "public IPv4 literal", url: "https://93.184.216.34/hook", want: true },
    { name: "public IPv6 literal", url: "https://[2606:2800:220:1:248:1893:25c8:1946]/hook", want: true },
    { name: "IDN host", url: "https://bücher.example/hook", want: true },
    { name: "http refused", url: "http://hooks.example.com/", want: "scheme" },
    { name: "ftp refused", url: "ftp://hooks.example.com/", want: "scheme" },
    { name: "user and password", url: "https://user:pass@hooks.example.com/", want: "userinfo" },
    { name: "user only", url: "https://user@hooks.example.com/", want: "userinfo" },
    { name: "odd port", url: "https://hooks.example.com:8080/", want: "port" },
    { name: "ssh port", url: "https://hooks.example.com:22/", want: "port" },
    { name: "loopback 127.0.0.1", url: "https://127.0.0.1/", want: "address" },
    { name: "loopback 127.1.2.3", url: "https://127.1.2.3/", want: "address" },
    { name: "decimal loopback", url: "https://2130706433/", want: "address" },
    { name: "hex-dotted loopback", url: "https://0x7f.1/", want: "address" },
    { name: "octal loopback", url: "https://0177.0.0.1/", want: "address" },
    { name: "hex loopback", url: "https://0x7f000001/", want: "address" },
    { name: "short loopback 127.1", url: "https://127.1/", want: "address" },
    { name: "IPv6 loopback", url: "https://[::1]/", want: "address" },
    { name: "IPv6 loopback long form", url: "https://[0:0:0:0:0:0:0:1]/", want: "address" },
    { name: "IPv4-mapped loopback", url: "https://[::ffff:127.0.0.1]/", want: "address" },
    { name: "IPv4-mapped private in hex", url: "https://[::ffff:a00:1]/", want: "address" },
    { name: "NAT64 of metadata", url: "https://[64:ff9b::a9fe:a9fe]/", want: "address" },
    { name: "6to4 of private", url: "https://[2002:c0a8:0101::1]/", want: "address" },
    { name: "private 10/8", url: "https://10.0.0.5/", want: "address" },
    { name: "private 172.16/12 low", url: "https://172.16.0.1/", want: "address" },
    { name: "private 172.16/12 high", url: "https://172.31.255.255/", want: "address" },
    { name: "just outside 172.16/12", url: "https://172.32.0.1/", want: true },
    { name: "private 192.168/16", url: "https://192.168.1.1/", want: "address" },
    { name: "CGNAT", url: "https://100.64.0.1/", want: "address" },
    { name: "just outside CGNAT", url: "https://100.128.0.1/", want: true },
    { name: "link-local", url: "https://169.254.1.1/", want: "address" },
    { name: "AWS metadata", url: "https://169.254.169.254/latest/meta-data/", want: "address" },
    { name: "AWS metadata decimal", url: "https://2852039166/", want: "address" },
    { name: "AWS IPv6 metadata", url: "https://[fd00:ec2::254]/", want: "address" },
    { name: "GCP metadata name", url: "https://metadata.google.internal/computeMetadata/v1/", want: "hostname" },
    { name: "GCP metadata name with trailing dot", url: "https://metadata.google.internal./", want: "hostname" },
    { name: "*.internal", url: "https://api.corp.internal/", want: "hostname" },
    { name: "*.local mDNS", url: "https://printer.local/", want: "hostname" },
    { name: "localhost", url: "https://localhost/", want: "hostname" },
    { name: "LOCALHOST upper case", url: "https://LOCALHOST/", want: "hostname" },
    { name: "localhost trailing dot", url: "https://localhost./", want: "hostname" },
    { name: "*.localhost", url: "https://app.localhost/", want: "hostname" },
    { name: "single-label name", url: "https://intranet/", want: "hostname" },
    { name: "unspecified 0.0.0.0", url: "https://0.0.0.0/", want: "address" },
    { name: "zero as one number", url: "https://0/", want: "address" },
    { name: "IPv6 unspecified", url: "https://[::]/", want: "address" },
    { name: "link-local IPv6", url: "https://[fe80::1]/", want: "address" },
    { name: "unique-local IPv6", url: "https://[fd12:3456::1]/", want: "address" },
    { name: "unique-local IPv6 fc00", url: "https://[fc00::1]/", want: "address" },
    { name: "multicast IPv4", url: "https://224.0.0.1/", want: "address" },
    { name: "multicast IPv6", url: "https://[ff02::1]/", want: "address" },
    { name: "broadcast", url: "https://255.255.255.255/", want: "address" },
    { name: "reserved 240/4", url: "https://240.0.0.1/", want: "address" },
    { name: "documentation TEST-NET-3", url: "https://203.0.113.5/", want: "address" },
    { name: "encoded dot trick resolves to an IP", url: "https://127%2E0%2E0%2E1/", want: "address" },
  ])("$name: $url", ({ url, want }) => {
    expect(guard(url)).toBe(want);
  });
});

describe("checkEndpointUrl: local development", () => {
  it.each<{ name: string; url: string; cfg: SsrfConfig; want: true | SsrfReason }>([
    {
      name: "http loopback on an ephemeral port",
      url: "http://127.0.0.1:54321/hook",
      cfg: LOCAL_DEVELOPMENT,
      want: true,
    },
    { name: "localhost", url: "http://localhost:8787/", cfg: LOCAL_DEVELOPMENT, want: true },
    { name: "IPv6 loopback", url: "http://[::1]:9000/", cfg: LOCAL_DEVELOPMENT, want: true },
    { name: "decimal loopback", url: "http://2130706433:9000/", cfg: LOCAL_DEVELOPMENT, want: true },
    { name: "private still refused", url: "http://10.1.2.3/", cfg: LOCAL_DEVELOPMENT, want: "address" },
    { name: "metadata still refused", url: "http://169.254.169.254/", cfg: LOCAL_DEVELOPMENT, want: "address" },
    {
      name: "public host on an odd port still refused",
      url: "http://hooks.example.com:9000/",
      cfg: LOCAL_DEVELOPMENT,
      want: "port",
    },
    {
      name: "insecure alone does not allow loopback",
      url: "http://127.0.0.1/",
      cfg: { allowInsecure: true },
      want: "address",
    },
    {
      name: "loopback alone does not allow http",
      url: "http://127.0.0.1/",
      cfg: { allowLoopback: true },
      want: "scheme",
    },
    {
      name: "extra allowed port",
      url: "https://hooks.example.com:9443/",
      cfg: { allowedPorts: [443, 9443] },
      want: true,
    },
  ])("$name", ({ url, cfg, want }) => {
    expect(guard(url, cfg)).toBe(want);
  });
});

describe("checkEndpointUrl: raw hostnames without WHATWG normalisation", () => {
  it.each<{ name: string; host: string; want: true | SsrfReason }>([
    { name: "decimal", host: "2130706433", want: "address" },
    { name: "hex dotted", host: "0x7f.1", want: "address" },
    { name: "octal", host: "0177.1", want: "address" },
    { name: "bracketed IPv6 loopback", host: "[::1]", want: "address" },
    { name: "IPv6 with zone id", host: "[fe80::1%25eth0]", want: "address" },
    { name: "bad IPv4 part", host: "1.2.3.999", want: "address" },
    { name: "illegal characters", host: "exa mple.com", want: "hostname" },
    { name: "empty", host: "", want: "hostname" },
    { name: "public", host: "hooks.example.com", want: true },
  ])("$name: $host", ({ host, want }) => {
    expect(guardParts(host)).toBe(want);
  });
});

describe("checkResolvedAddress (after DNS)", () => {
  it.each<{ name: string; ip: string; cfg?: SsrfConfig; want: boolean }>([
    { name: "public IPv4", ip: "93.184.216.34", want: true },
    { name: "public IPv6", ip: "2606:4700::6810:84e5", want: true },
    { name: "rebinding to loopback", ip: "127.0.0.1", want: false },
    { name: "rebinding to metadata", ip: "169.254.169.254", want: false },
    { name: "rebinding to IPv4-mapped private", ip: "::ffff:192.168.0.10", want: false },
    { name: "loopback allowed in local development", ip: "127.0.0.1", cfg: LOCAL_DEVELOPMENT, want: true },
    { name: "IPv6 loopback allowed in local development", ip: "::1", cfg: LOCAL_DEVELOPMENT, want: true },
    { name: "not an address", ip: "example.com", want: false },
  ])("$name", ({ ip, cfg, want }) => {
    expect(checkResolvedAddress(ip, cfg).ok).toBe(want);
  });
});

describe("ip-address parsing", () => {
  it.each([
    { name: "dotted quad", s: "1.2.3.4", want: 0x01020304 },
    { name: "two parts", s: "127.1", want: 0x7f000001 },
    { name: "three parts", s: "10.1.258", want: 0x0a010102 },
    { name: "hex", s: "0xC0A80001", want: 0xc0a80001 },
    { name: "octal part", s: "010.0.0.1", want: 0x08000001 },
    { name: "bare 0x", s: "0x.0.0.1", want: 1 },
    { name: "trailing dot", s: "1.2.3.4.", want: 0x01020304 },
    { name: "too big part", s: "256.1.1.1", want: null },
    { name: "too big tail", s: "1.2.3.256", want: null },
    { name: "five parts", s: "1.2.3.4.5", want: null },
    { name: "bad octal", s: "08.1.1.1", want: null },
    { name: "name", s: "example", want: null },
  ])("parseIpv4Loose: $name", ({ s, want }) => {
    expect(parseIpv4Loose(s)).toBe(want);
  });

  it.each([
    { name: "loopback", s: "::1", want: [0, 0, 0, 0, 0, 0, 0, 1] },
    { name: "full", s: "2001:db8:0:0:0:0:2:1", want: [0x2001, 0xdb8, 0, 0, 0, 0, 2, 1] },
    { name: "embedded IPv4", s: "::ffff:1.2.3.4", want: [0, 0, 0, 0, 0, 0xffff, 0x0102, 0x0304] },
    { name: "brackets", s: "[fe80::]", want: [0xfe80, 0, 0, 0, 0, 0, 0, 0] },
    { name: "two ::", s: "1::2::3", want: null },
    { name: "too many groups", s: "1:2:3:4:5:6:7:8:9", want: null },
    { name: ":: with eight groups", s: "1:2:3:4::5:6:7:8", want: null },
    { name: "zone id", s: "fe80::1%eth0", want: null },
    { name: "bad hex", s: "12345::", want: null },
  ])("parseIpv6: $name", ({ s, want }) => {
    expect(parseIpv6(s)).toEqual(want);
  });
});

// The ranges the brief names, written out here independently of ip-address.ts's table.
const REQUIRED_FORBIDDEN_V4: [number, number][] = [
  [0x00000000, 8], // unspecified "this network"
  [0x0a000000, 8], // private
  [0x64400000, 10], // CGNAT
  [0x7f000000, 8], // loopback
  [0xa9fe0000, 16], // link-local and metadata
  [0xac100000, 12], // private
  [0xc0a80000, 16], // private
  [0xe0000000, 4], // multicast
  [0xf0000000, 4], // reserved and broadcast
];
const inRequired = (n: number) =>
  REQUIRED_FORBIDDEN_V4.some(
    ([base, prefix]) => Math.floor(n / 2 ** (32 - prefix)) === Math.floor(base / 2 ** (32 - prefix)),
  );

describe("SSRF guard: properties", () => {
  const ipv4 = fc.integer({ min: 0, max: 2 ** 32 - 1 });
  const forbidden = (n: number) => classifyIp(formatIpv4(n))?.range !== "public";

  it("refuses every address in the required ranges (independent oracle), in any spelling", () => {
    const biased = fc.oneof(
      ipv4,
      fc
        .constantFrom(...REQUIRED_FORBIDDEN_V4)
        .chain(([base, prefix]) => fc.integer({ min: 0, max: 2 ** (32 - prefix) - 1 }).map((o) => base + o)),
    );
    fc.assert(
      fc.property(biased, (n) => {
        if (!inRequired(n)) return;
        for (const host of [formatIpv4(n), String(n), `0x${n.toString(16)}`, `[::ffff:${formatIpv4(n)}]`]) {
          expect(guard(`https://${host}/`), host).toBe("address");
        }
        expect(checkResolvedAddress(formatIpv4(n)).ok).toBe(false);
        expect(checkResolvedAddress(`::ffff:${formatIpv4(n)}`).ok).toBe(false);
      }),
      { numRuns: 3000 },
    );
  });

  it("never accepts an IPv4 address in a forbidden range, in any spelling", () => {
    fc.assert(
      fc.property(ipv4, fc.constantFrom("dotted", "decimal", "hex", "mapped"), (n, form) => {
        const host =
          form === "dotted"
            ? formatIpv4(n)
            : form === "decimal"
              ? String(n)
              : form === "hex"
                ? `0x${n.toString(16)}`
                : `[::ffff:${formatIpv4(n)}]`;
        const accepted = guard(`https://${host}/`) === true;
        expect(accepted && forbidden(n)).toBe(false);
        expect(checkResolvedAddress(formatIpv4(n)).ok).toBe(!forbidden(n));
      }),
      { numRuns: 2000 },
    );
  });

  it("refuses random addresses drawn from inside every forbidden IPv4 range", () => {
    const inRange = fc
      .constantFrom(...IPV4_RANGES)
      .chain(([first, prefix]) =>
        fc.integer({ min: 0, max: 2 ** (32 - prefix) - 1 }).map((offset) => (parseIpv4Loose(first) ?? 0) + offset),
      );
    fc.assert(
      fc.property(inRange, (n) => {
        expect(guard(`https://${formatIpv4(n)}/`)).toBe("address");
        expect(checkResolvedAddress(formatIpv4(n)).ok).toBe(false);
      }),
      { numRuns: 2000 },
    );
  });

  it("refuses random IPv6 addresses in fc00::/7, fe80::/10 and ff00::/8", () => {
    const group = fc.integer({ min: 0, max: 0xffff });
    const addr = fc
      .tuple(fc.constantFrom(0xfc00, 0xfe80, 0xff00), fc.array(group, { minLength: 7, maxLength: 7 }), group)
      .map(([prefix, rest, low]) => {
        const head =
          prefix === 0xfc00
            ? prefix | (low & 0x1ff)
            : prefix === 0xfe80
              ? prefix | (low & 0x3f)
              : prefix | (low & 0xff);
        return [head, ...rest].map((g) => g.toString(16)).join(":");
      });
    fc.assert(
      fc.property(addr, (ip) => {
        expect(guard(`https://[${ip}]/`)).toBe("address");
        expect(checkResolvedAddress(ip, LOCAL_DEVELOPMENT).ok).toBe(false);
      }),
    );
  });

  it("allowLoopback admits loopback and nothing else", () => {
    fc.assert(
      fc.property(ipv4, (n) => {
        const range = classifyIp(formatIpv4(n))?.range;
        expect(checkResolvedAddress(formatIpv4(n), LOCAL_DEVELOPMENT).ok).toBe(
          range === "public" || range === "loopback",
        );
      }),
      { numRuns: 2000 },
    );
  });
});
