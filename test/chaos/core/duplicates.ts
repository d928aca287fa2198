/**
 * The crash campaign's rule for duplicate deliveries.
 *
 * DESCRIPTION
 *   explainedByKill(copies, kills)  whether the copies of one recipient (the times each reached
 *       its sink, ms) are explained by a kill: some kill, from the moment it began (`atMs`) to
 *       the moment the whole process tree was dead (`killedMs`), overlaps the span from the
 *       first copy to the last. Such an entry was in flight at the kill: the sink had the final
 *       dot, and the runtime died before it could record the reply, so the lease ran out and the
 *       entry was sent again (Postfix does the same after a crash). One copy, or copies with no
 *       kill over their span, are not explained.
 *
 * INVARIANTS
 *   Pure: no I/O, no clock.
 */

/** A kill of the runtime: when it began and when every process of the tree was dead. */
export interface KillSpan {
  atMs: number;
  killedMs: number;
}

/** Whether a kill overlaps the span of the copies (see the header). */
export function explainedByKill(copies: readonly number[], kills: readonly KillSpan[]): boolean {
  if (copies.length < 2) return false;
  const first = Math.min(...copies),
    last = Math.max(...copies);
  return kills.some((k) => k.killedMs >= first && k.atMs <= last);
}
