/**
 * Submission load from a process of its own: closed-loop POST /emails workers, so that the load
 * generator's HTTP client does not share an event loop with the SMTP sink being measured.
 *
 * DESCRIPTION
 *   startPostLoops({ url, key, workers, domain, tag })
 *       forks this file (under the same tsx loader) and starts `workers` loops, each sending one
 *       one-recipient message (load<k>-<tag>@<domain>) after the other. A 429 answer
 *       (back-pressure, worker/api/http/accept-gate.ts) is counted as refused and the loop waits its
 *       Retry-After before its next request, as a client would; any other failure is counted as
 *       failed (the loop waits 100 ms). stop() ends the loops and resolves with
 *       { accepted, refused, failed, ms }.
 *
 * WHY
 *   A sink in production does not share a process with the senders: the loops' HTTP client
 *   should not delay the sink's SMTP replies. Moving them here did not explain the stall it was
 *   suspected of (bench:backlog, 64 loops, mail classified through the queue: 0.18 of the empty
 *   queue's rate in the bench's process, 0.104 here, one run each); classifying through a queue
 *   the flood filled did (worker/api/http/accept-gate.ts, wrangler.toml CLASSIFY_AT_ACCEPT_MAX_RCPTS).
 *
 * ERRORS
 *   The child's own failure (it exits) rejects stop().
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { devFetch } from "../../scripts/lib/dev-server";

/** Options of startPostLoops. */
export interface PostLoopOptions {
  url: string;
  key: string;
  workers: number;
  domain: string;
  tag: string;
}

/** What the loops did. */
export interface PostLoopResult {
  accepted: number;
  refused: number;
  failed: number;
  ms: number;
}

type ToChild = { kind: "start"; opts: PostLoopOptions } | { kind: "stop" };
type FromChild = { kind: "started" } | { kind: "done"; result: PostLoopResult };

/** Starts the loops in a child process; resolves once they run. */
export async function startPostLoops(opts: PostLoopOptions): Promise<{ stop: () => Promise<PostLoopResult> }> {
  const child = fork(fileURLToPath(import.meta.url), ["--post-loops-child"], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const done = new Promise<PostLoopResult>((resolve, reject) => {
    child.on("message", (m: FromChild) => {
      if (m.kind === "done") resolve(m.result);
    });
    child.once("exit", (code) => reject(new Error(`post loops exited with ${code} before reporting`)));
  });
  done.catch(() => undefined); // observed by stop()
  await new Promise<void>((resolve, reject) => {
    child.on("message", (m: FromChild) => {
      if (m.kind === "started") resolve();
    });
    child.once("exit", (code) => reject(new Error(`post loops exited with ${code}`)));
    child.send({ kind: "start", opts } satisfies ToChild);
  });
  return {
    stop: async () => {
      child.send({ kind: "stop" } satisfies ToChild);
      try {
        return await done;
      } finally {
        child.kill();
      }
    },
  };
}

/** The child: runs the loops until told to stop, then reports. */
async function runChild(opts: PostLoopOptions, stopped: () => boolean): Promise<PostLoopResult> {
  const t0 = Date.now();
  const r: PostLoopResult = { accepted: 0, refused: 0, failed: 0, ms: 0 };
  let seq = 0;
  const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));
  await Promise.all(
    Array.from({ length: opts.workers }, async () => {
      while (!stopped()) {
        const k = seq++;
        const subject = `load ${k}`;
        try {
          const res = await devFetch(
            `${opts.url}/emails`,
            {
              method: "POST",
              headers: { authorization: `Bearer ${opts.key}`, "content-type": "application/json" },
              body: JSON.stringify({
                from: "Load <load@cohort.test>",
                to: [`load${k}-${opts.tag}@${opts.domain}`],
                subject,
                text: `${subject}\nThe quick brown fox jumps over the lazy dog.\n`,
              }),
            },
            undefined,
            false,
          ); // a 429 is counted here, then waited out
          await res.arrayBuffer();
          if (res.status === 200) r.accepted++;
          else if (res.status === 429) {
            r.refused++;
            await sleep(1000 * Math.max(0, Number(res.headers.get("retry-after") ?? 1) || 1));
          } else {
            r.failed++;
            await sleep(100);
          }
        } catch {
          r.failed++;
          await sleep(100);
        }
      }
    }),
  );
  r.ms = Date.now() - t0;
  return r;
}

if (process.argv.includes("--post-loops-child") && process.send !== undefined) {
  let stop = false;
  process.on("message", (m: ToChild) => {
    if (m.kind === "stop") {
      stop = true;
      return;
    }
    const work = runChild(m.opts, () => stop);
    process.send!({ kind: "started" } satisfies FromChild);
    void work.then((result) => {
      process.send!({ kind: "done", result } satisfies FromChild, () => process.exit(0));
    });
  });
}
