/** An accepted message as the Outbox stores it, for the tests of the Outbox's rows (outbox-rcpt, outbox-rcpt-list, outbox-unadmitted, outbox-content, stored-envelopes), and an Outbox to run them in. */
import { env, runInDurableObject } from "cloudflare:test";
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

/** Runs `f` in a fresh Outbox with an SqlStorage that adds up the rows each step writes (`rows()`: since its last call). */
export function inOutbox<T>(name: string, f: (sql: SqlStorage, rows: () => number) => T): Promise<T> {
  return runInDurableObject(env.OUTBOX.getByName(name), (_o, state) => {
    const real = state.storage.sql;
    let cursors: SqlStorageCursor<Record<string, SqlStorageValue>>[] = [];
    const sql = {
      exec: (q: string, ...b: unknown[]) => {
        const c = real.exec(q, ...b);
        cursors.push(c);
        return c;
      },
    } as unknown as SqlStorage;
    const rows = () => {
      const n = cursors.reduce((s, c) => s + c.rowsWritten, 0);
      cursors = [];
      return n;
    };
    return f(sql, rows);
  });
}
