import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  mustParseSchedulerConfig,
  restoreQmgr,
  runCommand,
  runJournaled,
  snapshotQmgr,
  type Command,
  type QmgrSnapshot,
} from "../../../durable-objects/core";
import type { TestRcpt } from "./harness";
import { REFUSAL, Runner, scenarioArb, type Scenario } from "./scenario";

const RUNS = Number(process.env.PROPERTY_RUNS ?? 1000);

/** Turns a scenario's operations into the command log a Durable Object would journal. */
function commandsOf(s: Scenario, r: Runner): { commands: Command[]; results: string[]; journaled: boolean[] } {
  const commands: Command[] = [];
  const journaled: boolean[] = [];
  const results: string[] = [];
  const inflight: number[] = [];
  let now = 0;
  let admitted = 0;
  const run = (c: Command) => {
    const res = runJournaled(r.q, c);
    commands.push(c);
    journaled.push(res.changed);
    for (const e of res.entries) inflight.push(e.id);
    results.push(
      JSON.stringify({
        e: res.entries.map((e) => [e.id, e.rcpts.map((x) => x.n)]),
        a: res.accepted,
        f: res.effects,
        r: res.removed?.map((x) => x.n),
      }),
    );
    return res;
  };
  for (const op of s.ops) {
    if (op.kind === "admit" && admitted < s.messages.length) {
      const spec = s.messages[admitted]!;
      const res = run({
        kind: "admit",
        now,
        intake: {
          id: `m${admitted}`,
          createTime: now,
          rcptTotal: spec.rcpts.length,
          tenant: `t${spec.tenant}`,
          priority: spec.priority,
          singleRcpt: spec.singleRcpt,
        },
      });
      if (res.accepted) admitted += 1;
    } else if (op.kind === "dispatch") run({ kind: "dispatch", now, max: op.max });
    else if (op.kind === "report" && inflight.length > 0) {
      const [id] = inflight.splice(op.pick % inflight.length, 1);
      const report =
        op.outcome === "ok"
          ? { status: "ok" as const }
          : op.outcome === "crash"
            ? { status: "crash" as const }
            : {
                status: "defer" as const,
                ...(op.outcome === "site"
                  ? { siteFailure: { dsnStatus: "4.4.1", reason: "refused" } }
                  : op.outcome === "refusal"
                    ? { siteFailure: REFUSAL }
                    : {}),
              };
      run({ kind: "report", now, entryId: id!, report });
    } else if (op.kind === "advance") {
      now += op.sec;
      run({ kind: "tick", now });
    } else if (op.kind === "remove") {
      const ids = [...r.q.messages.keys()];
      if (ids.length > 0) run({ kind: "remove", now, messageId: ids[op.pick % ids.length]! });
    } else if (op.kind === "verdict") {
      const queues = [...r.q.transports.values()].flatMap((t) => [...t.queues.values()]);
      const queue = queues[op.pick % Math.max(queues.length, 1)];
      if (queue)
        run({
          kind: "destination",
          now,
          transport: queue.transport.name,
          queue: queue.name,
          verdict: { window: op.window, deadUntil: op.dead ? now + 30 : 0, reason: "verdict" },
        });
    }
  }
  return { commands, results, journaled };
}

/** A snapshot as JSON without the clock reading, which only the next command sets again. */
function stateOf(q: Parameters<typeof snapshotQmgr>[0]): string {
  return JSON.stringify({ ...snapshotQmgr(q), now: 0 });
}

/**
 * Found by 100,000 runs (2026-11-27): a job whose peers a restored core rebuilt kept the
 * snapshot's peerBatch while the live one had moved to its peer map, so the restored state
 * differed in that field (the results did not). peerBatch is no longer snapshotted.
 */
const replayArb = scenarioArb({ failures: true, control: true });
type ReplayScenario = typeof replayArb extends fc.Arbitrary<infer T> ? T : never;
const PEER_BATCH_CASE = JSON.parse(`[{
  "config": {
    "qmgr_message_active_limit": 1, "qmgr_message_recipient_limit": 1, "qmgr_message_recipient_minimum": 2,
    "initial_destination_concurrency": 1, "default_destination_concurrency_limit": 0, "default_destination_recipient_limit": 0,
    "default_destination_concurrency_positive_feedback": "1", "default_destination_concurrency_negative_feedback": "1",
    "default_destination_concurrency_failed_cohort_limit": 0,
    "default_delivery_slot_cost": 0, "default_delivery_slot_loan": 0, "default_delivery_slot_discount": 0,
    "default_minimum_delivery_slots": 0, "default_recipient_limit": 4, "default_extra_recipient_limit": 0,
    "default_recipient_refill_limit": 5, "default_recipient_refill_delay": 1, "default_process_limit": 2,
    "destination_idle_memory": 0, "minimal_backoff_time": 10, "default_destination_concurrency_ceiling_memory": 0
  },
  "messages": [
    {"rcpts":[{"dest":0,"transport":1},{"dest":1,"transport":1},{"dest":0,"transport":0},{"dest":0,"transport":0},
              {"dest":0,"transport":0},{"dest":0,"transport":0},{"dest":2,"transport":1},{"dest":0,"transport":1}],
     "tenant":0,"priority":0,"singleRcpt":false},
    {"rcpts":[{"dest":0,"transport":0}],"tenant":0,"priority":0,"singleRcpt":false}
  ],
  "ops": [
    {"kind":"admit"},
    {"kind":"verdict","pick":189345427,"dead":true,"window":1},
    {"kind":"dispatch","max":3},
    {"kind":"report","pick":0,"outcome":"ok"},
    {"kind":"report","pick":0,"outcome":"ok"},
    {"kind":"report","pick":0,"outcome":"ok"},
    {"kind":"verdict","pick":0,"dead":false,"window":1}
  ]
}, 360764795]`) as [ReplayScenario, number];

describe("command journal", () => {
  it(
    `replaying the journal since a snapshot reproduces the live state and every result, ` +
      `with removals and Destination DO verdicts mixed in (${RUNS} scenarios)`,
    () => {
      fc.assert(
        fc.property(replayArb, fc.nat(), (s, cut) => {
          const live = Runner.fresh(s);
          const { commands, results } = commandsOf(s, live);
          // Rebuild: snapshot after `at` commands (from a second live run), then replay the rest.
          const at = cut % (commands.length + 1);
          const twin = Runner.fresh(s);
          for (const c of commands.slice(0, at)) runCommand(twin.q, c);
          const snap = JSON.parse(JSON.stringify(snapshotQmgr(twin.q))) as QmgrSnapshot<TestRcpt>;
          const restored = restoreQmgr(snap, mustParseSchedulerConfig(s.config), twin.src);
          const replayed = commands.slice(at).map((c) => {
            const res = runCommand(restored, JSON.parse(JSON.stringify(c)) as Command);
            return JSON.stringify({
              e: res.entries.map((e) => [e.id, e.rcpts.map((x) => x.n)]),
              a: res.accepted,
              f: res.effects,
              r: res.removed?.map((x) => x.n),
            });
          });
          expect(replayed).toEqual(results.slice(at));
          expect(JSON.stringify(snapshotQmgr(restored))).toBe(JSON.stringify(snapshotQmgr(live.q)));
        }),
        { numRuns: RUNS, examples: [PEER_BATCH_CASE] },
      );
    },
    600_000,
  );

  it(
    `leaving out the commands that change nothing (empty dispatches, agreeing verdicts, ` +
      `ticks with no timer due) replays to the same results and state (${RUNS} scenarios)`,
    () => {
      fc.assert(
        fc.property(scenarioArb({ failures: true, control: true }), (s) => {
          const live = Runner.fresh(s);
          const { commands, results, journaled } = commandsOf(s, live);
          const q = Runner.fresh(s).q;
          commands.forEach((c, i) => {
            if (!journaled[i]) return;
            const res = runCommand(q, JSON.parse(JSON.stringify(c)) as Command);
            expect(
              JSON.stringify({
                e: res.entries.map((e) => [e.id, e.rcpts.map((x) => x.n)]),
                a: res.accepted,
                f: res.effects,
                r: res.removed?.map((x) => x.n),
              }),
            ).toBe(results[i]);
          });
          expect(stateOf(q)).toBe(stateOf(live.q));
        }),
        { numRuns: RUNS },
      );
    },
    600_000,
  );
});
