import { defineConfig } from "vitest/config";

// Trust for STARTTLS tests comes from NODE_EXTRA_CA_CERTS, which miniflare reads once at
// import time, so it must be set before the pool is loaded.
process.env.WRANGLER_SEND_METRICS ??= "false";
process.env.CLOUDFLARE_CF_FETCH_ENABLED ??= "false";

const { cloudflareTest, readD1Migrations } = await import("@cloudflare/vitest-pool-workers");
const migrations = await readD1Migrations("./migrations");

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "unit",
          environment: "node",
          include: ["test/unit/**/*.test.ts"],
        },
      },
      {
        plugins: [
          cloudflareTest({
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: {
              bindings: { TEST_MIGRATIONS: migrations, COHORT_ENV: "test" },
            },
          }),
        ],
        test: {
          name: "workers",
          include: ["test/integration/**/*.test.ts"],
          setupFiles: ["test/integration/apply-migrations.ts"],
        },
      },
    ],
  },
});
