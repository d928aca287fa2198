/**
 * The delivery agent's connection cache, as Postfix's smtp(8) keeps one
 * (smtp_connection_cache_on_demand): a session that finished its messages stays open, idle, and
 * the next entry to the same host takes it instead of connecting, greeting and saying EHLO again.
 * Only under load, as Nagle's rule batches: a connection stays open, for SESSION_IDLE_MS
 * (smtp_connection_cache_time_limit, 2 s), only when mail to its host is flowing: another
 * transaction to the host began less than SESSION_IDLE_MS before this one, or began while it ran;
 * a lone message's connection is closed at once. An open connection keeps its agent billed as active: holding one
 * for a lone email cost 2 s of duration, and the next lone email to the host would rarely come in
 * time to use it. A connection is not reused once
 * it is SESSION_REUSE_MS old (smtp_connection_reuse_time_limit, 300 s). A cached connection that
 * fails its reuse check (the RSET before the new messages: staleCache) is dropped and the
 * messages go over a new one, as Postfix does; nothing of them reached the server. A provider
 * rule's messages per session (Postfix's smtp_connection_reuse_count_limit) closes a connection
 * once it has carried that many messages.
 *
 * An agent serves many destinations (agentName), so its idle connections may be to many hosts: at
 * most `maxOpen` connections are open at once, in transactions or idle, and a transaction that
 * needs a new one while that many are open first closes the longest idle (Workers allow a handful
 * of open connections at a time; one more would wait behind an idle one).
 *
 * DESCRIPTION
 *   new SessionCache(now?, maxOpen?)   now() in ms (injected for tests); maxOpen: connections open
 *                            at once, at most (the agent's AGENT_SESSIONS; default no bound).
 *   run(key, open, messages, openBody, reuseLimit?)  the messages over a cached session for
 *                            `key` (a host, port and session settings), or over a new one from
 *                            open(); kept for more only under load (see above) and while it has
 *                            carried fewer than `reuseLimit` messages.
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
  /** When it was last left idle (ms). */
  idleAt: number;
  timer: ReturnType<typeof setTimeout> | null;
}

export class SessionCache {
  private readonly idle = new Map<string, Held[]>();
  /** Transactions begun to each key, and when the last began (ms), for the hold under load. */
  private readonly began = new Map<string, { n: number; at: number }>();

  /** Transactions running now, each over a connection of its own. */
  private running = 0;

  constructor(
    private readonly now: () => number = Date.now,
    private readonly maxOpen = Infinity,
  ) {}

  /** Sends `messages` over an idle session for `key`, or over a new one (see header). */
  async run(
    key: string,
    open: () => CachedSmtpSession,
    messages: MessageEnvelope[],
    openBody: SmtpDeliveryRequest["openBody"],
    reuseLimit = 0,
  ): Promise<CachedBatch> {
    const hold = this.begin(key);
    this.running++;
    try {
      const cached = this.take(key);
      if (cached) {
        const batch = await cached.session.send(messages, openBody);
        if (!batch.staleCache) return this.keep(key, cached, batch, messages.length, reuseLimit, hold());
      }
      while (this.running + this.size() > this.maxOpen && this.closeOldest());
      const fresh: Held = { session: open(), born: this.now(), timer: null, sent: 0, idleAt: 0 };
      return this.keep(key, fresh, await fresh.session.send(messages, openBody), messages.length, reuseLimit, hold());
    } finally {
      this.running--;
    }
  }

  /** QUITs the session idle longest (of any host); false when none is idle. */
  private closeOldest(): boolean {
    let oldest: { key: string; held: Held; at: number } | null = null;
    for (const [key, list] of this.idle)
      for (const held of list) if (!oldest || held.idleAt < oldest.at) oldest = { key, held, at: held.idleAt };
    if (!oldest) return false;
    if (oldest.held.timer) clearTimeout(oldest.held.timer);
    this.expire(oldest.key, oldest.held);
    return true;
  }

  /**
   * Notes a transaction to `key` beginning now; answers, for when it ends, how long its connection
   * stays open (see the header): SESSION_IDLE_MS when mail to the host flows, else 0.
   */
  private begin(key: string): () => number {
    const now = this.now();
    const last = this.began.get(key);
    if (this.began.size >= 4096) this.began.clear();
    const mine = (last?.n ?? 0) + 1;
    this.began.set(key, { n: mine, at: now });
    const before = last !== undefined && now - last.at < SESSION_IDLE_MS;
    return () => (before || (this.began.get(key)?.n ?? 0) > mine ? SESSION_IDLE_MS : 0);
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

  /**
   * Caches, for `hold` ms, a session that stays open, is young enough and has carried fewer than
   * `reuseLimit` messages (0: any number); closes it otherwise, and when `hold` is 0.
   */
  private keep(
    key: string,
    held: Held,
    batch: CachedBatch,
    sent: number,
    reuseLimit: number,
    hold: number,
  ): CachedBatch {
    if (!batch.open) return batch;
    held.sent += sent;
    if (hold === 0 || this.now() - held.born >= SESSION_REUSE_MS || (reuseLimit > 0 && held.sent >= reuseLimit)) {
      void held.session.close();
      return batch;
    }
    held.idleAt = this.now();
    held.timer = setTimeout(() => this.expire(key, held), hold);
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
