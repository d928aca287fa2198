#!/usr/bin/env node
// @ts-check
/**
 * cohort — the relay's command line: queue summary, flush, suspend/resume, send a test
 * message, tail events, show a message. Plain ESM on Node 20 built-ins (fetch, util.parseArgs);
 * no build step. This file parses the options and runs the queue and inbound commands; the other
 * command groups sit beside it (policy-commands.mjs, message-commands.mjs, resend-commands.mjs),
 * and client.mjs holds the API client and the errors that set the exit status.
 *
 * USAGE
 *   npx cohort <command> [options]      (--url / COHORT_URL, --key / COHORT_API_KEY)
 *   queue                               qshape of the active and deferred queues, queue counts by state
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
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { ApiError, client, UsageError } from "./client.mjs";
import { queueText, textTable } from "./format.mjs";
import { messageCommand } from "./message-commands.mjs";
import { policyCommand } from "./policy-commands.mjs";
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
        `flushed ${r.transports.join(", ")}; revived ${r.revived.length} dead destination(s)` +
          (r.revived.length ? `: ${r.revived.map((d) => `${d.transport}/${d.queue}`).join(", ")}` : ""),
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
    default: {
      const code =
        (await policyCommand(command, args, values, call, print)) ??
        (await messageCommand(command, args, values, call, print, out)) ??
        (await resendCommand(command, args, values, call, print));
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
