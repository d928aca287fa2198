/**
 * npm run key:create -- --tenant <id> [--name <label>] [--remote] [--persist-to <dir>]
 *
 * Creates an API key for a tenant (creating the tenant if new), stores only its SHA-256 in D1
 * (local by default, the deployed database with --remote) and prints the key once on stdout.
 * The local state directory is --persist-to, else $COHORT_STATE_DIR, else .wrangler/state.
 */
import { parseArgs } from "node:util";
import { isTenantId } from "../worker/db/api-keys";
import { createKey } from "./lib/keys";

const { values } = parseArgs({
  options: { tenant: { type: "string" }, name: { type: "string", default: "" }, remote: { type: "boolean", default: false }, "persist-to": { type: "string" } },
});
if (!values.tenant || !isTenantId(values.tenant)) {
  console.error("usage: npm run key:create -- --tenant <id> [--name <label>] [--remote] [--persist-to <dir>]\n  <id>: lowercase letters, digits, - and _ (1–64)");
  process.exit(2);
}
try {
  const key = await createKey({ tenant: values.tenant, name: values.name ?? "", remote: values.remote ?? false, ...(values["persist-to"] ? { persistTo: values["persist-to"] } : {}) });
  console.error(`Created an API key for tenant "${values.tenant}". It is shown once; only its hash is stored:`);
  console.log(key);
} catch (e) {
  console.error(e instanceof Error ? e.message : String(e));
  process.exit(1);
}
