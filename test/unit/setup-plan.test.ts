import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { RESOURCES, parseD1Id, planSetup, setDatabaseId } from "../../scripts/lib/setup-plan";

const nothing = { d1: [], buckets: [], queues: [], secrets: [] };
const everything = {
  d1: [RESOURCES.d1],
  buckets: [RESOURCES.bucket],
  queues: [...RESOURCES.queues, ...RESOURCES.deadLetterQueues],
  secrets: [...RESOURCES.secrets],
};

describe("npm run setup:cloudflare's plan", () => {
  it("on an empty account: the database, migrations, bucket, every queue and dead-letter queue, and the secret on stdin", () => {
    const plan = planSetup(nothing, { operatorKey: false });
    expect(plan.map((s) => s.args.slice(0, 3).join(" "))).toEqual([
      "d1 create cohort",
      "d1 migrations apply",
      "r2 bucket create",
      ...[...RESOURCES.queues, ...RESOURCES.deadLetterQueues].map((q) => `queues create ${q}`),
      "secret put WEBHOOK_SECRETS_KEY",
    ]);
    const secret = plan.find((s) => s.args[0] === "secret")!;
    expect(secret.stdin).toBe("generated-secret");
    expect(secret.args).toEqual(["secret", "put", "WEBHOOK_SECRETS_KEY", "--env", "production"]);
  });

  it("is idempotent: on an account that has everything it creates nothing (migrations are re-applied, a no-op)", () => {
    expect(planSetup(everything, { operatorKey: false }).map((s) => s.args.slice(0, 3).join(" "))).toEqual([
      "d1 migrations apply",
    ]);
  });

  it("creates only what is missing, and the operator key only when asked", () => {
    const plan = planSetup({ ...everything, queues: ["classify", "deliver"] }, { operatorKey: true });
    expect(plan.map((s) => s.args.slice(0, 3).join(" "))).toEqual([
      "d1 migrations apply",
      "queues create classify-bulk",
      "queues create webhooks",
      "queues create webhooks-slow",
      "queues create email-events",
      ...RESOURCES.deadLetterQueues.map((q) => `queues create ${q}`),
      "d1 execute DB",
    ]);
  });

  it("every queue wrangler.toml's production environment binds, and every dead-letter queue it names, is in the plan", () => {
    const toml = readFileSync(new URL("../../wrangler.toml", import.meta.url), "utf8");
    const prod = toml.slice(toml.indexOf("[env.production]"));
    const named = new Set([...prod.matchAll(/^(?:queue|dead_letter_queue) = "([^"]+)"/gm)].map((m) => m[1]));
    expect([...named].sort()).toEqual([...RESOURCES.queues, ...RESOURCES.deadLetterQueues].sort());
    expect(prod).toContain(`bucket_name = "${RESOURCES.bucket}"`);
    expect(prod).toContain(`database_name = "${RESOURCES.d1}"`);
    expect(prod).toContain('COHORT_ENV = "production"');
  });

  it("reads the id wrangler d1 create prints (TOML or JSON) and writes it into the production environment only", () => {
    const id = "6f1c2a3b-1d2e-4f50-8a9b-0c1d2e3f4a5b";
    expect(parseD1Id(`[[d1_databases]]\nbinding = "DB"\ndatabase_name = "cohort"\ndatabase_id = "${id}"\n`)).toBe(id);
    expect(parseD1Id(`{"d1_databases":[{"binding":"DB","database_name":"cohort","database_id":"${id}"}]}`)).toBe(id);
    expect(parseD1Id("no id here")).toBeNull();
    const toml = readFileSync(new URL("../../wrangler.toml", import.meta.url), "utf8");
    const out = setDatabaseId(toml, id);
    expect(out.slice(out.indexOf("[env.production]"))).toContain(`database_id = "${id}"`);
    expect(out.slice(0, out.indexOf("[env.production]"))).not.toContain(id);
  });
});
