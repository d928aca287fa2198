/**
 * CPU time of a set of processes, read from Linux /proc, for comparing what each side of a
 * benchmark spends: the relay's wrangler dev (its process group: npx, wrangler's Node process,
 * workerd) or a private Postfix (the master's session: master, smtpd, qmgr, smtp, cleanup, …).
 *
 * DESCRIPTION
 *   cpuSample(match)  the CPU used so far by every live process that `match` selects (by its
 *       /proc/<pid>/stat fields), in ms, in all and by command name: user + system time, plus the
 *       time of its exited children that it has waited for (cutime + cstime), so a short-lived
 *       Postfix process that ended is still counted, in its master.
 *   byGroup(pgid), bySession(sid)  matchers.
 *   cpuDelta(before, after)  what was spent in between, in all and by command name.
 *
 * INVARIANTS
 *   Linux only; reads nothing but /proc. A process that exits between two samples while its
 *   parent is outside the set loses its time (neither wrangler's group nor Postfix's session has
 *   such processes).
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

/** The fields of /proc/<pid>/stat used here. */
export interface ProcStat {
  pid: number;
  comm: string;
  ppid: number;
  pgrp: number;
  session: number;
  ticks: number;
}

/** CPU used so far, ms. */
export interface CpuSample {
  totalMs: number;
  byCommand: Record<string, number>;
}

let tickMs: number | null = null;

/** Milliseconds per clock tick (getconf CLK_TCK, usually 100 per second). */
function msPerTick(): number {
  if (tickMs === null) {
    const hz = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
    tickMs = 1000 / (Number.isFinite(hz) && hz > 0 ? hz : 100);
  }
  return tickMs;
}

/** Parses /proc/<pid>/stat (the command may hold spaces and parentheses). */
export function parseStat(text: string): ProcStat | null {
  const open = text.indexOf("(");
  const close = text.lastIndexOf(")");
  if (open < 0 || close < open) return null;
  const f = text.slice(close + 2).split(" ");
  // After ")": state(0) ppid(1) pgrp(2) session(3) … utime(11) stime(12) cutime(13) cstime(14).
  const n = (i: number) => Number(f[i]);
  const pid = Number(text.slice(0, open).trim());
  return {
    pid,
    comm: text.slice(open + 1, close),
    ppid: n(1),
    pgrp: n(2),
    session: n(3),
    ticks: n(11) + n(12) + n(13) + n(14),
  };
}

/** Selects processes by their group. */
export const byGroup = (pgid: number) => (p: ProcStat) => p.pgrp === pgid;
/** Selects processes by their session. */
export const bySession = (sid: number) => (p: ProcStat) => p.session === sid;

/** The CPU used so far by the processes `match` selects (see the header). */
export function cpuSample(match: (p: ProcStat) => boolean): CpuSample {
  const out: CpuSample = { totalMs: 0, byCommand: {} };
  const ms = msPerTick();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let p: ProcStat | null = null;
    try {
      p = parseStat(readFileSync(`/proc/${name}/stat`, "utf8"));
    } catch {
      continue; // exited meanwhile
    }
    if (!p || !match(p)) continue;
    out.totalMs += p.ticks * ms;
    out.byCommand[p.comm] = (out.byCommand[p.comm] ?? 0) + p.ticks * ms;
  }
  return out;
}

/** What was spent between two samples. */
export function cpuDelta(before: CpuSample, after: CpuSample): CpuSample {
  const byCommand: Record<string, number> = {};
  for (const k of new Set([...Object.keys(before.byCommand), ...Object.keys(after.byCommand)])) {
    const d = (after.byCommand[k] ?? 0) - (before.byCommand[k] ?? 0);
    if (d !== 0) byCommand[k] = d;
  }
  return { totalMs: after.totalMs - before.totalMs, byCommand };
}
