/**
 * Reaching every Transport DO and Destination DO for the admin API.
 *
 * DESCRIPTION
 *   allTransports(env)          D1 `transports` names ∪ DEFAULT_TRANSPORT, sorted.
 *   inspectAll(env, names)      each Transport DO's inspect() (qshape of the active and of the
 *                               deferred queue, destinations, policies).
 *   destinationStub(env, t, q)  the Destination DO of queue q of transport t (`<t>/<q>`).
 *   unknownTransport(name)      the 404 for a transport that is not configured.
 */
import { transportNames } from "../db/admin";
import { ApiError } from "../model/errors";
import { settingsOf } from "../settings/settings";

/** Every configured transport name. */
export async function allTransports(env: Env): Promise<string[]> {
  const names = new Set(await transportNames(env.DB));
  names.add(settingsOf(env).defaultTransport);
  return [...names].sort();
}

/** The Transport DO of a transport. */
export function transportStub(env: Env, name: string) {
  return env.TRANSPORT_QUEUE.getByName(name);
}

/** What a Transport DO's inspect() answers. */
export type Inspection = Awaited<ReturnType<ReturnType<typeof transportStub>["inspect"]>>;

/** Every transport's inspection, in name order. */
export async function inspectAll(env: Env, names: string[]): Promise<Inspection[]> {
  // A Transport DO that never saw a message does not know its name yet: use the one called.
  return Promise.all(names.map(async (n) => ({ ...((await transportStub(env, n).inspect()) as Inspection), transport: n })));
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
