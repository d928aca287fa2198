/*
 * npm run bench:event-id [-- --json]
 *
 * Event ids per second: eventId (worker/webhooks/core/event-id.ts, FNV-1a 64 in two 32-bit
 * halves) against the same hash written with a BigInt per code unit (its definition, as the
 * implementation was before), over the same identities, side by side in one run. Every
 * published event's id is computed on the delivery path (two per delivered one-recipient email).
 * Prints both rates and the ratio; with --json the last line is
 *   {"ids":N,"ids_per_s":…,"bigint_ids_per_s":…,"ratio":…}.
 * Each side runs ROUNDS times alternately and the median is kept: the machine is shared.
 */
import { eventId, type EventIdentity } from "../worker/webhooks/core/event-id";
import { fnv1a64ByDefinition } from "./fnv-reference";

const IDS = 20_000;
const ROUNDS = 5;

/** The hash by its definition: a BigInt multiply per UTF-16 code unit. */
function bigintId(identity: EventIdentity): string {
  const text = [identity.emailId, identity.recipient, String(identity.attempt), identity.type]
    .map((f) => `${f.length}:${f}`)
    .join("|");
  return `evt_${identity.emailId}_${fnv1a64ByDefinition(text).toString(16).padStart(16, "0")}`;
}

const identities: EventIdentity[] = Array.from({ length: IDS }, (_, i) => ({
  emailId: `0190c0de-${(i % 10_000).toString(16).padStart(4, "0")}-4bbb-8ccc-0123456789ab`,
  recipient: `user${i}@example.test`,
  attempt: 1 + (i % 3),
  type: i % 2 === 0 ? "email.sent" : "email.delivered",
}));

function rate(f: (x: EventIdentity) => string): number {
  const t0 = performance.now();
  let n = 0;
  for (const x of identities) n += f(x).length;
  const ms = performance.now() - t0;
  if (n === 0) throw new Error("no ids");
  return (IDS * 1000) / ms;
}

for (const x of identities.slice(0, 100)) {
  if (eventId(x) !== bigintId(x)) throw new Error(`ids differ for ${JSON.stringify(x)}`);
}
const ours: number[] = [];
const big: number[] = [];
for (let r = 0; r < ROUNDS; r++) {
  ours.push(rate(eventId));
  big.push(rate(bigintId));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const [a, b] = [median(ours), median(big)];
console.log(`bench:event-id: ${IDS} event ids, median of ${ROUNDS} alternating rounds`);
console.log(`  eventId (two 32-bit halves)   ${Math.round(a).toLocaleString("en")} ids/s`);
console.log(`  BigInt per code unit          ${Math.round(b).toLocaleString("en")} ids/s`);
console.log(`  ratio: ${(a / b).toFixed(2)} (shared CPU: compare within one run only)`);
if (process.argv.includes("--json"))
  console.log(
    JSON.stringify({
      ids: IDS,
      ids_per_s: Math.round(a),
      bigint_ids_per_s: Math.round(b),
      ratio: Number((a / b).toFixed(2)),
    }),
  );
