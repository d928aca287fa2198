/**
 * Inserts the local development key into the local D1 (tenant "dev", an operator key, so the
 * dashboard and the admin API work with it); `npm start` runs this before `wrangler dev`, and
 * dev-smtp.ts prints it once the relay answers. The key is fixed so local tools and docs can rely on it; it
 * exists only in the local state under .wrangler/, never in a deployed database.
 */
import { storeKey } from "./lib/keys";
import { DEV_KEY } from "./lib/dev-key";

export { DEV_KEY };

try {
  await storeKey(DEV_KEY, { tenant: "dev", name: "local development", role: "operator" });
} catch (e) {
  console.error(e instanceof Error ? e.message : String(e));
  process.exit(1);
}
