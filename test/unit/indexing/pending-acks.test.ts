import { describe, expect, it } from "vitest";
import { newMessageId, outboxName, shardOf } from "../../../worker/model/ids";
import { PendingAcks, type EventAck } from "../../../worker/indexing/pending-acks";

/** Message ids of two different Outbox shards. */
function idsOfTwoShards(): [string, string] {
  return [newMessageId(0), newMessageId(1)];
}

function fakeEnv(fail = false) {
  const sent: { name: string; acks: EventAck[] }[] = [];
  const env = {
    OUTBOX: {
      getByName: (name: string) => ({
        ackEventsMany: async (acks: EventAck[]) => {
          sent.push({ name, acks });
          if (fail) throw new Error("down");
        },
      }),
    },
  } as unknown as Env;
  return { env, sent };
}

describe("event acks riding on the next Outbox request", () => {
  it("hands a shard's acks to the request that takes them, and sends nothing of its own for them", async () => {
    const [a, b] = idsOfTwoShards();
    const { env, sent } = fakeEnv();
    const kept: Promise<unknown>[] = [];
    const acks = new PendingAcks(
      env,
      (p) => kept.push(p),
      () => true,
      20,
    );
    acks.add([
      { id: a, uptoSeq: 3 },
      { id: b, uptoSeq: 4 },
    ]);
    acks.add([{ id: a, uptoSeq: 5 }]);
    expect(acks.take(outboxName(shardOf(a)))).toEqual([
      { id: a, uptoSeq: 3 },
      { id: a, uptoSeq: 5 },
    ]);
    expect(acks.take(outboxName(shardOf(a)))).toEqual([]);
    await Promise.all(kept);
    // The other shard's ack found no request to ride on: it went on its own after the linger.
    expect(sent).toEqual([{ name: outboxName(shardOf(b)), acks: [{ id: b, uptoSeq: 4 }] }]);
  });

  it("sends one request per shard after the linger, and a failed one loses nothing but the ack", async () => {
    const [a, b] = idsOfTwoShards();
    const { env, sent } = fakeEnv(true);
    const kept: Promise<unknown>[] = [];
    const acks = new PendingAcks(
      env,
      (p) => kept.push(p),
      () => true,
      10,
    );
    acks.add([
      { id: a, uptoSeq: 1 },
      { id: b, uptoSeq: 2 },
      { id: a, uptoSeq: 3 },
    ]);
    expect(kept).toHaveLength(1); // one timer for all
    await Promise.all(kept);
    expect(sent.map((x) => x.acks.length).sort()).toEqual([1, 2]);
    acks.add([{ id: a, uptoSeq: 4 }]);
    expect(kept).toHaveLength(2); // armed again after the flush
    await Promise.all(kept);
    expect(sent).toHaveLength(3);
  });

  it("sends at once when the agent is idle: no request of its own is coming", async () => {
    const [a] = idsOfTwoShards();
    const { env, sent } = fakeEnv();
    const kept: Promise<unknown>[] = [];
    let busy = false;
    const acks = new PendingAcks(
      env,
      (p) => kept.push(p),
      () => busy,
      60_000,
    );
    acks.add([{ id: a, uptoSeq: 1 }]);
    await Promise.all(kept);
    expect(sent).toEqual([{ name: outboxName(shardOf(a)), acks: [{ id: a, uptoSeq: 1 }] }]);
    busy = true;
    acks.add([{ id: a, uptoSeq: 2 }]);
    expect(acks.take(outboxName(shardOf(a)))).toEqual([{ id: a, uptoSeq: 2 }]);
  });
});
