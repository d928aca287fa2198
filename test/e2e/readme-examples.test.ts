/**
 * The README's API examples, run exactly as written (extracted from between the api markers, so
 * they cannot drift) against a wrangler dev started for this file: key creation, the curl calls
 * and the Resend SDK pointed at the relay.
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevServer, type DevServer } from "../../scripts/lib/dev-server";

const run = promisify(execFile);

/** The fenced code blocks between the README's api markers, in order. */
async function readmeBlocks(): Promise<{ lang: string; code: string }[]> {
  const readme = await readFile(new URL("../../README.md", import.meta.url), "utf8");
  const section = readme.slice(readme.indexOf("<!-- api:start -->"), readme.indexOf("<!-- api:end -->"));
  return [...section.matchAll(/```(\w+)\n([\s\S]*?)```/g)].map((m) => ({ lang: m[1]!, code: m[2]! }));
}

let server: DevServer;
let blocks: { lang: string; code: string }[];
let key: string;
let env: NodeJS.ProcessEnv = { ...process.env };

function sh(code: string, extra: Record<string, string> = {}) {
  return run("bash", ["-eo", "pipefail", "-c", code], {
    env: { ...env, ...extra },
    cwd: new URL("../..", import.meta.url).pathname,
  });
}

beforeAll(async () => {
  blocks = await readmeBlocks();
  server = await startDevServer({ tenant: "e2e" });
}, 120_000);
afterAll(async () => {
  await server?.stop();
});

describe("the README's API examples", () => {
  it("has the examples this test runs", () => {
    expect(blocks.map((b) => b.lang)).toEqual(["sh", "sh", "sh", "sh", "js", "sh"]);
  });

  it("creates a key with the documented command, printed once on stdout", async () => {
    const { stdout } = await sh(blocks[0]!.code, { COHORT_STATE_DIR: server.state });
    key = stdout.trim().split("\n").pop()!;
    expect(key).toMatch(/^co_[A-Za-z0-9_-]{32}$/);
    env = { ...process.env, COHORT_URL: server.url, COHORT_API_KEY: key, WRANGLER_SEND_METRICS: "false" };
  }, 60_000);

  it("sends with curl, idempotently, and reads the message back", async () => {
    const first = JSON.parse((await sh(blocks[1]!.code)).stdout) as { id: string };
    expect(first.id).toMatch(/^[0-9a-f-]{36}$/);
    const again = JSON.parse((await sh(blocks[1]!.code)).stdout) as { id: string };
    expect(again.id).toBe(first.id);
    const email = JSON.parse((await sh(blocks[2]!.code, { EMAIL_ID: first.id })).stdout);
    expect(email).toMatchObject({
      object: "email",
      id: first.id,
      from: "Acme <hello@acme.example>",
      to: ["ann@example.com"],
      subject: "Welcome",
    });
    expect(email.recipients[0]).toMatchObject({ email: "ann@example.com" });
    // The list is the D1 index, written by the classify consumer shortly after accept.
    const deadline = Date.now() + 15_000;
    let listed: { object: string; data: { id: string }[] } = { object: "", data: [] };
    while (Date.now() < deadline && !listed.data.some((d) => d.id === first.id)) {
      listed = JSON.parse((await sh(blocks[3]!.code)).stdout);
      await new Promise((r) => setTimeout(r, 250));
    }
    expect(listed.object).toBe("list");
    expect(listed.data.map((d) => d.id)).toContain(first.id);
  }, 60_000);

  it("sends and reads back with the official resend SDK pointed at the relay", async () => {
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", blocks[4]!.code], {
      env,
      cwd: new URL("../..", import.meta.url).pathname,
    });
    const [id, status] = stdout.trim().split("\n");
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    const [lastEvent, recipients] = [
      status!.slice(0, status!.indexOf(" ")),
      JSON.parse(status!.slice(status!.indexOf(" ") + 1)),
    ];
    expect(lastEvent).toBe("scheduled");
    expect(recipients).toEqual([
      expect.objectContaining({ email: "ann@example.com", status: "incoming", blocked_by: "scheduled" }),
    ]);
  }, 60_000);

  it("rejects a wrong key through the SDK with Resend's error shape", async () => {
    const code = `import { Resend } from "resend";
const { error } = await new Resend("co_wrong", { baseUrl: process.env.COHORT_URL }).emails.get("00000000-0000-4000-8000-000000000000");
console.log(JSON.stringify(error));`;
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", code], {
      env,
      cwd: new URL("../..", import.meta.url).pathname,
    });
    expect(JSON.parse(stdout)).toEqual({ statusCode: 403, name: "invalid_api_key", message: "API key is invalid." });
  }, 30_000);
});
