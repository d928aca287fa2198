/**
 * `npx cohort` against a local relay that delivers real mail to the scripted SMTP catcher:
 * send, show, queue, suspend/resume, flush, tail, and the error paths (exit status and message).
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, recipientsIn, startRelay, waitFor, type Relay } from "../browser/relay";

const exec = promisify(execFile);
const ROOT = new URL("../..", import.meta.url).pathname;
// npm's own warnings (e.g. about the machine's npmrc) would mix into the CLI's stderr.
const QUIET = { ...process.env, NPM_CONFIG_LOGLEVEL: "error", NO_COLOR: "1" };

let relay: Relay;

/**
 * Runs the CLI with the relay's URL and a key in the environment: `node bin/cohort.mjs …`, or
 * with `npx` as a user types it (package.json's bin; npx itself takes about a second a call, so
 * the first test alone goes through it).
 */
async function cohort(
  args: string[],
  key = relay.operatorKey,
  via: "node" | "npx" = "node",
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const [file, first] = via === "npx" ? ["npx", "cohort"] : [process.execPath, join(ROOT, "bin/cohort.mjs")];
    const r = await exec(file, [first, ...args], {
      cwd: ROOT,
      env: { ...QUIET, COHORT_URL: relay.url, COHORT_API_KEY: key },
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: x.code, stdout: x.stdout, stderr: x.stderr };
  }
}

beforeAll(async () => {
  relay = await startRelay();
}, 120_000);
afterAll(async () => {
  await relay?.stop();
});

describe("npx cohort", () => {
  let delivered: string;

  it("sends a test message and shows it delivered, with the SMTP response in the timeline", async () => {
    const sent = await cohort(
      [
        "send",
        "--from",
        "Ops <ops@acme.test>",
        "--to",
        "ann@example.test",
        "--subject",
        "CLI test",
        "--text",
        "hello",
        "--tag",
        "source:cli",
      ],
      relay.tenantKey,
      "npx",
    );
    expect(sent).toMatchObject({ code: 0, stderr: expect.not.stringContaining("cohort:") });
    delivered = sent.stdout.trim();
    expect(delivered).toMatch(/^[0-9a-f]{2}/);
    await recipientsIn(relay, relay.tenantKey, delivered, ["delivered"]);
    expect(relay.catcher.messages.some((m) => m.rcptTo.includes("ann@example.test"))).toBe(true);

    // The timeline is the D1 event log, which the delivery agent's index stage writes after
    // gathering for AGENT_STAGE_MS (1 s): it may land after the state above.
    const shown = await waitFor(
      async () => {
        const r = await cohort(["show", delivered], relay.tenantKey);
        return r.code !== 0 || r.stdout.includes("email.delivered") ? r : undefined;
      },
      15_000,
      "email.delivered in the timeline",
    );
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain("ann@example.test");
    expect(shown.stdout).toMatch(/ann@example\.test\s+delivered\s+1/);
    expect(shown.stdout).toContain("email.delivered");
    expect(shown.stdout).toMatch(/email\.delivered.*250/);
    const json = JSON.parse((await cohort(["show", delivered, "--json"], relay.tenantKey)).stdout);
    expect(json).toMatchObject({
      id: delivered,
      tenant: "acme",
      recipients: [{ email: "ann@example.test", status: "delivered" }],
    });
  });

  it("prints the queue summary as a qshape table, and --json equal to GET /relay/queue's counts", async () => {
    const human = await cohort(["queue"]);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain("active queue");
    expect(human.stdout).toContain("deferred queue");
    expect(human.stdout).toMatch(/TOTAL\s+\d+/);
    expect(human.stdout).toMatch(/recipients in the queue: total=\d+ /);
    const json = JSON.parse((await cohort(["queue", "--json"])).stdout);
    const direct = await api(relay, relay.operatorKey, "GET", "/relay/queue");
    expect(json.counts).toEqual(direct.counts);
    expect(json.qshape[0].destination).toBe("TOTAL");
  });

  it("suspends the destination: new mail waits; resume lets it go", async () => {
    const s = await cohort(["suspend", "destination", relay.smarthost, "--ttl", "1h"]);
    expect(s).toMatchObject({ code: 0 });
    expect(s.stdout).toContain(`suspended dest:smtp/${relay.smarthost} until`);
    expect((await cohort(["suspensions"])).stdout).toContain(`dest:smtp/${relay.smarthost}`);

    const id = (
      await cohort(
        ["send", "--from", "ops@acme.test", "--to", "held@example.test", "--subject", "held", "--text", "x"],
        relay.tenantKey,
      )
    ).stdout.trim();
    await recipientsIn(relay, relay.tenantKey, id, ["ready", "active"]);
    await new Promise((r) => setTimeout(r, 2000));
    const held = await api(relay, relay.tenantKey, "GET", `/relay/messages/${id}`);
    expect(held.recipients[0].status).not.toBe("delivered");
    expect(relay.catcher.messages.some((m) => m.rcptTo.includes("held@example.test"))).toBe(false);

    const r = await cohort(["resume", "destination", relay.smarthost]);
    expect(r).toMatchObject({ code: 0, stdout: `resumed dest:smtp/${relay.smarthost}\n` });
    await recipientsIn(relay, relay.tenantKey, id, ["delivered"], 20_000);
  });

  it("flushes: a deferred recipient is retried at once, long before its back-off", async () => {
    const id = (
      await cohort(
        ["send", "--from", "ops@acme.test", "--to", "tempfail-1@example.test", "--subject", "later", "--text", "x"],
        relay.tenantKey,
      )
    ).stdout.trim();
    const deferred = await recipientsIn(relay, relay.tenantKey, id, ["deferred"]);
    expect(deferred.recipients[0]!.status).toBe("deferred");
    const f = await cohort(["flush"]);
    expect(f).toMatchObject({ code: 0 });
    expect(f.stdout).toMatch(/^flushed smtp; revived 0 dead destination\(s\)/);
    // The catcher accepts the second RCPT from this address: delivered well inside the default 300 s back-off.
    await recipientsIn(relay, relay.tenantKey, id, ["delivered"], 20_000);
  });

  it("tails events: each line is an event, --json one object per line, --type filters", async () => {
    const all = await cohort(["tail", "--once"], relay.tenantKey);
    expect(all.code).toBe(0);
    const lines = all.stdout.trim().split("\n");
    expect(lines.some((l) => /email\.delivered/.test(l))).toBe(true);
    // The three deliveries of the tests above are in the message API at once, and in the event
    // feed once the delivery stage's index write lands (a second or so later): wait for them.
    const events = await waitFor(
      async () => {
        const json = await cohort(["tail", "--once", "--json", "--type", "email.delivered"], relay.tenantKey);
        expect(json.code).toBe(0);
        const got = json.stdout
          .trim()
          .split("\n")
          .filter((l) => l !== "")
          .map((l) => JSON.parse(l) as { id: string; type: string });
        return got.length >= 3 ? got : undefined;
      },
      30_000,
      "three email.delivered events in the feed",
    );
    expect(new Set(events.map((e) => e.type))).toEqual(new Set(["email.delivered"]));
    // --count stops after that many events; --after continues from an id.
    const two = await cohort(["tail", "--count", "2", "--json"], relay.tenantKey);
    const [first, second] = two.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { id: string });
    const next = await cohort(["tail", "--count", "1", "--json", "--after", first!.id], relay.tenantKey);
    expect(JSON.parse(next.stdout.trim()).id).toBe(second!.id);
  });

  it("holds, releases, requeues and cancels a message; cancels by domain", async () => {
    const at = new Date(Date.now() + 3600_000).toISOString();
    const sent = await api(relay, relay.tenantKey, "POST", "/emails", {
      from: "ops@acme.test",
      to: ["later@cli-later.test", "x@cli-other.test"],
      subject: "later",
      text: "x",
      scheduled_at: at,
    });
    const id = sent.id as string;
    expect(await cohort(["hold", id], relay.tenantKey)).toMatchObject({
      code: 0,
      stdout: `hold: ${id} (2 recipient(s))\n`,
    });
    expect(
      (await api(relay, relay.tenantKey, "GET", `/emails/${id}`)).recipients.map(
        (r: { blocked_by: string }) => r.blocked_by,
      ),
    ).toEqual(["held", "held"]);
    expect(await cohort(["hold", id], relay.tenantKey)).toMatchObject({
      code: 1,
      stderr: expect.stringContaining("already held"),
    });
    expect(await cohort(["release", id], relay.tenantKey)).toMatchObject({
      code: 0,
      stdout: `release: ${id} (2 recipient(s))\n`,
    });
    expect(await cohort(["requeue", id, "--json"], relay.tenantKey)).toMatchObject({ code: 0 });
    const one = await cohort(["cancel", id, "--domain", "cli-other.test"], relay.tenantKey);
    expect(one).toMatchObject({ code: 0, stdout: `cancelled 1 recipient(s) of ${id}\n` });
    const statuses = (await api(relay, relay.tenantKey, "GET", `/emails/${id}`)).recipients.map(
      (r: { status: string }) => r.status,
    );
    expect(statuses).toEqual(["incoming", "cancelled"]);
    expect(await cohort(["cancel"], relay.tenantKey)).toMatchObject({ code: 2 });
    // By filter, through the D1 index (which follows the Outbox shortly).
    let filtered = { code: -1, stdout: "", stderr: "" };
    for (let i = 0; i < 20 && !filtered.stdout.includes("cancelled 1 recipient(s) in 1 message(s)"); i++) {
      filtered = await cohort(["cancel", "--domain", "cli-later.test"], relay.tenantKey);
      if (!filtered.stdout.includes("in 1 message")) await new Promise((r) => setTimeout(r, 500));
    }
    expect(filtered).toMatchObject({ code: 0, stdout: "cancelled 1 recipient(s) in 1 message(s)\n" });
  });

  it("shows what came back, the complaint rate, and lifts the brake", async () => {
    const inbound = await cohort(["inbound", "--days", "2", "--json"]);
    expect(inbound.code).toBe(0);
    expect(JSON.parse(inbound.stdout)).toEqual(await api(relay, relay.operatorKey, "GET", "/relay/inbound?days=2"));
    const rate = await cohort(["complaint-rate"], relay.tenantKey);
    expect(rate.code).toBe(0);
    expect(rate.stdout).toMatch(
      /last 7 days \(line 0\.300%; bulk mail not paused\)\nsending domain\s+delivered\s+complained\s+rate\nall\s/,
    );
    const lifted = await cohort(["brake-lift", "acme"]);
    expect(lifted).toMatchObject({ code: 0, stdout: "lifted the complaint-rate brake of acme\n" });
    expect((await cohort(["brake-lift", "acme"], relay.tenantKey)).stderr).toContain("restricted_api_key (HTTP 403)");
    expect((await cohort(["brake-lift"])).code).toBe(2);
  });

  it("lists, sets and deletes provider rules", async () => {
    const list = await cohort(["providers"]);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^name\s+mx suffixes\s+shape\n/);
    expect(list.stdout).toMatch(
      /\ngoogle\s+\.google\.com \.googlemail\.com\s+window 5\.\.5, 50 msgs\/session, TLS required\n/,
    );
    const dir = await mkdtemp(join(tmpdir(), "cohort-cli-"));
    const file = join(dir, "rule.json");
    await writeFile(file, JSON.stringify({ mx: [".messagingengine.com"], rate: "600/m" }));
    expect(await cohort(["provider-set", "fastmail", "--file", file])).toMatchObject({
      code: 0,
      stdout: "provider rule fastmail set: .messagingengine.com\n",
    });
    expect((await api<{ rate: string }>(relay, relay.operatorKey, "GET", "/relay/providers/fastmail")).rate).toBe(
      "600/m",
    );
    await writeFile(file, JSON.stringify({ mx: ["not a suffix"] }));
    const bad = await cohort(["provider-set", "fastmail", "--file", file]);
    expect(bad).toMatchObject({ code: 1, stderr: expect.stringContaining("validation_error (HTTP 422)") });
    expect(await cohort(["provider-delete", "fastmail"])).toMatchObject({
      code: 0,
      stdout: "provider rule fastmail deleted\n",
    });
    expect((await cohort(["provider-set", "x"])).code).toBe(2);
    await rm(dir, { recursive: true, force: true });
  });

  it("sets and lists pickup policies, and shows and advances warm-up plans", async () => {
    const set = await cohort([
      "policy-set",
      "jobid:acme/drip",
      "--concurrency",
      "2",
      "--rate",
      "60/m",
      "--connect-interval",
      "5",
    ]);
    expect(set.code).toBe(0);
    expect(set.stdout).toMatch(/^jobid:acme\/drip: set in /);
    const list = await cohort(["policies"]);
    expect(list.stdout).toMatch(/jobid:acme\/drip\s+concurrency 2, rate 60\/m, interval 5s\s+operator/);
    expect(await cohort(["policy-set", "jobid:acme/drip"])).toMatchObject({
      code: 0,
      stdout: "jobid:acme/drip: no limits left\n",
    });
    expect((await cohort(["policy-set", "jobid:acme/drip", "--concurrency", "0"])).code).toBe(2);
    expect((await cohort(["warmup"])).stdout).toBe("no warm-up plans\n");
    await api(relay, relay.operatorKey, "PUT", "/relay/warmup/direct", {
      ramp: [{ per_day: 10, per_hour: 2 }, { per_day: 20 }],
    });
    expect((await cohort(["warmup"])).stdout).toMatch(/\ndirect\s+1 of 2\s+.*google 10\/d 2\/h/);
    expect(await cohort(["warmup-advance", "direct"])).toMatchObject({ code: 0, stdout: "direct: day 2 of 2\n" });
    expect(await cohort(["warmup-advance", "direct", "--days", "5"])).toMatchObject({
      code: 0,
      stdout: "direct: day 7 of 2 (done: nothing capped)\n",
    });
    await api(relay, relay.operatorKey, "DELETE", "/relay/warmup/direct");
  });

  it("drives Resend's newer resources: templates, topics, suppressions, received mail, metrics, key rename", async () => {
    const k = relay.tenantKey;
    const id = (
      await cohort(
        [
          "template-create",
          "--name",
          "welcome",
          "--html",
          "<p>Hi {{{NAME}}}</p>",
          "--subject",
          "Welcome {{{NAME}}}",
          "--from",
          "ops@acme.test",
          "--var",
          "NAME:string:friend",
        ],
        k,
      )
    ).stdout.trim();
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(await cohort(["template-publish", id], k)).toMatchObject({ code: 0, stdout: `published ${id}\n` });
    expect((await cohort(["template", id], k)).stdout).toMatch(
      /welcome\s+published\n.*\nvariables NAME:string=friend\n\n<p>Hi \{\{\{NAME\}\}\}<\/p>/,
    );
    expect((await cohort(["templates"], k)).stdout).toMatch(new RegExp(`${id}\\s+welcome\\s+-\\s+published`));
    const sent = (
      await cohort(["send-template", "--to", "tpl@example.test", "--template", id, "--var", "NAME=Ann"], k)
    ).stdout.trim();
    const html = await waitFor(
      async () => {
        const m = relay.catcher.messages.find((x) => x.rcptTo.includes("tpl@example.test"));
        return m ? Buffer.from(m.body, "base64").toString("latin1") : undefined;
      },
      30_000,
      "the templated email",
    );
    expect(sent).toMatch(/^[0-9a-f-]{36}$/);
    expect(html).toContain("Subject: Welcome Ann");
    const topic = (await cohort(["topic-create", "--name", "News", "--default", "opt_in"], k)).stdout.trim();
    expect(await cohort(["unsubscribe-topic", "reader@example.test", topic], k)).toMatchObject({
      code: 0,
      stdout: `reader@example.test: opted out of ${topic}\n`,
    });
    expect((await cohort(["subscriptions", "reader@example.test"], k)).stdout).toMatch(
      new RegExp(`${topic}\\s+News\\s+opt_out`),
    );
    expect((await cohort(["suppress", "gone@example.test"], k)).code).toBe(0);
    expect((await cohort(["suppressions-list"], k)).stdout).toMatch(/gone@example\.test\s+manual\s+all\s+manual/);
    expect((await cohort(["unsuppress", "gone@example.test"], k)).code).toBe(0);
    expect((await cohort(["received"], k)).stdout).toBe("no received mail\n");
    const metrics = await cohort(["metrics", "--days", "1", "--by", "domain"], k);
    expect(metrics.stdout).toMatch(/^last 1 days\n\s+sent\s+delivered.*\nall\s+\d+/);
    const keyId = (await api<{ id: string }>(relay, k, "POST", "/api-keys", { name: "cli" })).id;
    expect(await cohort(["key-rename", keyId, "--name", "cli-renamed"], k)).toMatchObject({
      code: 0,
      stdout: `renamed ${keyId}\n`,
    });
    expect((await cohort(["receiving", "x"], k)).code).toBe(2);
    expect((await cohort(["template-create", "--name", "x"], k)).code).toBe(2);
  });

  it("fails clearly: tenant key on an operator command, bad key, unreachable relay, bad usage", async () => {
    const restricted = await cohort(["queue"], relay.tenantKey);
    expect(restricted.code).toBe(1);
    expect(restricted.stderr).toMatch(/^cohort: restricted_api_key \(HTTP 403\): .*operator key/);
    const bad = await cohort(["queue"], "co_not_a_real_key");
    expect(bad).toMatchObject({ code: 1, stderr: "cohort: invalid_api_key (HTTP 403): API key is invalid.\n" });
    const missing = await cohort(["show", "00000000-0000-0000-0000-000000000000"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("not_found (HTTP 404)");
    const down = await exec("npx", ["cohort", "queue", "--url", "http://127.0.0.1:9", "--key", "x"], {
      cwd: ROOT,
      env: QUIET,
    }).catch((e: { code: number; stderr: string }) => e);
    expect(down).toMatchObject({ code: 1, stderr: expect.stringContaining("cannot reach http://127.0.0.1:9") });
    expect((await cohort(["frobnicate"])).code).toBe(2);
    expect((await cohort(["suspend", "tenant", "acme", "--ttl", "soon"])).stderr).toContain("bad --ttl");
    const notSuspended = await cohort(["resume", "tenant", "nobody"]);
    expect(notSuspended).toMatchObject({ code: 1, stderr: expect.stringContaining("not_found (HTTP 404)") });
  });
});
