/**
 * Test harness for the scheduling core: an in-memory recipient source (the "queue file")
 * and helpers to build a queue manager from Postfix-style parameters.
 */
import {
  createQmgr,
  mustParseSchedulerConfig,
  type Qmgr,
  type RecipientSource,
  type ResolvedRecipient,
  type SchedulerConfigInput,
} from "../../../durable-objects/core";

/** A recipient with a test id. */
export interface TestRcpt extends ResolvedRecipient {
  n: number;
}

/** An in-memory recipient source: message id → recipients in file order. */
export class ArraySource implements RecipientSource<TestRcpt> {
  readonly files = new Map<string, TestRcpt[]>();
  reads = 0;
  read(messageId: string, offset: number, limit: number) {
    this.reads += 1;
    const all = this.files.get(messageId) ?? [];
    const rcpts = all.slice(offset, offset + limit);
    const nextOffset = offset + rcpts.length;
    return { rcpts, nextOffset, unread: all.length - nextOffset };
  }
}

/** Builds recipients for one message: `count` of them to `nexthop` on `transport`. */
export function rcpts(count: number, nexthop = "dest.example", transport = "smtp", start = 0): TestRcpt[] {
  return Array.from({ length: count }, (_, i) => ({
    n: start + i,
    address: `u${start + i}@${nexthop}`,
    transport,
    nexthop,
  }));
}

/** A queue manager over a fresh ArraySource. */
export function makeQmgr(input: SchedulerConfigInput): { q: Qmgr<TestRcpt>; src: ArraySource } {
  const src = new ArraySource();
  return { q: createQmgr(mustParseSchedulerConfig(input), src), src };
}
