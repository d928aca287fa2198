/**
 * D1 look-ups of the classify stage, shared by all messages of one queue batch.
 *
 * DESCRIPTION
 *   Lookups              what classification reads: routing, and which addresses are suppressed.
 *   BatchLookups(db)     reads routing once per batch, and coalesces the suppression checks that
 *                        the batch's messages ask for within one turn of the event loop into one
 *                        query per tenant (chunked to D1's parameter limit), DataLoader style.
 *                        D1 is single-threaded; one query per message was the consumer's
 *                        largest cost.
 *   AcceptLookups(db)    BatchLookups for the accepting worker: routing is read at most once per
 *                        ROUTING_TTL_MS per isolate and shared by its requests, never a read under
 *                        way of another request (lib/shared-cache.ts; a route changed
 *                        in D1 applies to mail accepted from then on); suppressions are read per
 *                        request, never cached: with `prefetch` (the rows the request read with
 *                        its key, api/http/send-reads.ts) a check of its tenant's addresses that
 *                        the prefetch covers is answered from those rows (db/routing.ts
 *                        suppressedIn), any other from D1.
 */
import { loadRouting, suppressedAmong, suppressedIn, type Routing, type SuppressionRow } from "../db/routing";
import { SharedCache } from "../lib/shared-cache";

/** The classify stage's reads. */
export interface Lookups {
  routing(): Promise<Routing>;
  /** The addresses (lower-cased) among `addresses` suppressed for `tenant` by an entry of one of `scopes` ([""] when absent), → its scope. */
  suppressed(tenant: string, addresses: string[], scopes?: readonly string[]): Promise<Map<string, string>>;
}

type Waiter = { addresses: string[]; resolve: (s: Map<string, string>) => void; reject: (e: unknown) => void };

/** Batch-scoped look-ups. */
export class BatchLookups implements Lookups {
  private routingP: Promise<Routing> | null = null;
  private waiting = new Map<string, Waiter[]>();
  private scheduled = false;

  constructor(
    protected readonly db: D1Database,
    protected readonly nowMs: () => number = Date.now,
  ) {}

  /** Routing, read once per batch. */
  routing(): Promise<Routing> {
    return (this.routingP ??= loadRouting(this.db));
  }

  /** Suppressed addresses, coalesced with the other requests of this turn for the same tenant and scopes. */
  suppressed(tenant: string, addresses: string[], scopes: readonly string[] = [""]): Promise<Map<string, string>> {
    return new Promise((resolve, reject) => {
      const key = JSON.stringify([tenant, scopes]);
      const list = this.waiting.get(key) ?? [];
      list.push({ addresses, resolve, reject });
      this.waiting.set(key, list);
      if (!this.scheduled) {
        this.scheduled = true;
        setTimeout(() => void this.flush(), 0);
      }
    });
  }

  private async flush(): Promise<void> {
    const waiting = this.waiting;
    this.waiting = new Map();
    this.scheduled = false;
    await Promise.all(
      [...waiting].map(async ([key, waiters]) => {
        try {
          const [tenant, scopes] = JSON.parse(key) as [string, string[]];
          const hit = await suppressedAmong(
            this.db,
            tenant,
            waiters.flatMap((w) => w.addresses),
            this.nowMs(),
            scopes,
          );
          for (const w of waiters) {
            const mine = new Map<string, string>();
            for (const a of w.addresses.map((x) => x.toLowerCase())) if (hit.has(a)) mine.set(a, hit.get(a)!);
            w.resolve(mine);
          }
        } catch (e) {
          for (const w of waiters) w.reject(e);
        }
      }),
    );
  }
}

/** How long the accepting worker's isolate reuses the routing it read (ms). */
export const ROUTING_TTL_MS = 5000;

/** Routing as last read by this isolate's accepting requests: the value shared, a read under way only by its request's look-ups (lib/shared-cache.ts). */
const lastRouting = new SharedCache<Routing>(1);

/** A send request's suppression entries read with its key (api/http/send-reads.ts SendPrefetch). */
export interface SuppressionPrefetch {
  tenant: string;
  addresses: ReadonlySet<string>;
  rows: readonly SuppressionRow[];
}

/** BatchLookups whose routing is shared by the isolate's requests for ROUTING_TTL_MS (see the header). */
export class AcceptLookups extends BatchLookups {
  constructor(
    db: D1Database,
    nowMs: () => number = Date.now,
    private readonly prefetch?: SuppressionPrefetch,
  ) {
    super(db, nowMs);
  }

  override suppressed(tenant: string, addresses: string[], scopes?: readonly string[]): Promise<Map<string, string>> {
    const p = this.prefetch;
    if (p && p.tenant === tenant && addresses.every((a) => p.addresses.has(a.toLowerCase()))) {
      const hit = suppressedIn(p.rows, addresses, this.nowMs(), scopes);
      if (hit !== null) return Promise.resolve(hit);
    }
    return super.suppressed(tenant, addresses, scopes);
  }

  override routing(): Promise<Routing> {
    const now = this.nowMs();
    return lastRouting.lookup(
      "",
      this,
      () => loadRouting(this.db),
      now,
      () => now + ROUTING_TTL_MS,
    );
  }
}
