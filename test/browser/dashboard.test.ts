/**
 * The operator dashboard in a real browser (Debian's Chromium driven by playwright-core) against
 * a local relay carrying real mail: delivered, bounced (550) and deferred (451) recipients
 * through the scripted SMTP catcher. Checks that every number the page shows equals the API's,
 * and saves screenshots to test-artifacts/.
 */
import { mkdir } from "node:fs/promises";
import { chromium, type Browser, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, recipientsIn, startRelay, waitFor, type Relay } from "./relay";
import { startDohZone, type DohZone } from "../../scripts/lib/doh-zone";

const ARTIFACTS = new URL("../../test-artifacts/", import.meta.url).pathname;
// The states of a recipient in the queue: the overview counts these (final outcomes are its throughput).
const STATES = ["incoming", "ready", "active", "deferred"];

let relay: Relay;
let doh: DohZone;
let browser: Browser;
let page: Page;
const ids: Record<string, string> = {};

type Queue = {
  counts: { total: number; by_state: Record<string, number>; by_destination: unknown[] };
  open: { count: number; age_percentiles: { p: number }[] };
  deferred: { total: number }[];
  qshape: { total: number }[];
};
type Stats = { totals: Record<string, number>; series: unknown[] };

async function send(to: string[], extra: Record<string, unknown> = {}): Promise<string> {
  return (
    await api<{ id: string }>(relay, relay.tenantKey, "POST", "/emails", {
      from: "Acme <news@acme.test>",
      to,
      subject: "dashboard",
      text: "hello",
      ...extra,
    })
  ).id;
}

const text = async (testid: string) => (await page.getByTestId(testid).first().textContent())?.trim() ?? "";
const shot = (name: string) => page.screenshot({ path: `${ARTIFACTS}dashboard-${name}.png`, fullPage: true });

async function view(name: string): Promise<void> {
  await page.click(`#nav a[href="#${name}"]`);
  await page.waitForSelector(`body[data-ready="${name}"]`, { timeout: 15_000 });
}

beforeAll(async () => {
  await mkdir(ARTIFACTS, { recursive: true });
  doh = await startDohZone();
  relay = await startRelay({ DOH_RESOLVER_URL: doh.url });
  ids.delivered = await send(["ok-a@example.test", "ok-b@example.test"]);
  ids.bounced = await send(["reject-c@example.test"]);
  ids.deferred = await send(["tempfail-d@example.test"]);
  ids.tagged = await send(["ok-e@example.test"], { tags: [{ name: "campaign", value: "launch" }] });
  await recipientsIn(relay, relay.tenantKey, ids.delivered, ["delivered"]);
  await recipientsIn(relay, relay.tenantKey, ids.tagged, ["delivered"]);
  await recipientsIn(relay, relay.tenantKey, ids.bounced, ["bounced"]);
  await recipientsIn(relay, relay.tenantKey, ids.deferred, ["deferred"]);
  // The D1 index and event log catch up asynchronously: wait until the API shows all of it.
  await waitFor(
    async () => {
      const q = await api<Queue>(relay, relay.operatorKey, "GET", "/relay/queue");
      const s = await api<Stats>(relay, relay.operatorKey, "GET", "/relay/stats?window=60");
      const b = q.counts.by_state;
      return b.deferred === 1 &&
        b.delivered === undefined &&
        s.totals.delivered === 3 &&
        s.totals.bounced === 1 &&
        s.totals.deferred! >= 1
        ? true
        : undefined;
    },
    30_000,
    "the index and the event log",
  );
  await api(relay, relay.operatorKey, "POST", "/relay/suppressions", {
    address: "blocked@example.test",
    reason: "manual",
  });
  await api(relay, relay.operatorKey, "POST", "/webhooks", {
    endpoint: "https://hooks.example.com/cohort",
    events: ["email.bounced"],
  });
  browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await relay?.stop();
  await doh?.close();
});

describe("the operator dashboard", () => {
  it("shows only a login form without a key, and refuses a tenant key", async () => {
    await page.goto(`${relay.url}/relay/dashboard`);
    expect(await page.locator("#login").isVisible()).toBe(true);
    expect(await page.locator("#nav").isVisible()).toBe(false);
    expect(await page.locator("#view-overview").isVisible()).toBe(false);
    await page.fill("#key", relay.tenantKey);
    await page.click('#login-form button[type="submit"]');
    await page.waitForFunction(() => (globalThis as any).document.getElementById("login-error").textContent !== "");
    expect(await page.textContent("#login-error")).toContain("operator key");
    expect(await page.evaluate(() => (globalThis as any).sessionStorage.getItem("cohort.key"))).toBeNull();
    await shot("login-refused");
  });

  it("shows the queue overview with the API's counts, age percentiles and throughput", async () => {
    await page.fill("#key", relay.operatorKey);
    await page.click('#login-form button[type="submit"]');
    await page.waitForSelector('body[data-ready="overview"]', { timeout: 15_000 });
    const q = await api<Queue>(relay, relay.operatorKey, "GET", "/relay/queue");
    const s = await api<Stats>(relay, relay.operatorKey, "GET", "/relay/stats?window=60");
    expect(await text("count-total")).toBe(String(q.counts.total));
    for (const state of STATES)
      expect({ state, shown: await text(`count-${state}`) }).toEqual({
        state,
        shown: String(q.counts.by_state[state] ?? 0),
      });
    // The queue holds the deferred recipient; the delivered and bounced ones are throughput.
    expect(await text("count-deferred")).toBe("1");
    expect(await page.getByTestId("count-delivered").count()).toBe(0);
    expect(await text("tp-delivered")).toBe("3");
    expect(await text("tp-bounced")).toBe("1");
    expect(await text("open-count")).toBe(String(q.open.count));
    for (const p of q.open.age_percentiles) expect(await text(`age-p${p.p}`)).toMatch(/^\d+(s|m \d+s|h \d+m)$/);
    for (const k of ["delivered", "bounced", "deferred", "failed"])
      expect({ k, shown: await text(`tp-${k}`) }).toEqual({ k, shown: String(s.totals[k]) });
    expect(await page.getByTestId("throughput-chart").locator("rect").count()).toBeGreaterThanOrEqual(2);
    expect(await page.getByTestId("destination-row").count()).toBe(q.counts.by_destination.length);
    // qshape deferred: TOTAL row's total cell (third column) equals the API's.
    expect(
      await page.getByTestId("qshape-deferred").locator("tbody tr").first().locator("td").nth(2).textContent(),
    ).toBe(String(q.deferred[0]!.total));
    expect(await page.getByTestId("qshape-active").locator("tbody tr").first().locator("td").nth(2).textContent()).toBe(
      String(q.qshape[0]!.total),
    );
    await shot("overview");
  });

  it("lists destinations and charts one's window over time from its feedback history", async () => {
    await view("destinations");
    const list = await api<{ data: { transport: string; queue: string }[] }>(
      relay,
      relay.operatorKey,
      "GET",
      "/relay/destinations",
    );
    expect(await page.getByTestId("destination").count()).toBe(list.data.length);
    const row = page.locator(`[data-testid="destination"][data-queue="${relay.smarthost}"]`);
    await row.locator("a").click();
    await page.getByTestId("dest-window").waitFor();
    const d = await api<{ window: number; busy: number; history: unknown[] }>(
      relay,
      relay.operatorKey,
      "GET",
      `/relay/destinations/smtp/${encodeURIComponent(relay.smarthost)}`,
    );
    expect(await text("dest-window")).toBe(String(d.window));
    expect(await text("dest-busy")).toBe(String(d.busy));
    expect(await page.getByTestId("window-chart").locator("circle").count()).toBe(d.history.length);
    await shot("destinations");
  });

  it("finds messages by address and tag and shows a bounce's timeline with the SMTP response", async () => {
    await view("messages");
    await page.fill('[data-testid="search-form"] input[name="address"]', "reject-c@example.test");
    await page.click('[data-testid="search-form"] button[type="submit"]');
    await page.getByTestId("message-results").waitFor();
    expect(await page.getByTestId("message-row").count()).toBe(1);
    await page.getByTestId("message-row").locator("a").click();
    await page.getByTestId("timeline").waitFor();
    const m = await api<{ last_event: string; events: unknown[] }>(
      relay,
      relay.operatorKey,
      "GET",
      `/relay/messages/${ids.bounced}`,
    );
    expect(await text("message-last-event")).toBe(m.last_event);
    const rcpt = page.getByTestId("recipient-row").first();
    expect(await rcpt.locator("td").nth(1).textContent()).toBe("bounced");
    expect(await rcpt.locator("td").nth(4).textContent()).toContain("550");
    expect(await page.getByTestId("timeline").locator("li").count()).toBe(m.events.length);
    expect(await page.getByTestId("timeline").textContent()).toContain("email.bounced");
    expect(await page.textContent("#view-messages")).not.toMatch(/\b(null|undefined|NaN)\b/);
    await shot("message-bounced");

    await page.fill('[data-testid="search-form"] input[name="address"]', "");
    await page.fill('[data-testid="search-form"] input[name="tag"]', "campaign:launch");
    await page.click('[data-testid="search-form"] button[type="submit"]');
    await page.waitForFunction(() => {
      const rows = (globalThis as any).document.querySelectorAll('[data-testid="message-row"]');
      return rows.length === 1 && String(rows[0].textContent).includes("ok-e@example.test");
    });
  });

  it("shows webhook endpoints and suppressions as the API lists them", async () => {
    await view("webhooks");
    const hooks = await api<{ data: unknown[] }>(relay, relay.operatorKey, "GET", "/webhooks?limit=100");
    expect(await page.getByTestId("webhook-row").count()).toBe(hooks.data.length);
    expect(await page.getByTestId("webhook-row").first().textContent()).toContain("https://hooks.example.com/cohort");
    await shot("webhooks");
    await view("suppressions");
    const sup = await api<{ data: unknown[] }>(relay, relay.operatorKey, "GET", "/relay/suppressions?limit=100");
    expect(await page.getByTestId("suppression-row").count()).toBe(sup.data.length);
    expect(await page.getByTestId("suppression-row").first().textContent()).toContain("blocked@example.test");
    const cr = await api<{ totals: { delivered: number; complained: number }; domains: unknown[] }>(
      relay,
      relay.operatorKey,
      "GET",
      "/relay/complaint-rate?days=7",
    );
    expect(await page.getByTestId("complaint-total").textContent()).toContain(
      `all${cr.totals.delivered}${cr.totals.complained}`,
    );
    expect(await page.getByTestId("complaint-domain").count()).toBe(cr.domains.length);
    await shot("suppressions");
  });

  it("holds and releases a deferred message from its page, as the API then reports", async () => {
    await view("messages");
    await page.fill('[data-testid="search-form"] input[name="tag"]', "");
    await page.fill('[data-testid="search-form"] input[name="address"]', "tempfail-d@example.test");
    await page.click('[data-testid="search-form"] button[type="submit"]');
    await page.getByTestId("message-row").first().locator("a").click();
    await page.getByTestId("action-hold").click();
    const blockedCell = () => page.getByTestId("recipient-row").first().locator("td").nth(5);
    await page.waitForFunction(
      () =>
        String(
          (globalThis as any).document.querySelector('[data-testid="recipient-row"] td:nth-child(6)')?.textContent,
        ) === "held",
    );
    const held = await api<{ recipients: { blocked_by: string }[] }>(
      relay,
      relay.tenantKey,
      "GET",
      `/emails/${ids.deferred}`,
    );
    expect(held.recipients[0]!.blocked_by).toBe("held");
    expect(await blockedCell().textContent()).toBe("held");
    await shot("message-held");
    await page.getByTestId("action-release").click();
    await page.waitForFunction(
      () =>
        String(
          (globalThis as any).document.querySelector('[data-testid="recipient-row"] td:nth-child(6)')?.textContent,
        ) !== "held",
    );
    const released = await api<{ recipients: { blocked_by: string | null }[] }>(
      relay,
      relay.tenantKey,
      "GET",
      `/emails/${ids.deferred}`,
    );
    expect(released.recipients[0]!.blocked_by).not.toBe("held");
  });
});

describe("the dashboard's views of Resend's resources and of the settings", () => {
  const op = () => relay.operatorKey;
  let domainId = "";
  let templateId = "";

  beforeAll(async () => {
    const d = await api<{ id: string; records: { name: string; type: string; value: string }[] }>(
      relay,
      op(),
      "POST",
      "/domains",
      { name: "dash-recv.test" },
    );
    domainId = d.id;
    doh.publish("dash-recv.test", d.records);
    await api(relay, op(), "POST", `/domains/${domainId}/verify`);
    expect((await api<{ status: string }>(relay, op(), "GET", `/domains/${domainId}`)).status).toBe("verified");
    await api(relay, op(), "PATCH", `/domains/${domainId}`, { capabilities: { receiving: "enabled" } });
    templateId = (
      await api<{ id: string }>(relay, op(), "POST", "/templates", {
        name: "welcome",
        subject: "Welcome, {{{NAME}}}",
        from: "hello@dash-recv.test",
        html: "<h1>Hello {{{NAME}}}</h1><p>Your plan: {{{PLAN}}}</p>",
        text: "Hello {{NAME}}",
        variables: [
          { key: "NAME", type: "string", fallback_value: "friend" },
          { key: "PLAN", type: "string", fallback_value: "free" },
        ],
      })
    ).id;
    const mime = [
      "From: Ann <ann@outside.example>",
      "To: support@dash-recv.test",
      "Subject: Refund request",
      "Message-ID: <dash-1@outside.example>",
      "MIME-Version: 1.0",
      'Content-Type: multipart/mixed; boundary="b"',
      "",
      "--b",
      "Content-Type: text/plain",
      "",
      "Please refund order 42.",
      "--b",
      'Content-Type: text/plain; name="order.txt"',
      'Content-Disposition: attachment; filename="order.txt"',
      "",
      "order 42",
      "--b--",
      "",
    ].join("\r\n");
    const url = new URL("/cdn-cgi/handler/email", relay.url);
    url.searchParams.set("from", "ann@outside.example");
    url.searchParams.set("to", "support@dash-recv.test");
    const inbound = await fetch(url, { method: "POST", body: mime });
    expect(inbound.status, await inbound.clone().text()).toBe(200);
    await api(relay, op(), "PUT", "/relay/warmup/direct", { ramp: [{ per_day: 50, per_hour: 10 }, { per_day: 100 }] });
    await api(relay, op(), "PUT", `/relay/policies/${encodeURIComponent("tenant:acme")}`, {
      concurrency: 5,
      rate: "120/m",
      interval_seconds: null,
    });
  }, 60_000);

  it("shows the tenant's domains with their records, verifies, and turns receiving off and on", async () => {
    await view("domains");
    const list = await api<{ data: { name: string }[] }>(relay, op(), "GET", "/domains");
    expect(await page.getByTestId("domain-row").count()).toBe(list.data.length);
    await page.getByTestId("domain-row").filter({ hasText: "dash-recv.test" }).locator("a").click();
    await page.waitForSelector('[data-testid="domain-records"]');
    expect(await text("domain-status")).toBe("verified");
    expect(await text("domain-receiving")).toBe("enabled");
    expect(await page.getByTestId("domain-record").count()).toBe(
      (await api<{ records: unknown[] }>(relay, op(), "GET", `/domains/${domainId}`)).records.length,
    );
    await shot("domains");
    await page.getByTestId("domain-receiving-toggle").click();
    await page.waitForFunction(
      () => (globalThis as any).document.querySelector('[data-testid="domain-receiving"]')?.textContent === "disabled",
    );
    expect(
      (await api<{ capabilities: { receiving: string } }>(relay, op(), "GET", `/domains/${domainId}`)).capabilities
        .receiving,
    ).toBe("disabled");
    await page.getByTestId("domain-receiving-toggle").click();
    await page.waitForFunction(
      () => (globalThis as any).document.querySelector('[data-testid="domain-receiving"]')?.textContent === "enabled",
    );
  });

  it("creates a key (its token shown once), renames it, and lists keys as the API does", async () => {
    await view("keys");
    await page.fill('[data-testid="key-form"] input[name="name"]', "dashboard-made");
    await page.click('[data-testid="key-form"] button[type="submit"]');
    const token = await page.getByTestId("key-token").textContent();
    expect(token).toMatch(/^co_/);
    const row = page.getByTestId("key-row").filter({ hasText: "dashboard-made" });
    await row.locator("input[name=name]").fill("dashboard-renamed");
    await row.getByTestId("key-rename").click();
    await page.getByTestId("key-name").filter({ hasText: "dashboard-renamed" }).waitFor();
    const keys = await api<{ data: { name: string }[] }>(relay, op(), "GET", "/api-keys");
    expect(keys.data.map((k) => k.name)).toContain("dashboard-renamed");
    expect(await page.getByTestId("key-row").count()).toBe(keys.data.length);
    await shot("api-keys");
  });

  it("shows a template's variables and a rendered, escaped preview, and publishes it", async () => {
    await view("templates");
    expect(await page.getByTestId("template-row").count()).toBe(
      (await api<{ data: unknown[] }>(relay, op(), "GET", "/templates")).data.length,
    );
    await page.getByTestId("template-row").filter({ hasText: "welcome" }).locator("a").click();
    await page.waitForSelector('[data-testid="template-preview-frame"]');
    expect(await text("template-status")).toBe("draft");
    expect(await page.getByTestId("template-variable").count()).toBe(2);
    expect(await text("template-preview-subject")).toBe("Welcome, friend");
    await page.fill('[data-testid="template-preview-form"] input[name="NAME"]', "<Ann>");
    await page.click('[data-testid="template-preview-form"] button[type="submit"]');
    await page.waitForFunction(
      () =>
        (globalThis as any).document.querySelector('[data-testid="template-preview-subject"]')?.textContent ===
        "Welcome, <Ann>",
    );
    expect(await text("template-preview-html")).toBe("<h1>Hello &lt;Ann&gt;</h1><p>Your plan: free</p>");
    const frame = page.frameLocator('[data-testid="template-preview-frame"]');
    expect(await frame.locator("h1").textContent()).toBe("Hello <Ann>");
    await shot("template-preview");
    await page.getByTestId("template-publish").click();
    await page.waitForFunction(
      () => (globalThis as any).document.querySelector('[data-testid="template-status"]')?.textContent === "published",
    );
    expect((await api<{ status: string }>(relay, op(), "GET", `/templates/${templateId}`)).status).toBe("published");
  });

  it("lists received mail and shows one with its text and an attachment link that downloads", async () => {
    await view("received");
    const list = await api<{ data: unknown[] }>(relay, op(), "GET", "/emails/receiving");
    expect(await page.getByTestId("received-row").count()).toBe(list.data.length);
    await page.getByTestId("received-row").filter({ hasText: "Refund request" }).locator("a").click();
    await page.waitForSelector('[data-testid="received-attachment"]');
    expect(await text("received-text")).toContain("Please refund order 42.");
    const href = await page.getByTestId("received-attachment").first().locator("a").getAttribute("href");
    expect((await (await fetch(href!)).text()).trimEnd()).toBe("order 42");
    await shot("received");
  });

  it("shows the provider, policy and warm-up settings as the API does, and saves the tenant's quota", async () => {
    await view("settings");
    const [providers, policies, warmups] = await Promise.all([
      api<{ data: unknown[] }>(relay, op(), "GET", "/relay/providers"),
      api<{ data: unknown[] }>(relay, op(), "GET", "/relay/policies"),
      api<{ data: unknown[] }>(relay, op(), "GET", "/relay/warmup"),
    ]);
    expect(await page.getByTestId("provider-row").count()).toBe(providers.data.length);
    expect(await page.getByTestId("policy-row").count()).toBe(policies.data.length);
    expect(await page.getByTestId("policy-row").filter({ hasText: "tenant:acme" }).textContent()).toContain(
      "concurrency 5, rate 120/m",
    );
    expect(await page.getByTestId("warmup-row").count()).toBe(warmups.data.length);
    expect(await page.getByTestId("warmup-row").first().textContent()).toContain("1 of 2");
    await page.fill('[data-testid="quota-form"] input[name="quota"]', "250");
    await page.click('[data-testid="quota-form"] button[type="submit"]');
    await page.waitForFunction(() =>
      (globalThis as any).document.querySelector('[data-testid="setting-quota"]')?.textContent?.includes("250"),
    );
    expect(
      (await api<{ receiving_daily_quota: number }>(relay, op(), "GET", "/relay/settings")).receiving_daily_quota,
    ).toBe(250);
    await page.getByTestId("warmup-advance").first().click();
    await page.waitForFunction(() =>
      (globalThis as any).document.querySelector('[data-testid="warmup-row"]')?.textContent?.includes("2 of 2"),
    );
    await shot("settings");
  });
});
