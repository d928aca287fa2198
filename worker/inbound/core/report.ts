/**
 * NAME
 *   report - whether a message that came in by mail is a report about mail the relay sent
 *
 * SUMMARY
 *   The one place that decides whether the email() handler treats a message as a report: a
 *   delivery status notification, a feedback-loop (ARF) report, an automatic reply, an
 *   unsubscribe by mail, or anything else addressed to a signed VERP address. Everything that is
 *   not a report goes elsewhere (inbound/email.ts notAReport).
 *
 * DESCRIPTION
 *   reportOf(what, token)  `what` is mail/inbound.ts readInbound's reading of the message,
 *       `token` what its envelope recipient names when that is a signed token address
 *       (mail/verp.ts), else null. In order:
 *     - an `unsubscribe+` address: an unsubscribe, whatever the message says (RFC 8058 mailto);
 *     - a DSN or an ARF report: that report, with the `bounces+` token when it came to one;
 *     - an automatic reply (RFC 3834 and the other marks readInbound knows): an auto-reply;
 *     - anything else to a `bounces+` address: an auto-reply too (a vacation program answers
 *       the Return-Path, often with no mark at all), never refused;
 *     - anything else: null, not a report.
 *
 * INVARIANTS
 *   Pure: no I/O, no clock. A message to a signed token address is always a report.
 *
 * ERRORS
 *   None thrown.
 */
import type { InboundKind } from "../../model/inbound";
import type { TokenKind } from "../../model/tokens";

/** A verified token address: what it names. */
export interface Token {
  kind: TokenKind;
  emailId: string;
  idx: number;
}

/** A DSN as readInbound reads it. */
export type Dsn = Extract<InboundKind, { kind: "dsn" }>;

/** What the handler takes as a report. */
export type Report =
  | { kind: "unsubscribe"; token: Token }
  | { kind: "dsn"; dsn: Dsn; token: Token | null }
  | { kind: "arf"; token: Token | null }
  | { kind: "auto-reply"; why: string };

/** See the header. */
export function reportOf(what: InboundKind, token: Token | null): Report | null {
  if (token?.kind === "unsubscribe") return { kind: "unsubscribe", token };
  const bounces = token?.kind === "bounces" ? token : null;
  if (what.kind === "dsn") return { kind: "dsn", dsn: what, token: bounces };
  if (what.kind === "arf") return { kind: "arf", token: bounces };
  if (what.kind === "auto-reply") return { kind: "auto-reply", why: what.why };
  if (bounces !== null) return { kind: "auto-reply", why: "a reply to a VERP address that is not a report" };
  return null;
}
