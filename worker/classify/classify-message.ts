/**
 * Classification of one message (qmail-send's todo processing): resolve, record, admit.
 *
 * DESCRIPTION
 *   decide(env, work, lookups)       for the undecided recipients of `work`: rewrite, resolve
 *                                    through the routes, check suppressions (lookups are per
 *                                    batch). Pure of Outbox calls.
 *   classifyMessage(env, id, lookups, work?)  reads the due work from the Outbox (unless the
 *                                    queue message carried it), decides, and hands the
 *                                    decisions to Outbox.classify, which records them, admits
 *                                    the decided recipients to their Transport DOs
 *                                    (storage/outbox-admit.ts) and marks them ready in that one
 *                                    call. Returns the state the index must reflect, and
 *                                    whether the delivery stage will write it instead.
 *   decideNew(env, tenant, messages, prefetch?)  decide() for newly accepted messages, in the accepting
 *                                    worker (the Outbox stores them decided in its accept
 *                                    request and admits them with its next AdmissionBatch); null (the classify queue decides) for a scheduled
 *                                    message (decided when due), for one of more than
 *                                    CLASSIFY_AT_ACCEPT_MAX_RCPTS recipients (default 0: every
 *                                    message; see wrangler.toml for the trade-off), and for all
 *                                    when a look-up fails.
 *   decideMessage(env, id, lookups)  the first two steps only (decisions recorded, nothing
 *                                    admitted); for crash tests.
 *
 * INVARIANTS
 *   A stop between any two steps is repaired by running classifyMessage again: decisions are
 *   read back rather than remade, admission is idempotent, and only `incoming` recipients move.
 *   Work carried by the queue message is only a hint: the Outbox ignores decisions for
 *   recipients that are no longer undecided and `incoming`.
 */
import { outboxOf } from "../model/ids";
import { bulkOf, type ClassifyResult, type ClassifyWork, type NewMessage, type SyncState } from "../model/message";
import { suppressionScopes } from "../webhooks/core/suppression-policy";
import { AcceptLookups, type Lookups, type SuppressionPrefetch } from "./lookups";
import { resolveRecipient, rewriteAddress, type RouteDefaults } from "./resolve";
import { settingsOf } from "../settings/settings";

function defaultsOf(env: Env): RouteDefaults {
  return { transport: settingsOf(env).defaultTransport, smarthost: settingsOf(env).smarthost };
}

function rewriteOrKeep(address: string): string {
  try {
    return rewriteAddress(address);
  } catch {
    return address; // validated at accept; a domain the rewrite rejects still goes to its own nexthop
  }
}

/** Decisions for the undecided recipients of `work`. */
export async function decide(
  env: Env,
  work: Pick<ClassifyWork, "tenant" | "rcpts" | "bulk">,
  lookups: Lookups,
): Promise<ClassifyResult[]> {
  const undecided = work.rcpts
    .filter((r) => r.transport === null)
    .map((r) => ({ idx: r.idx, address: rewriteOrKeep(r.address) }));
  if (undecided.length === 0) return [];
  const [suppressed, routing] = await Promise.all([
    lookups.suppressed(
      work.tenant,
      undecided.map((r) => r.address),
      suppressionScopes(work.bulk),
    ),
    lookups.routing(),
  ]);
  return undecided.map((r): ClassifyResult => {
    const scope = suppressed.get(r.address.toLowerCase());
    if (scope !== undefined) return { ...r, status: "suppressed", reason: suppressedBecause(scope) };
    return { ...r, status: "ready", ...resolveRecipient(r.address, work.tenant, routing, defaultsOf(env)) };
  });
}

/** The reason an email.suppressed gives for an entry of `scope`. */
function suppressedBecause(scope: string): string {
  if (scope === "") return "on the suppression list";
  return scope === "bulk"
    ? "unsubscribed from the sender's bulk mail"
    : `unsubscribed from the topic ${scope.slice("bulk:".length)}`;
}

/** Decisions for new messages at accept (see the header). */
export async function decideNew(
  env: Env,
  tenant: string,
  messages: Pick<NewMessage, "rcptTo" | "scheduledAt" | "summary">[],
  prefetch?: SuppressionPrefetch,
): Promise<(ClassifyResult[] | null)[]> {
  const lookups = new AcceptLookups(env.DB, Date.now, prefetch);
  const max = settingsOf(env).classifyAtAcceptMaxRcpts;
  try {
    return await Promise.all(
      messages.map((m) =>
        m.scheduledAt !== null || m.rcptTo.length > max
          ? null
          : decide(
              env,
              {
                tenant,
                rcpts: m.rcptTo.map((address, idx) => ({ idx, address, transport: null, nexthop: null })),
                bulk: bulkOf(m.summary),
              },
              lookups,
            ),
      ),
    );
  } catch (e) {
    console.error(
      JSON.stringify({
        error: "classify at accept failed; the classify queue decides",
        detail: e instanceof Error ? e.message : String(e),
      }),
    );
    return messages.map(() => null);
  }
}

/** Steps 1–2: the due work, with decisions recorded for every recipient; null when none is due. */
export async function decideMessage(
  env: Env,
  id: string,
  lookups: Lookups,
): Promise<{ plan: ClassifyWork | null; sync: SyncState | null }> {
  const outbox = outboxOf(env, id);
  const { work, sync } = await outbox.beginClassify(id);
  if (!work) return { plan: null, sync };
  return outbox.classify(id, await decide(env, work, lookups), false);
}

/**
 * Classifies a message completely; returns the state for the index (null if the message is
 * unknown), and `indexLater` when the delivery stage will index it (see Outbox.classify).
 */
export async function classifyMessage(
  env: Env,
  id: string,
  lookups: Lookups,
  carried?: Pick<ClassifyWork, "tenant" | "rcpts">,
): Promise<{ sync: SyncState | null; indexLater: boolean }> {
  const outbox = outboxOf(env, id);
  let work = carried ?? null;
  if (!work) {
    const begun = await outbox.beginClassify(id);
    if (!begun.work) return { sync: begun.sync, indexLater: false };
    work = begun.work;
  }
  const { sync, indexLater } = await outbox.classify(id, await decide(env, work, lookups));
  return { sync, indexLater };
}

export { admitPlan } from "../../durable-objects/outbox/admit";
