/**
 * Reaching every Transport DO and Destination DO for the admin API.
 *
 * DESCRIPTION
 *   allTransports(env)          D1 `transports` names ∪ DEFAULT_TRANSPORT, sorted.
 *   transportStub(env, name)    a transport's Transport DOs as one (TRANSPORT_SHARDS: its shards by
 *                               destination, schedulerNames): inspect() merges theirs, flush()
 *                               and setPolicy() go to each (a policy holds in every shard).
 *   inspectAll(env, names)      each transport's inspect() (qshape of the active and of the
 *                               deferred queue, destinations, policies).
 *   destinationStub(env, t, q)  the Destination DO of queue q of transport t (`<t>/<q>`).
 *   unknownTransport(name)      the 404 for a transport that is not configured.
 */
import { transportNames } from "../db/admin";
import { schedulerNames } from "../model/delivery";
import type { ShapeRow } from "../../durable-objects/core";
import { ApiError } from "../model/errors";
import { settingsOf } from "../settings/settings";

/** Every configured transport name. */
export async function allTransports(env: Env): Promise<string[]> {
  const names = new Set(await transportNames(env.DB));
  names.add(settingsOf(env).defaultTransport);
  return [...names].sort();
}

type OneStub = ReturnType<Env["TRANSPORT_QUEUE"]["getByName"]>;

/** What a Transport DO's inspect() answers. */
export type Inspection = Awaited<ReturnType<OneStub["inspect"]>>;

/** A transport's Transport DOs as one (see the header). */
export function transportStub(env: Env, name: string): Pick<OneStub, "inspect" | "flush" | "setPolicy"> {
  const stubs = schedulerNames(name, settingsOf(env).transportShards).map((n) => env.TRANSPORT_QUEUE.getByName(n));
  if (stubs.length === 1) return stubs[0]!;
  return {
    inspect: async () => mergeInspections(await Promise.all(stubs.map(async (s) => (await s.inspect()) as Inspection))),
    flush: async () => {
      await Promise.all(stubs.map((s) => s.flush()));
    },
    setPolicy: async (key: string, rule: Parameters<OneStub["setPolicy"]>[1]) => {
      await Promise.all(stubs.map((s) => s.setPolicy(key, rule)));
    },
  } as unknown as Pick<OneStub, "inspect" | "flush" | "setPolicy">;
}

/** One transport's inspections of its shards as one: counts summed, shapes and destinations joined, each policy once. */
function mergeInspections(list: Inspection[]): Inspection {
  const shape = (rows: ShapeRow[][]): ShapeRow[] => {
    const total: ShapeRow = { destination: "TOTAL", total: 0, buckets: [] };
    const rest: ShapeRow[] = [];
    for (const r of rows.flat()) {
      if (r.destination !== "TOTAL") {
        rest.push(r);
        continue;
      }
      total.total += r.total;
      r.buckets.forEach((n, i) => {
        total.buckets[i] = (total.buckets[i] ?? 0) + n;
      });
    }
    return [total, ...rest.sort((a, b) => b.total - a.total)];
  };
  const policies = new Map<string, Inspection["policies"][number]>();
  for (const i of list) for (const p of i.policies) if (!policies.has(p.key)) policies.set(p.key, p);
  return {
    ...list[0]!,
    now: Math.max(...list.map((i) => i.now)),
    inflight: list.reduce((n, i) => n + i.inflight, 0),
    incoming: list.reduce((n, i) => n + i.incoming, 0),
    qshape: shape(list.map((i) => i.qshape)),
    deferred: shape(list.map((i) => i.deferred)),
    destinations: list.flatMap((i) => i.destinations),
    policies: [...policies.values()],
    inFlightTimes: list.find((i) => i.inFlightTimes)?.inFlightTimes ?? null,
  };
}

/** Every transport's inspection, in name order. */
export async function inspectAll(env: Env, names: string[]): Promise<Inspection[]> {
  // A Transport DO that never saw a message does not know its name yet: use the one called.
  return Promise.all(
    names.map(async (n) => ({ ...((await transportStub(env, n).inspect()) as Inspection), transport: n })),
  );
}

/** The Destination DO of one destination queue. */
export function destinationStub(env: Env, transport: string, queue: string) {
  return env.DESTINATION_QUEUE.getByName(`${transport}/${queue}`);
}

/** The 404 for an unconfigured transport. */
export function unknownTransport(name: string): ApiError {
  return new ApiError(404, "not_found", `Transport ${JSON.stringify(name)} is not configured.`);
}

/** The transport named, checked against the configured ones. */
export async function knownTransport(env: Env, name: string): Promise<string> {
  if (!(await allTransports(env)).includes(name)) throw unknownTransport(name);
  return name;
}
