/**
 * MTA-STS (RFC 8461) and TLS-RPT (RFC 8460) end to end in the Workers runtime, against the world
 * of sts-world.ts: the fixture DoH resolver publishes `_mta-sts` and `_smtp._tls` records, a
 * policy server on HTTPS presents a certificate trusted through NODE_EXTRA_CA_CERTS, and MX sinks
 * offer STARTTLS with a good certificate, a wrong-name one, or none. Mail goes through the SOCKS5
 * bridge (Dante) as every mx delivery of this project does.
 */
import { createExecutionContext, createScheduledController, env, waitOnExecutionContext } from "cloudflare:test";
import { beforeAll, describe, expect, inject, it } from "vitest";
import worker from "../../../worker/index";
import { callWithKey, email, eventually, newKey } from "../helpers";
import { caught as sinkMessages, recipientsWhen, type Rcpt } from "./observe";
import { stsInfo } from "../../../worker/tls-policy/sts";

const sts = inject("sts");
const doh = inject("doh");
const sink = inject("sink");
let key: string;

type Stats = { messages: { rcptTo: string[]; secure: boolean }[]; connections: number };
type W = Rcpt & { blocked_by: string | null };

beforeAll(async () => {
  key = await newKey("acme");
  await env.DB.batch([
    env.DB.prepare("INSERT INTO transports (name, nexthop) VALUES ('stsmx', NULL)"),
    env.DB.prepare("INSERT INTO routes (tenant_id, pattern, transport) VALUES (NULL, '*.test', 'stsmx')"),
  ]);
});

async function send(to: string): Promise<string> {
  const res = await callWithKey(key, "POST", "/emails", email({ to: [to] }));
  expect(res.status).toBe(200);
  return (await res.json<{ id: string }>()).id;
}

const sinkStats = async (name: string) => (await fetch(`${sts.sinksUrl}/${name}`)).json<Stats>();
const worldStats = async () =>
  (await fetch(sts.statsUrl)).json<{
    fetches: Record<string, number>;
    reports: { contentType: string; report: Record<string, unknown> }[];
  }>();
const queries = async () => (await fetch(doh.url.replace("/dns-query", "/queries"))).json<Record<string, number>>();
const deferredBySts = (id: string) =>
  recipientsWhen(
    key,
    id,
    (r) => r.status === "deferred" && (r as W).blocked_by === "mta_sts",
    "deferred with blocked_by mta_sts",
    15_000,
  ) as Promise<W[]>;

describe("MTA-STS enforce", () => {
  it("a policy whose MX presents a certificate valid for its name: delivered over TLS", async () => {
    const id = await send("ada@sts-enforce.test");
    const [r] = await recipientsWhen(key, id, (x) => x.status === "delivered", "delivered", 15_000);
    expect(r!.last_response).toMatchObject({ code: 250, tls: true });
    const got = (await sinkStats("stsGood")).messages.filter((m) => m.rcptTo.includes("ada@sts-enforce.test"));
    expect(got.map((m) => m.secure)).toEqual([true]);
  });

  it("a policy that is cached costs no DoH query and no fetch on the next delivery", async () => {
    const before = { q: await queries(), f: (await worldStats()).fetches };
    const id = await send("bea@sts-enforce.test");
    await recipientsWhen(key, id, (x) => x.status === "delivered", "delivered", 15_000);
    const after = { q: await queries(), f: (await worldStats()).fetches };
    expect(before.f["mta-sts.sts-enforce.test"]).toBe(1);
    expect(after.f["mta-sts.sts-enforce.test"]).toBe(1);
    for (const name of [
      "_mta-sts.sts-enforce.test/TXT",
      "_smtp._tls.sts-enforce.test/TXT",
      "mta-sts.sts-enforce.test/A",
    ])
      expect(after.q[name]).toBe(before.q[name]);
  });

  it("an MX whose certificate is for another name: deferred with blocked_by mta_sts, never sent in clear", async () => {
    const id = await send("cal@sts-wrongname.test");
    const [r] = await deferredBySts(id);
    expect(r!.last_response?.text).toMatch(
      /^MTA-STS policy of sts-wrongname\.test \(enforce\): mx\.sts-wrongname\.test: .*TLS.*; not sent in clear$/,
    );
    expect((await sinkStats("stsWrongName")).messages).toEqual([]);
  });

  it("an MX without STARTTLS: deferred with blocked_by mta_sts, nothing sent", async () => {
    const id = await send("dan@sts-notls.test");
    const [r] = await deferredBySts(id);
    expect(r!.last_response?.text).toMatch(
      /MTA-STS policy of sts-notls\.test \(enforce\): mx\.sts-notls\.test: TLS is required, but was not offered/,
    );
    expect((await sinkStats("stsNoTls")).messages.filter((m) => m.rcptTo.includes("dan@sts-notls.test"))).toEqual([]);
  });

  it("an MX the policy's patterns do not list: deferred with blocked_by mta_sts before any connection", async () => {
    const id = await send("eve@sts-badmx.test");
    const [r] = await deferredBySts(id);
    expect(r!.last_response).toMatchObject({
      enhanced: "4.7.5",
      text: expect.stringContaining(
        "none of its MX hosts (mx.sts-badmx.test) matches the policy's mx patterns (*.elsewhere.test)",
      ),
    });
    expect((await sinkStats("stsGood")).messages.filter((m) => m.rcptTo.includes("eve@sts-badmx.test"))).toEqual([]);
  });
});

describe("MTA-STS testing", () => {
  it("delivers as usual to an MX without STARTTLS (the failure is only reported)", async () => {
    const id = await send("fay@sts-testing.test");
    const [r] = await recipientsWhen(key, id, (x) => x.status === "delivered", "delivered", 15_000);
    expect(r!.last_response).toMatchObject({ code: 250, tls: false });
    expect(
      (await sinkStats("stsNoTls")).messages
        .filter((m) => m.rcptTo.includes("fay@sts-testing.test"))
        .map((m) => m.secure),
    ).toEqual([false]);
  });
});

describe("MTA-STS cache", () => {
  /** Publishes a TXT answer (texts; none: an empty answer) at the fixture resolver. */
  const publishTxt = async (name: string, data: string[]) =>
    expect(
      (
        await fetch(doh.url.replace(/\/dns-query$/, "/records"), {
          method: "POST",
          body: JSON.stringify({ name, type: "TXT", data }),
        })
      ).status,
    ).toBe(204);
  const row = (domain: string) =>
    env.DB.prepare("SELECT rua FROM mta_sts_policies WHERE domain = ?").bind(domain).first<{ rua: string | null }>();

  it("a domain that publishes neither record costs no D1 row: its negative answer stays in this isolate's memory", async () => {
    await publishTxt("_mta-sts.plain-sts.test", []);
    await publishTxt("_smtp._tls.plain-sts.test", []);
    const bg = (p: Promise<unknown>) => void p.catch(() => undefined);
    const stage = {}; // the delivery stage whose discoveries under way its callers share
    const info = await stsInfo(env, "plain-sts.test", stage, bg);
    expect(info.entry.policy).toBeNull();
    expect(info.rua).toBeNull();
    expect(await row("plain-sts.test")).toBeNull();
    const asked = (await queries())["_mta-sts.plain-sts.test/TXT"];
    await stsInfo(env, "plain-sts.test", stage, bg);
    expect((await queries())["_mta-sts.plain-sts.test/TXT"]).toBe(asked);
    // A TLS-RPT address is worth a row (the daily report reads it), also without a policy.
    await publishTxt("_mta-sts.rpt-only.test", []);
    await publishTxt("_smtp._tls.rpt-only.test", ["v=TLSRPTv1; rua=mailto:tlsrpt@rpt-only.test"]);
    expect((await stsInfo(env, "rpt-only.test", stage, bg)).rua).toEqual(["mailto:tlsrpt@rpt-only.test"]);
    expect(await row("rpt-only.test")).toEqual({ rua: JSON.stringify(["mailto:tlsrpt@rpt-only.test"]) });
  });
});

describe("TLS-RPT", () => {
  it("the daily cron sends each domain's report in RFC 8460's schema, gzipped, to its https and mailto rua", async () => {
    // Counts are written with the delivery stage's feedback; wait for yesterday's (here: today's) rows.
    await eventually(
      async () => {
        const n = await env.DB.prepare(
          "SELECT count(DISTINCT domain) AS n FROM tlsrpt_counts WHERE domain IN ('sts-enforce.test', 'sts-wrongname.test', 'sts-testing.test')",
        ).first<number>("n");
        return n === 3 ? true : undefined;
      },
      10_000,
      "TLS-RPT counts of three domains",
    );
    const tomorrow = Date.parse(`${new Date().toISOString().slice(0, 10)}T00:30:00Z`) + 86_400_000;
    const ctx = createExecutionContext();
    await worker.scheduled!(createScheduledController({ cron: "30 0 * * *", scheduledTime: tomorrow }), env, ctx);
    await waitOnExecutionContext(ctx);
    const { reports } = await eventually(
      async () => {
        const s = await worldStats();
        return s.reports.length >= 3 ? s : undefined;
      },
      10_000,
      "three reports POSTed",
    );
    expect(new Set(reports.map((r) => r.contentType))).toEqual(new Set(["application/tlsrpt+gzip"]));
    const byDomain = new Map(
      reports.map((r) => [
        (r.report.policies as { policy: { "policy-domain": string } }[])[0]!.policy["policy-domain"],
        r.report,
      ]),
    );
    const day = new Date().toISOString().slice(0, 10);
    expect(byDomain.get("sts-enforce.test")).toMatchObject({
      "organization-name": "cohort.test",
      "date-range": { "start-datetime": `${day}T00:00:00Z`, "end-datetime": `${day}T23:59:59Z` },
      "report-id": expect.any(String),
      policies: [
        {
          policy: {
            "policy-type": "sts",
            "policy-string": ["version: STSv1", "mode: enforce", "mx: *.sts-enforce.test", "max_age: 86400"],
            "policy-domain": "sts-enforce.test",
            "mx-host": ["*.sts-enforce.test"],
          },
          summary: { "total-successful-session-count": 2, "total-failure-session-count": 0 },
        },
      ],
    });
    const wrong = (
      byDomain.get("sts-wrongname.test")!.policies as {
        summary: Record<string, number>;
        "failure-details": Record<string, unknown>[];
      }[]
    )[0]!;
    expect(wrong.summary["total-failure-session-count"]).toBeGreaterThanOrEqual(1);
    expect(wrong["failure-details"][0]).toMatchObject({
      "result-type": expect.stringMatching(/^certificate-(host-mismatch|not-trusted)$|^validation-failure$/),
      "receiving-mx-hostname": "mx.sts-wrongname.test",
      "sending-mta-ip": "127.0.0.5",
    });
    const testing = (
      byDomain.get("sts-testing.test")!.policies as { "failure-details": Record<string, unknown>[] }[]
    )[0]!;
    expect(testing["failure-details"][0]).toMatchObject({
      "result-type": "starttls-not-supported",
      "receiving-mx-hostname": "mx.sts-testing.test",
    });
    // The mailto rua: a multipart/report through the relay itself, to reports.test's MX (the sink).
    const mails = await eventually(
      async () => {
        const got = (await sinkMessages(sink.httpPort)).filter((m) => m.rcptTo.includes("tlsrpt@reports.test"));
        return got.length >= 3 ? got : undefined;
      },
      15_000,
      "three reports by mail",
    );
    const text = atob(mails[0]!.body);
    expect(text).toMatch(/^Content-Type: multipart\/report; report-type="tlsrpt"/m);
    expect(text).toMatch(/^TLS-Report-Domain: sts-[a-z]+\.test/m);
    expect(text).toMatch(/^Content-Type: application\/tlsrpt\+gzip/m);
    expect(text).toMatch(/filename="cohort\.test!sts-[a-z]+\.test!\d+!\d+!/);
    // Reported once: the next run finds nothing new.
    const again = createExecutionContext();
    await worker.scheduled!(createScheduledController({ cron: "30 0 * * *", scheduledTime: tomorrow }), env, again);
    await waitOnExecutionContext(again);
    expect(await env.DB.prepare("SELECT count(*) AS n FROM tlsrpt_reports").first<number>("n")).toBe(byDomain.size);
  });
});
