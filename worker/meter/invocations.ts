/**
 * The meter's count of the Worker's invocations (fetch, queue, scheduled, email), each of which
 * hands on the metered env (meter.ts's meterEnv; meter.ts says what is counted, where and why).
 *
 * DESCRIPTION
 *   meterOn(env)          whether METER is "on"; every entry below hands back what it was given,
 *                        untouched and uncounted, when it is not.
 *   meterFetch(req, env)  counts a Worker fetch invocation, returns the metered env. Requests to
 *                        /relay/dev/* are the meter's own observation: neither counted nor metered.
 *   meterQueue(batch, env, run)  counts a queue-consumer invocation, a read per message (per 64 KB)
 *                        and a delete per message that ends acked (ack(), ackAll(), or neither
 *                        ack nor retry when `run` resolves); runs `run` with the metered batch/env.
 *   meterScheduled(env)  counts a scheduled invocation, returns the metered env.
 *   meterEmail(env)      counts an email invocation (Email Routing's), returns the metered env.
 */
import { settingsOf } from "../settings/settings";
import { add, reg } from "./registry";
import { bindTo, meterEnv, queueOps } from "./meter";

const DEV_PREFIX = "/relay/dev/";

/** Counts a fetch invocation of the Worker and returns the env to serve it with (see header). */
export function meterFetch(request: Request, env: Env): Env {
  if (!meterOn(env)) return env;
  const path = new URL(request.url).pathname;
  if (path.startsWith(DEV_PREFIX)) return env;
  add(reg.worker_invocations, "fetch", 1);
  return meterEnv(env);
}

/** Whether the meter counts in the runtime of `env` (METER "on"; see header). */
export function meterOn(env: object): boolean {
  return settingsOf(env).meter;
}

/** Counts a scheduled invocation and returns the metered env. */
export function meterScheduled(env: Env): Env {
  if (!meterOn(env)) return env;
  add(reg.worker_invocations, "scheduled", 1);
  return meterEnv(env);
}

/** Counts an email invocation (Email Routing's) and returns the metered env. */
export function meterEmail(env: Env): Env {
  if (!meterOn(env)) return env;
  add(reg.worker_invocations, "email", 1);
  return meterEnv(env);
}

/**
 * Counts a queue-consumer invocation and its messages' reads, runs `run` with a batch whose
 * ack/retry are tracked, then counts a delete per message that ended acked.
 */
export async function meterQueue<B extends MessageBatch<unknown>, R>(
  batch: B,
  env: Env,
  run: (batch: B, env: Env) => Promise<R>,
): Promise<R> {
  if (!meterOn(env)) return run(batch, env);
  add(reg.worker_invocations, "queue", 1);
  const q = batch.queue;
  const acked = new Set<number>();
  const retried = new Set<number>();
  let reads = 0;
  const messages = batch.messages.map((m, i) => {
    reads += queueOps(m.body);
    return wrapMessage(
      m,
      () => {
        if (!retried.has(i)) acked.add(i);
      },
      () => {
        if (!acked.has(i)) retried.add(i);
      },
    );
  });
  add(reg.queue_reads, q, reads);
  const wrapped = new Proxy(batch, {
    get(target, prop) {
      if (prop === "messages") return messages;
      if (prop === "ackAll")
        return () => {
          messages.forEach((_, i) => {
            if (!retried.has(i)) acked.add(i);
          });
          target.ackAll();
        };
      if (prop === "retryAll")
        return (o?: QueueRetryOptions) => {
          messages.forEach((_, i) => {
            if (!acked.has(i)) retried.add(i);
          });
          target.retryAll(o);
        };
      return bindTo(target, Reflect.get(target, prop, target));
    },
  });
  let ok = false;
  try {
    const r = await run(wrapped, meterEnv(env));
    ok = true;
    return r;
  } finally {
    // A message neither acked nor retried is acked when the invocation succeeds (and redelivered when it throws).
    const deletes = ok ? messages.length - retried.size : acked.size;
    add(reg.queue_deletes, q, deletes);
  }
}

function wrapMessage<M extends Message<unknown>>(m: M, onAck: () => void, onRetry: () => void): M {
  return new Proxy(m, {
    get(target, prop) {
      if (prop === "ack")
        return () => {
          onAck();
          target.ack();
        };
      if (prop === "retry")
        return (o?: QueueRetryOptions) => {
          onRetry();
          target.retry(o);
        };
      return bindTo(target, Reflect.get(target, prop, target));
    },
  });
}
