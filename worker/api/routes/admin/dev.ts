/**
 * The meter's (and the DNS cache's) development endpoints (worker/meter/meter.ts), for npm run bench:cost.
 *
 * DESCRIPTION
 *   GET  /relay/dev/meter         every counter of the meter (meterSnapshot()).
 *   POST /relay/dev/meter/reset   zeroes them; answers the (zero) snapshot.
 *   GET  /relay/dev/rows          rows held now: { d1: {table: n}, outbox: {name: {table: n}},
 *                                 transport: {…}, destination: {…} }. D1: every table but
 *                                 sqlite_/_cf_ ones and d1_migrations. Outbox shards by
 *                                 outboxName(shard < OUTBOX_SHARDS), Transport DOs by the
 *                                 configured transport names (each shard, TRANSPORT_SHARDS), Destination DOs by the names the
 *                                 meter saw stubs created for in this isolate.
 *   GET  /relay/dev/dns           the isolate's MX answer cache (worker/delivery/mx-cache.ts):
 *                                 { mx: { entries, bytes, hits, misses, evictions } } (wrangler
 *                                 dev runs every object in this one isolate; the meter need not be on).
 *   These requests are not themselves counted (meterFetch serves /relay/dev/* unmetered).
 *
 * ERRORS
 *   404 not_found unless COHORT_ENV is development or test, and for /dev/meter* unless the
 *   meter is on (METER "on"); 403 restricted_api_key for a tenant key.
 */
import { Hono, type MiddlewareHandler } from "hono";
import { outboxName } from "../../../model/ids";
import { schedulerNames } from "../../../model/delivery";
import { meterReset, meterSnapshot } from "../../../meter";
import { type AppEnv } from "../../http/context";
import { ApiError } from "../../../model/errors";
import { requireOperator, type RoleCache } from "../../http/operator";
import { allTransports } from "../../../policy/transports";
import { settingsOf } from "../../../settings/settings";
import { mxCache } from "../../../delivery/mx-cache";

const DEV_PATHS = ["/dev/meter", "/dev/meter/reset", "/dev/rows", "/dev/dns"] as const;

const devOnly: MiddlewareHandler<AppEnv> = async (c, next) => {
  if (!settingsOf(c.env).local) throw new ApiError(404, "not_found", "The requested endpoint was not found.");
  await next();
};

const meterOnly: MiddlewareHandler<AppEnv> = async (c, next) => {
  if (!settingsOf(c.env).meter)
    throw new ApiError(404, "not_found", 'The meter is off in this runtime: start it with METER = "on".');
  await next();
};

async function d1RowCounts(db: D1Database): Promise<Record<string, number>> {
  const { results } = await db
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    .all<{ name: string }>();
  const names = results
    .map((r) => r.name)
    .filter((n) => !n.startsWith("sqlite_") && !n.startsWith("_cf_") && n !== "d1_migrations");
  if (names.length === 0) return {};
  const rs = await db.batch(names.map((n) => db.prepare(`SELECT count(*) AS n FROM "${n.replace(/"/g, '""')}"`)));
  return Object.fromEntries(names.map((n, i) => [n, (rs[i]!.results[0] as { n: number }).n]));
}

/** The /relay/dev/meter and /relay/dev/rows routes, mounted at /relay. */
export function devRoutes(roles: RoleCache) {
  const r = new Hono<AppEnv>();
  const operator = requireOperator(roles);
  for (const p of DEV_PATHS) r.use(p, devOnly, operator);
  r.use("/dev/meter", meterOnly);
  r.use("/dev/meter/reset", meterOnly);

  r.get("/dev/meter", (c) => c.json(meterSnapshot()));

  r.post("/dev/meter/reset", (c) => {
    meterReset();
    return c.json(meterSnapshot());
  });

  r.get("/dev/rows", async (c) => {
    const env = c.env;
    const shards = Array.from({ length: settingsOf(env).outboxShards }, (_, s) => outboxName(s));
    const transports = (await allTransports(env)).flatMap((t) => schedulerNames(t, settingsOf(env).transportShards));
    const destinations = meterSnapshot().do_names.DestinationQueue ?? [];
    const each = async (names: string[], stub: (n: string) => { devRowCounts(): Promise<Record<string, number>> }) =>
      Object.fromEntries(await Promise.all(names.map(async (n) => [n, await stub(n).devRowCounts()] as const)));
    const [d1, outbox, transport, destination] = await Promise.all([
      d1RowCounts(env.DB),
      each(shards, (n) => env.OUTBOX.getByName(n)),
      each(transports, (n) => env.TRANSPORT_QUEUE.getByName(n)),
      each(destinations, (n) => env.DESTINATION_QUEUE.getByName(n)),
    ]);
    return c.json({ d1, outbox, transport, destination });
  });

  r.get("/dev/dns", (c) => c.json({ mx: mxCache.stats() }));
  return r;
}
