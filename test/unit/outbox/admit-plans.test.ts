import { describe, expect, it } from "vitest";
import { admitPlans } from "../../../durable-objects/outbox/admit";
import type { ClassifyWork } from "../../../worker/model/message";
import type { AdmitRequest } from "../../../worker/model/transport";

/** An env whose Transport DOs record each admitMany call; `down` ones throw, `full` refuses `full`'s ids. */
function fakeEnv(opts: { down?: string[]; refuse?: string[]; config?: object } = {}) {
  const calls: { transport: string; ids: string[]; reqs: AdmitRequest[] }[] = [];
  const env = {
    DELIVERY: "agents",
    SCHEDULER_CONFIG: opts.config ? JSON.stringify(opts.config) : "",
    TRANSPORT_QUEUE: {
      getByName: (transport: string) => ({
        admitMany: async (reqs: AdmitRequest[]) => {
          calls.push({ transport, ids: reqs.map((r) => r.id), reqs });
          if (opts.down?.includes(transport)) throw new Error(`${transport} is down`);
          return reqs.map((r) => ({
            admitted: !opts.refuse?.includes(r.id),
            effects: [],
            active: transport !== "slow",
          }));
        },
      }),
    },
  } as unknown as Env;
  return { env, calls };
}

const plan = (id: string, rcpts: [string, string | null][]): ClassifyWork => ({
  id,
  tenant: "t",
  createdAt: 1_700_000_000_000,
  mailFrom: "a@b.example",
  rcpts: rcpts.map(([address, transport], idx) => ({
    idx,
    address,
    transport,
    nexthop: transport === null ? null : "mx.example",
  })),
});

describe("admitPlans: a classify batch's messages admitted with one request per transport", () => {
  it("sends each transport one admitMany with every plan that uses it, in order", async () => {
    const { env, calls } = fakeEnv();
    const res = await admitPlans(env, [
      plan("m1", [
        ["a@x", "smtp"],
        ["b@y", "slow"],
      ]),
      plan("m2", [["c@x", "smtp"]]),
      plan("m3", [
        ["d@y", "slow"],
        ["e@z", null],
      ]),
    ]);
    expect(
      calls.sort((a, b) => a.transport.localeCompare(b.transport)).map(({ transport, ids }) => ({ transport, ids })),
    ).toEqual([
      { transport: "slow", ids: ["m1", "m3"] },
      { transport: "smtp", ids: ["m1", "m2"] },
    ]);
    expect(res).toEqual([
      { status: "fulfilled", value: { idxs: [0, 1], active: false } },
      { status: "fulfilled", value: { idxs: [0], active: true } },
      { status: "fulfilled", value: { idxs: [0], active: false } },
    ]);
  });

  it("fails only the plans that use a transport that failed, and reads the others' answers at their own positions", async () => {
    const { env } = fakeEnv({ down: ["broken"], refuse: ["m3"] });
    const res = await admitPlans(env, [
      plan("m1", [
        ["a@x", "broken"],
        ["b@y", "smtp"],
      ]),
      plan("m2", [["c@x", "smtp"]]),
      plan("m3", [["d@y", "smtp"]]),
      plan("m4", [["e@y", "smtp"]]),
    ]);
    expect(res.map((r) => r.status)).toEqual(["rejected", "fulfilled", "rejected", "fulfilled"]);
    expect(String((res[0] as PromiseRejectedResult).reason)).toContain("broken is down");
    expect(String((res[2] as PromiseRejectedResult).reason)).toContain("no room for message m3");
  });

  it("admits nothing for a plan with no decided recipient", async () => {
    const { env, calls } = fakeEnv();
    expect(await admitPlans(env, [plan("m1", [["a@x", null]])])).toEqual([
      { status: "fulfilled", value: { idxs: [], active: false } },
    ]);
    expect(calls).toEqual([]);
  });

  it("hands each admission the message's policy fields: campaign, bulk, and only the tags named in policy_tags", async () => {
    const { env, calls } = fakeEnv({ config: { policy_tags: ["region"] } });
    const tagged: ClassifyWork = {
      ...plan("m1", [["a@x", "smtp"]]),
      campaign: "spring",
      bulk: { topic: null },
      tags: [
        { name: "region", value: "eu" },
        { name: "campaign", value: "spring" },
        { name: "other", value: "x" },
      ],
    };
    await admitPlans(env, [tagged, plan("m2", [["b@x", "smtp"]])]);
    expect(calls[0]!.reqs.map((r) => r.fields ?? null)).toEqual([
      { jobid: "spring", bulk: true, tags: { region: "eu" } },
      null,
    ]);
  });
});
