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
 *   verifySender(s, world)  makes the domain the cases send from a verified sending domain of the
 *     bench tenant, its records published where the server resolves (production sends only from
 *     verified domains: DKIM-signed, and without the compliance warnings an unverified sender's
 *     summary keeps). The mx world's resolver publishes nothing: its cases send unverified.
 */
import type { Catcher } from "../../scripts/lib/smtp-catcher";
import { startMixCostWorld, type MixCostWorld } from "../world/cost-mix";
import { email, SENDER_DOMAIN, sendAll } from "./cost-cases";
import { MIX_FROM } from "../world/sides";
import { api, waitDelivered, type Setup } from "./cost-server";
import { startMxWorld } from "./mx-world";

export interface World {
  vars: Record<string, string>;
  /** The domain its mail is from, and where to publish that domain's records (none: sent unverified). */
  sender?: {
    domain: string;
    publish?(s: Setup, records: readonly { name: string; type: string; value: string }[]): void;
  };
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
      sender: {
        domain: MIX_FROM.split("@")[1]!,
        publish: (_s, records) => mix.publish(MIX_FROM.split("@")[1]!, records),
      },
      mix,
      warm: (s) => mix.warm((path, body) => api(s.server, "POST", path, body)),
      close: () => mix.close(),
    };
  }
  return {
    vars: {},
    sender: { domain: SENDER_DOMAIN, publish: (s, records) => s.doh.publish(SENDER_DOMAIN, records) },
    warm: (s) => warmTo(s, ["warm.example"]),
    close: async () => undefined,
  };
}

/** See the header. */
export async function verifySender(s: Setup, world: World): Promise<void> {
  const sender = world.sender;
  if (!sender?.publish) return;
  const d = await api<{ id: string; records: { name: string; type: string; value: string }[] }>(
    s.server,
    "POST",
    "/domains",
    { name: sender.domain },
  );
  sender.publish(s, d.records);
  const v = await api<{ status?: string }>(s.server, "POST", `/domains/${d.id}/verify`);
  const got = await api<{ status: string }>(s.server, "GET", `/domains/${d.id}`);
  if (got.status !== "verified")
    throw new Error(`the sender's domain ${sender.domain} is ${got.status} (${JSON.stringify(v)})`);
}
