/**
 * Bounce and delay notices (RFC 3464 DSNs) in the Outbox: written down in the same transaction
 * as the outcome that calls for them, then composed and queued as ordinary messages.
 *
 * DESCRIPTION
 *   migrateDsn        the `dsn_pending` table: one row per notice still to send (message id,
 *                     kind failed|delayed, recipients as JSON).
 *   planDsn           called inside recordOutcome's transaction: applied bounced/expired reports
 *                     become one `failed` notice row, unless notices are off or the message's
 *                     sender is the null sender or MAILER-DAEMON (a bounce is never bounced).
 *   planDelayNotice   a `delayed` notice for recipients still being retried (the core's
 *                     delay_warning_time), same rules.
 *   sendPendingDsns   composes each pending notice (worker/mail/dsn.ts) from the original's
 *                     header block in R2, stores its body, and in one transaction inserts it as a
 *                     new message of the same tenant (null sender, the original sender as its
 *                     only recipient) and drops the pending row. Returns the new message ids for
 *                     the classify queue: notices go through the same queue as all mail.
 *
 * INVARIANTS
 *   A message's body is not deleted while it has a pending notice (deleteDoneBodies skips it;
 *   the notice deletes it once sent, when the message is done),
 *   so the original headers are still there to quote. A crash after the body write and before
 *   the transaction leaves an orphan body (the sweeper deletes it) and the row, which is sent
 *   again: at least once, and never for a null-sender message. A notice that cannot be composed
 *   (a sender no 7-bit message can reach) is logged and dropped, so it never blocks the others.
 *   An object whose table was found empty remembers it (NONE_PENDING) until it plans a notice, so
 *   the follow-up of every change (after-change.ts) does not read the table to find nothing.
 */
import { composeDsn, shouldBounce, type DsnRecipient } from "../../worker/mail/dsn";
import { bodyKey, newMessageId, shardOf } from "../../worker/model/ids";
import { failsForDsn } from "./outcomes";
import { insertMessage } from "./store";
import type { OutcomeReport } from "../../worker/model/message";

/** Largest header block quoted in a notice. */
const HEADER_BYTES = 64 * 1024;

/** The SQLite of objects whose `dsn_pending` was found empty and got no row since. */
const NONE_PENDING = new WeakSet<SqlStorage>();

/** Creates the pending-notice table if missing. */
export function migrateDsn(sql: SqlStorage): void {
  sql.exec(`CREATE TABLE IF NOT EXISTS dsn_pending (seq INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT NOT NULL,
    kind TEXT NOT NULL, rcpts TEXT NOT NULL, created_at INTEGER NOT NULL)`);
}

function senderOf(sql: SqlStorage, id: string): string | null {
  return (
    sql.exec<{ mail_from: string }>("SELECT mail_from FROM message WHERE id = ?", id).toArray()[0]?.mail_from ?? null
  );
}

function addressOf(sql: SqlStorage, id: string, idx: number): string | null {
  return (
    sql.exec<{ address: string }>("SELECT address FROM rcpt_all WHERE message_id = ? AND idx = ?", id, idx).toArray()[0]
      ?.address ?? null
  );
}

/** Records a `failed` notice for the applied bounced/expired reports (inside the outcome's transaction). */
export function planDsn(sql: SqlStorage, id: string, applied: OutcomeReport[], nowMs: number): void {
  const failed = applied.filter(failsForDsn);
  if (failed.length === 0) return;
  const from = senderOf(sql, id);
  if (from === null || !shouldBounce(from)) return;
  const rcpts: DsnRecipient[] = failed.flatMap((r) => {
    const address = addressOf(sql, id, r.idx);
    if (!address) return [];
    const enhanced =
      r.response?.enhanced && /^5\.\d+\.\d+$/.test(r.response.enhanced)
        ? r.response.enhanced
        : r.status === "expired"
          ? "4.4.7"
          : "5.0.0";
    // RFC 3464 wants a 5.x.x status with action failed; an expiry reports its last temporary cause as 5.4.7.
    const status = enhanced.startsWith("5.") ? enhanced : "5.4.7";
    return [
      {
        address,
        action: "failed" as const,
        status,
        remoteMta: r.response?.mx ?? null,
        diagnostic: r.response?.text
          ? { code: r.response.code ?? null, text: r.response.text }
          : { text: r.status === "expired" ? "delivery time expired" : "delivery failed" },
        lastAttemptMs: nowMs,
      },
    ];
  });
  if (rcpts.length === 0) return;
  NONE_PENDING.delete(sql);
  sql.exec(
    "INSERT INTO dsn_pending (message_id, kind, rcpts, created_at) VALUES (?, 'failed', ?, ?)",
    id,
    JSON.stringify(rcpts),
    nowMs,
  );
}

/** Records a `delayed` notice for recipients still being retried. */
export function planDelayNotice(
  sql: SqlStorage,
  id: string,
  addresses: string[],
  reason: string,
  retryUntilMs: number | null,
  nowMs: number,
): void {
  const from = senderOf(sql, id);
  if (addresses.length === 0 || from === null || !shouldBounce(from)) return;
  const rcpts: DsnRecipient[] = addresses.map((address) => ({
    address,
    action: "delayed",
    status: "4.4.7",
    diagnostic: { text: reason },
    lastAttemptMs: nowMs,
    willRetryUntilMs: retryUntilMs,
  }));
  NONE_PENDING.delete(sql);
  sql.exec(
    "INSERT INTO dsn_pending (message_id, kind, rcpts, created_at) VALUES (?, 'delayed', ?, ?)",
    id,
    JSON.stringify(rcpts),
    nowMs,
  );
}

/** The header block of a stored body (up to the first empty line), from the row or from R2. */
async function headerBlock(sql: SqlStorage, bucket: R2Bucket, id: string): Promise<string> {
  const row = sql
    .exec<{ body: string | ArrayBuffer | null; body_r2: number }>("SELECT body, body_r2 FROM message WHERE id = ?", id)
    .toArray()[0];
  let text: string;
  if (row && row.body_r2 === 0) {
    if (row.body === null) return "";
    text =
      typeof row.body === "string"
        ? row.body.slice(0, HEADER_BYTES)
        : new TextDecoder().decode(row.body.slice(0, HEADER_BYTES));
  } else {
    const obj = await bucket.get(bodyKey(id), { range: { offset: 0, length: HEADER_BYTES } });
    if (!obj) return "";
    text = new TextDecoder().decode(await obj.arrayBuffer());
  }
  const end = text.search(/\r?\n\r?\n/);
  return end >= 0 ? text.slice(0, end) : text;
}

type Pending = { seq: number; message_id: string; kind: "failed" | "delayed"; rcpts: string };

/** Composes, stores and admits every pending notice; returns the new message ids. */
export async function sendPendingDsns(
  storage: DurableObjectStorage,
  bucket: R2Bucket,
  heloName: string,
  nowMs: number,
): Promise<string[]> {
  const sql = storage.sql;
  if (NONE_PENDING.has(sql)) return [];
  const pending = sql
    .exec<Pending>("SELECT seq, message_id, kind, rcpts FROM dsn_pending ORDER BY seq LIMIT 50")
    .toArray();
  if (pending.length === 0) NONE_PENDING.add(sql);
  const out: string[] = [];
  for (const p of pending) {
    const m = sql
      .exec<{ tenant: string; mail_from: string; created_at: number }>(
        "SELECT tenant, mail_from, created_at FROM message WHERE id = ?",
        p.message_id,
      )
      .toArray()[0];
    if (!m || !shouldBounce(m.mail_from)) {
      sql.exec("DELETE FROM dsn_pending WHERE seq = ?", p.seq);
      continue;
    }
    const id = newMessageId(shardOf(p.message_id));
    let text: string;
    try {
      text = composeDsn({
        heloName,
        mailFrom: m.mail_from,
        envelopeId: p.message_id,
        arrivalMs: m.created_at,
        nowMs,
        token: `${p.message_id}.${p.seq}`,
        recipients: JSON.parse(p.rcpts) as DsnRecipient[],
        originalHeaders: await headerBlock(sql, bucket, p.message_id),
      });
    } catch (e) {
      // A notice that cannot be composed (e.g. a sender no 7-bit message can reach) never will be:
      // drop it rather than let it block every later notice of the shard.
      console.error(
        JSON.stringify({
          error: "outbox: a delivery status notice cannot be composed; dropped",
          messageId: p.message_id,
          detail: e instanceof Error ? e.message : String(e),
        }),
      );
      sql.exec("DELETE FROM dsn_pending WHERE seq = ?", p.seq);
      continue;
    }
    const bytes = new TextEncoder().encode(text);
    await bucket.put(bodyKey(id), bytes);
    const subject = /^Subject: (.*)$/m.exec(text)?.[1]?.trim() ?? "Delivery Status Notification";
    const messageId = /^Message-ID: (.*)$/im.exec(text)?.[1]?.trim() ?? `<${id}@${heloName}>`;
    storage.transactionSync(() => {
      insertMessage(sql, m.tenant, {
        id,
        createdAt: nowMs,
        scheduledAt: null,
        mailFrom: "",
        rcptTo: [m.mail_from],
        size: bytes.length,
        summary: {
          from: `MAILER-DAEMON@${heloName}`,
          to: [m.mail_from],
          cc: null,
          bcc: null,
          reply_to: null,
          subject,
          html: null,
          text: null,
          tags: [{ name: "dsn", value: p.kind }],
          message_id: messageId,
        },
      });
      sql.exec("DELETE FROM dsn_pending WHERE seq = ?", p.seq);
    });
    // The original finished meanwhile and waits for no other notice: its body goes now.
    const done = sql
      .exec<{ body_r2: number }>(
        "SELECT body_r2 FROM message WHERE id = ?1 AND state = 'done' AND id NOT IN (SELECT message_id FROM dsn_pending)",
        p.message_id,
      )
      .toArray()[0];
    if (done?.body_r2 === 0) sql.exec("UPDATE message SET body = NULL WHERE id = ? AND body IS NOT NULL", p.message_id);
    else if (done) await bucket.delete(bodyKey(p.message_id));
    out.push(id);
  }
  return out;
}
