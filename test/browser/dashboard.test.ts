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

const ARTIFACTS = new URL("../../test-artifacts/", import.meta.url).pathname;
const STATES = ["incoming", "ready", "active", "deferred", "delivered", "bounced", "expired", "suppressed", "cancelled"];

let relay: Relay;
let browser: Browser;
let page: Page;
const ids: Record<string, string> = {};

type Queue = { counts: { total: number; by_state: Record<string, number>; by_destination: unknown[] }; open: { count: number; age_percentiles: { p: number }[] }; deferred: { total: number }[]; qshape: { total: number }[] };
type Stats = { totals: Record<string, number>; series: unknown[] };

async function send(to: string[], extra: Record<string, unknown> = {}): Promise<string> {
  return (await api<{ id: string }>(relay, relay.tenantKey, "POST", "/emails", { from: "Acme <news@acme.test>", to, subject: "dashboard", text: "hello", ...extra })).id;
}

const text = async (testid: string) => (await page.getByTestId(testid).first().textContent())?.trim() ?? "";
const shot = (name: string) => page.screenshot({ path: `${ARTIFACTS}dashboard-${name}.png`, fullPage: true });

async function view(name: string): Promise<void> {
  await page.click(`#nav a[href="#${name}"]`);
  await page.waitForSelector(`body[data-ready="${name}"]`, { timeout: 15_000 });
}

beforeAll(async () => {
  await mkdir(ARTIFACTS, { recursive: true });
  relay = await startRelay();
  ids.delivered = await send(["ok-a@example.test", "ok-b@example.test"]);
  ids.bounced = await send(["reject-c@example.test"]);
  ids.deferred = await send(["tempfail-d@example.test"]);
  ids.tagged = await send(["ok-e@example.test"], { tags: [{ name: "campaign", value: "launch" }] });
  await recipientsIn(relay, relay.tenantKey, ids.delivered, ["delivered"]);
  await recipientsIn(relay, relay.tenantKey, ids.tagged, ["delivered"]);
  await recipientsIn(relay, relay.tenantKey, ids.bounced, ["bounced"]);
  await recipientsIn(relay, relay.tenantKey, ids.deferred, ["deferred"]);
  // The D1 index and event log catch up asynchronously: wait until the API shows all of it.
  await waitFor(async () => {
    const q = await api<Queue>(relay, relay.operatorKey, "GET", "/relay/queue");
    const s = await api<Stats>(relay, relay.operatorKey, "GET", "/relay/stats?window=60");
    const b = q.counts.by_state;
    return b.delivered === 3 && b.bounced === 1 && b.deferred === 1 && s.totals.delivered === 3 && s.totals.bounced === 1 && s.totals.deferred! >= 1 ? true : undefined;
  }, 30_000, "the index and the event log");
  await api(relay, relay.operatorKey, "POST", "/relay/suppressions", { address: "blocked@example.test", reason: "manual" });
  await api(relay, relay.operatorKey, "POST", "/webhooks", { endpoint: "https://hooks.example.com/cohort", events: ["email.bounced"] });
  browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await relay?.stop();
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
    for (const state of STATES) expect({ state, shown: await text(`count-${state}`) }).toEqual({ state, shown: String(q.counts.by_state[state] ?? 0) });
    expect(await text("count-delivered")).toBe("3");
    expect(await text("count-bounced")).toBe("1");
    expect(await text("count-deferred")).toBe("1");
    expect(await text("open-count")).toBe(String(q.open.count));
    for (const p of q.open.age_percentiles) expect(await text(`age-p${p.p}`)).toMatch(/^\d+(s|m \d+s|h \d+m)$/);
    for (const k of ["delivered", "bounced", "deferred", "failed"]) expect({ k, shown: await text(`tp-${k}`) }).toEqual({ k, shown: String(s.totals[k]) });
    expect(await page.getByTestId("throughput-chart").locator("rect").count()).toBeGreaterThanOrEqual(2);
    expect(await page.getByTestId("destination-row").count()).toBe(q.counts.by_destination.length);
    // qshape deferred: TOTAL row's total cell (third column) equals the API's.
    expect(await page.getByTestId("qshape-deferred").locator("tbody tr").first().locator("td").nth(2).textContent()).toBe(String(q.deferred[0]!.total));
    expect(await page.getByTestId("qshape-active").locator("tbody tr").first().locator("td").nth(2).textContent()).toBe(String(q.qshape[0]!.total));
    await shot("overview");
  });

  it("lists destinations and charts one's window over time from its feedback history", async () => {
    await view("destinations");
    const list = await api<{ data: { transport: string; queue: string }[] }>(relay, relay.operatorKey, "GET", "/relay/destinations");
    expect(await page.getByTestId("destination").count()).toBe(list.data.length);
    const row = page.locator(`[data-testid="destination"][data-queue="${relay.smarthost}"]`);
    await row.locator("a").click();
    await page.getByTestId("dest-window").waitFor();
    const d = await api<{ window: number; busy: number; history: unknown[] }>(relay, relay.operatorKey, "GET", `/relay/destinations/smtp/${encodeURIComponent(relay.smarthost)}`);
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
    const m = await api<{ last_event: string; events: unknown[] }>(relay, relay.operatorKey, "GET", `/relay/messages/${ids.bounced}`);
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
    const cr = await api<{ totals: { delivered: number; complained: number }; domains: unknown[] }>(relay, relay.operatorKey, "GET", "/relay/complaint-rate?days=7");
    expect(await page.getByTestId("complaint-total").textContent()).toContain(`all${cr.totals.delivered}${cr.totals.complained}`);
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
    await page.waitForFunction(() => String((globalThis as any).document.querySelector('[data-testid="recipient-row"] td:nth-child(6)')?.textContent) === "held");
    const held = await api<{ recipients: { blocked_by: string }[] }>(relay, relay.tenantKey, "GET", `/emails/${ids.deferred}`);
    expect(held.recipients[0]!.blocked_by).toBe("held");
    expect(await blockedCell().textContent()).toBe("held");
    await shot("message-held");
    await page.getByTestId("action-release").click();
    await page.waitForFunction(() => String((globalThis as any).document.querySelector('[data-testid="recipient-row"] td:nth-child(6)')?.textContent) !== "held");
    const released = await api<{ recipients: { blocked_by: string | null }[] }>(relay, relay.tenantKey, "GET", `/emails/${ids.deferred}`);
    expect(released.recipients[0]!.blocked_by).not.toBe("held");
  });
});
