// The Transport DO's hand-off to delivery agents (durable-objects/transport/handoff.ts): the next
// entry of a destination goes to an agent whose connection was just left idle, and only to one
// that really left a connection idle: a refused or lost session, or a crash, leaves none, and
// sending the next entry there would open a new connection while an idle one still counts at
// the server (a 421 from a server at its session limit).
import { describe, expect, it, vi } from "vitest";
import { Handoff } from "../../durable-objects/transport/handoff";
import type { DispatchedEntry } from "../../durable-objects/transport/transport-types";

const NEXTHOP = "[192.0.2.1]:25";
const entry = (entryId: number): DispatchedEntry => ({
  entryId,
  messageId: `m${entryId}`,
  transport: "smtp",
  nexthop: NEXTHOP,
  rcpts: [{ idx: 0, address: `r${entryId}@example.test` }] as DispatchedEntry["rcpts"],
});

function setup() {
  const delivered: { agent: string; ids: number[] }[] = [];
  const env = {
    DELIVERY: "agents",
    DELIVERY_AGENT: {
      getByName: (agent: string) => ({
        deliver: async (jobs: { entryId: number }[]) => {
          delivered.push({ agent, ids: jobs.map((j) => j.entryId) });
        },
      }),
    },
  } as unknown as Env;
  let now = 1_000_000;
  const h = new Handoff(
    () => env,
    () => now,
  );
  const agentOf = (id: number) => delivered.find((d) => d.ids.includes(id))?.agent;
  return {
    h,
    agentOf,
    tick: (ms: number) => {
      now += ms;
    },
  };
}

describe("Handoff: which agent takes the next entry", () => {
  it("the agent that last left a connection idle, not one whose session was refused after it", async () => {
    const { h, agentOf, tick } = setup();
    // Five entries: four fill agent #0 (AGENT_SESSIONS), the fifth goes to #1.
    await h.send([1, 2, 3, 4, 5].map(entry), 0);
    expect(agentOf(1)).toBe(`smtp/${NEXTHOP}#0`);
    expect(agentOf(5)).toBe(`smtp/${NEXTHOP}#1`);
    h.release(2, true); // #0's session ended well: its connection waits idle
    tick(10);
    h.release(5, false); // #1's session was refused: nothing idle there
    await h.send([entry(6)], 0);
    expect(agentOf(6)).toBe(`smtp/${NEXTHOP}#0`);
  });

  it("the most recent of the agents that left a connection idle", async () => {
    const { h, agentOf, tick } = setup();
    await h.send([1, 2, 3, 4, 5].map(entry), 0);
    h.release(2, true);
    tick(10);
    h.release(5, true);
    await h.send([entry(6)], 0);
    expect(agentOf(6)).toBe(`smtp/${NEXTHOP}#1`);
  });
});

describe("Handoff.check: which entries leased for long no agent holds", () => {
  /** A core entry as check() reads it: its id, message, destination and transport's process_limit. */
  const coreEntry = (id: number, processLimit = 10) =>
    ({
      id,
      rcpts: [],
      peer: {
        job: { message: { id: `m${id}` } },
        queue: { nexthop: NEXTHOP, transport: { name: "smtp", p: { processLimit } } },
      },
    }) as unknown as Parameters<Handoff["check"]>[0][number];

  function agents(holds: Record<string, number[]>, silent: string[] = []) {
    const asked: string[] = [];
    const env = {
      DELIVERY: "agents",
      DELIVERY_AGENT: {
        getByName: (name: string) => ({
          deliver: async () => undefined,
          holding: async (ids: number[]) => {
            asked.push(name);
            if (silent.includes(name)) throw new Error("overloaded");
            return ids.filter((id) => (holds[name] ?? []).includes(id));
          },
        }),
      },
    } as unknown as Env;
    return { h: new Handoff(() => env), asked };
  }
  const slot = (n: number) => `smtp/${NEXTHOP}#${n}`;

  it("asks only the agent an entry was handed to; one it does not hold is lost", async () => {
    const { h, asked } = agents({ [slot(0)]: [1] });
    await h.send([1, 2].map(entry), 0);
    expect(await h.check([coreEntry(1), coreEntry(2)])).toEqual({ lost: [2], held: [1] });
    expect(asked).toEqual([slot(0)]);
  });

  it("after a restart (no agent known), asks every slot process_limit allows, then remembers the holder", async () => {
    const { h, asked } = agents({ [slot(2)]: [7] });
    expect(await h.check([coreEntry(7, 10), coreEntry(8, 10)])).toEqual({ lost: [8], held: [7] });
    expect([...new Set(asked)].sort()).toEqual([slot(0), slot(1), slot(2)]); // ceil(10 / 4) slots
    asked.length = 0;
    expect(await h.check([coreEntry(7, 10)])).toEqual({ lost: [], held: [7] });
    expect(asked).toEqual([slot(2)]);
  });

  it("leaves undecided what an agent that did not answer in 10 s may hold", async () => {
    vi.useFakeTimers();
    try {
      const env = {
        DELIVERY: "agents",
        DELIVERY_AGENT: {
          getByName: () => ({ deliver: async () => undefined, holding: () => new Promise(() => undefined) }),
        },
      } as unknown as Env;
      const h = new Handoff(() => env);
      await h.send([entry(1)], 0);
      const answer = h.check([coreEntry(1)]);
      await vi.advanceTimersByTimeAsync(10_000);
      expect(await answer).toEqual({ lost: [], held: [] });
    } finally {
      vi.useRealTimers();
    }
  });

  it("leaves undecided what an agent that failed to answer may hold", async () => {
    const { h } = agents({}, [slot(1)]);
    await h.send([1].map(entry), 0); // to #0, which answers
    expect(await h.check([coreEntry(1), coreEntry(9, 10)])).toEqual({ lost: [1], held: [] }); // 9 may be at #1
  });
});
