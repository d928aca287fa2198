/**
 * Inserts the local development key into the local D1 (tenant "dev", an operator key, so the
 * dashboard and the admin API work with it) and prints it; `npm start`
 * runs this before `wrangler dev`. The key is fixed so local tools and docs can rely on it; it
 * exists only in the local state under .wrangler/, never in a deployed database.
 */
import { storeKey } from "./lib/keys";

/** The local development key (local D1 only). */
export const DEV_KEY = "co_dev_local_development_key_0000";

try {
  await storeKey(DEV_KEY, { tenant: "dev", name: "local development", role: "operator" });
  const base = `http://127.0.0.1:${process.env.PORT || 8787}`;
  console.log(`\n  Local operator API key (tenant "dev"): ${DEV_KEY}\n  Try: curl -H "Authorization: Bearer ${DEV_KEY}" ${base}/emails\n  Dashboard: ${base}/relay/dashboard\n`);
} catch (e) {
  console.error(e instanceof Error ? e.message : String(e));
  process.exit(1);
}
