/*
 * NAME
 *   ssrf - refuse webhook endpoints that point inside the network
 *
 * SUMMARY
 *   The URL guard run when an endpoint is created or changed and before
 *   each delivery, plus the check of the resolved address after DNS
 *   (against DNS rebinding). Address ranges live in ip-address.ts.
 *
 * DESCRIPTION
 *   checkEndpointUrl(url, cfg) takes the parts of a WHATWG-parsed URL (a
 *   `new URL(raw)` satisfies UrlParts; parsing stays in the shell, with the
 *   same parser fetch will use) and returns {ok:true} or {ok:false, reason,
 *   detail}. It refuses, in this order:
 *     scheme     anything but https:, and http: unless cfg.allowInsecure;
 *     userinfo   a user name or password in the URL;
 *     address    an IP-literal host (any IPv4 form, IPv6 in brackets) in
 *                a special range, loopback unless cfg.allowLoopback;
 *     hostname   localhost and *.localhost (unless cfg.allowLoopback),
 *                metadata names, *.internal, *.local, *.localdomain,
 *                *.home.arpa, *.lan, *.intranet, *.corp, invalid host
 *                names, and single-label names (they resolve
 *                through search domains, usually to internal hosts);
 *     port       any port outside cfg.allowedPorts (default 443, 80, 8443)
 *                except on an allowed loopback target, where local
 *                receivers listen on ephemeral ports.
 *
 *   checkResolvedAddress(ip, cfg) applies the address rule to one address
 *   returned by DNS; the shell must check every address it connects to.
 *
 *   LOCAL_DEVELOPMENT is the configuration for `wrangler dev` and tests:
 *   http: and loopback allowed. Nothing else enables loopback.
 *
 * INVARIANTS
 *   With cfg.allowLoopback false, no URL or address whose IP is in any
 *   range of ip-address.ts is accepted. With it true, only the loopback
 *   range is additionally accepted.
 *
 * ERRORS
 *   None thrown: refusals are results.
 */

import { classifyIp, type IpRange } from "./ip-address";

/** The parts of a WHATWG URL the guard reads (a `URL` instance has them). */
export interface UrlParts {
  protocol: string;
  username: string;
  password: string;
  hostname: string;
  port: string;
}

/** Guard configuration; everything is refused unless enabled here. */
export interface SsrfConfig {
  /** Allow http: as well as https:; default false. */
  allowInsecure?: boolean;
  /** Allow loopback targets (local development and tests only); default false. */
  allowLoopback?: boolean;
  /** Ports allowed on non-loopback targets; default [443, 80, 8443]. */
  allowedPorts?: readonly number[];
}

/** Why a target was refused. */
export type SsrfReason = "scheme" | "userinfo" | "address" | "hostname" | "port";

/** Result of a guard check. */
export type SsrfVerdict = { ok: true } | { ok: false; reason: SsrfReason; detail: string };

/** Local development and tests: http: and loopback allowed. */
export const LOCAL_DEVELOPMENT: SsrfConfig = { allowInsecure: true, allowLoopback: true };

/** Default allowed ports for non-loopback targets. */
export const DEFAULT_ALLOWED_PORTS: readonly number[] = [443, 80, 8443];

const METADATA_NAMES = new Set(["metadata.google.internal", "metadata", "instance-data"]);
const INTERNAL_SUFFIXES = [".internal", ".local", ".localdomain", ".home.arpa", ".lan", ".intranet", ".corp"];
const HOSTNAME = /^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

function refuse(reason: SsrfReason, detail: string): SsrfVerdict {
  return { ok: false, reason, detail };
}

function judgeRange(range: IpRange | "public", what: string, cfg: SsrfConfig): SsrfVerdict {
  if (range === "public") return { ok: true };
  if (range === "loopback" && cfg.allowLoopback === true) return { ok: true };
  return refuse("address", `${what} is a ${range} address`);
}

/** Checks one resolved IP address (after DNS, against rebinding). */
export function checkResolvedAddress(ip: string, cfg: SsrfConfig = {}): SsrfVerdict {
  const c = classifyIp(ip.trim());
  if (c === null) return refuse("address", `"${ip}" is not an IP address`);
  return judgeRange(c.range, ip, cfg);
}

/** True when the host is all digits, dots and hex prefixes, so a resolver would read it as IPv4. */
function looksNumeric(host: string): boolean {
  const labels = (host.endsWith(".") ? host.slice(0, -1) : host).split(".");
  const last = labels[labels.length - 1] ?? "";
  return /^(\d+|0x[0-9a-f]*)$/i.test(last);
}

function checkHostname(host: string, cfg: SsrfConfig): SsrfVerdict & { loopback?: boolean } {
  const name = host.endsWith(".") ? host.slice(0, -1) : host;
  if (name === "localhost" || name.endsWith(".localhost")) {
    return cfg.allowLoopback === true ? { ok: true, loopback: true } : refuse("hostname", `${host} is loopback`);
  }
  if (!HOSTNAME.test(name)) return refuse("hostname", `"${host}" is not a valid host name`);
  if (METADATA_NAMES.has(name)) return refuse("hostname", `${host} is a cloud metadata name`);
  if (INTERNAL_SUFFIXES.some((s) => name.endsWith(s))) return refuse("hostname", `${host} is an internal name`);
  if (!name.includes(".")) return refuse("hostname", `${host} is a single-label name`);
  return { ok: true };
}

function checkHost(host: string, cfg: SsrfConfig): SsrfVerdict & { loopback?: boolean } {
  const lower = host.toLowerCase();
  if (lower === "") return refuse("hostname", "empty host");
  if (lower.startsWith("[") || lower.includes(":") || looksNumeric(lower)) {
    const c = classifyIp(lower);
    if (c === null) return refuse("address", `"${host}" is not a valid IP literal`);
    const v = judgeRange(c.range, host, cfg);
    return v.ok ? { ok: true, loopback: c.range === "loopback" } : v;
  }
  return checkHostname(lower, cfg);
}

function checkPort(port: string, protocol: string, loopback: boolean, cfg: SsrfConfig): SsrfVerdict {
  if (port === "") return { ok: true };
  if (!/^\d{1,5}$/.test(port) || Number(port) > 65535) return refuse("port", `"${port}" is not a port`);
  if (loopback && cfg.allowLoopback === true) return { ok: true };
  const allowed = cfg.allowedPorts ?? DEFAULT_ALLOWED_PORTS;
  if (allowed.includes(Number(port))) return { ok: true };
  return refuse("port", `port ${port} is not allowed for ${protocol}// targets`);
}

/** Checks a webhook endpoint URL (WHATWG-parsed parts); see the module header for the rules. */
export function checkEndpointUrl(url: UrlParts, cfg: SsrfConfig = {}): SsrfVerdict {
  const protocol = url.protocol.toLowerCase();
  if (protocol !== "https:" && !(protocol === "http:" && cfg.allowInsecure === true)) {
    return refuse("scheme", `scheme ${protocol} is not allowed`);
  }
  if (url.username !== "" || url.password !== "") return refuse("userinfo", "credentials in the URL are not allowed");
  const host = checkHost(url.hostname, cfg);
  if (!host.ok) return host;
  return checkPort(url.port, protocol, host.loopback === true, cfg);
}
