/**
 * The floor: the least a relay on Workers does per email, run by bench:mix --floor on the same
 * workerd as the relay, to tell how much of the relay's CPU is its design and how much is the
 * runtime's price for any design.
 *
 * What it does per email, and nothing more
 *   POST /emails or /emails/batch (the relay's paths and the fields bench:mix sends: from, to,
 *   subject, text, headers), no key, no idempotency, no suppression look-up, no classification;
 *   one RPC to one Floor object, which stores every message of the request in its SQLite (one
 *   transaction), then answers; the request is answered with the ids. The object delivers each
 *   (message, domain) pair at once over our own ESMTP client (worker/smtp), through a lane per
 *   domain of at most LANE_SESSIONS connections, each reused for the lane's next job while there
 *   is one (Postfix's connection cache on demand); a temporary failure is tried again after the
 *   bench's back-off (doubling from MIN_BACKOFF_MS to MAX_BACKOFF_MS), in memory, and never given
 *   up (a run lasts minutes; a dead domain's recipients are tried until the server stops); a
 *   message's row is deleted once every recipient is final (delivered or refused with a 5xx).
 *   Not done: events, webhooks, the D1 index, a status API, scheduling fairness, concurrency
 *   feedback, retries that survive a restart, DNS (the routes come as a var, as Postfix's
 *   transport map gives them), a second Outbox shard. So what it costs is a floor: no relay that
 *   keeps the promises Cohort keeps does less on this runtime.
 *
 * Rungs (RUNGS, a comma list; none by default): promises the relay keeps, added one at a time to
 * price each on this runtime.
 *   d1    a D1 read at accept (an API key's look-up) and a D1 write per message when it is done
 *         (the index): two statements per email, against the relay's 3.65.
 *   hops  the relay's object-to-object requests around each delivery: the admission to a
 *         scheduler, its hand-off to an agent, the agent's envelope read, outcome record and report
 *         (five more RPCs per message and domain, to Hop objects, 16 of them, chosen by the domain name's length, with
 *         the envelope or the outcome as payload), against the relay's 5.7 DO requests per email.
 *   sql   the relay's SQLite work per email in its objects (about 26 statements: 19.7 in the
 *         Outbox, 6.5 in the Transport DO): 24 more statements on the stored row, 8 at accept
 *         (reads by key and updates) and 16 around the delivery, against the floor's 2.
 *
 * Environment
 *   ROUTES  JSON {domain: address}; PORT the sink's port; RUNGS as above.
 */
import { DurableObject } from "cloudflare:workers";
import { createSessionConfig, type SessionConfig } from "../../worker/smtp/core/config";
import type { MessageEnvelope } from "../../worker/smtp/core/types";
import { CachedSmtpSession } from "../../worker/smtp/socket";

interface Env {
  FLOOR: DurableObjectNamespace<Floor>;
  HOP: DurableObjectNamespace<Hop>;
  DB: D1Database;
  ROUTES: string;
  PORT: string;
  RUNGS?: string;
}

const rung = (env: Env, name: string) => (env.RUNGS ?? "").split(",").includes(name);
let schema: Promise<unknown> | null = null;

interface ApiEmail {
  from?: unknown;
  to?: unknown;
  subject?: unknown;
  text?: unknown;
  headers?: unknown;
}

/** One message as stored: its raw text and its envelope. */
interface Stored {
  id: string;
  from: string;
  to: string[];
  raw: string;
}

/** One (message, domain) pair to deliver. */
interface Job {
  id: string;
  from: string;
  rcpts: string[];
  raw: string;
  tries: number;
}

const LANE_SESSIONS = 5;
const MIN_BACKOFF_MS = 5_000;
const MAX_BACKOFF_MS = 20_000;

const bare = (a: string) => /<([^>]*)>/.exec(a)?.[1] ?? a.trim();

/** The message's text: the headers a sender's library writes, then the body, CRLF line ends. */
function rawOf(id: string, m: ApiEmail, to: string[]): string {
  const extra =
    m.headers && typeof m.headers === "object"
      ? Object.entries(m.headers as Record<string, unknown>).map(([k, v]) => `${k}: ${String(v)}`)
      : [];
  const head = [
    `From: ${String(m.from)}`,
    `To: ${to.join(", ")}`,
    `Subject: ${String(m.subject ?? "")}`,
    `Message-ID: <${id}@floor.cohort.test>`,
    `Date: ${new Date().toUTCString()}`,
    "MIME-Version: 1.0",
    "Content-Type: text/plain; charset=utf-8",
    ...extra,
  ];
  const body = String(m.text ?? "").replace(/\r?\n/g, "\r\n");
  return `${head.join("\r\n")}\r\n\r\n${body}`;
}

function parse(m: ApiEmail): Stored | null {
  const to = typeof m.to === "string" ? [m.to] : Array.isArray(m.to) ? m.to.map(String) : [];
  if (typeof m.from !== "string" || to.length === 0) return null;
  const id = crypto.randomUUID();
  return { id, from: bare(m.from), to: to.map(bare), raw: rawOf(id, m, to) };
}

export default {
  async fetch(req: Request, env: Env): Promise<Response> {
    const path = new URL(req.url).pathname;
    if (path === "/health") return new Response("ok");
    if (req.method !== "POST" || (path !== "/emails" && path !== "/emails/batch"))
      return Response.json({ message: "not found" }, { status: 404 });
    const body = (await req.json()) as ApiEmail | ApiEmail[];
    const list = path === "/emails" ? [body as ApiEmail] : (body as ApiEmail[]);
    const stored = list.map(parse);
    if (stored.some((s) => s === null)) return Response.json({ message: "from and to are required" }, { status: 422 });
    const messages = stored as Stored[];
    if (rung(env, "d1")) {
      schema ??= env.DB.batch([
        env.DB.prepare("CREATE TABLE IF NOT EXISTS api_key (hash TEXT PRIMARY KEY, tenant TEXT)"),
        env.DB.prepare("CREATE TABLE IF NOT EXISTS idx (id TEXT PRIMARY KEY, status TEXT, at INTEGER)"),
      ]);
      await schema;
      await env.DB.prepare("SELECT tenant FROM api_key WHERE hash = ?").bind("floor").first();
    }
    await env.FLOOR.get(env.FLOOR.idFromName("floor")).take(messages);
    return path === "/emails"
      ? Response.json({ id: messages[0]!.id })
      : Response.json({ data: messages.map((m) => ({ id: m.id })) });
  },
};

/** The relay's other objects, as far as the hops rung needs them: each request answers its payload. */
export class Hop extends DurableObject<Env> {
  echo<T>(payload: T): T {
    return payload;
  }
}

/** The one object: stores, then delivers (see the header). */
export class Floor extends DurableObject<Env> {
  private readonly routes: Record<string, string>;
  private readonly lanes = new Map<string, { queue: Job[]; sessions: number }>();
  /** Recipients not final yet, per message. */
  private readonly open = new Map<string, number>();
  private readonly config = new Map<string, SessionConfig>();
  private readonly hops: boolean;
  private readonly sql: boolean;
  private readonly d1: boolean;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.routes = JSON.parse(env.ROUTES) as Record<string, string>;
    this.hops = rung(env, "hops");
    this.sql = rung(env, "sql");
    this.d1 = rung(env, "d1");
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS mail (id TEXT PRIMARY KEY, mail_from TEXT, rcpts TEXT, raw TEXT)");
  }

  take(messages: Stored[]): void {
    this.ctx.storage.transactionSync(() => {
      for (const m of messages)
        this.ctx.storage.sql.exec("INSERT INTO mail VALUES (?, ?, ?, ?)", m.id, m.from, JSON.stringify(m.to), m.raw);
    });
    if (this.sql) for (const m of messages) this.touch(m.id, 8);
    for (const m of messages) {
      this.open.set(m.id, m.to.length);
      const byDomain = new Map<string, string[]>();
      for (const r of m.to) {
        const d = r.slice(r.lastIndexOf("@") + 1).toLowerCase();
        byDomain.set(d, [...(byDomain.get(d) ?? []), r]);
      }
      for (const [d, rcpts] of byDomain) this.enqueue(d, { id: m.id, from: m.from, rcpts, raw: m.raw, tries: 0 });
    }
  }

  private enqueue(domain: string, job: Job): void {
    let lane = this.lanes.get(domain);
    if (!lane) this.lanes.set(domain, (lane = { queue: [], sessions: 0 }));
    lane.queue.push(job);
    if (lane.sessions < LANE_SESSIONS) void this.run(domain, lane);
  }

  /** One connection of a lane: takes the lane's jobs while there are any and the connection lasts. */
  private async run(domain: string, lane: { queue: Job[]; sessions: number }): Promise<void> {
    const address = this.routes[domain];
    if (address === undefined) {
      for (const j of lane.queue.splice(0)) this.final(j.id, j.rcpts.length);
      return;
    }
    lane.sessions++;
    const session = new CachedSmtpSession({
      hostname: address,
      port: Number(this.env.PORT),
      config: this.configOf(address),
    });
    try {
      for (let job = lane.queue.shift(); job; job = session.open ? lane.queue.shift() : undefined) {
        const envelope: MessageEnvelope = {
          id: job.id,
          mailFrom: job.from,
          rcptTo: job.rcpts,
          sizeBytes: job.raw.length,
          eightBitMime: false,
          smtpUtf8: false,
        };
        const raw = job.raw;
        const hop = this.hops ? this.env.HOP.get(this.env.HOP.idFromName(`hop-${domain.length % 16}`)) : null;
        if (hop) {
          await hop.echo([job.id]); // admission
          await hop.echo([job.id]); // hand-off
          await hop.echo(envelope); // envelope read
        }
        if (this.sql) this.touch(job.id, 8);
        const batch = await session.send([envelope], () => new Blob([raw]).stream()).catch(() => null);
        if (batch?.staleCache) {
          lane.queue.unshift(job);
          break;
        }
        const results = batch?.transactions[0]?.recipients ?? [];
        // A recipient without a result (the session failed first) is deferred too.
        const deferred = job.rcpts.filter(
          (r) => (results.find((x) => x.rcpt === r)?.status ?? "deferred") === "deferred",
        );
        if (this.sql) this.touch(job.id, 8);
        if (hop) {
          await hop.echo(results); // outcome record
          await hop.echo([job.id, deferred.length]); // report
        }
        this.final(job.id, job.rcpts.length - deferred.length);
        if (deferred.length > 0) this.later(domain, { ...job, rcpts: deferred, tries: job.tries + 1 });
      }
    } finally {
      lane.sessions--;
      void session.close();
      if (lane.queue.length > 0 && lane.sessions < LANE_SESSIONS) void this.run(domain, lane);
    }
  }

  /** The sql rung: n statements on the message's row, three reads by key to each update. */
  private touch(id: string, n: number): void {
    const sql = this.ctx.storage.sql;
    for (let i = 0; i < n; i++)
      if (i % 4 === 3) sql.exec("UPDATE mail SET mail_from = mail_from WHERE id = ?", id);
      else sql.exec("SELECT id, mail_from, rcpts, length(raw) AS size FROM mail WHERE id = ?", id).toArray();
  }

  private later(domain: string, job: Job): void {
    const ms = Math.min(MAX_BACKOFF_MS, MIN_BACKOFF_MS * 2 ** (job.tries - 1));
    setTimeout(() => this.enqueue(domain, job), ms);
  }

  /** `n` more recipients of the message are final; its row goes with its last. */
  private final(id: string, n: number): void {
    if (n === 0) return;
    const left = (this.open.get(id) ?? 0) - n;
    if (left > 0) this.open.set(id, left);
    else {
      this.open.delete(id);
      this.ctx.storage.sql.exec("DELETE FROM mail WHERE id = ?", id);
      if (this.d1)
        void this.env.DB.prepare("INSERT OR REPLACE INTO idx VALUES (?, 'done', ?)").bind(id, Date.now()).run();
    }
  }

  private configOf(address: string): SessionConfig {
    let c = this.config.get(address);
    if (!c)
      this.config.set(
        address,
        (c = createSessionConfig({
          heloName: "floor.cohort.test",
          remoteHost: address,
          timeouts: { connectTimeoutSec: 5, heloTimeoutSec: 10 },
        })),
      );
    return c;
  }
}
