/** A message view as the Outbox answers it, for the tests of the D1 index (index-batch, event-runs-named). */
import type { MessageView, RcptStatus } from "../../worker/model/message";

export function view(
  id: string,
  tenant: string,
  n: number,
  status: RcptStatus,
  at: number,
  extra: { tags?: { name: string; value: string }[]; message_id?: string; cc?: string[] } = {},
): MessageView {
  const to = Array.from({ length: n }, (_, i) => `r${i}@${id.slice(-6)}.example`);
  return {
    id,
    tenant,
    created_at: 1_000,
    scheduled_at: null,
    state: status === "delivered" ? "done" : "open",
    summary: {
      from: "s@sender.test",
      to,
      cc: extra.cc ?? null,
      bcc: null,
      reply_to: null,
      subject: `subject of ${id}`,
      html: null,
      text: "hi",
      tags: extra.tags ?? null,
      ...(extra.message_id !== undefined ? { message_id: extra.message_id as string } : {}),
    } as MessageView["summary"],
    recipients: to.map((email, idx) => ({
      idx,
      email,
      status,
      transport: "smtp",
      nexthop: `${id.slice(-6)}.example`,
      attempts: status === "delivered" ? 1 : 0,
      next_attempt_at: null,
      last_response: null,
      blocked_by: null,
      updated_at: at,
    })),
  };
}
