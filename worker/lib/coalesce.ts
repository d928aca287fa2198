/**
 * Adaptive batching: items added while a flush runs wait for it and go together in the next one.
 * An item added when nothing runs is flushed at once (or after lingerMs, for a stage off the
 * critical path that would rather batch), so an idle caller waits no longer than the call itself;
 * a busy one makes one call for many items (Nagle's idea, for RPCs). One flush at a time.
 *
 * DESCRIPTION
 *   new Coalescer(flush, lingerMs = 0)   flush(items) answers one result per item, in order;
 *                          lingerMs may be a function, asked before each flush (0: none).
 *   add(item)              resolves with the item's result (rejects as its flush did).
 */
export class Coalescer<I, O> {
  private pending: { item: I; resolve: (o: O) => void; reject: (e: unknown) => void }[] = [];
  private running = false;

  constructor(
    private readonly flush: (items: I[]) => Promise<O[]>,
    private readonly lingerMs: number | (() => number) = 0,
  ) {}

  add(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      if (!this.running) void this.loop();
    });
  }

  private async loop(): Promise<void> {
    this.running = true;
    try {
      while (this.pending.length > 0) {
        const linger = typeof this.lingerMs === "number" ? this.lingerMs : this.lingerMs();
        if (linger > 0) await new Promise((r) => setTimeout(r, linger));
        const batch = this.pending.splice(0);
        try {
          const out = await this.flush(batch.map((b) => b.item));
          batch.forEach((b, i) => b.resolve(out[i]!));
        } catch (e) {
          for (const b of batch) b.reject(e);
        }
      }
    } finally {
      this.running = false;
    }
  }
}
