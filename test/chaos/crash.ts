/**
 * Crash campaign: `kill -9` of the whole local runtime (wrangler, workerd) at random moments
 * while mail is submitted and delivered, then a restart on the same persisted state; at the end
 * every accepted message is counted at the sinks.
 *
 * DESCRIPTION
 *   runCrash({ messages, kills, seed, log })  three scripted sinks (smtp-server) behind D1
 *       routes c1/c2/c3.chaos; each message has 1–3 recipients spread over them, ~10 %
 *       `tempfail-` (451 once, then 250) and ~5 % `reject-` (550 → bounced). Submission runs with
 *       8 workers, each message under Idempotency-Key `chaos-<seq>` and retried after a kill
 *       until a 2xx (so the API id is known even when the first answer was lost); a key still
 *       reserved by a request that died in a kill (409, up to 120 s) is parked and retried every
 *       5 s while the worker goes on with other messages. Kills come at
 *       seeded random moments 4–20 s after the previous restart, during submission and the
 *       drain. Then it waits until every recipient is at its sink or final in GET /emails/:id.
 *
 *   Accounting per recipient of every accepted message: delivered (at the sink), bounced
 *   (`reject-`, GET /emails/:id), other final, or unaccounted (a loss). Duplicates are copies
 *   beyond the first; one is "explained" when a kill overlaps the span of its copies (the entry
 *   was in flight at the kill, see core/duplicates.ts), otherwise it is a failure.
 *
 * ERRORS
 *   A failed start is thrown; everything started is stopped.
 */
import { startCatcher, type Catcher } from "../../scripts/lib/smtp-catcher";
import { explainedByKill, type KillSpan } from "./core/duplicates";
import { FINAL, recipientsOf, request, sleep } from "./lib/api";
import { headerOf, Ledger, rawOf } from "./lib/mail";
import type { CampaignResult } from "./lib/report";
import { createRng } from "./lib/rng";
import { createRuntime, type Runtime } from "./lib/runtime";

/** Crash campaign options. */
export interface CrashOptions {
  messages: number;
  kills: number;
  seed: number;
  drainTimeoutS: number;
  log: (line: string) => void;
}

type Planned = { seq: number; to: string[] };

const DOMAINS = ["c1.chaos", "c2.chaos", "c3.chaos"];

function plan(n: number, seed: number): Planned[] {
  const rng = createRng(seed);
  return Array.from({ length: n }, (_, seq) => {
    const count = rng.int(1, 3);
    const to = Array.from({ length: count }, (_, j) => {
      const roll = rng.next();
      const prefix = roll < 0.05 ? "reject-" : roll < 0.15 ? "tempfail-" : "user-";
      return `${prefix}${seq}-${j}@${DOMAINS[(seq + j) % DOMAINS.length]}`;
    });
    return { seq, to };
  });
}

function bodyOf(p: Planned): string {
  return JSON.stringify({
    from: "Chaos <chaos@sender.example>",
    to: p.to,
    subject: `crash campaign ${p.seq}`,
    text: `message ${p.seq}\n${"x".repeat(600)}`,
    headers: { "X-Chaos-Seq": String(p.seq) },
  });
}

/** One message's submission so far. */
type Submission = { tries: number; t0: number; statuses: number[] };

type Outcome = { kind: "accepted"; id: string } | { kind: "rejected"; status: number } | { kind: "parked" };

/**
 * Submits once, retrying only while the runtime is down (no answer, 5xx, 429). A 409
 * concurrent_idempotent_requests (the key is still reserved by a request that died in a kill,
 * for up to 120 s) parks the message, so the worker moves on and comes back to it later.
 */
async function submit(rt: Runtime, p: Planned, sub: Submission, stopAt: number): Promise<Outcome> {
  for (;;) {
    sub.tries++;
    const a = await request(rt, "POST", "/emails", bodyOf(p), { "idempotency-key": `chaos-${p.seq}` }, 15_000);
    sub.statuses.push(a.status);
    if (a.status >= 200 && a.status < 300) return { kind: "accepted", id: (a.body as { id: string }).id };
    if (Date.now() > stopAt || (a.status >= 400 && a.status < 500 && a.status !== 409 && a.status !== 429))
      return { kind: "rejected", status: a.status };
    if (a.status === 409) return { kind: "parked" };
    await sleep(a.status === 0 ? 500 : 200);
  }
}

/** "0×3 409×12 200×1": consecutive answers run-length encoded. */
function summarise(statuses: number[]): string {
  const out: string[] = [];
  for (let i = 0; i < statuses.length;) {
    let j = i;
    while (j < statuses.length && statuses[j] === statuses[i]) j++;
    out.push(`${statuses[i]}×${j - i}`);
    i = j;
  }
  return out.join(" ");
}

/** A kill: `atMs` when it began (the process tree is listed first, which takes a moment),
 * `killedMs` when every process of the tree was signalled and wrangler had exited. */
interface KillLog extends KillSpan {
  pids: number;
  restartMs: number;
}

async function killer(
  rt: Runtime,
  kills: number,
  seed: number,
  done: () => boolean,
  log: (l: string) => void,
): Promise<KillLog[]> {
  const rng = createRng(seed ^ 0x5eed);
  const out: KillLog[] = [];
  for (let k = 0; k < kills; k++) {
    await sleep(rng.int(4000, 20_000));
    const atMs = Date.now();
    const pids = await rt.kill9();
    const t0 = Date.now();
    await rt.start();
    out.push({ atMs, killedMs: t0, pids, restartMs: Date.now() - t0 });
    log(
      `  kill ${k + 1}/${kills}: SIGKILL to ${pids} processes; back after ${((Date.now() - t0) / 1000).toFixed(1)} s${done() ? " (during the drain)" : ""}`,
    );
  }
  return out;
}

function collect(sinks: Catcher[], ledger: Ledger, from: number[]): void {
  sinks.forEach((s, i) => {
    for (let j = from[i]!; j < s.messages.length; j++) {
      const m = s.messages[j]!;
      const seq = headerOf(rawOf(m), "X-Chaos-Seq") ?? "?";
      for (const r of m.rcptTo) ledger.add(seq, r, m.receivedAt);
    }
    from[i] = s.messages.length;
  });
}

/** Runs the crash campaign. */
export async function runCrash(o: CrashOptions): Promise<CampaignResult> {
  const sinks = await Promise.all(DOMAINS.map(() => startCatcher({ scripted: true })));
  const rt = await createRuntime({
    tenant: "chaos-crash",
    vars: {
      OUTBOX_GRACE_SECONDS: "5",
      DELIVERY_LEASE_SECONDS: "20",
      SCHEDULER_CONFIG: JSON.stringify({ minimal_backoff_time: 1, maximal_backoff_time: 2 }),
    },
    routes: DOMAINS.map((d, i) => ({ pattern: d, transport: "chaos", nexthop: `[127.0.0.1]:${sinks[i]!.smtpPort}` })),
  });
  try {
    await rt.start();
    return await campaign(rt, sinks, o);
  } finally {
    await rt.dispose();
    await Promise.all(sinks.map((s) => s.close()));
  }
}

async function campaign(rt: Runtime, sinks: Catcher[], o: CrashOptions): Promise<CampaignResult> {
  const planned = plan(o.messages, o.seed);
  const ids = new Map<number, string>();
  const rejected: { seq: number; status: number }[] = [];
  let submitted = 0;
  let retried = 0;
  const slow: { seq: number; waited_s: number; answers: string }[] = [];
  const t0 = Date.now();
  const stopAt = t0 + 30 * 60_000;
  let next = 0;
  const parked: { p: Planned; at: number }[] = [];
  const subs = new Map<number, Submission>();
  const take = (): Planned | null | "wait" => {
    const due = parked.findIndex((x) => x.at <= Date.now());
    if (due >= 0) return parked.splice(due, 1)[0]!.p;
    if (next < planned.length) return planned[next++]!;
    return parked.length > 0 ? "wait" : null;
  };
  const worker = async () => {
    for (let p = take(); p !== null; p = take()) {
      if (p === "wait") {
        await sleep(1000);
        continue;
      }
      const sub = subs.get(p.seq) ?? { tries: 0, t0: Date.now(), statuses: [] };
      subs.set(p.seq, sub);
      const r = await submit(rt, p, sub, stopAt);
      if (r.kind === "parked") {
        parked.push({ p, at: Date.now() + 5000 });
        continue;
      }
      if (sub.tries > 1) {
        retried++;
        slow.push({
          seq: p.seq,
          waited_s: Math.round((Date.now() - sub.t0) / 100) / 10,
          answers: summarise(sub.statuses),
        });
      }
      if (r.kind === "accepted") ids.set(p.seq, r.id);
      else rejected.push({ seq: p.seq, status: r.status });
      if (++submitted % 500 === 0)
        o.log(`  submitted ${submitted}/${planned.length} (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
    }
  };
  let submitting = true;
  const kills = killer(rt, o.kills, o.seed, () => !submitting, o.log);
  kills.catch(() => undefined); // awaited below; a failed restart must not crash the process meanwhile
  await Promise.all(Array.from({ length: 8 }, worker));
  submitting = false;
  const submitS = (Date.now() - t0) / 1000;
  o.log(
    `  all ${planned.length} submitted in ${submitS.toFixed(0)} s (${ids.size} ` +
      `accepted, ${retried} needed a retry after a kill); waiting for the kills to finish`,
  );
  const killLog = await kills;
  slow.sort((a, b) => b.waited_s - a.waited_s);
  if (slow.length)
    o.log(
      `  resubmissions after kills, longest first: ${slow
        .slice(0, 5)
        .map((x) => `#${x.seq} ${x.waited_s} s (${x.answers})`)
        .join("; ")}`,
    );
  return account(rt, sinks, o, planned, ids, rejected, killLog, { submitS, retried, slow, t0 });
}

type Unexplained = { seq: number; rcpt: string; copies: number; gap_s: number; since_last_kill_s: number | null };
type Tally = {
  delivered: number;
  bounced: number;
  otherFinal: number;
  missing: { seq: number; rcpt: string; status: string }[];
  dupCopies: number;
  dupExplained: number;
  dupUnexplained: Unexplained[];
};

function tally(
  planned: Planned[],
  ids: Map<number, string>,
  ledger: Ledger,
  finals: Map<string, string>,
  killLog: KillLog[],
): Tally {
  const t: Tally = {
    delivered: 0,
    bounced: 0,
    otherFinal: 0,
    missing: [],
    dupCopies: 0,
    dupExplained: 0,
    dupUnexplained: [],
  };
  for (const p of planned) {
    if (!ids.has(p.seq)) continue;
    for (const rcpt of p.to) {
      const copies = ledger.copies(String(p.seq), rcpt);
      if (copies.length > 0) t.delivered++;
      else {
        const st = finals.get(`${p.seq}\u0000${rcpt}`) ?? "unknown";
        if (st === "bounced") t.bounced++;
        else if (FINAL.has(st)) t.otherFinal++;
        else t.missing.push({ seq: p.seq, rcpt, status: st });
      }
      if (copies.length > 1) {
        t.dupCopies += copies.length - 1;
        const first = Math.min(...copies),
          last = Math.max(...copies);
        if (explainedByKill(copies, killLog)) t.dupExplained += copies.length - 1;
        else {
          // Seconds between the copies, and from the last kill before the first copy (a lease
          // that ran out, or a redelivered queue message, shows here).
          const before = killLog.filter((k) => k.atMs <= first).map((k) => k.atMs);
          t.dupUnexplained.push({
            seq: p.seq,
            rcpt,
            copies: copies.length,
            gap_s: Math.round((last - first) / 100) / 10,
            since_last_kill_s: before.length ? Math.round((first - Math.max(...before)) / 100) / 10 : null,
          });
        }
      }
    }
  }
  return t;
}

/** Recipients expected at a sink (not `reject-`) that have not arrived yet. */
function pendingAtSinks(planned: Planned[], ids: Map<number, string>, ledger: Ledger): number {
  let n = 0;
  for (const p of planned) {
    if (!ids.has(p.seq)) continue;
    for (const r of p.to) if (!r.startsWith("reject-") && ledger.copies(String(p.seq), r).length === 0) n++;
  }
  return n;
}

/** The recipients not at a sink: their status from GET /emails/:id. */
async function statusesOf(
  rt: Runtime,
  planned: Planned[],
  ids: Map<number, string>,
  ledger: Ledger,
): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const todo = planned.filter((p) => ids.has(p.seq) && p.to.some((r) => ledger.copies(String(p.seq), r).length === 0));
  let next = 0;
  const worker = async () => {
    while (next < todo.length) {
      const p = todo[next++]!;
      const rs = await recipientsOf(rt, ids.get(p.seq)!);
      for (const r of rs ?? []) out.set(`${p.seq}\u0000${r.email.toLowerCase()}`, r.status);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  return out;
}

async function account(
  rt: Runtime,
  sinks: Catcher[],
  o: CrashOptions,
  planned: Planned[],
  ids: Map<number, string>,
  rejected: { seq: number; status: number }[],
  killLog: KillLog[],
  f: { submitS: number; retried: number; slow: { seq: number; waited_s: number; answers: string }[]; t0: number },
): Promise<CampaignResult> {
  const ledger = new Ledger();
  const from = sinks.map(() => 0);
  const deadline = Date.now() + o.drainTimeoutS * 1000;
  const t0 = Date.now();
  let t: Tally;
  for (;;) {
    collect(sinks, ledger, from);
    // Reading every open message through the API would load the relay under test: only the
    // `reject-` recipients are expected away from the sinks, so wait for the rest there first.
    const atSinkPending = pendingAtSinks(planned, ids, ledger);
    if (atSinkPending > 0 && Date.now() < deadline) {
      o.log(
        `  drain ${((Date.now() - t0) / 1000).toFixed(0)} s: ${atSinkPending} deliverable recipients not at the sinks yet`,
      );
      await sleep(5000);
      continue;
    }
    const finals = await statusesOf(rt, planned, ids, ledger);
    t = tally(planned, ids, ledger, finals, killLog);
    o.log(
      `  drain ${((Date.now() - t0) / 1000).toFixed(0)} s: delivered ${t.delivered}, ` +
        `bounced ${t.bounced}, other final ${t.otherFinal}, not yet ${t.missing.length}`,
    );
    if (t.missing.length === 0 || Date.now() > deadline) break;
    await sleep(5000);
  }
  const rcpts = planned.filter((p) => ids.has(p.seq)).reduce((n, p) => n + p.to.length, 0);
  const failures: string[] = [];
  if (rejected.length > 0)
    failures.push(
      `${rejected.length} submissions never accepted (statuses ${[...new Set(rejected.map((r) => r.status))].join(", ")})`,
    );
  if (t.missing.length > 0)
    failures.push(
      `${t.missing.length} recipients unaccounted after ${o.drainTimeoutS} s, e.g. ${JSON.stringify(t.missing.slice(0, 5))}`,
    );
  if (t.dupUnexplained.length > 0)
    failures.push(
      `${t.dupUnexplained.length} duplicates with no kill between the copies, e.g. ${JSON.stringify(t.dupUnexplained.slice(0, 5))}`,
    );
  const drainS = (Date.now() - t0) / 1000;
  return {
    campaign: "crash",
    tried:
      `${o.messages} messages (${rcpts} recipients over 3 sinks, ~10 % 451-then-250, ~5 % ` +
      `550), ${killLog.length} × kill -9 of wrangler+workerd and restart on the same state`,
    result: failures.length === 0 ? "pass" : "fail",
    figures:
      `${ids.size}/${o.messages} accepted; ${t.delivered} delivered, ${t.bounced} bounced, ${t.otherFinal} other final, ${t.missing.length} lost; ` +
      `${t.dupCopies} duplicate copies (${t.dupExplained} explained by a kill); ` +
      `restart ${avg(killLog.map((k) => k.restartMs / 1000)).toFixed(1)} s avg; ` +
      `submit ${f.submitS.toFixed(0)} s, drain ${drainS.toFixed(0)} s`,
    failures,
    details: {
      seed: o.seed,
      messages: o.messages,
      accepted: ids.size,
      recipients: rcpts,
      delivered: t.delivered,
      bounced: t.bounced,
      other_final: t.otherFinal,
      lost: t.missing.length,
      duplicate_copies: t.dupCopies,
      duplicates_explained: t.dupExplained,
      duplicates_unexplained: t.dupUnexplained.length,
      kills: killLog.length,
      restart_s: killLog.map((k) => Math.round(k.restartMs / 100) / 10),
      submit_s: Math.round(f.submitS),
      drain_s: Math.round(drainS),
      resubmitted_after_kill: f.retried,
      resubmissions: f.slow.slice(0, 20),
      never_accepted: rejected.length,
      unexplained_duplicates: t.dupUnexplained.slice(0, 20),
      kill_at_s: killLog.map((k) => Math.round((k.atMs - f.t0) / 100) / 10),
    },
  };
}

function avg(xs: number[]): number {
  return xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length;
}
