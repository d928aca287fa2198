// The delivery agent's connection cache (worker/delivery/session-cache.ts): reuse of an idle
// session, and a provider rule's messages per session (Postfix's
// smtp_connection_reuse_count_limit) closing a connection once it has carried that many.
import { afterEach, describe, expect, it, vi } from "vitest";
import { SessionCache } from "../../../worker/delivery/session-cache";
import type { CachedSmtpSession } from "../../../worker/smtp/socket";
import type { MessageEnvelope } from "../../../worker/smtp/core/types";

/** A fake session that stays open and counts what it carried. */
function fakes() {
  const made: { carried: number; closed: boolean }[] = [];
  const open = () => {
    const s = { carried: 0, closed: false };
    made.push(s);
    return {
      send: async (messages: MessageEnvelope[]) => {
        s.carried += messages.length;
        return { transactions: [], siteFailure: null, staleCache: false, open: true };
      },
      close: async () => { s.closed = true; },
    } as unknown as CachedSmtpSession;
  };
  return { made, open };
}

const msg = (id: string) => ({ id, mailFrom: "a@x.test", rcptTo: ["b@y.test"], sizeBytes: 1, eightBitMime: true, smtpUtf8: false }) as MessageEnvelope;
const body = async () => new ReadableStream<Uint8Array>();

afterEach(() => vi.useRealTimers());

describe("SessionCache", () => {
  it("reuses an idle session for the same key", async () => {
    vi.useFakeTimers();
    const cache = new SessionCache(() => Date.now());
    const { made, open } = fakes();
    for (let i = 0; i < 5; i++) await cache.run("h:25", open, [msg(`m${i}`)], body);
    expect(made).toHaveLength(1);
    expect(made[0]!.carried).toBe(5);
    await cache.closeAll();
  });

  it("closes a session once it has carried the reuse limit, and opens a new one for more", async () => {
    vi.useFakeTimers();
    const cache = new SessionCache(() => Date.now());
    const { made, open } = fakes();
    for (let i = 0; i < 5; i++) await cache.run("h:25", open, [msg(`m${i}`)], body, 2);
    expect(made.map((s) => [s.carried, s.closed])).toEqual([[2, true], [2, true], [1, false]]);
    expect(cache.size()).toBe(1);
    // A batch larger than the limit goes out whole, and the session is not kept.
    await cache.run("h:25", open, [msg("a"), msg("b"), msg("c")], body, 2);
    expect(made.at(-1)!.closed).toBe(true);
    await cache.closeAll();
  });
});
