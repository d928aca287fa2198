/*
 * NAME
 *   ports - what passes between the queue manager's core and its shell
 * DESCRIPTION
 *   ResolvedRecipient is a recipient as the classify stage resolved it. RecipientSource is the
 *   port through which the core reads a message's recipients (the queue file in Postfix), one
 *   RecipientBatch per read. It is synchronous, as a Durable Object's SQLite is; the core
 *   itself does no I/O.
 *
 *   Timer is a time at which the shell must call tick(); Effect is something the shell must do
 *   or record, drained after each call. The in-core state they serve is model.ts's.
 */

/** A recipient as the classify stage resolved it. Extra fields are carried through untouched. */
export interface ResolvedRecipient {
  /** The recipient address (used for per-recipient queue names). */
  address: string;
  /** Transport name, e.g. "smtp" or "relay". */
  transport: string;
  /** Nexthop (destination), e.g. "example.com" or "[smtp.example.net]:587". */
  nexthop: string;
  /** Optional pickup-policy keys (spec §12.6): egress source and destination site. */
  egress?: string;
  site?: string;
}

/** One read of a message's recipients. */
export interface RecipientBatch<R extends ResolvedRecipient = ResolvedRecipient> {
  rcpts: R[];
  /** Where the next read starts. */
  nextOffset: number;
  /** Upper bound of recipients not yet read after this batch (0 = fully read). */
  unread: number;
}

/** The queue-file port: reads up to `limit` recipients of a message from `offset`. */
export interface RecipientSource<R extends ResolvedRecipient = ResolvedRecipient> {
  read(messageId: string, offset: number, limit: number): RecipientBatch<R>;
}

/** A timer the shell must honour by calling tick() at or after `at`. */
export interface Timer {
  at: number;
  seq: number;
  kind: "queue" | "transport" | "policy" | "idle";
  /** Transport name ("" for the idle list). */
  transport: string;
  /** Queue name (queue, idle) or policy key (policy). */
  ref: string;
}

/** Something the shell must do or record; drained after each call. */
export type Effect =
  | {
      kind: "deferred";
      messageId: string;
      rcpts: ResolvedRecipient[];
      reason: string;
      transport: string;
      nexthop: string;
    }
  | { kind: "message-done"; messageId: string }
  | { kind: "message-deferred"; messageId: string; nextAttemptAt: number; warn: boolean; warnTime: number }
  | { kind: "message-expired"; messageId: string }
  | {
      kind: "destination";
      transport: string;
      queue: string;
      event: "dead" | "revived" | "suspended" | "resumed";
      until?: number;
      reason?: string;
    }
  | { kind: "transport"; transport: string; event: "dead" | "revived"; until?: number }
  /** A reply rule matched a site failure of the entry `entryId` and suspended `key` until `until` (reply-rules.ts). */
  | {
      kind: "reply-rule";
      entryId: number;
      messageId: string;
      transport: string;
      queue: string;
      rule: string;
      action: string;
      key: string;
      until: number;
      reply: string;
      rate?: string;
    };
