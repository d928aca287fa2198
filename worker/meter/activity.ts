/**
 * The meter's clock of Durable Object duration: the wall-clock time each object is billed as
 * active, by Cloudflare's rule.
 *
 * THE RULE (developers.cloudflare.com: durable-objects/platform/pricing, concepts/durable-object-
 * lifecycle, reference/faq)
 *   An object is billed for duration, at 128 MB, while it is active in memory (handling a request
 *   or an event) and while it is idle in memory but cannot hibernate. It cannot hibernate while a
 *   setTimeout/setInterval callback is pending, while an awaited fetch or other I/O is in
 *   progress, or while a request or event is still being processed. An idle object that could
 *   hibernate is not billed, even before the runtime hibernates it. Several requests active at
 *   once share one interval. Pending ctx.waitUntil() promises keep the object running.
 *
 * DESCRIPTION
 *   An Activity per object instance (meterClass in objects.ts makes one) counts the reasons it
 *   is active: requests and alarms running, waitUntil and blockConcurrencyWhile promises
 *   pending, timers set and not fired or cleared, and calls out through its metered bindings
 *   (DO stubs, D1, R2, queues, EMAIL) not yet answered. The object is billed from the moment the
 *   count leaves 0 until it is back at 0 (do_active_ms per class; do_wakes counts the intervals).
 *   Work is attributed to the object whose request started it through an AsyncLocalStorage
 *   (`current`), which follows promises and timers; the global setTimeout and clearTimeout are
 *   wrapped, once, when the first metered object is made (setInterval is not used here).
 *
 *   current              the Activity of the request running now, if any.
 *   activityOf(cls, name)  a new Activity for an object.
 *   trackIo(p)           p, counted as I/O of the current object while it is pending.
 *   watchTimers()        wraps setTimeout/clearTimeout (idempotent).
 *
 * INVARIANTS
 *   Only closed intervals are added to the counters (a snapshot taken while an object is busy
 *   leaves its open interval out and says how many are open: do_busy_now). A reset restarts the
 *   open intervals at the reset. Tracking never changes what a promise resolves to or when.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { add, countBusyWith, onMeterReset, reg, type DoClass } from "./registry";

const busy = new Set<Activity>();

/** One object's activity (see the header). */
export class Activity {
  private reasons = 0;
  private since = 0;
  private left = -1;

  constructor(
    readonly cls: DoClass,
    readonly name: string,
  ) {}

  enter(): void {
    if (this.reasons++ > 0) return;
    this.since = Date.now();
    busy.add(this);
    // Work that starts in the same millisecond as the last ended (a request right after the
    // constructor's blockConcurrencyWhile) is the same wake.
    if (this.since !== this.left) add(reg.do_wakes, this.cls, 1);
    (reg.do_active_objects[this.cls] ??= new Set()).add(this.name);
  }

  leave(): void {
    if (this.reasons === 0 || --this.reasons > 0) return;
    busy.delete(this);
    this.left = Date.now();
    add(reg.do_active_ms, this.cls, this.left - this.since);
  }

  /** `p`, with the object active until it settles. */
  track<T>(p: Promise<T>): Promise<T> {
    this.enter();
    p.then(
      () => this.leave(),
      () => this.leave(),
    );
    return p;
  }

  /** Restarts an open interval now (a reset). */
  restart(): void {
    this.since = Date.now();
  }
}

export const current = new AsyncLocalStorage<Activity>();

countBusyWith(() => busy.size);
onMeterReset(() => {
  for (const a of busy) a.restart();
});

/** A new Activity for the object `name` of `cls`. */
export function activityOf(cls: DoClass, name: string): Activity {
  watchTimers();
  return new Activity(cls, name);
}

/** `p`, counted as I/O of the object whose request runs now (if any) while it is pending. */
export function trackIo<T>(p: T): T {
  const a = current.getStore();
  if (a && p instanceof Promise) a.track(p);
  return p;
}

let watching = false;

/** Wraps the global setTimeout and clearTimeout so that a pending timer keeps its object active. */
export function watchTimers(): void {
  if (watching) return;
  watching = true;
  const g = globalThis as unknown as { setTimeout: (...a: unknown[]) => unknown; clearTimeout: (h: unknown) => void };
  const set = g.setTimeout.bind(globalThis);
  const clear = g.clearTimeout.bind(globalThis);
  const pending = new Map<unknown, Activity>();
  g.setTimeout = (fn: unknown, ms?: unknown, ...args: unknown[]) => {
    const a = current.getStore();
    if (!a || typeof fn !== "function") return set(fn, ms, ...args);
    a.enter();
    const handle = set(
      (...x: unknown[]) => {
        try {
          (fn as (...y: unknown[]) => unknown)(...x);
        } finally {
          if (pending.delete(handle)) a.leave();
        }
      },
      ms,
      ...args,
    );
    pending.set(handle, a);
    return handle;
  };
  g.clearTimeout = (h: unknown) => {
    const a = pending.get(h);
    if (a) {
      pending.delete(h);
      a.leave();
    }
    clear(h);
  };
}
