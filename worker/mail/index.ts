/**
 * Public surface of the mail module: compose Resend-style requests into MIME and DKIM-sign them.
 *
 * DESCRIPTION
 *   Re-exports compose/formatDate (compose.ts), envelopeOf/parseMailbox/toAsciiDomain (address.ts),
 *   signDkim/importDkimKey (dkim.ts), the header policy sets (header.ts) and the error types
 *   (errors.ts). Everything here runs on Web APIs only (crypto.subtle, TextEncoder, btoa/atob, URL).
 *
 * INVARIANTS
 *   No module under worker/mail imports node:* or uses Buffer, Math.random or the clock; the only
 *   randomness is crypto.randomUUID() as compose's Message-ID when the caller injects none.
 *
 * ERRORS
 *   See the re-exported modules.
 */
export {
  compose,
  formatDate,
  type AttachmentInput,
  type ComposedMessage,
  type ComposeOptions,
  type SendRequest,
} from "./compose";
export { envelopeOf, parseMailbox, toAsciiDomain, type Envelope, type Mailbox } from "./address";
export { importDkimKey, signDkim, type DkimAlgorithm, type DkimSigner } from "./dkim";
export { OVERRIDABLE_HEADERS, REFUSED_HEADERS } from "./header";
export { DkimError, isDkimError, isMailInputError, MailInputError, type MailErrorName } from "./errors";
