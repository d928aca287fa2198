/**
 * Every wrangler.toml [vars] knob, parsed once, with its default, bounds and meaning: the relay
 * reads typed settings (settingsOf(env).x), never a raw binding. The structured ones are parsed
 * by their own pure modules: SCHEDULER_CONFIG by durable-objects/core/config.ts (through
 * scheduler.ts, which also applies the relay's defaults), SMTP_TIMEOUTS by
 * worker/smtp/core/config.ts and the WEBHOOK_* knobs by worker/webhooks/core/webhook-config.ts.
 *
 * DESCRIPTION
 *   SETTINGS           the table: for each knob its [vars] name, its default and its meaning
 *                      (the knobs from DSN_NOTICES on are policy-knobs.ts's; the row shape and
 *                      its parsers are knob.ts's).
 *   settingsOf(env)    the parsed settings of an env, cached per env object.
 *   Settings           their type.
 *
 * INVARIANTS
 *   A knob that is unset, empty or out of its bounds takes its default (as Postfix falls back on a
 *   bad parameter), except where the table says it is capped: then the bound. Parsing never
 *   throws; MX_PORT keeps an invalid value as null for the delivery stage to refuse by name.
 */
import { knob, nonNegative, positive, text, type Vars } from "./knob";
import { countSetting, msSetting } from "./parse";
import { POLICY_KNOBS } from "./policy-knobs";

/** The DNS-over-HTTPS JSON API used when DOH_RESOLVER_URL is empty. */
export const DEFAULT_DOH_URL = "https://cloudflare-dns.com/dns-query";

/** The knobs (see the header); the order is wrangler.toml's. */
export const SETTINGS = {
  env: knob(
    "COHORT_ENV",
    "development",
    "development, test or production; only production is served to the world and fails closed without its secrets",
    (r) => r ?? "development",
  ),
  meter: knob(
    "METER",
    "on",
    '"on": count every billable operation (GET /relay/dev/meter, bench:cost); off in production',
    (r) => r === "on",
  ),
  outboxShards: knob("OUTBOX_SHARDS", "8", "Outbox shards, 1–256; the message id names its shard", (r) =>
    countSetting(r, 8) <= 256 ? countSetting(r, 8) : 8,
  ),
  graceMs: knob(
    "OUTBOX_GRACE_SECONDS",
    "300",
    "seconds before the sweeper treats a body without envelope as an orphan, or an unclassified message as lost",
    nonNegative(300, 1000),
  ),
  indexLagMs: knob(
    "INDEX_LAG_SECONDS",
    "15",
    "seconds a message's events wait for the delivery stage's index write before the Outbox forwards them itself",
    nonNegative(15, 1000),
  ),
  retentionMs: knob(
    "MESSAGE_RETENTION_DAYS",
    "30",
    "days a finished message stays readable (GET /emails/:id) before every row of it is deleted",
    nonNegative(30, 86_400_000),
  ),
  inlineBodyBytes: knob(
    "INLINE_BODY_BYTES",
    "32768",
    "bodies up to this size stay in the Outbox row instead of R2 (at most 512 KiB; 0: all in R2)",
    (r) => Math.min(nonNegative(32_768)(r), 512 * 1024),
  ),
  classifyAtAcceptMaxRcpts: knob(
    "CLASSIFY_AT_ACCEPT_MAX_RCPTS",
    "50",
    "messages of at most this many recipients are classified by the accepting worker (0: all through the classify queue)",
    (r) => countSetting(r, 0),
  ),
  admitBatchMs: knob(
    "ADMIT_BATCH_MS",
    "50",
    "least ms between two admission runs of an Outbox shard: idle, at once; under load what arrives meanwhile goes together (0: each accept its own; ≤ 10 s)",
    (r) => msSetting(r, 50, 10_000),
  ),
  inFlowDelayMs: knob(
    "IN_FLOW_DELAY_MS",
    "1000",
    "ms an accept's answer waits while mail arrives faster than it is delivered (Postfix's in_flow_delay; 0: never; at most 10 s)",
    (r) => msSetting(r, 1000, 10_000),
  ),
  acceptConcurrency: knob(
    "ACCEPT_CONCURRENCY",
    "4",
    "send requests one isolate works on at once (Postfix's smtpd process_limit; at most 10,000)",
    (r) => Math.min(countSetting(r, 4), 10_000),
  ),
  acceptWaitMs: knob(
    "ACCEPT_WAIT_MS",
    "10000",
    "ms a send request waits for an accept slot, in arrival order, before it is answered 429 (0: at once; at most 60 s)",
    (r) => msSetting(r, 10_000, 60_000),
  ),
  maxMessageBytes: knob("MAX_MESSAGE_BYTES", "41943040", "largest accepted message, bytes (413 above)", (r) =>
    countSetting(r, 40 * 1024 * 1024),
  ),
  maxRecipients: knob(
    "MAX_RECIPIENTS",
    "50",
    "most recipients per message, to + cc + bcc after de-duplication (422 above)",
    (r) => countSetting(r, 50),
  ),
  defaultTransport: knob("DEFAULT_TRANSPORT", "smtp", "the transport of recipients no route matches", text("smtp")),
  transportShards: knob(
    "TRANSPORT_SHARDS",
    "1",
    "Transport DOs each transport runs on, by destination (1–64; docs/scale.md)",
    (r) => Math.min(64, Math.max(1, countSetting(r, 1))),
  ),
  checkpointEvery: knob(
    "TRANSPORT_CHECKPOINT_EVERY",
    "500",
    "commands a Transport DO journals between two snapshots while the snapshot is small",
    positive(500),
  ),
  journalRing: knob(
    "TRANSPORT_JOURNAL_RING",
    "16384",
    "rows of a Transport DO's journal ring (the most flushes between two snapshots)",
    (r) => positive(0)(r) || undefined,
  ),
  tinySnapshotChars: knob(
    "TRANSPORT_TINY_SNAPSHOT_CHARS",
    "65536",
    "a Transport DO whose snapshot is at most this many characters writes a snapshot at every flush instead of a journal row (0: always journal)",
    nonNegative(65536),
  ),
  smarthost: knob(
    "SMARTHOST",
    "",
    '"[host]:port": the default transport relays everything there instead of to each domain\'s MX',
    (r) => r ?? "",
  ),
  autoDispatch: knob(
    "DISPATCH",
    "auto",
    '"auto": a Transport DO dispatches after every admit, report and alarm; "manual": only the dispatch RPC does (tests)',
    (r) => r === "auto",
  ),
  agents: knob(
    "DELIVERY",
    "agents",
    'who delivers: "agents" (DeliveryAgent objects with a connection cache) or "queue" (the deliver queue consumer)',
    (r) => r === "agents",
  ),
  leaseSeconds: knob(
    "DELIVERY_LEASE_SECONDS",
    "900",
    "seconds a dispatched entry may stay unreported before it is treated as crashed and retried",
    positive(900),
  ),
  agentCheckMs: knob(
    "AGENT_CHECK_SECONDS",
    "60",
    "seconds after which the Transport DO asks an agent whether it still holds an entry (queue mode: a cut hand-off's lease)",
    positive(60, 1000),
  ),
  agentStageMs: knob(
    "AGENT_STAGE_MS",
    "1000",
    "ms an agent's feedback and index stages gather finished entries while other sessions run (idle: at once; 0: never; at most 10 s)",
    (r) => msSetting(r, 1000, 10_000),
  ),
  heloName: knob("HELO_NAME", "cohort.localhost", "the name sent with EHLO/HELO", text("cohort.localhost")),
  relayTls: knob(
    "RELAY_TLS",
    "opportunistic",
    "the relay kind's TLS: off, opportunistic or required",
    (r): "off" | "opportunistic" | "required" =>
      (["off", "opportunistic", "required"] as const).find((p) => p === r) ?? "opportunistic",
  ),
  relayImplicitTls: knob(
    "RELAY_IMPLICIT_TLS",
    "false",
    '"true": the relay kind speaks TLS from the first byte (port 465)',
    (r) => r === "true",
  ),
  dohResolverUrl: knob(
    "DOH_RESOLVER_URL",
    DEFAULT_DOH_URL,
    "the DNS-over-HTTPS JSON API for MX, A, TXT and domain verification look-ups",
    text(DEFAULT_DOH_URL),
  ),
  mxPort: knob(
    "MX_PORT",
    "25",
    "the port of MX hosts (other values are for local runs and tests); null when not a TCP port",
    (r) => {
      const port = Number(r || 25);
      return Number.isInteger(port) && port > 0 && port < 65536 ? port : null;
    },
  ),
  egress: knob(
    "EGRESS",
    "direct",
    'how MX connections leave: "direct" or "socks5://host:port" through a SOCKS5 bridge',
    (r) => r ?? "direct",
  ),
  devMailboxUrl: knob(
    "DEV_MAILBOX_URL",
    "",
    "the local SMTP catcher's listing, for GET /relay/dev/mailbox (development only)",
    (r) => r ?? "",
  ),
  ...POLICY_KNOBS,
};

/** The parsed settings. */
export type Settings = { [K in keyof typeof SETTINGS]: ReturnType<(typeof SETTINGS)[K]["parse"]> } & {
  /** Development or test: local shortcuts (unverified senders, loopback fetches, the dev routes). */
  local: boolean;
};

const cache = new WeakMap<object, Settings>();

/** The settings of `env` (any object with the [vars] as strings), parsed once per env object. */
export function settingsOf(env: object): Settings {
  const hit = cache.get(env);
  if (hit) return hit;
  const vars = env as Vars;
  const out: Record<string, unknown> = {};
  for (const [key, k] of Object.entries(SETTINGS)) out[key] = k.parse(vars[k.name], vars);
  const settings = out as Settings;
  settings.local = settings.env === "development" || settings.env === "test";
  cache.set(env, settings);
  return settings;
}
