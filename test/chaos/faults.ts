/**
 * SMTP fault campaign: one misbehaving sink per fault (lib/fault-sink.ts), each behind its own
 * D1 route and transport, mail sent through the relay to all of them at once, and per fault the
 * recipients' states, the site-failure feedback and the events checked against SCENARIOS.
 *
 * DESCRIPTION
 *   runFaults({ quick, log })   one wrangler dev (back-off 1–2 s) and one sink per scenario. While the
 *       mail is in flight it polls GET /emails/:id (each recipient's status history) and
 *       GET /relay/destinations (operator key), opens the `refused` sink once a deferral was
 *       seen, and stops per fault when every recipient is final (or the deadline passes). Then
 *       it reads the events (pull feed, else D1) and each destination's feedback history
 *       (GET /relay/destinations/:transport/:queue: `site_failure` lines).
 *   A fault passes when: the final states are the expected ones; the expected deferral (code or
 *   enhanced status) was seen, in the status history or in an email.delivery_delayed event;
 *   each recipient has exactly one copy at the sink (drop-after-dot: the dropped copy plus one,
 *   reported as an expected duplicate); an event exists for every final recipient; and, when the
 *   destinations route is served, a site failure was recorded exactly when one is expected.
 *   The relay runs with SMTP_TIMEOUTS {"smtp_connect_timeout":"10s","smtp_helo_timeout":"20s"}
 *   (Postfix's defaults are 30 s and 300 s): a session hanging at the greeting holds its
 *   `deliver` batch until that timeout, and the local runtime runs one batch at a time, so the
 *   healthy bystander measures how long one hanging destination can hold up the others.
 */
import { destinationsOf, eventsOf, FINAL, recipientsOf, request, sleep, type ChaosEvent, type Rcpt } from "./lib/api";
import { startFaultSink, type Fault, type FaultSink } from "./lib/fault-sink";
import type { CampaignResult } from "./lib/report";
import { createRuntime, type Runtime } from "./lib/runtime";

/** What a fault should do to its recipients. */
export interface Scenario {
  fault: Fault;
  what: string;
  /** Sessions that misbehave before the sink is healthy (Infinity: always). */
  faultySessions: number;
  messages: number;
  rcptsPerMessage: number;
  /** The deferral that must be seen (code or enhanced status prefix), or null. */
  deferral: { code?: number; enhanced?: string } | null;
  final: "delivered" | "bounced";
  /**
   * Whether the destination's feedback must record a site failure. "either" for the session cap:
   * a 421 greeting to a concurrent session is a site failure by Postfix's rules (that is how
   * concurrency feedback finds the limit), a 421 after delivered messages is not, and which of
   * the two happens depends on how the relay batches the messages.
   */
  siteFailure: boolean | "either";
  /** Extra copies at the sink that are expected (the message was received, the reply lost). */
  expectDuplicates: boolean;
}

/** The faults and what each must lead to. */
export const SCENARIOS: Scenario[] = [
  {
    fault: "refused",
    what: "connection refused, then the sink starts listening",
    faultySessions: Infinity,
    messages: 1,
    rcptsPerMessage: 3,
    deferral: { enhanced: "4.4.1" },
    final: "delivered",
    siteFailure: true,
    expectDuplicates: false,
  },
  {
    fault: "greeting-timeout",
    what: "no greeting on the first session",
    faultySessions: 1,
    messages: 1,
    rcptsPerMessage: 2,
    deferral: { enhanced: "4.4.2" },
    final: "delivered",
    siteFailure: true,
    expectDuplicates: false,
  },
  {
    fault: "greeting-421",
    what: "421 at the greeting on the first session",
    faultySessions: 1,
    messages: 1,
    rcptsPerMessage: 3,
    deferral: { code: 421 },
    final: "delivered",
    siteFailure: true,
    expectDuplicates: false,
  },
  {
    fault: "session-cap",
    what: "421 to a second simultaneous session and after 3 messages in a session (20 messages)",
    faultySessions: Infinity,
    messages: 20,
    rcptsPerMessage: 1,
    deferral: { code: 421 },
    final: "delivered",
    siteFailure: "either",
    expectDuplicates: false,
  },
  {
    fault: "drop-in-data",
    what: "connection dropped during DATA on the first session",
    faultySessions: 1,
    messages: 1,
    rcptsPerMessage: 3,
    deferral: { enhanced: "4." },
    final: "delivered",
    siteFailure: true,
    expectDuplicates: false,
  },
  {
    fault: "drop-after-dot",
    what: "dropped after the final dot, before the reply, first session",
    faultySessions: 1,
    messages: 1,
    rcptsPerMessage: 2,
    deferral: { enhanced: "4." },
    final: "delivered",
    siteFailure: true,
    expectDuplicates: true,
  },
  {
    fault: "tls-fail",
    what: "STARTTLS offered, handshake fails (opportunistic TLS)",
    faultySessions: Infinity,
    messages: 1,
    rcptsPerMessage: 2,
    deferral: null,
    final: "delivered",
    siteFailure: false,
    expectDuplicates: false,
  },
  {
    fault: "rcpt-452",
    what: "452 4.5.3 from the third RCPT of a transaction on",
    faultySessions: Infinity,
    messages: 1,
    rcptsPerMessage: 5,
    deferral: { code: 452, enhanced: "4.5.3" },
    final: "delivered",
    siteFailure: false,
    expectDuplicates: false,
  },
  {
    fault: "size-552",
    what: "552 5.3.4 after the final dot",
    faultySessions: Infinity,
    messages: 1,
    rcptsPerMessage: 3,
    deferral: null,
    final: "bounced",
    siteFailure: false,
    expectDuplicates: false,
  },
  {
    fault: "trickle",
    what: "every reply 1 byte per 100 ms",
    faultySessions: Infinity,
    messages: 1,
    rcptsPerMessage: 2,
    deferral: null,
    final: "delivered",
    siteFailure: false,
    expectDuplicates: false,
  },
  {
    fault: "healthy",
    what: "a healthy destination, sent to while another hangs at the greeting",
    faultySessions: 0,
    messages: 2,
    rcptsPerMessage: 1,
    deferral: null,
    final: "delivered",
    siteFailure: false,
    expectDuplicates: false,
  },
  {
    fault: "invalid-reply",
    what: "EHLO answered with a line without a reply code, first session",
    faultySessions: 1,
    messages: 1,
    rcptsPerMessage: 2,
    deferral: { enhanced: "4." },
    final: "delivered",
    siteFailure: true,
    expectDuplicates: false,
  },
];

/** Fault campaign options. */
export interface FaultOptions {
  quick: boolean;
  log: (line: string) => void;
  only?: Fault[];
}

type Seen = { status: string; code: number | null; enhanced: string | null; text: string; blockedBy: string | null };

interface Run {
  sc: Scenario;
  sink: FaultSink;
  transport: string;
  domain: string;
  ids: string[];
  rcpts: string[];
  history: Map<string, Seen[]>;
  last: Map<string, Rcpt>;
  done: boolean;
  doneAtS: number | null;
  queues: Set<string>;
  dead: boolean;
}

const GREETING_WAIT_QUICK_S = 20;
/** A healthy destination must not wait longer than this behind a hanging one. */
const BYSTANDER_MAX_S = 30;

function remember(run: Run, r: Rcpt): void {
  const key = r.email.toLowerCase();
  const h = run.history.get(key) ?? [];
  const seen: Seen = {
    status: r.status,
    code: r.last_response?.code ?? null,
    enhanced: r.last_response?.enhanced ?? null,
    text: r.last_response?.text ?? "",
    blockedBy: r.blocked_by ?? null,
  };
  const prev = h[h.length - 1];
  if (
    !prev ||
    prev.status !== seen.status ||
    prev.code !== seen.code ||
    prev.enhanced !== seen.enhanced ||
    prev.blockedBy !== seen.blockedBy
  )
    h.push(seen);
  run.history.set(key, h);
  run.last.set(key, r);
}

async function submitAll(rt: Runtime, run: Run): Promise<void> {
  for (let m = 0; m < run.sc.messages; m++) {
    const to = Array.from({ length: run.sc.rcptsPerMessage }, (_, j) => `u${m}-${j}@${run.domain}`);
    const a = await request(
      rt,
      "POST",
      "/emails",
      JSON.stringify({
        from: "Faults <faults@sender.example>",
        to,
        subject: `fault ${run.sc.fault} #${m}`,
        text: `fault ${run.sc.fault}\n${"y".repeat(2000)}`,
      }),
    );
    if (a.status !== 200)
      throw new Error(
        `POST /emails for ${run.sc.fault} answered ${a.status}: ${JSON.stringify(a.body)}; ` +
          `runtime ${rt.running() ? "running" : "exited"}; wrangler log ` +
          `tail:\n${rt.log().slice(-3000)}`,
      );
    run.ids.push((a.body as { id: string }).id);
    run.rcpts.push(...to);
  }
}

async function poll(rt: Runtime, run: Run, t0: number): Promise<void> {
  for (const id of run.ids) for (const r of (await recipientsOf(rt, id)) ?? []) remember(run, r);
  const all = run.rcpts.map((a) => run.last.get(a.toLowerCase()));
  const sawDeferral = [...run.history.values()].some((h) => h.some((s) => s.status === "deferred"));
  if (run.sc.fault === "refused" && sawDeferral) await run.sink.open();
  if (all.every((r) => r && FINAL.has(r.status))) {
    run.done = true;
    run.doneAtS = (Date.now() - t0) / 1000;
  }
}

async function sampleDestinations(rt: Runtime, runs: Run[]): Promise<boolean> {
  const ds = await destinationsOf(rt);
  if (ds === null) return false;
  for (const d of ds) {
    const run = runs.find((r) => r.transport === d.transport);
    if (!run) continue;
    run.queues.add(d.queue);
    if (d.state === "dead") run.dead = true;
  }
  return true;
}

/** The Destination DO's feedback history lines of a run's destination(s). */
async function siteFailuresOf(
  rt: Runtime,
  run: Run,
): Promise<{ lines: number; siteFailures: number; died: boolean } | null> {
  const queues = run.queues.size > 0 ? [...run.queues] : [`[127.0.0.1]:${run.sink.port}`];
  let lines = 0,
    siteFailures = 0,
    died = false,
    any = false;
  for (const q of queues) {
    const a = await request(
      { url: rt.url, key: rt.operatorKey },
      "GET",
      `/relay/destinations/${encodeURIComponent(run.transport)}/${encodeURIComponent(q)}`,
    );
    if (a.status !== 200) continue;
    any = true;
    const hist = (a.body as { history?: { kind: string; outcome: string }[] }).history ?? [];
    lines += hist.length;
    siteFailures += hist.filter((h) => h.kind === "site_failure").length;
    died ||= hist.some((h) => h.outcome === "died");
  }
  return any ? { lines, siteFailures, died } : null;
}

function matches(d: { code?: number; enhanced?: string }, code: number | null, enhanced: string | null): boolean {
  if (d.code !== undefined && code !== d.code) return false;
  if (d.enhanced !== undefined && !(enhanced ?? "").startsWith(d.enhanced)) return false;
  return true;
}

interface Verdict {
  fault: Fault;
  ok: boolean;
  pending: boolean;
  summary: string;
  problems: string[];
  detail: Record<string, unknown>;
}

function judge(
  run: Run,
  events: ChaosEvent[],
  site: { lines: number; siteFailures: number; died: boolean } | null,
  quick: boolean,
): Verdict {
  const sc = run.sc;
  const problems: string[] = [];
  const finals = run.rcpts.map((a) => run.last.get(a.toLowerCase())?.status ?? "unknown");
  const myEvents = events.filter((e) => run.ids.includes(e.email_id));
  const greetingQuick = false; // the 20 s greeting timeout is awaited in every mode
  void quick;
  if (greetingQuick) {
    if (finals.some((s) => FINAL.has(s)))
      problems.push(
        `expected the recipients in flight for ${GREETING_WAIT_QUICK_S} s (300 s greeting timeout), got ${finals.join(",")}`,
      );
  } else if (!finals.every((s) => s === sc.final)) {
    const hol =
      sc.fault === "healthy"
        ? " — a healthy destination waited behind the session hanging at the greeting (head-of-line blocking in the deliver consumer)"
        : "";
    problems.push(`final states ${finals.join(",")} (want all ${sc.final})${hol}`);
  }
  if (sc.fault === "healthy" && finals.every((s) => s === sc.final) && (run.doneAtS ?? Infinity) > BYSTANDER_MAX_S) {
    problems.push(
      `the healthy destination took ${run.doneAtS?.toFixed(0)} s (more ` +
        `than ${BYSTANDER_MAX_S} s) while another session hung at the greeting (head-of-line ` +
        `blocking in the deliver consumer)`,
    );
  }
  const deferrals = [...run.history.values()].flat().filter((s) => s.status === "deferred");
  const delayed = myEvents.filter((e) => e.type === "email.delivery_delayed");
  if (sc.deferral && !greetingQuick) {
    const seen =
      deferrals.some((s) => matches(sc.deferral!, s.code, s.enhanced)) ||
      delayed.some((e) => matches(sc.deferral!, e.code, e.enhanced));
    if (!seen)
      problems.push(
        `no deferral matching ${JSON.stringify(sc.deferral)} ` +
          `(saw ${JSON.stringify(deferrals.slice(0, 3))}, ` +
          `events ${delayed.map((e) => `${e.code}/${e.enhanced}`).join(" ")})`,
      );
  }
  const copies = new Map<string, { kept: number; dropped: number }>();
  for (const m of run.sink.received)
    for (const r of m.rcptTo) {
      const c = copies.get(r.toLowerCase()) ?? { kept: 0, dropped: 0 };
      if (m.dropped) c.dropped++;
      else c.kept++;
      copies.set(r.toLowerCase(), c);
    }
  let extra = 0;
  if (sc.final === "delivered" && !greetingQuick) {
    for (const a of run.rcpts) {
      const c = copies.get(a.toLowerCase()) ?? { kept: 0, dropped: 0 };
      if (c.kept !== 1) problems.push(`${a}: ${c.kept} copies at the sink`);
      if (c.dropped > 0 && !sc.expectDuplicates) problems.push(`${a}: ${c.dropped} dropped copies`);
      extra += c.kept + c.dropped - 1;
    }
  }
  const finalTypes: Record<string, string> = { delivered: "email.delivered", bounced: "email.bounced" };
  if (!greetingQuick) {
    for (const a of run.rcpts) {
      const want = finalTypes[sc.final]!;
      if (!myEvents.some((e) => e.type === want && (e.recipient ?? "").toLowerCase() === a.toLowerCase()))
        problems.push(`${a}: no ${want} event`);
    }
  }
  const siteSeen = site ? site.siteFailures > 0 : null;
  if (site && !greetingQuick && sc.siteFailure !== "either" && siteSeen !== sc.siteFailure)
    problems.push(
      `site failure ${siteSeen ? "recorded" : "not recorded"} (want ${sc.siteFailure ? "one" : "none"}): ${JSON.stringify(site)}`,
    );
  const counts = myEvents.reduce<Record<string, number>>(
    (acc, e) => ({ ...acc, [e.type.replace("email.", "")]: (acc[e.type.replace("email.", "")] ?? 0) + 1 }),
    {},
  );
  const attempts = Math.max(0, ...run.rcpts.map((a) => run.last.get(a.toLowerCase())?.attempts ?? 0));
  const firstDefer = deferrals[0] ?? null;
  const summary =
    `${greetingQuick ? `in flight ${GREETING_WAIT_QUICK_S} s (not awaited)` : `${finals.filter((s) => s === sc.final).length}/${finals.length} ${sc.final}`}` +
    `${firstDefer ? `, deferred ${firstDefer.code ?? "-"} ${firstDefer.enhanced ?? ""}`.trimEnd() : ""}${attempts ? `, max attempts ${attempts}` : ""}` +
    `, site failure ${site ? (siteSeen ? `yes (${site.siteFailures}${site.died ? ", died" : ""})` : "no") : "not checked"}` +
    `${extra > 0 ? `, ${extra} extra cop${extra === 1 ? "y" : "ies"}` : ""}, events ${
      Object.entries(counts)
        .map(([k, v]) => `${k}×${v}`)
        .join(" ") || "none"
    }` +
    `${run.doneAtS !== null ? `, done in ${run.doneAtS.toFixed(0)} s` : ""}`;
  return {
    fault: sc.fault,
    ok: problems.length === 0,
    pending: greetingQuick,
    summary,
    problems,
    detail: {
      finals,
      first_deferral: firstDefer,
      attempts,
      site,
      dead_seen: run.dead,
      events: counts,
      extra_copies: extra,
      done_s: run.doneAtS,
      sessions: run.sink.sessions(),
    },
  };
}

/** Runs the fault campaign. */
export async function runFaults(o: FaultOptions): Promise<CampaignResult> {
  const scenarios = SCENARIOS.filter((s) => !o.only || o.only.includes(s.fault));
  const sinks = await Promise.all(
    scenarios.map((sc) => startFaultSink({ fault: sc.fault, faultySessions: sc.faultySessions })),
  );
  const runs: Run[] = scenarios.map((sc, i) => ({
    sc,
    sink: sinks[i]!,
    transport: `fault-${sc.fault}`,
    domain: `${sc.fault}.chaos`,
    ids: [],
    rcpts: [],
    history: new Map(),
    last: new Map(),
    done: false,
    doneAtS: null,
    queues: new Set(),
    dead: false,
  }));
  const rt = await createRuntime({
    tenant: "chaos-faults",
    vars: {
      SCHEDULER_CONFIG: JSON.stringify({ minimal_backoff_time: 1, maximal_backoff_time: 2 }),
      OUTBOX_GRACE_SECONDS: "30",
      SMTP_TIMEOUTS: JSON.stringify({ smtp_connect_timeout: "10s", smtp_helo_timeout: "20s" }),
    },
    routes: runs.map((r) => ({ pattern: r.domain, transport: r.transport, nexthop: `[127.0.0.1]:${r.sink.port}` })),
  });
  try {
    await rt.start();
    return await campaign(rt, runs, o);
  } finally {
    await rt.dispose();
    await Promise.all(sinks.map((s) => s.close()));
  }
}

/**
 * The greeting timeout holds its delivery session for the helo timeout (20 s here); it runs in a
 * second phase with the healthy bystander, so that its effect on other destinations shows
 * apart from the other faults.
 */
const SECOND_PHASE: Fault[] = ["greeting-timeout", "healthy"];

async function campaign(rt: Runtime, runs: Run[], o: FaultOptions): Promise<CampaignResult> {
  const first = runs.filter((r) => !SECOND_PHASE.includes(r.sc.fault));
  const second = runs.filter((r) => SECOND_PHASE.includes(r.sc.fault));
  let served = false;
  if (first.length > 0) {
    o.log(`  phase 1: ${first.map((r) => r.sc.fault).join(", ")}`);
    served = (await runPhase(rt, first, o.quick ? 120_000 : 300_000, o.quick)) || served;
  }
  if (second.length > 0) {
    o.log(
      `  phase 2: ${second.map((r) => r.sc.fault).join(", ")} (the bystander is sent to 2 s after the hanging session starts)`,
    );
    served = (await runPhase(rt, second, 120_000, o.quick)) || served;
  }
  return conclude(rt, runs, o, served);
}

/** Sends the runs' mail and polls until each is done or the deadline; true if destinations were served. */
async function runPhase(rt: Runtime, runs: Run[], budgetMs: number, quick: boolean): Promise<boolean> {
  const t0 = Date.now();
  for (const run of runs) {
    if (run.sc.fault === "healthy") await sleep(2000);
    await submitAll(rt, run);
  }
  const deadline = t0 + budgetMs;
  let destinationsServed = false;
  for (;;) {
    for (const run of runs) {
      if (run.done) continue;
      await poll(rt, run, t0);
    }
    destinationsServed = (await sampleDestinations(rt, runs)) || destinationsServed;
    if (runs.every((r) => r.done) || Date.now() > deadline) break;
    await sleep(300);
  }
  for (const run of runs) if (!run.done) await poll(rt, run, t0);
  return destinationsServed;
}

async function conclude(
  rt: Runtime,
  runs: Run[],
  o: FaultOptions,
  destinationsServed: boolean,
): Promise<CampaignResult> {
  // The events are written by the delivery consumer right after the outcome: give them a moment.
  await sleep(3000);
  const { source, events } = await eventsOf(
    rt,
    runs.flatMap((r) => r.ids),
  );
  const verdicts: Verdict[] = [];
  for (const run of runs) verdicts.push(judge(run, events, await siteFailuresOf(rt, run), o.quick));
  for (const v of verdicts)
    o.log(
      `  ${v.ok ? "ok  " : "FAIL"} ${v.fault.padEnd(17)} ${v.summary}${v.problems.length ? `\n         ${v.problems.join("\n         ")}` : ""}`,
    );
  const failed = verdicts.filter((v) => !v.ok);
  const passed = verdicts.filter((v) => v.ok && !v.pending).length;
  const misbehaving = runs.filter((r) => r.sc.fault !== "healthy");
  const eventsFrom = source === "feed" ? "GET /relay/events" : "the D1 event_log table (no pull feed yet)";
  const failuresFrom = destinationsServed
    ? "GET /relay/destinations/:transport/:queue history"
    : "— (no destinations route: not checked)";
  const pendingNote = verdicts.some((v) => v.pending)
    ? ` (+ greeting timeout in flight after ${GREETING_WAIT_QUICK_S} s; the 300 s timeout is not awaited in --quick)`
    : "";
  const failedNote = failed.length ? `failed: ${failed.map((v) => v.fault).join(", ")}` : "no failure";
  return {
    campaign: "faults",
    tried:
      `${misbehaving.length} misbehaving sinks (${misbehaving.map((r) => r.sc.fault).join(", ")}) and a healthy ` +
      `bystander; back-off 1–2 s; events from ${eventsFrom}; site failures from ${failuresFrom}`,
    result: failed.length === 0 ? "pass" : "fail",
    figures: `${passed}/${verdicts.length} as expected${pendingNote}; ${failedNote} (per fault below)`,
    table: [
      "| fault | what the sink did | result | observed |",
      "|---|---|---|---|",
      ...verdicts.map(
        (v) =>
          `| ${v.fault} | ${SCENARIOS.find((s) => s.fault === v.fault)!.what} ` +
          `| ${v.pending ? "PENDING" : v.ok ? "ok" : "FAIL"} ` +
          `| ${v.summary.replace(/\|/g, "\\|")} |`,
      ),
    ].join("\n"),
    failures: failed.map((v) => `${v.fault}: ${v.problems.join("; ")}`),
    details: {
      events_source: source,
      destinations_checked: destinationsServed,
      faults: Object.fromEntries(
        verdicts.map((v) => [v.fault, { ok: v.ok, summary: v.summary, problems: v.problems, ...v.detail }]),
      ),
    },
  };
}
