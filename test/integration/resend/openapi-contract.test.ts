/**
 * Each route in /openapi.json, with its schema, against the app: every operation of Resend's
 * newer resources (worker/api/openapi/: suppressions, templates, topics, received mail, ...)
 * and of the Resend-compatible core is called with a real request, and its answer must have
 * the documented status and parse with the documented response schema; every other GET
 * without path parameters is called the same way with an operator key. The few operations not
 * called are named below with the reason, so a new operation cannot go unchecked.
 * (test/integration/openapi.test.ts checks the table against the app's routes, both ways.)
 */
import { env } from "cloudflare:test";
import { beforeAll, describe, expect, it } from "vitest";
import { ROUTES } from "../../../worker/api/openapi/document";
import { insertDomain, updateDomain } from "../../../worker/db/domains";
import { newDkimKey } from "../../../worker/domains/service";
import { handleInbound } from "../../../worker/inbound/email";
import { call, callWithKey, email, newOperatorKey } from "../helpers";

/** Operations not called here, and why (each is covered by the test named). */
const NOT_CALLED: Record<string, string> = {
  unsubscribePage: "text/html: unsubscribe.test.ts",
  unsubscribe: "text/html: unsubscribe.test.ts",
  devMailbox: "needs the local SMTP catcher: e2e",
  devMeter: "needs METER on: dev-meter.test.ts",
  devMeterReset: "dev-meter.test.ts",
  verifyDomain: "DNS over HTTPS: domains.test.ts",
  rotateDomainKey: "domains.test.ts",
  listWebhookDeadLetters: "webhooks-api.test.ts",
  replayWebhook: "webhooks-api.test.ts",
  rotateWebhookSecret: "webhooks-api.test.ts",
  adminDestination: "admin.test.ts",
  adminFlush: "admin.test.ts",
  adminSuspend: "admin.test.ts",
  adminResume: "admin.test.ts",
  adminPutPolicy: "admin.test.ts",
  adminDeletePolicy: "admin.test.ts",
  adminPutWarmup: "admin.test.ts",
  adminAdvanceWarmup: "admin.test.ts",
  adminDeleteWarmup: "admin.test.ts",
  adminProvider: "admin.test.ts",
  adminPutProvider: "admin.test.ts",
  adminDeleteProvider: "admin.test.ts",
  liftComplaintBrake: "complaint-brake.test.ts",
  getMessageDetail: "admin.test.ts",
  messageEvents: "admin.test.ts",
  holdEmail: "control.test.ts",
  releaseEmail: "control.test.ts",
  requeueEmail: "control.test.ts",
  cancelEmailRecipients: "control.test.ts",
  reportComplaint: "complaint tests",
  reportArf: "complaint tests",
  cancelByFilter: "control tests",
  sendRaw: "relay-raw.test.ts",
  updateEmail: "emails-send.test.ts (scheduled mail)",
  cancelEmail: "emails-send.test.ts (scheduled mail)",
};

let key: string;
const ids: Record<string, string> = {};

async function jsonOf(res: Response): Promise<unknown> {
  return (res.headers.get("content-type") ?? "").includes("json") ? res.json() : res.text();
}

/** The requests, in order; each yields the path (with ids from earlier answers) and a body. */
const CALLS: [string, () => { path: string; body?: unknown }, (body: Record<string, unknown>) => void][] = [
  [
    "createTemplate",
    () => ({
      path: "/templates",
      body: {
        name: "contract",
        html: "<p>{{{X}}}</p>",
        subject: "S",
        from: "a@contract.example",
        variables: [{ key: "X", type: "string", fallback_value: "x" }],
      },
    }),
    (b) => {
      ids.template = b.id as string;
    },
  ],
  ["updateTemplate", () => ({ path: `/templates/${ids.template}`, body: { alias: "contract" } }), () => undefined],
  ["publishTemplate", () => ({ path: `/templates/${ids.template}/publish` }), () => undefined],
  [
    "previewTemplate",
    () => ({ path: `/relay/templates/${ids.template}/preview`, body: { variables: { X: "<b>y</b>" } } }),
    (b) => {
      expect(b.html).toBe("<p>&lt;b&gt;y&lt;/b&gt;</p>");
    },
  ],
  [
    "duplicateTemplate",
    () => ({ path: `/templates/${ids.template}/duplicate` }),
    (b) => {
      ids.copy = b.id as string;
    },
  ],
  ["listTemplates", () => ({ path: "/templates" }), () => undefined],
  ["getTemplate", () => ({ path: "/templates/contract" }), () => undefined],
  ["removeTemplate", () => ({ path: `/templates/${ids.copy}` }), () => undefined],
  [
    "createTopic",
    () => ({ path: "/topics", body: { name: "News", default_subscription: "opt_in", description: "d" } }),
    (b) => {
      ids.topic = b.id as string;
    },
  ],
  ["updateTopic", () => ({ path: `/topics/${ids.topic}`, body: { name: "News 2" } }), () => undefined],
  ["listTopics", () => ({ path: "/topics" }), () => undefined],
  ["getTopic", () => ({ path: `/topics/${ids.topic}` }), () => undefined],
  [
    "updateContactTopics",
    () => ({ path: "/contacts/ann@example.com/topics", body: [{ id: ids.topic, subscription: "opt_out" }] }),
    () => undefined,
  ],
  ["listContactTopics", () => ({ path: "/contacts/ann@example.com/topics" }), () => undefined],
  [
    "sendEmail",
    () => ({
      path: "/emails",
      body: email({ template: undefined, attachments: [{ filename: "a.txt", content: btoa("hello") }] }),
    }),
    (b) => {
      ids.email = b.id as string;
    },
  ],
  [
    "sendBatch",
    () => ({
      path: "/emails/batch",
      body: [{ to: "bob@example.com", template: { id: "contract" } }, email({ topic_id: ids.topic })],
    }),
    () => undefined,
  ],
  ["listEmails", () => ({ path: "/emails" }), () => undefined],
  ["getEmail", () => ({ path: `/emails/${ids.email}` }), () => undefined],
  [
    "listEmailAttachments",
    () => ({ path: `/emails/${ids.email}/attachments` }),
    (b) => {
      ids.att = (b.data as { id: string }[])[0]!.id;
      ids.attUrl = (b.data as { download_url: string }[])[0]!.download_url;
    },
  ],
  ["getEmailAttachment", () => ({ path: `/emails/${ids.email}/attachments/${ids.att}` }), () => undefined],
  ["downloadFile", () => ({ path: new URL(ids.attUrl!).pathname }), () => undefined],
  ["emailMetrics", () => ({ path: "/emails/metrics?dimensions=period,domain" }), () => undefined],
  [
    "listReceivedEmails",
    () => ({ path: "/emails/receiving" }),
    (b) => {
      ids.received = (b.data as { id: string }[])[0]!.id;
    },
  ],
  ["getReceivedEmail", () => ({ path: `/emails/receiving/${ids.received}` }), () => undefined],
  [
    "listReceivedAttachments",
    () => ({ path: `/emails/receiving/${ids.received}/attachments` }),
    (b) => {
      ids.ratt = (b.data as { id: string }[])[0]!.id;
    },
  ],
  [
    "getReceivedAttachment",
    () => ({ path: `/emails/receiving/${ids.received}/attachments/${ids.ratt}` }),
    () => undefined,
  ],
  [
    "resendAddSuppression",
    () => ({ path: "/suppressions", body: { email: "x@contract.example" } }),
    (b) => {
      ids.sup = b.id as string;
    },
  ],
  ["resendListSuppressions", () => ({ path: "/suppressions" }), () => undefined],
  ["resendGetSuppression", () => ({ path: `/suppressions/${ids.sup}` }), () => undefined],
  ["resendRemoveSuppression", () => ({ path: "/suppressions/x%40contract.example" }), () => undefined],
  [
    "resendBatchAddSuppressions",
    () => ({ path: "/suppressions/batch/add", body: { emails: ["y@contract.example"] } }),
    () => undefined,
  ],
  [
    "resendBatchRemoveSuppressions",
    () => ({ path: "/suppressions/batch/remove", body: { emails: ["y@contract.example"] } }),
    () => undefined,
  ],
  [
    "addSuppression",
    () => ({ path: "/relay/suppressions", body: { address: "z@contract.example", scope: "bulk" } }),
    () => undefined,
  ],
  ["removeSuppression", () => ({ path: "/relay/suppressions/z@contract.example" }), () => undefined],
  ["removeTopic", () => ({ path: `/topics/${ids.topic}` }), () => undefined],
  [
    "createDomain",
    () => ({ path: "/domains", body: { name: "new.contract.example", capabilities: { receiving: "enabled" } } }),
    (b) => {
      ids.domain = b.id as string;
    },
  ],
  ["getDomain", () => ({ path: `/domains/${ids.domain}` }), () => undefined],
  [
    "updateDomain",
    () => ({ path: `/domains/${ids.domain}`, body: { capabilities: { receiving: "disabled" }, open_tracking: false } }),
    () => undefined,
  ],
  ["removeDomain", () => ({ path: `/domains/${ids.domain}` }), () => undefined],
  [
    "createApiKey",
    () => ({ path: "/api-keys", body: { name: "second" } }),
    (b) => {
      ids.key = b.id as string;
    },
  ],
  ["updateApiKey", () => ({ path: `/api-keys/${ids.key}`, body: { name: "renamed" } }), () => undefined],
  ["removeApiKey", () => ({ path: `/api-keys/${ids.key}` }), () => undefined],
  [
    "createWebhook",
    () => ({
      path: "/webhooks",
      body: { endpoint: "https://hooks.contract.example/x", events: ["email.received", "email.sent"] },
    }),
    (b) => {
      ids.webhook = b.id as string;
    },
  ],
  ["getWebhook", () => ({ path: `/webhooks/${ids.webhook}` }), () => undefined],
  ["updateWebhook", () => ({ path: `/webhooks/${ids.webhook}`, body: { status: "disabled" } }), () => undefined],
  ["deleteWebhook", () => ({ path: `/webhooks/${ids.webhook}` }), () => undefined],
  ["updateSettings", () => ({ path: "/relay/settings", body: { receiving_daily_quota: 500 } }), () => undefined],
];

beforeAll(async () => {
  key = await newOperatorKey("contract");
  const id = crypto.randomUUID();
  const now = Date.now();
  await insertDomain(
    env.DB,
    {
      id,
      tenant_id: "contract",
      name: "in.contract.example",
      status: "verified",
      region: "us-east-1",
      return_path: "send",
      open_tracking: 0,
      click_tracking: 0,
      tls: "opportunistic",
      records: "[]",
      created_at: now,
      verified_at: now,
    },
    await newDkimKey(env, id, "cohort1", "active", now),
  );
  await updateDomain(env.DB, "contract", id, { receiving: true });
  const raw = new TextEncoder().encode(
    "From: a@o.example\r\nTo: help@in.contract.example\r\nSubject: hi\r\nMIME-Version: " +
      "1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: " +
      "text/plain\r\n\r\nhello\r\n--b\r\nContent-Type: text/plain; name=n.txt\r\n" +
      "Content-Disposition: attachment; filename=n.txt\r\n\r\nnote\r\n--b--\r\n",
  );
  await handleInbound(
    {
      from: "a@o.example",
      to: "help@in.contract.example",
      raw: new Response(raw).body!,
      rawSize: raw.length,
      setReject: () => undefined,
    },
    env,
  );
});

describe("each documented operation", () => {
  it("answers its documented status with a body its documented schema accepts", async () => {
    const byId = new Map(ROUTES.map((r) => [r.operationId, r]));
    const called = new Set<string>();
    const problems: string[] = [];
    const check = async (opId: string, path: string, body: unknown) => {
      const op = byId.get(opId);
      if (!op) return problems.push(`${opId}: not in the document`);
      called.add(opId);
      const res = op.auth ? await callWithKey(key, op.method.toUpperCase(), path, body) : await call(path);
      const got = await jsonOf(res);
      if (res.status !== op.ok.status)
        return problems.push(`${opId} ${op.method} ${path}: ${res.status} ${JSON.stringify(got).slice(0, 300)}`);
      const parsed = op.ok.schema.safeParse(got);
      if (!parsed.success)
        problems.push(
          `${opId}: the answer does not fit its schema: ${parsed.error.issues
            .slice(0, 3)
            .map((i) => `${i.path.join(".")} ${i.message}`)
            .join("; ")}`,
        );
      return got as Record<string, unknown>;
    };
    for (const [opId, req, after] of CALLS) {
      const { path, body } = req();
      const got = await check(opId, path, body);
      if (got && typeof got === "object") after(got as Record<string, unknown>);
    }
    for (const op of ROUTES) {
      if (called.has(op.operationId) || NOT_CALLED[op.operationId] || op.method !== "get" || op.path.includes("{"))
        continue;
      await check(op.operationId, op.path, undefined);
    }
    expect(problems).toEqual([]);
    expect(
      ROUTES.filter((r) => !called.has(r.operationId) && !NOT_CALLED[r.operationId]).map((r) => r.operationId),
    ).toEqual([]);
    expect(Object.keys(NOT_CALLED).filter((k) => !byId.has(k))).toEqual([]);
  });
});
