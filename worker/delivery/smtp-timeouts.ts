/**
 * The SMTP client's per-step timeouts from configuration: SMTP_TIMEOUTS, a JSON object with
 * Postfix's parameter names (smtp_connect_timeout … smtp_quit_timeout); unset ones keep
 * Postfix's defaults. A malformed value is logged and ignored, so mail still goes out with the
 * defaults rather than not at all.
 */
import { parseSmtpTimeouts, type SmtpTimeouts } from "../smtp/core/config";

/** The configured timeouts (only those set). */
export function smtpTimeoutsOf(env: { SMTP_TIMEOUTS?: string }): Partial<SmtpTimeouts> {
  if (!env.SMTP_TIMEOUTS) return {};
  try {
    return parseSmtpTimeouts(JSON.parse(env.SMTP_TIMEOUTS));
  } catch (e) {
    console.error(JSON.stringify({ error: "SMTP_TIMEOUTS ignored", detail: e instanceof Error ? e.message : String(e) }));
    return {};
  }
}
