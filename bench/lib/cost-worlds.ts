/**
 * Where a bench:cost server delivers: the world its cases run in.
 *
 * DESCRIPTION
 *   startWorld(kind, mixMessages)  answers { vars, catcher?, mix?, warm(s), lookups?, close() }:
 *     sink   the scripted SMTP sink setup() starts as SMARTHOST (no vars, no catcher of its own);
 *            warm: ten messages to warm.example, delivered;
 *     mx     MX hosts through the delivery tests' DoH fixture (mx-world.ts): its vars and its sink
 *            as the catcher; warm: ten messages to each of its two domains (the enforce domain's
 *            MTA-STS policy discovered and cached); lookups: DoH queries and policy fetches so far;
 *     mix    a world of 1,000 domains by MX (bench/world/cost-mix.ts), `mixMessages` messages of
 *            its arrival stream; warm: ten messages to its big domains.
 */
import type { Catcher } from "../../scripts/lib/smtp-catcher";
import { startMixCostWorld, type MixCostWorld } from "../world/cost-mix";
import { email, sendAll } from "./cost-cases";
import { api, waitDelivered, type Setup } from "./cost-server";
import { startMxWorld } from "./mx-world";

export interface World {
  vars: Record<string, string>;
  catcher?: Catcher;
  mix?: MixCostWorld;
  warm(s: Setup): Promise<void>;
  lookups?(): Promise<{ queries: Record<string, number>; fetches: number }>;
  close(): Promise<void>;
}

async function warmTo(s: Setup, domains: string[]): Promise<void> {
  for (const [k, d] of domains.entries()) {
    await sendAll(s, 10, (i) => ({ path: "/emails", body: email(i, [`warm${i}@${d}`]) }));
    await waitDelivered(s, 10 * (k + 1), `warm-up to ${d}`);
  }
}

/** See the header. */
export async function startWorld(kind: "sink" | "mx" | "mix", mixMessages: number): Promise<World> {
  if (kind === "mx") {
    const w = await startMxWorld();
    return {
      vars: w.vars,
      catcher: w.catcher,
      warm: (s) => warmTo(s, ["plain.bench", "sts-enforce.test"]),
      lookups: () => w.lookups(),
      close: () => w.close(),
    };
  }
  if (kind === "mix") {
    const mix = await startMixCostWorld(mixMessages);
    return {
      vars: mix.vars,
      mix,
      warm: (s) => mix.warm((path, body) => api(s.server, "POST", path, body)),
      close: () => mix.close(),
    };
  }
  return { vars: {}, warm: (s) => warmTo(s, ["warm.example"]), close: async () => undefined };
}
