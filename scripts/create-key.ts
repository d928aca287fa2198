/**
 * npm run key:create -- --tenant <id> [--name <label>] [--operator] [--remote] [--persist-to <dir>]
 *
 * Creates an API key for a tenant (creating the tenant if new), stores only its SHA-256 in D1
 * (with --operator: an operator key, which may also use the admin API and the dashboard)
 * (local by default, the deployed database with --remote) and prints the key once on stdout.
 * The local state directory is --persist-to, else $COHORT_STATE_DIR, else .wrangler/state.
 */
import { parseArgs } from "node:util";
import { isTenantId } from "../worker/db/api-keys";
import { createKey } from "./lib/keys";
import { commandLine } from "./lib/command-line";

const { values } = commandLine(import.meta.url, () =>
  parseArgs({
    options: {
      tenant: { type: "string" },
      name: { type: "string", default: "" },
      remote: { type: "boolean", default: false },
      "persist-to": { type: "string" },
      operator: { type: "boolean", default: false },
    },
  }),
);
if (!values.tenant || !isTenantId(values.tenant)) {
  console.error(
    "usage: npm run key:create -- --tenant <id> [--name <label>] [--operator] [--remote] " +
      "[--persist-to <dir>]\n  <id>: lowercase letters, digits, - and _ (1–64)",
  );
  process.exit(2);
}
try {
  const key = await createKey({
    tenant: values.tenant,
    name: values.name ?? "",
    remote: values.remote ?? false,
    role: values.operator ? "operator" : "tenant",
    ...(values["persist-to"] ? { persistTo: values["persist-to"] } : {}),
  });
  console.error(
    `Created ${values.operator ? "an operator" : "an"} API key for tenant "${values.tenant}". It is shown once; only its hash is stored:`,
  );
  console.log(key);
} catch (e) {
  console.error(e instanceof Error ? e.message : String(e));
  process.exit(1);
}
