/*
 * Vitest config for the Postfix end-to-end suite only (`npm run test:postfix`), kept apart from
 * the root vitest.config.ts so `npm test` does not start Postfix instances. Node environment,
 * one file at a time, long timeouts (1,000 messages through a real MTA).
 */

import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const repoRoot = fileURLToPath(new URL("../../../", import.meta.url));

export default defineConfig({
  root: repoRoot,
  test: {
    name: "postfix",
    environment: "node",
    include: ["test/e2e/postfix/**/*.test.ts"],
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 120_000,
  },
});
