/**
 * The delivery agent's connection cache, as Postfix's smtp(8) keeps one
 * (smtp_connection_cache_on_demand): a session that finished its messages stays open, idle, for
 * SESSION_IDLE_MS (smtp_connection_cache_time_limit, 2 s), and the next entry to the same host
 * takes it instead of connecting, greeting and saying EHLO again. A connection is not reused once
 * it is SESSION_REUSE_MS old (smtp_connection_reuse_time_limit, 300 s). A cached connection that
 * fails its reuse check (the RSET before the new messages: staleCache) is dropped and the
 * messages go over a new one, as Postfix does; nothing of them reached the server. A provider
 * rule's messages per session (Postfix's smtp_connection_reuse_count_limit) closes a connection
 * once it has carried that many messages.
 *
 * DESCRIPTION
 *   new SessionCache(now?)   now() in ms (injected for tests).
 *   run(key, open, messages, openBody, reuseLimit?)  the messages over a cached session for
 *                            `key` (a host, port and session settings), or over a new one from
 *                            open(); kept for more only while it has carried fewer than
 *                            `reuseLimit` messages.
 *   size()                   idle sessions held.
 *   closeAll()               QUITs every idle session.
 */
import type { MessageEnvelope } from "../smtp/core/types";
import type { CachedBatch, CachedSmtpSession, SmtpDeliveryRequest } from "../smtp/socket";
import { SESSION_IDLE_MS } from "../model/delivery";

/** Postfix's smtp_connection_reuse_time_limit: how long a connection may be reused at all. */
export const SESSION_REUSE_MS = 300_000;

interface Held {
  session: CachedSmtpSession;
  born: number;
  /** Messages it has carried. */
  sent: number;
  timer: ReturnType<typeof setTimeout> | null;
}

export class SessionCache {
  private readonly idle = new Map<string, Held[]>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Sends `messages` over an idle session for `key`, or over a new one (see header). */
  async run(key: string, open: () => CachedSmtpSession, messages: MessageEnvelope[], openBody: SmtpDeliveryRequest["openBody"], reuseLimit = 0): Promise<CachedBatch> {
    const cached = this.take(key);
    if (cached) {
      const batch = await cached.session.send(messages, openBody);
      if (!batch.staleCache) return this.keep(key, cached, batch, messages.length, reuseLimit);
    }
    const fresh: Held = { session: open(), born: this.now(), timer: null, sent: 0 };
    return this.keep(key, fresh, await fresh.session.send(messages, openBody), messages.length, reuseLimit);
  }

  /** Idle sessions held now. */
  size(): number {
    let n = 0;
    for (const list of this.idle.values()) n += list.length;
    return n;
  }

  /** QUITs every idle session. */
  async closeAll(): Promise<void> {
    const all = [...this.idle.values()].flat();
    this.idle.clear();
    for (const h of all) if (h.timer) clearTimeout(h.timer);
    await Promise.all(all.map((h) => h.session.close()));
  }

  /** The most recently idled session for `key` (the warmest), if any. */
  private take(key: string): Held | null {
    const list = this.idle.get(key);
    const held = list?.pop() ?? null;
    if (list && list.length === 0) this.idle.delete(key);
    if (held?.timer) clearTimeout(held.timer);
    return held;
  }

  /** Caches a session that stays open, is young enough and has carried fewer than `reuseLimit` messages (0: any number); closes it otherwise. */
  private keep(key: string, held: Held, batch: CachedBatch, sent: number, reuseLimit: number): CachedBatch {
    if (!batch.open) return batch;
    held.sent += sent;
    if (this.now() - held.born >= SESSION_REUSE_MS || (reuseLimit > 0 && held.sent >= reuseLimit)) {
      void held.session.close();
      return batch;
    }
    held.timer = setTimeout(() => this.expire(key, held), SESSION_IDLE_MS);
    const list = this.idle.get(key) ?? [];
    list.push(held);
    this.idle.set(key, list);
    return batch;
  }

  /** An idle session's time is up: QUIT. */
  private expire(key: string, held: Held): void {
    const list = this.idle.get(key);
    const i = list?.indexOf(held) ?? -1;
    if (list && i >= 0) list.splice(i, 1);
    if (list && list.length === 0) this.idle.delete(key);
    void held.session.close();
  }
}
