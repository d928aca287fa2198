#!/usr/bin/env node
// @ts-check
/**
 * cohort — the relay's command line: queue summary, flush, suspend/resume, send a test
 * message, tail events, show a message. Plain ESM on Node 20 built-ins (fetch, util.parseArgs);
 * no build step.
 *
 * USAGE
 *   npx cohort <command> [options]      (--url / COHORT_URL, --key / COHORT_API_KEY)
 *   queue                               qshape of the active and deferred queues, counts by state
 *   flush [--transport T]               retry deferred mail now, revive dead destinations
 *   suspend <destination|tenant|transport|site|egress> <name> --ttl 1h [--transport T]
 *   resume  <destination|tenant|transport|site|egress> <name> [--transport T]
 *   suspensions                         suspensions in force
 *   providers | provider-set <name> --file F | provider-delete <name>   provider rules (MX suffix → shape)
 *   policies | policy-set <key> [--concurrency N] [--rate R] [--connect-interval S]   pickup policies
 *   warmup | warmup-advance <egress> [--days N]   IP warm-up plans
 *   send --from A --to B [--to C] --subject S (--text T | --html H) [--tag name:value]
 *   tail [--type email.delivered,…] [--after evt_…] [--interval 2] [--count N] [--once]
 *   show <email id>                     recipients and the event timeline
 *   hold | release | requeue <email id>  postsuper -h / -H / -r
 *   cancel <email id> [--domain D]      cancel its open recipients (only those at D)
 *   cancel --domain D | --tag name:value | --tenant T   cancel by filter
 *   --json prints the API's JSON (tail: one event per line).
 *
 * EXIT STATUS
 *   0 success; 1 the relay answered an error or could not be reached (the message says which);
 *   2 bad usage.
 */
import { realpathSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { eventLine, queueText, showText, textTable } from "./format.mjs";
import { RESEND_HELP, RESEND_OPTIONS, resendCommand, UsageError as ResendUsageError } from "./resend-commands.mjs";

const HELP = `usage: cohort <command> [options]

commands:
  queue                                    queue summary (qshape by destination and age)
  flush [--transport T]                    retry deferred mail now and revive dead destinations
  suspend <target> <name> --ttl 1h [--transport T]
                                           target: destination | tenant | transport
  resume <target> <name> [--transport T]   end a suspension
  suspensions                              list suspensions in force
  inbound [--days N]                       mail that came back (bounces, complaints...) by day and kind
  complaint-rate [--tenant T] [--days N]   complaints per delivery, by sending domain, and the brake
  brake-lift <tenant>                      lift the complaint-rate brake on a tenant's bulk mail
  providers                                provider rules (MX suffixes and the shape of their domains)
  provider-set <name> --file F             create or replace a provider rule from a JSON file (- for stdin)
  provider-delete <name>                   delete a provider rule
  policies                                 pickup policies in force (caps, rates, intervals, suspensions)
  policy-set <key> [--concurrency N] [--rate R] [--connect-interval S]
                                           set a key's limits (none given: remove them)
  warmup                                   IP warm-up plans: day and today's caps per provider
  warmup-advance <egress> [--days N]       move a warm-up plan on (default 1 day)
  send --from A --to B --subject S --text T [--html H] [--tag name:value]
  tail [--type T[,T…]] [--after evt_…] [--interval s] [--count N] [--once]
  show <email id>                          a message's recipients and timeline
  hold <email id>                          keep it from delivery until released (postsuper -h)
  release <email id>                       deliver a held message again (postsuper -H)
  requeue <email id>                       route its open recipients again (postsuper -r)
  cancel <email id> [--domain D]           cancel its open recipients (only those at D)
  cancel [--domain D] [--tag name:value] [--tenant T]
                                           cancel open recipients by filter (at least one)

options:
  --url URL      relay base URL (default $COHORT_URL, else http://127.0.0.1:8787)
  --key KEY      API key (default $COHORT_API_KEY)
  --json         machine-readable output
  -h, --help     this help
${RESEND_HELP}`;

class UsageError extends Error {}

class ApiError extends Error {
  /** @param {number} status @param {string} name @param {string} message */
  constructor(status, name, message) {
    super(message);
    this.status = status;
    this.code = name;
  }
}

/** Parses "90", "90s", "15m", "1h", "2d" into seconds. */
export function parseTtl(text) {
  const m = /^(\d+)\s*([smhd]?)$/.exec(String(text).trim());
  if (!m) throw new UsageError(`bad --ttl ${JSON.stringify(text)}: expected e.g. 90s, 15m, 1h or 2d`);
  const n = Number(m[1]) * { "": 1, s: 1, m: 60, h: 3600, d: 86400 }[m[2] ?? ""];
  if (n <= 0) throw new UsageError("--ttl must be positive");
  return n;
}

/** A client for one relay and key. */
function client(url, key) {
  return async function call(method, path, body) {
    let res;
    try {
      res = await fetch(new URL(path, url), {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      throw new ApiError(
        0,
        "unreachable",
        `cannot reach ${url}: ${e instanceof Error ? (e.cause instanceof Error ? e.cause.message : e.message) : String(e)}`,
      );
    }
    const text = await res.text();
    let json;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    if (!res.ok) throw new ApiError(res.status, json?.name ?? "http_error", json?.message ?? `HTTP ${res.status}`);
    return json;
  };
}

/** All of standard input, as text. */
async function readStdin() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return Buffer.concat(chunks).toString("utf8");
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Runs one command; returns the exit status. */
export async function main(argv, out = process.stdout, env = process.env) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      url: { type: "string" },
      key: { type: "string" },
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
      transport: { type: "string" },
      ttl: { type: "string" },
      from: { type: "string" },
      to: { type: "string", multiple: true },
      subject: { type: "string" },
      text: { type: "string" },
      html: { type: "string" },
      tag: { type: "string", multiple: true },
      domain: { type: "string" },
      tenant: { type: "string" },
      days: { type: "string" },
      file: { type: "string" },
      concurrency: { type: "string" },
      rate: { type: "string" },
      "connect-interval": { type: "string" },
      type: { type: "string" },
      after: { type: "string" },
      interval: { type: "string", default: "2" },
      count: { type: "string" },
      once: { type: "boolean", default: false },
      limit: { type: "string" },
      ...RESEND_OPTIONS,
    },
  });
  const [command, ...args] = positionals;
  if (values.help || !command) {
    out.write(HELP);
    return command || values.help ? 0 : 2;
  }
  const url = values.url ?? env.COHORT_URL ?? "http://127.0.0.1:8787";
  const key = values.key ?? env.COHORT_API_KEY;
  if (!key) throw new UsageError("no API key: pass --key or set COHORT_API_KEY");
  const call = client(url, key);
  const print = (json, text) => out.write(`${values.json ? JSON.stringify(json) : text}\n`);

  switch (command) {
    case "queue": {
      const q = await call("GET", "/relay/queue");
      print(q, queueText(q));
      return 0;
    }
    case "flush": {
      const r = await call("POST", "/relay/flush", values.transport ? { transport: values.transport } : {});
      print(
        r,
        `flushed ${r.transports.join(", ")}; revived ${r.revived.length} dead destination(s)${r.revived.length ? `: ${r.revived.map((d) => `${d.transport}/${d.queue}`).join(", ")}` : ""}`,
      );
      return 0;
    }
    case "suspend": {
      const [target, name] = args;
      if (!target || !name || !values.ttl)
        throw new UsageError(
          "usage: cohort suspend <destination|tenant|transport|site|egress> <name> --ttl 1h [--transport T]",
        );
      const r = await call("POST", "/relay/suspensions", {
        target,
        name,
        ttl_seconds: parseTtl(values.ttl),
        ...(values.transport ? { transport: values.transport } : {}),
      });
      print(r, `suspended ${r.key} until ${r.until} (in ${r.transports.join(", ")})`);
      return 0;
    }
    case "resume": {
      const [target, name] = args;
      if (!target || !name)
        throw new UsageError("usage: cohort resume <destination|tenant|transport|site|egress> <name> [--transport T]");
      const qs = values.transport ? `?transport=${encodeURIComponent(values.transport)}` : "";
      const r = await call(
        "DELETE",
        `/relay/suspensions/${encodeURIComponent(target)}/${encodeURIComponent(name)}${qs}`,
      );
      print(r, `resumed ${r.key}`);
      return 0;
    }
    case "suspensions": {
      const r = await call("GET", "/relay/suspensions");
      print(
        r,
        r.data.length
          ? textTable(
              ["key", "until", "set by", "transports"],
              r.data.map((s) => [s.key, s.until, s.set_by ?? "operator", s.transports.join(",")]),
            )
          : "no suspensions",
      );
      return 0;
    }
    case "inbound": {
      const r = await call("GET", `/relay/inbound${values.days ? `?days=${encodeURIComponent(values.days)}` : ""}`);
      const kinds = Object.keys(r.totals).sort();
      print(
        r,
        r.days.length
          ? textTable(
              ["day", ...kinds],
              r.days.map((d) => [d.day, ...kinds.map((k) => d.counts[k] ?? 0)]),
            )
          : `nothing came back since ${r.from}`,
      );
      return 0;
    }
    case "complaint-rate": {
      const qs = new URLSearchParams({
        ...(values.days ? { days: values.days } : {}),
        ...(values.tenant ? { tenant: values.tenant } : {}),
      });
      const r = await call("GET", `/relay/complaint-rate?${qs}`);
      const pct = (x) => `${(x * 100).toFixed(3)}%`;
      const rows = [
        ["all", r.totals.delivered, r.totals.complained, pct(r.totals.rate)],
        ...r.domains.map((d) => [d.domain, d.delivered, d.complained, pct(d.rate)]),
      ];
      const brake = r.bulk_paused_until ? `bulk mail paused until ${r.bulk_paused_until}` : "bulk mail not paused";
      print(
        r,
        `${r.tenant}, last ${r.days} days (line ${pct(r.threshold)}; ${brake})\n${textTable(["sending domain", "delivered", "complained", "rate"], rows)}`,
      );
      return 0;
    }
    case "brake-lift": {
      const [tenant] = args;
      if (!tenant) throw new UsageError("usage: cohort brake-lift <tenant>");
      const r = await call("DELETE", `/relay/complaint-rate/pause?tenant=${encodeURIComponent(tenant)}`);
      print(r, `lifted the complaint-rate brake of ${r.tenant}`);
      return 0;
    }
    case "providers": {
      const r = await call("GET", "/relay/providers");
      const shape = (p) =>
        [
          p.window?.initial !== undefined || p.window?.limit !== undefined
            ? `window ${p.window.initial ?? "-"}..${p.window.limit ?? "-"}`
            : "",
          p.messages_per_session ? `${p.messages_per_session} msgs/session` : "",
          p.recipients_per_message ? `${p.recipients_per_message} rcpts/msg` : "",
          p.rate ? `rate ${p.rate}` : "",
          p.require_tls ? "TLS required" : "",
        ]
          .filter(Boolean)
          .join(", ");
      print(
        r,
        r.data.length
          ? textTable(
              ["name", "mx suffixes", "shape"],
              r.data.map((p) => [p.name, p.mx.join(" "), shape(p)]),
            )
          : "no provider rules",
      );
      return 0;
    }
    case "provider-set": {
      const [name] = args;
      if (!name || !values.file)
        throw new UsageError("usage: cohort provider-set <name> --file rule.json (- for stdin)");
      const text = values.file === "-" ? await readStdin() : await readFile(values.file, "utf8");
      let rule;
      try {
        rule = JSON.parse(text);
      } catch {
        throw new UsageError(`${values.file} is not JSON`);
      }
      const r = await call("PUT", `/relay/providers/${encodeURIComponent(name)}`, rule);
      print(r, `provider rule ${r.name} set: ${r.mx.join(" ")}`);
      return 0;
    }
    case "provider-delete": {
      const [name] = args;
      if (!name) throw new UsageError("usage: cohort provider-delete <name>");
      const r = await call("DELETE", `/relay/providers/${encodeURIComponent(name)}`);
      print(r, `provider rule ${r.name} deleted`);
      return 0;
    }
    case "policies": {
      const r = await call("GET", "/relay/policies");
      const limits = (p) =>
        [
          p.concurrency !== null ? `concurrency ${p.concurrency}` : "",
          p.rate ? `rate ${p.rate}` : "",
          p.interval_seconds !== null ? `interval ${p.interval_seconds}s` : "",
          p.suspended_until ? `suspended until ${p.suspended_until}` : "",
          p.throttle ? `throttled to ${p.throttle.rate} until ${p.throttle.until}` : "",
        ]
          .filter(Boolean)
          .join(", ");
      print(
        r,
        r.data.length
          ? textTable(
              ["transport", "key", "limits", "set by"],
              r.data.map((p) => [p.transport, p.key, limits(p), p.set_by ?? "operator"]),
            )
          : "no pickup policies",
      );
      return 0;
    }
    case "policy-set": {
      const [pkey] = args;
      if (!pkey)
        throw new UsageError(
          "usage: cohort policy-set <key> [--concurrency N] [--rate 300/m] [--connect-interval 10] (none: remove the key's limits)",
        );
      const num = (v, name) => {
        if (v === undefined) return undefined;
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${name} must be a positive integer`);
        return n;
      };
      const body = {
        concurrency: num(values.concurrency, "concurrency") ?? null,
        rate: values.rate ?? null,
        interval_seconds: num(values["connect-interval"], "connect-interval") ?? null,
      };
      const r = await call("PUT", `/relay/policies/${encodeURIComponent(pkey)}`, body);
      print(
        r,
        r.data.length ? `${pkey}: set in ${r.data.map((p) => p.transport).join(", ")}` : `${pkey}: no limits left`,
      );
      return 0;
    }
    case "warmup": {
      const r = await call("GET", "/relay/warmup");
      const caps = (w) =>
        Object.entries(w.caps_today)
          .map(([p, c]) => `${p} ${c.per_day}/d ${c.per_hour}/h`)
          .join(", ") || "none (done)";
      print(
        r,
        r.data.length
          ? textTable(
              ["egress", "day", "caps today"],
              r.data.map((w) => [w.egress, `${w.day} of ${w.days}`, caps(w)]),
            )
          : "no warm-up plans",
      );
      return 0;
    }
    case "warmup-advance": {
      const [egress] = args;
      if (!egress) throw new UsageError("usage: cohort warmup-advance <egress> [--days N]");
      const days = values.days === undefined ? 1 : Number(values.days);
      if (!Number.isInteger(days)) throw new UsageError("--days must be an integer");
      const r = await call("POST", `/relay/warmup/${encodeURIComponent(egress)}/advance`, { days });
      print(r, `${r.egress}: day ${r.day} of ${r.days}${r.done ? " (done: nothing capped)" : ""}`);
      return 0;
    }
    case "send": {
      if (
        !values.from ||
        !values.to?.length ||
        values.subject === undefined ||
        (values.text === undefined && values.html === undefined)
      ) {
        throw new UsageError("usage: cohort send --from A --to B --subject S (--text T | --html H) [--tag name:value]");
      }
      const tags = (values.tag ?? []).map((t) => {
        const [name, value] = t.split(":");
        if (!name || !value) throw new UsageError(`bad --tag ${JSON.stringify(t)}: expected name:value`);
        return { name, value };
      });
      const body = {
        from: values.from,
        to: values.to,
        subject: values.subject,
        ...(values.text !== undefined ? { text: values.text } : {}),
        ...(values.html !== undefined ? { html: values.html } : {}),
        ...(tags.length ? { tags } : {}),
      };
      const r = await call("POST", "/emails", body);
      print(r, r.id);
      return 0;
    }
    case "tail": {
      let after = values.after;
      const max = values.count === undefined ? Infinity : Number(values.count);
      const interval = Math.max(0.1, Number(values.interval)) * 1000;
      let seen = 0;
      for (;;) {
        const qs = new URLSearchParams({
          limit: values.limit ?? "100",
          ...(after ? { after } : {}),
          ...(values.type ? { type: values.type } : {}),
        });
        const page = await call("GET", `/relay/events?${qs}`);
        for (const e of page.data) {
          out.write(`${values.json ? JSON.stringify(e) : eventLine(e)}\n`);
          after = e.id;
          if (++seen >= max) return 0;
        }
        if (values.once && !page.has_more) return 0;
        if (!page.has_more) await sleep(interval);
      }
    }
    case "show": {
      const [id] = args;
      if (!id) throw new UsageError("usage: cohort show <email id>");
      const m = await call("GET", `/relay/messages/${encodeURIComponent(id)}`);
      print(m, showText(m));
      return 0;
    }
    case "hold":
    case "release":
    case "requeue": {
      const [id] = args;
      if (!id) throw new UsageError(`usage: cohort ${command} <email id>`);
      const r = await call("POST", `/relay/messages/${encodeURIComponent(id)}/${command}`);
      print(r, `${command}: ${r.id} (${r.recipients} recipient(s))`);
      return 0;
    }
    case "cancel": {
      const [id] = args;
      if (id) {
        const r = await call(
          "POST",
          `/relay/messages/${encodeURIComponent(id)}/cancel`,
          values.domain ? { domain: values.domain } : {},
        );
        print(r, `cancelled ${r.recipients} recipient(s) of ${r.id}`);
        return 0;
      }
      const tag = values.tag?.[0];
      const [tagName, tagValue] = tag ? tag.split(":") : [];
      if (tag && (!tagName || !tagValue)) throw new UsageError(`bad --tag ${JSON.stringify(tag)}: expected name:value`);
      if (!values.domain && !tag && !values.tenant)
        throw new UsageError(
          "usage: cohort cancel <email id> | cohort cancel [--domain D] [--tag name:value] [--tenant T]",
        );
      const body = {
        ...(values.domain ? { domain: values.domain } : {}),
        ...(tag ? { tag: { name: tagName, value: tagValue } } : {}),
        ...(values.tenant ? { tenant: values.tenant } : {}),
      };
      const r = await call("POST", "/relay/messages/cancel", body);
      print(
        r,
        `cancelled ${r.recipients} recipient(s) in ${r.messages} message(s)${r.has_more ? " (more match: run it again)" : ""}`,
      );
      return 0;
    }
    default: {
      const code = await resendCommand(command, args, values, call, print);
      if (code === null) throw new UsageError(`unknown command ${JSON.stringify(command)} (cohort --help lists them)`);
      return code;
    }
  }
}

/** Runs the CLI and exits with its status. */
async function run() {
  try {
    process.exitCode = await main(process.argv.slice(2));
  } catch (e) {
    if (
      e instanceof UsageError ||
      e instanceof ResendUsageError ||
      (e instanceof Error && "code" in e && String(e.code).startsWith("ERR_PARSE_ARGS"))
    ) {
      process.stderr.write(`cohort: ${e.message}\n`);
      process.exitCode = 2;
    } else if (e instanceof ApiError) {
      process.stderr.write(`cohort: ${e.status ? `${e.code} (HTTP ${e.status}): ` : ""}${e.message}\n`);
      process.exitCode = 1;
    } else {
      process.stderr.write(`cohort: ${e instanceof Error ? e.message : String(e)}\n`);
      process.exitCode = 1;
    }
  }
}

// Run when executed (bin or `node bin/cohort.mjs`), not when imported by a test.
if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) await run();
