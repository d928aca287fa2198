// @ts-check
/**
 * cohort's commands for Resend's newer resources (issue 38): templates, topics and contacts'
 * subscriptions, Resend's suppressions, received mail, metrics, key rename and a domain's
 * receiving. bin/cohort.mjs hands every command it does not know to resendCommand().
 *
 * USAGE (see RESEND_HELP)
 *
 * EXIT STATUS
 *   As cohort.mjs: 0 success, 1 an API error (thrown by `call`), 2 bad usage (UsageError).
 */
import { readFile } from "node:fs/promises";
import { textTable } from "./format.mjs";

export const RESEND_HELP = `
Resend's resources:
  templates                                list templates
  template <id|alias>                      a template: status, versions, variables, html
  template-create --name N (--html H | --file F) [--subject S] [--from A] [--var KEY:string|number[:fallback]]…
  template-publish <id|alias>              publish the draft
  send-template --from A --to B --template <id|alias> [--var KEY=value]…   send the published version
  topics                                   list topics
  topic-create --name N --default opt_in|opt_out
  subscriptions <email>                    a contact's subscription to every topic
  subscribe <email> <topic id> | unsubscribe-topic <email> <topic id>
  suppress <email> | unsuppress <email|id> list Resend's suppressions with: suppressions-list
  received [--limit N]                     received mail, newest first
  received-show <id>                       a received email with its attachments
  metrics [--days N] [--by period|domain]  delivery, bounce, complaint, unsubscribe counts and rates
  key-rename <id> --name N                 rename an API key
  receiving <domain id> on|off             let a verified domain receive mail (or stop)
`;

/** Options these commands add to cohort's. */
export const RESEND_OPTIONS = /** @type {const} */ ({
  name: { type: "string" },
  var: { type: "string", multiple: true },
  template: { type: "string" },
  default: { type: "string" },
  by: { type: "string" },
});

export class UsageError extends Error {}

const pct = (x) => `${(x * 100).toFixed(2)}%`;
const METRIC_HEAD = [
  "",
  "sent",
  "delivered",
  "bounced",
  "complained",
  "unsubscribed",
  "suppressed",
  "received",
  "delivery",
  "bounce",
  "complaint",
];

/** A template variable declaration from "KEY:type[:fallback]". */
function variable(spec) {
  const [key, type, ...rest] = spec.split(":");
  if (!key || (type !== "string" && type !== "number"))
    throw new UsageError(`bad --var ${JSON.stringify(spec)}: expected KEY:string|number[:fallback]`);
  const fb = rest.length ? rest.join(":") : undefined;
  return { key, type, ...(fb === undefined ? {} : { fallback_value: type === "number" ? Number(fb) : fb }) };
}

/**
 * Runs one of these commands; null when `command` is not one of them.
 * @param {string} command @param {string[]} args @param {Record<string, any>} values
 * @param {(method: string, path: string, body?: unknown) => Promise<any>} call @param {(json: unknown, text: string) => void} print
 */
export async function resendCommand(command, args, values, call, print) {
  const need = (v, usage) => {
    if (!v) throw new UsageError(`usage: cohort ${usage}`);
    return v;
  };
  const enc = encodeURIComponent;
  switch (command) {
    case "templates": {
      const r = await call("GET", "/templates?limit=100");
      print(
        r,
        r.data.length
          ? textTable(
              ["id", "name", "alias", "status", "updated"],
              r.data.map((t) => [t.id, t.name, t.alias, t.status, t.updated_at]),
            )
          : "no templates",
      );
      return 0;
    }
    case "template": {
      const t = await call("GET", `/templates/${enc(need(args[0], "template <id|alias>"))}`);
      const vars =
        t.variables
          .map((v) => `${v.key}:${v.type}${v.fallback_value === null ? "" : `=${v.fallback_value}`}`)
          .join(" ") || "-";
      print(
        t,
        [
          `${t.id}  ${t.name}  ${t.status}${t.has_unpublished_versions ? " (draft changed since published)" : ""}`,
          `from ${t.from ?? "-"}  subject ${JSON.stringify(t.subject)}`,
          `variables ${vars}`,
          "",
          t.html,
        ].join("\n"),
      );
      return 0;
    }
    case "template-create": {
      const html = values.html ?? (values.file ? await readFile(values.file, "utf8") : undefined);
      const body = {
        name: need(values.name, "template-create --name N (--html H | --file F) …"),
        html: need(html, "template-create --name N (--html H | --file F) …"),
        ...(values.subject !== undefined ? { subject: values.subject } : {}),
        ...(values.from ? { from: values.from } : {}),
        variables: (values.var ?? []).map(variable),
      };
      const r = await call("POST", "/templates", body);
      print(r, r.id);
      return 0;
    }
    case "template-publish": {
      const r = await call("POST", `/templates/${enc(need(args[0], "template-publish <id|alias>"))}/publish`);
      print(r, `published ${r.id}`);
      return 0;
    }
    case "send-template": {
      const usage = "send-template --from A --to B --template <id|alias> [--var KEY=value]…";
      const variables = Object.fromEntries(
        (values.var ?? []).map((kv) => {
          const eq = kv.indexOf("=");
          if (eq < 1) throw new UsageError(`bad --var ${JSON.stringify(kv)}: expected KEY=value`);
          return [kv.slice(0, eq), kv.slice(eq + 1)];
        }),
      );
      const r = await call("POST", "/emails", {
        ...(values.from ? { from: values.from } : {}),
        to: need(values.to?.length ? values.to : null, usage),
        template: { id: need(values.template, usage), variables },
      });
      print(r, r.id);
      return 0;
    }
    case "topics": {
      const r = await call("GET", "/topics");
      print(
        r,
        r.data.length
          ? textTable(
              ["id", "name", "default"],
              r.data.map((t) => [t.id, t.name, t.default_subscription]),
            )
          : "no topics",
      );
      return 0;
    }
    case "topic-create": {
      const r = await call("POST", "/topics", {
        name: need(values.name, "topic-create --name N --default opt_in|opt_out"),
        default_subscription: need(values.default, "topic-create --name N --default opt_in|opt_out"),
      });
      print(r, r.id);
      return 0;
    }
    case "subscriptions": {
      const r = await call("GET", `/contacts/${enc(need(args[0], "subscriptions <email>"))}/topics`);
      print(
        r,
        r.data.length
          ? textTable(
              ["topic", "name", "subscription"],
              r.data.map((t) => [t.id, t.name, t.subscription]),
            )
          : "no topics",
      );
      return 0;
    }
    case "subscribe":
    case "unsubscribe-topic": {
      const [email, topic] = args;
      need(email && topic, `${command} <email> <topic id>`);
      const r = await call("PATCH", `/contacts/${enc(email)}/topics`, [
        { id: topic, subscription: command === "subscribe" ? "opt_in" : "opt_out" },
      ]);
      print(r, `${r.id}: ${command === "subscribe" ? "opted in to" : "opted out of"} ${topic}`);
      return 0;
    }
    case "suppress": {
      const r = await call("POST", "/suppressions", { email: need(args[0], "suppress <email>") });
      print(r, `suppressed (${r.id})`);
      return 0;
    }
    case "unsuppress": {
      const r = await call("DELETE", `/suppressions/${enc(need(args[0], "unsuppress <email|id>"))}`);
      print(r, `removed ${r.id}`);
      return 0;
    }
    case "suppressions-list": {
      const r = await call("GET", "/suppressions?limit=100");
      print(
        r,
        r.data.length
          ? textTable(
              ["email", "origin", "scope", "reason", "since"],
              r.data.map((s) => [s.email, s.origin, s.scope, s.reason, s.created_at]),
            )
          : "no suppressions",
      );
      return 0;
    }
    case "received": {
      const r = await call("GET", `/emails/receiving?limit=${enc(values.limit ?? "20")}`);
      print(
        r,
        r.data.length
          ? textTable(
              ["id", "received", "from", "to", "subject", "files"],
              r.data.map((m) => [
                m.id,
                m.created_at,
                m.from,
                m.received_for.join(","),
                m.subject,
                m.attachments.length,
              ]),
            )
          : "no received mail",
      );
      return 0;
    }
    case "received-show": {
      const m = await call("GET", `/emails/receiving/${enc(need(args[0], "received-show <id>"))}?html_format=cid`);
      const files =
        m.attachments.map((a) => `  ${a.filename ?? "(unnamed)"}  ${a.content_type}  ${a.size} bytes`).join("\n") ||
        "  none";
      print(
        m,
        [
          `${m.id}  received ${m.created_at}`,
          `from ${m.from}`,
          `to ${m.to.join(", ")}`,
          `subject ${JSON.stringify(m.subject)}`,
          "",
          m.text ?? "",
          "",
          "attachments:",
          files,
        ].join("\n"),
      );
      return 0;
    }
    case "metrics": {
      const days = Number(values.days ?? 7);
      if (!Number.isInteger(days) || days < 1) throw new UsageError("--days must be a positive integer");
      const by = values.by ? `&dimensions=${enc(values.by)}` : "";
      const start = new Date(Date.now() - days * 86_400_000).toISOString();
      const r = await call("GET", `/emails/metrics?start_date=${enc(start)}${by}`);
      const row = (label, t) => [
        label,
        t.sent,
        t.delivered,
        t.bounced,
        t.complained,
        t.unsubscribed,
        t.suppressed,
        t.received,
        pct(t.delivery_rate),
        pct(t.bounce_rate),
        pct(t.complaint_rate),
      ];
      const rows = [
        row("all", r.totals),
        ...(r.data ?? []).map((d) => row([d.period?.slice(0, 10), d.domain_name].filter(Boolean).join(" "), d)),
      ];
      print(r, `last ${days} days\n${textTable(METRIC_HEAD, rows)}`);
      return 0;
    }
    case "key-rename": {
      const r = await call("PATCH", `/api-keys/${enc(need(args[0], "key-rename <id> --name N"))}`, {
        name: need(values.name, "key-rename <id> --name N"),
      });
      print(r, `renamed ${r.id}`);
      return 0;
    }
    case "receiving": {
      const [id, state] = args;
      if (!id || (state !== "on" && state !== "off"))
        throw new UsageError("usage: cohort receiving <domain id> on|off");
      const r = await call("PATCH", `/domains/${enc(id)}`, {
        capabilities: { receiving: state === "on" ? "enabled" : "disabled" },
      });
      print(r, `${r.id}: receiving ${state}`);
      return 0;
    }
    default:
      return null;
  }
}
