/**
 * The entries a delivery agent holds (agent-work.ts): taken from the Transport DO and not yet
 * reported, given up or left to their lease, with the step each last entered. The Transport DO
 * asks an agent about entries leased for long, and keeps those it holds until their lease runs
 * out; an entry held in one step for minutes is logged when asked about, with that step, so a
 * wait that never ends shows where it is.
 *
 * DESCRIPTION
 *   new HeldEntries(now?)   now() in ms (injected for tests).
 *   take(id)                one more run of the entry, at its first step ("queued").
 *   step(id, name)          the entry's run entered step `name` now.
 *   drop(id)                one run of the entry is over.
 *   has(id)                 whether any run of the entry is held.
 *   stuck(ids, ms)          of `ids`, those held in one step for at least `ms` (the agent logs
 *                           those of STUCK_LOG_MS): their step and ms.
 *
 * INVARIANTS
 *   An entry taken n times is held until dropped n times (the Transport DO may hand it over again
 *   after a lost answer). Memory only: an agent that restarts holds nothing, and its entries go
 *   back to the Transport DO at their next check.
 */
/** An entry held this long in one step is logged when the Transport DO asks about it, ms. */
export const STUCK_LOG_MS = 300_000;

interface Held {
  runs: number;
  step: string;
  since: number;
}

export class HeldEntries {
  private readonly byId = new Map<number, Held>();

  constructor(private readonly now: () => number = Date.now) {}

  take(id: number): void {
    const h = this.byId.get(id);
    if (h) Object.assign(h, { runs: h.runs + 1, step: "queued", since: this.now() });
    else this.byId.set(id, { runs: 1, step: "queued", since: this.now() });
  }

  step(id: number, name: string): void {
    const h = this.byId.get(id);
    if (h) Object.assign(h, { step: name, since: this.now() });
  }

  drop(id: number): void {
    const h = this.byId.get(id);
    if (!h) return;
    if (h.runs > 1) h.runs -= 1;
    else this.byId.delete(id);
  }

  has(id: number): boolean {
    return this.byId.has(id);
  }

  stuck(ids: readonly number[], ms: number): { entryId: number; step: string; ms: number }[] {
    const now = this.now();
    return ids.flatMap((entryId) => {
      const h = this.byId.get(entryId);
      return h && now - h.since >= ms ? [{ entryId, step: h.step, ms: now - h.since }] : [];
    });
  }
}
