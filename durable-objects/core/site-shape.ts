/*
 * NAME
 *   site-shape - what a provider rule makes of a destination in the scheduler (issue #13, item 2)
 * DESCRIPTION
 *   The delivery stage matches a destination's MX hosts to a provider rule (worker/net/core/
 *   providers.ts: Google, Microsoft, Yahoo, Apple … host millions of domains behind a few MX
 *   names) and reports the rule's shape with the entry: SiteShape. applySiteShape() then
 *   - names the queue's site after the provider, so every domain hosted there shares the
 *     pickup-policy key "site:<name>" (the site scope of reply rules and operator suspensions);
 *   - bounds the provider's sessions as a whole: a concurrency cap `limit` on that key;
 *   - bounds each of its domains: the queue's window starts at `initial` (for a queue idle
 *     long enough to be reset) and never exceeds `limit` (windowParamsOf);
 *   - puts the rule's `rate` on the key.
 *   The cap and rate are installed on the key only when no one else set it (an operator's rule
 *   stays), and kept in step with the provider rule (PolicyRule.provider names it) as reports
 *   come in. With no shape reported, nothing here runs and scheduling is exactly Postfix's.
 * INVARIANTS
 *   Pure: no I/O, time passed in. A queue's window never exceeds its shape's limit.
 */
import type { WindowParams } from "./window-state";
import type { PolicyRule, Qmgr, Queue } from "./model";
import { formatRate, parseRate, setPolicy } from "./policy";

/** A provider rule's shape as the delivery stage reports it. */
export interface SiteShape {
  /** The provider rule's name: the queue's site. */
  name: string;
  /** The window's initial value and limit, per domain; `limit` also caps the provider's sessions. */
  initial?: number;
  limit?: number;
  /** At most this many selections per interval for the whole provider ("300/m"). */
  rate?: string;
}

/** The window parameters of a queue: its transport's, bounded by its shape. */
export function windowParamsOf(queue: Queue): WindowParams {
  const p = queue.transport.p;
  const s = queue.shape;
  if (!s) return p;
  const limit =
    s.limit !== undefined
      ? p.concurrencyLimit > 0
        ? Math.min(p.concurrencyLimit, s.limit)
        : s.limit
      : p.concurrencyLimit;
  const initial = Math.min(s.initial ?? p.initialConcurrency, limit > 0 ? limit : Infinity);
  return { ...p, initialConcurrency: initial, concurrencyLimit: limit };
}

/** Holds a shaped queue's window at its limit (Postfix's feedback sets it from the busy count, which may be above). */
export function boundWindow(queue: Queue): void {
  const limit = queue.shape?.limit;
  if (limit !== undefined && queue.window > limit) queue.window = limit;
}

/** Applies a reported shape to the queue and the provider's policy key (see the header). */
export function applySiteShape(q: Qmgr, queue: Queue, shape: SiteShape, now: number): void {
  queue.site = shape.name;
  const mine =
    shape.initial === undefined && shape.limit === undefined
      ? null
      : {
          ...(shape.initial !== undefined ? { initial: shape.initial } : {}),
          ...(shape.limit !== undefined ? { limit: shape.limit } : {}),
        };
  queue.shape = mine;
  boundWindow(queue);
  const key = `site:${shape.name}`;
  const existing = q.policies.get(key)?.rule;
  if (existing && existing.provider !== shape.name) return; // an operator's (or a reply rule's) rule stays
  const rate = shape.rate !== undefined ? parseRate(shape.rate) : null;
  const wanted: PolicyRule = {
    ...(shape.limit !== undefined ? { concurrency: shape.limit } : {}),
    ...(rate ? { rate } : {}),
  };
  if (wanted.concurrency === undefined && !wanted.rate) return;
  if (existing && sameShape(existing, wanted)) return;
  // Keeps what a reply rule added since (a suspension, a throttle).
  setPolicy(q, key, { ...existing, ...wanted, provider: shape.name }, now);
}

function sameShape(a: PolicyRule, b: PolicyRule): boolean {
  const rate = (r: PolicyRule) => (r.rate ? formatRate(r.rate) : null);
  return a.concurrency === b.concurrency && rate(a) === rate(b);
}
