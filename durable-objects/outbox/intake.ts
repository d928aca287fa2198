/**
 * What comes into an Outbox: the accept's messages and their admission (AdmissionBatch), the
 * accept's answer waiting for it, and the classify consumer's decisions with theirs. The Outbox
 * DO's RPC methods of that side call this; its state lives as long as the object.
 *
 * DESCRIPTION
 *   new OutboxIntake(storage, env, syncState)   env() is read at each call (the object's env, which
 *                 tests may swap); syncState(id, now): the state the classify side answers for
 *                 indexing (Outbox.syncState).
 *   accept(req, token)   stores (accept.ts storeAccepted), hands the messages decided at accept to
 *                 the next admission run, and answers with the ids it admits and the in_flow
 *                 pause (core/flow.ts).
 *   admitted(ids)        resolves once the admission of these accepted messages has ended, after
 *                 admitting those an Outbox restart since their accept left unadmitted.
 *   admitReplayed(body)  admits the messages of a replayed accept that its first try stored and
 *                 did not admit (unadmitted.ts).
 *   classifyMany(items, admit)   Outbox.classifyMany (see there).
 *   unmarked, flow       the one-recipient messages admitted and not marked ready (unmarked.ts),
 *                 and the shard's inflow meter: the outcome side reads and updates both.
 *
 * INVARIANTS
 *   An accepted message stored out of the index of waiting messages is admitted by the run its
 *   accept handed it to, or put in that index when the run fails (keepWaiting), or found by a
 *   replayed accept, by admitted(), or by the cron's scan (unadmitted.ts).
 */
import { admitAll } from "./admit";
import { AdmissionBatch } from "./admission-batch";
import { UnmarkedAdmissions } from "./unmarked";
import { FlowMeter } from "../core";
import { storeAccepted } from "./accept";
import { claimClassifyWork, keepWaiting, recordDecisions } from "./classify-state";
import { readMessage } from "./store";
import { replayedUnadmitted, unadmittedAmong } from "./unadmitted";
import { afterChange } from "./after-change";
import type { AcceptRequest, AcceptResult, ClassifyResult, ClassifyWork, SyncState } from "../../worker/model/message";
import { settingsOf } from "../../worker/settings/settings";

export class OutboxIntake {
  /** One-recipient messages admitted into an active queue and not marked ready (unmarked.ts). */
  readonly unmarked = new UnmarkedAdmissions();
  /** Recipients accepted here and leaving a delivery attempt (in memory): Postfix's in_flow_delay rule, core/flow.ts. */
  readonly flow = new FlowMeter();
  private readonly admission: AdmissionBatch;
  private readonly sql: SqlStorage;

  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly envOf: () => Env,
    private readonly syncState: (id: string, now: number) => SyncState | null,
  ) {
    this.sql = storage.sql;
    this.admission = new AdmissionBatch(settingsOf(envOf()).admitBatchMs, (ids) => this.admitAccepted(ids));
  }

  async accept(req: AcceptRequest, token?: string): Promise<AcceptResult> {
    const now = Date.now();
    const result = storeAccepted(this.storage, req, now, settingsOf(this.envOf()).graceMs, token);
    if (result.kind === "replay") await this.admitReplayed(result.response.body);
    if (result.kind !== "accepted") return result;
    // Decided at accept: admitted with the next batch, or (none left open) finished now and indexed through the queue.
    const decided = req.messages.filter((m) => m.decisions !== undefined && m.scheduledAt === null).map((m) => m.id);
    const finished = decided.filter((id) => readMessage(this.sql, id)?.state === "done");
    // Admitted with the next run; the worker waits for it with admitted(), out of its accept slot.
    const admitting = decided.filter((id) => !finished.includes(id));
    this.admission.add(admitting).catch(() => undefined); // a failed run is logged, its messages kept waiting
    await afterChange(this.storage, this.envOf(), now, finished, finished);
    const sec = Math.floor(now / 1000);
    this.flow.arrive(
      req.messages.reduce((n, m) => n + (m.scheduledAt === null ? m.rcptTo.length : 0), 0),
      sec,
    ); // scheduled mail is not due
    return { kind: "accepted", pauseMs: this.flow.over(sec) ? settingsOf(this.envOf()).inFlowDelayMs : 0, admitting };
  }

  async admitted(ids: string[]): Promise<void> {
    const inRun = ids.filter((id) => this.admission.has(id));
    const lost = unadmittedAmong(this.sql, ids, (id) => this.unmarked.has(id) || this.admission.has(id));
    await Promise.all([this.admission.whenDone(inRun), this.admission.add(lost)]);
  }

  async admitReplayed(body: unknown): Promise<void> {
    await this.admission.add(
      replayedUnadmitted(this.sql, body, (id) => this.unmarked.has(id) || this.admission.has(id)),
    );
  }

  /**
   * Admits accepted messages (AdmissionBatch); those not all in an active queue go to the classify
   * queue for their index. One whose admission failed joins the index of waiting messages (the
   * accept kept it out), so the sweeper classifies it again.
   */
  private async admitAccepted(ids: string[]): Promise<void> {
    const now = Date.now();
    const { active, unmarked, failed } = await admitAll(this.storage, this.envOf(), ids, now, undefined, true).catch(
      (e: unknown) => {
        keepWaiting(this.sql, ids);
        throw e;
      },
    );
    keepWaiting(this.sql, failed);
    for (const u of unmarked) this.unmarked.add(u.id, u.idxs, now);
    await afterChange(
      this.storage,
      this.envOf(),
      now,
      ids,
      ids.filter((id) => !active.has(id)),
      active.size > 0,
    );
  }

  async classifyMany(
    items: { id: string; results: ClassifyResult[] }[],
    admit: boolean,
  ): Promise<{ plan: ClassifyWork | null; sync: SyncState | null; indexLater: boolean; failed: boolean }[]> {
    const now = Date.now();
    // Only a message that finished here (every recipient suppressed) has a body to delete.
    const finished = this.storage.transactionSync(() =>
      items.filter((x) => x.results.length > 0 && recordDecisions(this.sql, x.id, x.results, now)).map((x) => x.id),
    );
    const plans = items.map((x) => claimClassifyWork(this.sql, x.id, now));
    const ids = items.filter((_, i) => plans[i] !== null).map((x) => x.id);
    const claimed = new Map(plans.flatMap((p) => (p ? [[p.id, p] as const] : [])));
    const admitted = admit && ids.length > 0 ? await admitAll(this.storage, this.envOf(), ids, now, claimed) : null;
    await afterChange(this.storage, this.envOf(), now, finished, [], (admitted?.active.size ?? 0) > 0);
    // A message all in an active queue is indexed by the delivery stage: no state to read and send for it.
    return items.map((x, i) => {
      const indexLater = admitted?.active.has(x.id) ?? false;
      return {
        plan: plans[i] ?? null,
        sync: indexLater ? null : this.syncState(x.id, Date.now()),
        indexLater,
        failed: admitted?.failed.includes(x.id) ?? false,
      };
    });
  }
}
