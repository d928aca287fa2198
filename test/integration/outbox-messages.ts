/** An accepted message as the Outbox stores it, for the tests of the Outbox's rows (outbox-rcpt, outbox-unadmitted, outbox-content, stored-envelopes). */
import type { ClassifyResult, NewMessage } from "../../worker/model/message";

export const T0 = 1_780_000_000_000;

export function message(id: string, to: string[], decided = true, createdAt = T0): NewMessage {
  return {
    id,
    createdAt,
    scheduledAt: null,
    mailFrom: "bounce@acme.test",
    rcptTo: to,
    size: 100,
    summary: {
      from: "a@acme.test",
      to,
      cc: null,
      bcc: null,
      reply_to: null,
      subject: "s",
      html: null,
      text: "t",
      tags: null,
      message_id: `<${id}@acme.test>`,
    },
    body: "Subject: s\r\n\r\nt\r\n",
    ...(decided
      ? {
          decisions: to.map((address, idx): ClassifyResult => ({
            idx,
            address,
            status: "ready",
            transport: "smtp",
            nexthop: "mx.example",
          })),
        }
      : {}),
  };
}
