/**
 * The Outbox's operator calls on one message (postsuper -h, -H, -r, -d), over its view as the
 * shell read it; the records they change are outbox-control.ts's. The shell re-indexes the
 * message when a call answers "ok".
 *
 * DESCRIPTION
 *   holdIn      the message leaves every Transport DO (entries in flight finish and report);
 *               nothing of it is admitted until release.
 *   releaseIn   a held message's open recipients are admitted again, as a new attempt.
 *   requeueIn   the open recipients are taken out of the Transport DOs, routed again and
 *               admitted as a new attempt.
 *   cancelIn    the open recipients (only those at `domain` when given) end `cancelled`, with
 *               one email.canceled event each (cancelWithEvents).
 */
import { beginControl, controlOf, noteAttempt, openTransports, readmitMessage } from "./control";
import { cancelWithEvents } from "./finish";
import { FINAL_STATUSES, type ControlResult, type MessageView } from "../../worker/model/message";
import { schedulerNames } from "../../worker/model/delivery";
import { settingsOf } from "../../worker/settings/settings";

/** Every Transport DO the open recipients of a message may be in: each transport's shards (TRANSPORT_SHARDS). */
function openSchedulers(sql: SqlStorage, env: Env, id: string): string[] {
  return openTransports(sql, id).flatMap((t) => schedulerNames(t, settingsOf(env).transportShards));
}

/** Hold (postsuper -h): the message leaves every Transport DO, in-flight deliveries finish, nothing is admitted until release. */
export async function holdIn(
  storage: DurableObjectStorage,
  env: Env,
  v: MessageView,
  nowMs: number,
): Promise<ControlResult> {
  const sql = storage.sql;
  if (!storage.transactionSync(() => beginControl(sql, v.id, "hold", nowMs)))
    return { result: v.state === "open" ? "already_held" : "not_open", recipients: 0 };
  for (const t of openSchedulers(sql, env, v.id))
    noteAttempt(sql, v.id, (await env.TRANSPORT_QUEUE.getByName(t).remove(v.id)).attempt);
  return { result: "ok", recipients: v.recipients.filter((r) => !FINAL_STATUSES.includes(r.status)).length };
}

/** Release (postsuper -H): a held message's open recipients are admitted again, as a new attempt. */
export function releaseIn(storage: DurableObjectStorage, v: MessageView, nowMs: number): ControlResult {
  if (controlOf(storage.sql, v.id)?.action !== "hold") return { result: "not_held", recipients: 0 };
  return { result: "ok", recipients: storage.transactionSync(() => readmitMessage(storage.sql, v.id, false, nowMs)) };
}

/** Requeue (postsuper -r): the open recipients are taken out, routed again and admitted as a new attempt. */
export async function requeueIn(
  storage: DurableObjectStorage,
  env: Env,
  v: MessageView,
  nowMs: number,
): Promise<ControlResult> {
  if (v.state !== "open") return { result: "not_open", recipients: 0 };
  let used = 0;
  for (const t of openSchedulers(storage.sql, env, v.id))
    used = Math.max(used, (await env.TRANSPORT_QUEUE.getByName(t).remove(v.id)).attempt);
  return {
    result: "ok",
    recipients: storage.transactionSync(() => readmitMessage(storage.sql, v.id, true, nowMs, used)),
  };
}

/** Cancels the open recipients (only those at `domain` when given), with one email.canceled event each. */
export function cancelIn(
  storage: DurableObjectStorage,
  v: MessageView,
  domain: string | null,
  nowMs: number,
): ControlResult {
  const done = storage.transactionSync(() => cancelWithEvents(storage.sql, v.id, v.tenant, domain, nowMs));
  return done === 0
    ? { result: v.state === "open" ? "no_match" : "not_open", recipients: 0 }
    : { result: "ok", recipients: done };
}
