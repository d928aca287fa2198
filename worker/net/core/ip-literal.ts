/*
 * NAME
 *   ip-literal - strict IPv4 and IPv6 text to bytes, and back
 *
 * SUMMARY
 *   Tells an IP address literal from a host name, for the SOCKS5 CONNECT
 *   address type (RFC 1928 ATYP) and for e-mail address literals
 *   (RFC 5321 4.1.3, "[192.0.2.1]" and "[IPv6:2001:db8::1]").
 *
 * DESCRIPTION
 *   parseIPv4(text) accepts exactly four decimal octets 0..255, without
 *   leading zeros ("010.0.0.1" is rejected: some resolvers read it as octal).
 *
 *   parseIPv6(text) accepts RFC 4291 text: eight groups of 1..4 hex digits,
 *   at most one "::", and an optional dotted IPv4 tail. Brackets and zone
 *   ids ("%eth0") are not accepted; strip brackets first.
 *
 *   formatIPv4(bytes) and formatIPv6(bytes) print addresses; IPv6 comes out
 *   as eight lower-case groups without compression (unambiguous, and only
 *   used in diagnostics).
 *
 * INVARIANTS
 *   parseIPv4(formatIPv4(b)) equals b; parseIPv6(formatIPv6(b)) equals b.
 *
 * ERRORS
 *   None: a string that is not a literal gives null.
 */

/** Parses dotted-quad IPv4 text into 4 bytes, or null when it is not one. */
export function parseIPv4(text: string): Uint8Array | null {
  const parts = text.split(".");
  if (parts.length !== 4) return null;
  const out = new Uint8Array(4);
  for (const [i, part] of parts.entries()) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(part)) return null;
    const n = Number(part);
    if (n > 255) return null;
    out[i] = n;
  }
  return out;
}

/** Parses IPv6 text (RFC 4291 2.2) into 16 bytes, or null when it is not one. */
export function parseIPv6(text: string): Uint8Array | null {
  if (!text.includes(":")) return null;
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const head = parseGroups(halves[0] ?? "", halves.length === 1 || halves[1] === "");
  const tail = halves.length === 2 ? parseGroups(halves[1] ?? "", true) : [];
  if (head === null || tail === null) return null;
  const count = head.length + tail.length;
  if (halves.length === 1 ? count !== 8 : count > 7) return null;
  const groups = [...head, ...new Array<number>(8 - count).fill(0), ...tail];
  const out = new Uint8Array(16);
  groups.forEach((g, i) => {
    out[2 * i] = g >> 8;
    out[2 * i + 1] = g & 0xff;
  });
  return out;
}

/**
 * Parses colon-separated hex groups; the last piece may be dotted IPv4
 * (worth two groups) when `mayEndInIPv4`. "" gives no groups.
 */
function parseGroups(text: string, mayEndInIPv4: boolean): number[] | null {
  if (text === "") return [];
  const pieces = text.split(":");
  const groups: number[] = [];
  for (const [i, piece] of pieces.entries()) {
    const last = i === pieces.length - 1;
    if (last && mayEndInIPv4 && piece.includes(".")) {
      const v4 = parseIPv4(piece);
      if (v4 === null) return null;
      groups.push(((v4[0] ?? 0) << 8) | (v4[1] ?? 0), ((v4[2] ?? 0) << 8) | (v4[3] ?? 0));
      continue;
    }
    if (!/^[0-9a-fA-F]{1,4}$/.test(piece)) return null;
    groups.push(parseInt(piece, 16));
  }
  return groups;
}

/** Prints 4 bytes as dotted-quad IPv4. */
export function formatIPv4(bytes: Uint8Array): string {
  return Array.from(bytes.subarray(0, 4), (b) => String(b)).join(".");
}

/** Prints 16 bytes as eight uncompressed lower-case IPv6 groups. */
export function formatIPv6(bytes: Uint8Array): string {
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) {
    groups.push((((bytes[i] ?? 0) << 8) | (bytes[i + 1] ?? 0)).toString(16));
  }
  return groups.join(":");
}
