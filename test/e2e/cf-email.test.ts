/**
 * The cf-email transport kind against `wrangler dev` (issue 14 item 5): with SMARTHOST = "cf-email"
 * every message goes to the send_email binding, which wrangler simulates by writing each message
 * to a file and logging its path. The recipient ends delivered with the service's answer, and
 * the file wrangler wrote is the message the relay stored (DKIM signature and all).
 */
import { existsSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevServer, type DevServer } from "../../scripts/lib/dev-server";
import { apiOf, until } from "./dev-api";

const LOG = join(tmpdir(), `cohort-cf-email-${process.pid}.log`);
let server: DevServer;
const api = apiOf(() => server);

beforeAll(async () => {
  process.env.DEV_LOG_FILE = LOG;
  server = await startDevServer({
    tenant: "cf-email",
    vars: { SMARTHOST: "cf-email", COHORT_ENV: "development" },
    logLevel: "info",
  });
}, 120_000);

afterAll(async () => {
  await server?.stop();
  delete process.env.DEV_LOG_FILE;
  rmSync(LOG, { force: true });
});

describe("the cf-email transport kind under wrangler dev", () => {
  it("hands the message to the simulated send_email binding and records the recipient delivered", async () => {
    const { id } = await api<{ id: string }>("POST", "/emails", {
      from: "Acme <news@acme.test>",
      to: ["reader@example.net"],
      subject: "via Email Service",
      text: "Hello from the relay",
    });
    const rcpt = await until(
      async () => {
        const r = (
          await api<{
            recipients: { status: string; last_response: { code?: number; text?: string; mx?: string } | null }[];
          }>("GET", `/emails/${id}`)
        ).recipients[0]!;
        return r.status === "delivered" ? r : undefined;
      },
      "delivered",
      60_000,
    );
    expect(rcpt.last_response).toMatchObject({
      code: 250,
      mx: "email-service.cloudflare",
      text: expect.stringMatching(/^accepted by Cloudflare Email Service/),
    });
    const file = await until(
      async () =>
        existsSync(LOG)
          ? /send_email binding called with the following message:\s+(\S+\.eml)/.exec(readFileSync(LOG, "utf8"))?.[1]
          : undefined,
      "wrangler's log of the message",
    );
    const eml = readFileSync(file, "utf8");
    expect(eml).toMatch(/^Subject: via Email Service$/m);
    expect(eml).toMatch(new RegExp(`^Message-ID: <${id}@acme\\.test>$`, "m"));
    expect(eml).toContain("Hello from the relay");
  }, 90_000);
});
