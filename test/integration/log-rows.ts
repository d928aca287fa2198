/** A D1 event-log row for the tests of the log (event-ids, event-runs): an email.delivered transition with its envelope `id` (none when null). */
import type { LogRow } from "../../worker/db/events";

export const deliveredRow = (sourceSeq: number, id: string | null, at: number): LogRow => ({
  source_seq: sourceSeq,
  part: 0,
  type: "email.delivered",
  recipient: "r@x.example",
  created_at: at,
  data: "{}",
  event_id: id,
  event_type: id === null ? null : "email.delivered",
  body: id === null ? null : JSON.stringify({ n: sourceSeq }),
});
