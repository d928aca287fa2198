/**
 * Test access to a Transport DO's in-memory delivery leases (durable-objects/transport/leases.ts).
 *
 * DESCRIPTION
 *   leasesIn(stub)      the object's leases, as { entry_id, core_id, until, checked } (checked: when
 *                       given, restored or last confirmed by its agent, ms).
 *   expireLeases(stub)  makes every lease run out now (the next alarm crashes the entries).
 */
import { runInDurableObject } from "cloudflare:test";
import type { Lease, Leases } from "../../durable-objects/transport/leases";
import type { TransportQueue } from "../../durable-objects/transport/transport-queue";

type Inside = { leases: Leases };

export function leasesIn(
  stub: DurableObjectStub<TransportQueue>,
): Promise<{ entry_id: number; core_id: string; until: number; checked: number }[]> {
  return runInDurableObject(stub, (o) =>
    (o as unknown as Inside).leases
      .list()
      .map((l) => ({ entry_id: l.entryId, core_id: l.coreId, until: l.until, checked: l.checked })),
  );
}

export function expireLeases(stub: DurableObjectStub<TransportQueue>): Promise<void> {
  return runInDurableObject(stub, (o) => {
    for (const l of ((o as unknown as Inside).leases as unknown as { byEntry: Map<number, Lease> }).byEntry.values())
      l.until = 0;
  });
}
