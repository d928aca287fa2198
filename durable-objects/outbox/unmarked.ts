/**
 * Messages admitted but not marked ready, in memory (admit.ts admitAll with `lazy`).
 *
 * A one-recipient message admitted into an active queue of a self-dispatching transport is
 * reported on soon: its outcome marks it ready in the write it makes anyway (outcomes.ts keeps
 * its email.queued there), so marking it ready at admission would write its row once more. This
 * keeps such messages until their index lag: the Outbox's lag alarm (armed at admission) marks
 * those still not marked, with email.queued dated at their admission, and forwards it as for any
 * message whose delivery stage is late. A mark of a message already marked or finished writes
 * nothing (markReady).
 *
 * INVARIANTS
 *   Nothing here is needed for safety: the Transport DO holds every admission it answered, and
 *   the outcome it brings marks the message (a deferral too). After a restart the messages it held
 *   are still `unclassified`, out of the index of waiting messages (the accept admitted them),
 *   and their email.queued comes with their first outcome instead of at their index lag.
 *
 * DESCRIPTION
 *   add(id, idxs, atMs)        remembers an admission; forget(id) drops it (its outcome came);
 *                              has(id): the status API shows its recipient `ready` meanwhile.
 *   markDue(sql, nowMs, lagMs) marks those admitted lagMs ago or earlier; forgets them.
 *   nextAt(lagMs)              when the next is due, or null.
 */
import { markReady } from "./classify-state";

export class UnmarkedAdmissions {
  private readonly byId = new Map<string, { idxs: number[]; at: number }>();

  add(id: string, idxs: number[], atMs: number): void {
    this.byId.set(id, { idxs, at: atMs });
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  forget(id: string): void {
    this.byId.delete(id);
  }

  /** Marks the admissions due (see the header). */
  markDue(sql: SqlStorage, nowMs: number, lagMs: number): void {
    for (const [id, a] of this.byId) {
      if (a.at > nowMs - lagMs) continue;
      this.byId.delete(id);
      markReady(sql, id, a.idxs, a.at);
    }
  }

  nextAt(lagMs: number): number | null {
    let at: number | null = null;
    for (const a of this.byId.values()) at = Math.min(at ?? Infinity, a.at + lagMs);
    return at;
  }
}
