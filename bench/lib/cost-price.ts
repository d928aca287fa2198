/**
 * The whole bill of one message on Cloudflare, priced from measured figures: one function any
 * benchmark case can call (bench:cost's cases, bench:mix's world).
 *
 * DESCRIPTION
 *   PRICES                   list prices, $ per million operations (../shared/design/cost.md).
 *   priceOps(perMessage)     $ per million messages of the operations counted per message
 *                            (the figure bench:cost printed before the whole bill: to delivery).
 *   allIn(input)             the all-in figure and every part of its sum, $ per million messages:
 *     operations_to_delivery   what the case caused until its mail was delivered;
 *     operations_after_delivery  what came after, over the message's whole life: retention's
 *                              deletes (billed as rows written), the sweepers' alarms, forgetting;
 *     do_duration              each object's billed active wall-clock time at 128 MB
 *                              ($12.50 per million GB-s);
 *     storage_d1, storage_do   bytes held per message, for as long as each store holds them
 *                              (D1 and the Outbox: MESSAGE_RETENTION_DAYS; the Transport DO: its
 *                              admission records' TTL), at $0.75 and $0.20 per GB-month;
 *     workers_cpu              CPU ms per message at $0.02 per million CPU-ms.
 *   Operations include messages sent through Email Service (email_sends, $0.35 per 1,000).
 *
 * INVARIANTS
 *   Pure: figures in, dollars out; usd_per_million_all_in is the sum of the parts as printed
 *   (each rounded to the cent, the sum of the rounded parts).
 */

/** $ per million operations (list prices, free allowances ignored). */
export const PRICES = {
  worker_invocations: 0.3,
  do_requests: 0.15,
  rows_written: 1.0,
  rows_read: 0.001,
  queue_ops: 0.4,
  r2_class_a: 4.5,
  r2_class_b: 0.36,
  email_sends: 350,
} as const;

/** $ per million GB-s of Durable Object duration, and the memory an object is billed at. */
export const DO_GB_S = 12.5;
export const DO_GB = 0.128;
/** $ per GB-month of D1 and Durable Object SQLite storage; a month of 30.44 days. */
export const D1_GB_MONTH = 0.75;
export const DO_GB_MONTH = 0.2;
export const MONTH_DAYS = 365.25 / 12;
/** $ per million Workers CPU-ms. */
export const CPU_MS = 0.02;

type PerMessage = Partial<Record<keyof typeof PRICES, number>>;

const cents = (n: number) => Math.round(n * 100) / 100;

/** $ per million messages of the operations counted per message. */
export function priceOps(per: PerMessage): number {
  let usd = 0;
  for (const [k, p] of Object.entries(PRICES)) usd += (per[k as keyof typeof PRICES] ?? 0) * p;
  return cents(usd);
}

/** What allIn needs, per message. */
export interface AllInInput {
  /** Operations per message until delivery, and over the whole life (delivery to purge included). */
  toDelivery: PerMessage;
  wholeLife: PerMessage;
  /** Billed active ms per message, by DO class. */
  activeMs: Record<string, number>;
  /** Bytes held per message in D1 and in each DO class. */
  bytes: { d1: number; do: Record<string, number> };
  /** Days each store holds a message's bytes: D1 and Outbox (retention), TransportQueue (its TTL); others default to `retentionDays`. */
  retentionDays: number;
  holdDays?: Record<string, number>;
  /** Workers CPU ms per message. */
  cpuMs: number;
}

/** The parts of the all-in figure, $ per million messages. */
export interface AllIn {
  usd_per_million_all_in: number;
  parts: {
    operations_to_delivery: number;
    operations_after_delivery: number;
    do_duration: number;
    storage_d1: number;
    storage_do: number;
    workers_cpu: number;
  };
}

/** The whole bill per million messages, and each part (see the header). */
export function allIn(x: AllInInput): AllIn {
  const toDelivery = priceOps(x.toDelivery);
  const after = cents(priceOps(x.wholeLife) - toDelivery);
  const activeS = Object.values(x.activeMs).reduce((a, b) => a + b, 0) / 1000;
  const duration = cents(activeS * DO_GB * DO_GB_S);
  // bytes × 10^6 messages / 10^9 bytes per GB × $ per GB-month × months held
  const months = (days: number) => days / MONTH_DAYS;
  const d1 = cents(x.bytes.d1 * 1e-3 * D1_GB_MONTH * months(x.retentionDays));
  const held = (cls: string, b: number) =>
    Math.max(0, b) * 1e-3 * DO_GB_MONTH * months(x.holdDays?.[cls] ?? x.retentionDays);
  const dos = cents(Object.entries(x.bytes.do).reduce((s, [cls, b]) => s + held(cls, b), 0));
  const cpu = cents(x.cpuMs * CPU_MS);
  const parts = {
    operations_to_delivery: toDelivery,
    operations_after_delivery: Math.max(0, after),
    do_duration: duration,
    storage_d1: Math.max(0, d1),
    storage_do: dos,
    workers_cpu: cpu,
  };
  return { usd_per_million_all_in: cents(Object.values(parts).reduce((a, b) => a + b, 0)), parts };
}
