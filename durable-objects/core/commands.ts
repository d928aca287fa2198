/*
 * NAME
 *   commands - the scheduler's inputs as data, for journaling and replay
 * DESCRIPTION
 *   Every change to the queue manager comes from one of a few commands, each carrying its
 *   own clock reading. runCommand() applies one and returns what it produced. Because the
 *   core is deterministic (no clock, no randomness, no I/O but the recipient source, which
 *   shells keep append-only), a snapshot plus the commands applied since reproduces the state
 *   exactly: a Durable Object journals each command (small) and snapshots now and then
 *   (large), instead of rewriting its whole state on every call.
 *   runJournaled() is runCommand() plus whether the command must be journaled: a dispatch
 *   that selected nothing, a Destination DO verdict that agreed with the queue and a tick with
 *   no timer due change nothing but the clock reading, so a shell need not store them.
 * INVARIANTS
 *   runCommand(restore(snapshot), c1..cn) is observationally equal to the live state after
 *   c1..cn, given the same recipient source contents; leaving out the commands runJournaled()
 *   calls unchanging keeps that true (the next command sets the clock reading again).
 * ERRORS
 *   None for expected input; InvariantError for corrupt state.
 */
import type { MessageIntake } from "./assign";
import { reportDelivery, type DeliveryReport, type ReportResult } from "./complete";
import { failTransport, flush } from "./timers";
import type { Entry, PolicyRule, Qmgr } from "./model";
import type { Effect, ResolvedRecipient } from "./ports";
import { clearPolicy, setPolicy } from "./policy";
import { admitMessage, dispatchAll, drainEffects, nextWakeupAt, tick } from "./scheduler";
import { obtainTransport } from "./assign";
import { applyDestinationState, removeMessage, type DestinationVerdict } from "./control";

/** One input to the queue manager, with the clock reading it ran at (whole seconds). */
export type Command =
  | { kind: "admit"; now: number; intake: MessageIntake }
  | { kind: "dispatch"; now: number; max: number }
  | { kind: "report"; now: number; entryId: number; report: DeliveryReport }
  | { kind: "tick"; now: number }
  | { kind: "set-policy"; now: number; key: string; rule: PolicyRule | null }
  | { kind: "flush"; now: number }
  | { kind: "fail-transport"; now: number; transport: string; reason: string }
  | { kind: "destination"; now: number; transport: string; queue: string; verdict: DestinationVerdict }
  | { kind: "remove"; now: number; messageId: string };

/** What a command produced. */
export interface CommandResult<R extends ResolvedRecipient = ResolvedRecipient> {
  /** Entries selected for delivery (dispatch). */
  entries: Entry<R>[];
  /** admit: whether the message entered the active queue; report/destination: whether it applied. */
  accepted: boolean;
  /** remove: the recipients that were still waiting (todo). */
  removed?: R[];
  effects: Effect[];
}

/** Applies one command to the queue manager. */
export function runCommand<R extends ResolvedRecipient>(q: Qmgr<R>, c: Command): CommandResult<R> {
  let entries: Entry<R>[] = [];
  let accepted = true;
  switch (c.kind) {
    case "admit":
      accepted = admitMessage(q, c.intake, c.now) !== null;
      break;
    case "dispatch":
      entries = dispatchAll(q, c.now, c.max);
      break;
    case "report": {
      const r: ReportResult = reportDelivery(q, c.entryId, c.report, c.now);
      accepted = r.kind === "applied";
      break;
    }
    case "tick":
      tick(q, c.now);
      break;
    case "set-policy":
      if (c.rule) setPolicy(q, c.key, c.rule, c.now);
      else clearPolicy(q, c.key);
      break;
    case "flush":
      flush(q, c.now);
      break;
    case "fail-transport":
      failTransport(q, obtainTransport(q, c.transport), c.reason, c.now);
      break;
    case "destination":
      accepted = applyDestinationState(q, c.transport, c.queue, c.verdict, c.now);
      break;
    case "remove": {
      const removed = removeMessage(q, c.messageId, c.now);
      return { entries, accepted: removed.length > 0, removed, effects: drainEffects(q) };
    }
  }
  return { entries, accepted, effects: drainEffects(q) };
}

/** runCommand(), and whether the command changed anything a replay needs (see the header). */
export function runJournaled<R extends ResolvedRecipient>(
  q: Qmgr<R>,
  c: Command,
): CommandResult<R> & { changed: boolean } {
  const due = nextWakeupAt(q);
  const res = runCommand(q, c);
  let changed = true;
  if (c.kind === "dispatch") changed = res.entries.length > 0 || res.effects.length > 0;
  else if (c.kind === "destination") changed = res.accepted || res.effects.length > 0;
  else if (c.kind === "tick") changed = (due !== null && due <= c.now) || res.effects.length > 0;
  return { ...res, changed };
}
