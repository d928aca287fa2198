// The delivery agent's connection cache (worker/delivery/session-cache.ts): reuse of an idle
// session while mail to its host flows, a lone message's connection closed at once, and a
// provider rule's messages per session (Postfix's smtp_connection_reuse_count_limit) closing a
// connection once it has carried that many.
import { afterEach, describe, expect, it, vi } from "vitest";
import { SessionCache } from "../../../worker/delivery/session-cache";
import { SESSION_IDLE_MS } from "../../../worker/model/delivery";
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
      close: async () => {
        s.closed = true;
      },
    } as unknown as CachedSmtpSession;
  };
  return { made, open };
}

const msg = (id: string) =>
  ({
    id,
    mailFrom: "a@x.test",
    rcptTo: ["b@y.test"],
    sizeBytes: 1,
    eightBitMime: true,
    smtpUtf8: false,
  }) as MessageEnvelope;
const body = async () => new ReadableStream<Uint8Array>();

afterEach(() => vi.useRealTimers());

describe("SessionCache", () => {
  it("closes a lone message's connection at once, and reuses one for the same key while mail to it flows", async () => {
    vi.useFakeTimers();
    const cache = new SessionCache(() => Date.now());
    const { made, open } = fakes();
    for (let i = 0; i < 5; i++) await cache.run("h:25", open, [msg(`m${i}`)], body);
    expect(made.map((s) => [s.carried, s.closed])).toEqual([
      [1, true],
      [4, false],
    ]);
    expect(cache.size()).toBe(1);
    await cache.closeAll();
  });

  it("holds a connection SESSION_IDLE_MS while mail to its host flows, then closes it", async () => {
    vi.useFakeTimers();
    const cache = new SessionCache(() => Date.now());
    const { made, open } = fakes();
    await cache.run("h:25", open, [msg("a")], body);
    await vi.advanceTimersByTimeAsync(300);
    await cache.run("h:25", open, [msg("b")], body); // 300 ms after a: mail flows, held 2 s
    expect(cache.size()).toBe(1);
    await vi.advanceTimersByTimeAsync(SESSION_IDLE_MS - 1);
    expect(cache.size()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(cache.size()).toBe(0);
    expect(made.map((s) => s.closed)).toEqual([true, true]);
  });

  it("keeps the first connection of a burst: another transaction to its host began while it ran", async () => {
    vi.useFakeTimers();
    const cache = new SessionCache(() => Date.now());
    const { made, open } = fakes();
    await Promise.all([cache.run("h:25", open, [msg("a")], body), cache.run("h:25", open, [msg("b")], body)]);
    expect(made.map((s) => s.closed)).toEqual([false, false]);
    expect(cache.size()).toBe(2);
    await cache.closeAll();
  });

  it("treats a message more than SESSION_IDLE_MS after the last to its host as lone", async () => {
    vi.useFakeTimers();
    const cache = new SessionCache(() => Date.now());
    const { made, open } = fakes();
    await cache.run("h:25", open, [msg("a")], body);
    await vi.advanceTimersByTimeAsync(SESSION_IDLE_MS);
    await cache.run("h:25", open, [msg("b")], body);
    expect(made.map((s) => s.closed)).toEqual([true, true]);
    expect(cache.size()).toBe(0);
  });

  it("closes a session once it has carried the reuse limit, and opens a new one for more", async () => {
    vi.useFakeTimers();
    const cache = new SessionCache(() => Date.now());
    const { made, open } = fakes();
    await cache.run("h:25", open, [msg("first")], body, 2); // lone: closed at once
    for (let i = 0; i < 5; i++) await cache.run("h:25", open, [msg(`m${i}`)], body, 2);
    expect(made.map((s) => [s.carried, s.closed])).toEqual([
      [1, true],
      [2, true],
      [2, true],
      [1, false],
    ]);
    expect(cache.size()).toBe(1);
    // A batch larger than the limit goes out whole, and the session is not kept.
    await cache.run("h:25", open, [msg("a"), msg("b"), msg("c")], body, 2);
    expect(made.at(-1)!.closed).toBe(true);
    await cache.closeAll();
  });

  it("keeps at most maxOpen connections open, idle ones included: a new host's closes the longest idle", async () => {
    vi.useFakeTimers();
    const cache = new SessionCache(() => Date.now(), 2);
    const { made, open } = fakes();
    // Two messages to each of a and b, 10 ms apart: mail flows, both connections stay idle.
    for (const key of ["a:25", "a:25", "b:25", "b:25"]) {
      await cache.run(key, open, [msg(key)], body);
      await vi.advanceTimersByTimeAsync(10);
    }
    expect(made.map((s) => s.closed)).toEqual([true, false, true, false]);
    expect(cache.size()).toBe(2);
    // A transaction to c needs a third connection: a's, idle longest, is closed first.
    await cache.run("c:25", open, [msg("c")], body);
    expect(made.map((s) => s.closed)).toEqual([true, true, true, false, true]);
    expect(cache.size()).toBe(1);
    // Two transactions at once with b idle: the second new connection closes b's.
    await Promise.all([cache.run("d:25", open, [msg("d1")], body), cache.run("e:25", open, [msg("e1")], body)]);
    expect(made[3]!.closed).toBe(true);
    await cache.closeAll();
  });
});
