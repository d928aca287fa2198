/*
 * NAME
 *   ip-address - parse IP literals and name the special range they fall in
 *
 * SUMMARY
 *   The address half of the webhook SSRF guard (see ssrf.ts): strict and
 *   lenient IPv4 parsing, IPv6 parsing, and a table of special-purpose
 *   ranges (RFC 6890 and friends) that a webhook must never reach.
 *
 * DESCRIPTION
 *   parseIpv4Loose(s) parses IPv4 the way WHATWG URL and inet_aton do: one
 *   to four parts, each decimal, 0x-hex or 0-prefixed octal, the last part
 *   filling the remaining bytes ("2130706433", "0x7f.1", "017700000001").
 *   It returns the address as an unsigned 32-bit number, or null.
 *
 *   parseIpv6(s) parses an IPv6 literal (optionally in brackets, with "::"
 *   and an embedded dotted IPv4 tail) into eight 16-bit groups, or null.
 *   Zone identifiers ("%eth0") are refused (null).
 *
 *   classifyIp(s) parses either family and returns {family, range}, where
 *   range is "public" or the special range's name; IPv4-mapped,
 *   IPv4-translated (::ffff:0:0/96), IPv4-compatible, NAT64 (64:ff9b::/96)
 *   and 6to4 (2002::/16) IPv6 addresses are judged by the IPv4 address they
 *   embed; the local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215) is refused
 *   whole, and Teredo (2001::/32) falls in 2001::/23. Returns null when s is
 *   not an IP literal.
 *
 * INVARIANTS
 *   Every address in a range listed in IPV4_RANGES or IPV6_RANGES is
 *   classified as that range (or an earlier, more specific one), never as
 *   "public".
 *
 * ERRORS
 *   None thrown: malformed input gives null.
 */

/** Names of the ranges a webhook target may not be in. */
export type IpRange =
  | "metadata"
  | "loopback"
  | "private"
  | "link-local"
  | "cgnat"
  | "unique-local"
  | "unspecified"
  | "multicast"
  | "broadcast"
  | "reserved"
  | "documentation";

/** A classified address. */
export interface IpClass {
  family: 4 | 6;
  range: IpRange | "public";
}

/** IPv4 ranges as [first address, prefix length, name]; more specific first. */
export const IPV4_RANGES: readonly (readonly [string, number, IpRange])[] = [
  ["169.254.169.254", 32, "metadata"],
  ["100.100.100.200", 32, "metadata"],
  ["255.255.255.255", 32, "broadcast"],
  ["0.0.0.0", 8, "unspecified"],
  ["10.0.0.0", 8, "private"],
  ["100.64.0.0", 10, "cgnat"],
  ["127.0.0.0", 8, "loopback"],
  ["169.254.0.0", 16, "link-local"],
  ["172.16.0.0", 12, "private"],
  ["192.0.0.0", 24, "reserved"],
  ["192.0.2.0", 24, "documentation"],
  ["192.88.99.0", 24, "reserved"],
  ["192.168.0.0", 16, "private"],
  ["198.18.0.0", 15, "reserved"],
  ["198.51.100.0", 24, "documentation"],
  ["203.0.113.0", 24, "documentation"],
  ["224.0.0.0", 4, "multicast"],
  ["240.0.0.0", 4, "reserved"],
];

/** IPv6 ranges as [first address, prefix length, name]; more specific first. */
export const IPV6_RANGES: readonly (readonly [string, number, IpRange])[] = [
  ["fd00:ec2::254", 128, "metadata"],
  ["::", 128, "unspecified"],
  ["::1", 128, "loopback"],
  // RFC 8215 local-use IPv4/IPv6 translation: the operator's own NAT64, so inside the network
  // whatever IPv4 it carries (and where it carries it depends on the prefix length, RFC 6052).
  ["64:ff9b:1::", 48, "reserved"],
  ["100::", 64, "reserved"],
  ["2001:db8::", 32, "documentation"],
  ["2001::", 23, "reserved"],
  ["fc00::", 7, "unique-local"],
  ["fe80::", 10, "link-local"],
  ["fec0::", 10, "reserved"],
  ["ff00::", 8, "multicast"],
];

const DEC = /^(0|[1-9]\d*)$/;
const OCT = /^0[0-7]+$/;
const HEX = /^0x[0-9a-f]*$/i;

function parseIpv4Part(part: string): number | null {
  if (HEX.test(part)) return part.length === 2 ? 0 : Number.parseInt(part.slice(2), 16);
  if (OCT.test(part)) return Number.parseInt(part.slice(1), 8);
  if (DEC.test(part)) return Number(part);
  return null;
}

/** Parses IPv4 in any WHATWG/inet_aton form into an unsigned 32-bit number, or null. */
export function parseIpv4Loose(s: string): number | null {
  const parts = (s.endsWith(".") ? s.slice(0, -1) : s).split(".");
  if (parts.length < 1 || parts.length > 4) return null;
  const nums: number[] = [];
  for (const part of parts) {
    const n = parseIpv4Part(part);
    if (n === null || !Number.isFinite(n)) return null;
    nums.push(n);
  }
  const last = nums.pop() ?? 0;
  // Leading parts are single bytes; the last part fills every remaining byte.
  if (nums.some((n) => n > 255) || last >= 2 ** (8 * (4 - nums.length))) return null;
  let value = 0;
  nums.forEach((n, i) => {
    value += n * 2 ** (8 * (3 - i));
  });
  return value + last;
}

/** Formats an unsigned 32-bit number as dotted-quad IPv4. */
export function formatIpv4(value: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(value / 2 ** shift) % 256).join(".");
}

function parseGroups(text: string): number[] | null {
  if (text === "") return [];
  const out: number[] = [];
  const pieces = text.split(":");
  for (let i = 0; i < pieces.length; i++) {
    const piece = pieces[i] ?? "";
    if (i === pieces.length - 1 && piece.includes(".")) {
      if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(piece) || piece.split(".").some((b) => Number(b) > 255 || /^0\d/.test(b)))
        return null;
      const v4 = parseIpv4Loose(piece);
      if (v4 === null) return null;
      out.push(Math.floor(v4 / 65536), v4 % 65536);
    } else if (/^[0-9a-f]{1,4}$/i.test(piece)) {
      out.push(Number.parseInt(piece, 16));
    } else {
      return null;
    }
  }
  return out;
}

/** Parses an IPv6 literal (brackets optional, no zone id) into 8 groups, or null. */
export function parseIpv6(s: string): number[] | null {
  const text = s.startsWith("[") && s.endsWith("]") ? s.slice(1, -1) : s;
  if (!text.includes(":") || text.includes("%")) return null;
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const head = parseGroups(halves[0] ?? "");
  const tail = halves.length === 2 ? parseGroups(halves[1] ?? "") : [];
  if (head === null || tail === null) return null;
  if (halves.length === 1) return head.length === 8 ? head : null;
  const missing = 8 - head.length - tail.length;
  if (missing < 1) return null;
  return [...head, ...new Array<number>(missing).fill(0), ...tail];
}

function inRange4(addr: number, first: string, prefix: number): boolean {
  const base = parseIpv4Loose(first) ?? 0;
  const size = 2 ** (32 - prefix);
  return Math.floor(addr / size) === Math.floor(base / size);
}

function inRange6(groups: readonly number[], first: string, prefix: number): boolean {
  const base = parseIpv6(first) ?? [];
  for (let i = 0, left = prefix; left > 0; i++, left -= 16) {
    const bits = Math.min(16, left);
    const shift = 16 - bits;
    if ((groups[i] ?? 0) >> shift !== (base[i] ?? 0) >> shift) return false;
  }
  return true;
}

/** Classifies an IPv4 address given as an unsigned 32-bit number. */
export function classifyIpv4(addr: number): IpRange | "public" {
  for (const [first, prefix, range] of IPV4_RANGES) if (inRange4(addr, first, prefix)) return range;
  return "public";
}

/** The IPv4 address embedded in a mapped, compatible, NAT64 or 6to4 IPv6 address, or null. */
export function embeddedIpv4(g: readonly number[]): number | null {
  const at = (i: number) => g[i] ?? 0;
  const v4 = (hi: number, lo: number) => at(hi) * 65536 + at(lo);
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zeros(0, 5) && at(5) === 0xffff) return v4(6, 7);
  // IPv4-translated (SIIT, RFC 2765/6145): ::ffff:0:a.b.c.d.
  if (zeros(0, 4) && at(4) === 0xffff && at(5) === 0) return v4(6, 7);
  if (zeros(0, 6) && (at(6) !== 0 || at(7) > 1)) return v4(6, 7);
  if (at(0) === 0x64 && at(1) === 0xff9b && zeros(2, 6)) return v4(6, 7);
  if (at(0) === 0x2002) return v4(1, 2);
  return null;
}

/** Classifies IPv6 groups, judging embedded IPv4 by its own range. */
export function classifyIpv6(groups: readonly number[]): IpRange | "public" {
  for (const [first, prefix, range] of IPV6_RANGES) if (inRange6(groups, first, prefix)) return range;
  const v4 = embeddedIpv4(groups);
  return v4 === null ? "public" : classifyIpv4(v4);
}

/** Parses and classifies an IP literal of either family, or null if it is not one. */
export function classifyIp(s: string): IpClass | null {
  const groups = parseIpv6(s);
  if (groups !== null) return { family: 6, range: classifyIpv6(groups) };
  const v4 = parseIpv4Loose(s);
  if (v4 !== null) return { family: 4, range: classifyIpv4(v4) };
  return null;
}
