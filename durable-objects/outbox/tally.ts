/**
 * What an Outbox shard recorded since it started, for GET /metrics: outcomes by status and reply
 * class (worker/metrics/core/prom.ts replyClass). Kept in memory only: a counter that starts
 * again from zero when the object does, which Prometheus' rate() and increase() read as a
 * restart; no row is written for it.
 *
 * DESCRIPTION
 *   new OutcomeTally()    empty.
 *   count(reports)        adds the reports that applied.
 *   snapshot()            [{ status, code, enhanced, n }] (bounded: four statuses, three codes and
 *                         "none", the enhanced classes seen).
 */
import type { OutcomeReport } from "../../worker/model/message";
import { replyClass } from "../../worker/metrics/core/prom";

export class OutcomeTally {
  private readonly counts = new Map<string, number>();

  count(reports: readonly OutcomeReport[]): void {
    for (const r of reports) {
      if (r.status === "active") continue;
      const c = replyClass(r.response?.code, r.response?.enhanced);
      const key = `${r.status}|${c.code}|${c.enhanced}`;
      this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
    }
  }

  snapshot(): { status: string; code: string; enhanced: string; n: number }[] {
    return [...this.counts].map(([k, n]) => {
      const [status, code, enhanced] = k.split("|") as [string, string, string];
      return { status, code, enhanced, n };
    });
  }
}
