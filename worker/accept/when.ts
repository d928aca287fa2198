/**
 * Resend's natural-language `scheduled_at`, parsed (pure: the clock is an argument).
 *
 * DESCRIPTION
 *   parseWhen(text, nowMs)  epoch ms for
 *     - "in N <unit>" and "in a|an <unit>": seconds (s, sec), minutes (min), hours (h, hr), days,
 *       weeks, singular or plural;
 *     - "now";
 *     - "[today|tomorrow|<weekday>|next <weekday>] [at] <time> [<zone>]", or "<time> [<zone>]"
 *       alone (today): time as "9am", "9:30 pm", "15:00", "noon", "midnight"; a weekday is its next
 *       occurrence (today when that time is still ahead), "next <weekday>" the one after today;
 *     - zone: UTC (the default), GMT, Z, ±HH:MM, the US abbreviations ET/EST/EDT, CT/CST/CDT,
 *       MT/MST/MDT, PT/PST/PDT (ET, CT, MT, PT follow daylight saving time), or an IANA name
 *       (Europe/Berlin);
 *   or null when the text is none of these. ISO 8601 is the caller's (limits.ts).
 *
 * INVARIANTS
 *   Wall-clock times in a zone are converted with the platform's time zone data (Intl), so a
 *   date on either side of a daylight saving change gets that day's offset.
 */

const UNIT_MS: Record<string, number> = {
  s: 1000,
  sec: 1000,
  second: 1000,
  m: 60_000,
  min: 60_000,
  minute: 60_000,
  h: 3_600_000,
  hr: 3_600_000,
  hour: 3_600_000,
  d: 86_400_000,
  day: 86_400_000,
  w: 604_800_000,
  week: 604_800_000,
};
const WEEKDAYS = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"];
const SHORT_DAYS: Record<string, number> = {
  sun: 0,
  mon: 1,
  tue: 2,
  tues: 2,
  wed: 3,
  thu: 4,
  thur: 4,
  thurs: 4,
  fri: 5,
  sat: 6,
};
const US_ZONES: Record<string, string | number> = {
  et: "America/New_York",
  ct: "America/Chicago",
  mt: "America/Denver",
  pt: "America/Los_Angeles",
  est: -300,
  edt: -240,
  cst: -360,
  cdt: -300,
  mst: -420,
  mdt: -360,
  pst: -480,
  pdt: -420,
  utc: 0,
  gmt: 0,
  z: 0,
};

/** Minutes east of UTC that `zone` has at instant `ms`. */
function zoneOffsetMin(zone: string, ms: number): number {
  const parts = new Intl.DateTimeFormat("en-US", {
    timeZone: zone,
    hourCycle: "h23",
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
  }).formatToParts(new Date(ms));
  const get = (t: string) => Number(parts.find((p) => p.type === t)?.value);
  const asUtc = Date.UTC(get("year"), get("month") - 1, get("day"), get("hour"), get("minute"), get("second"));
  return Math.round((asUtc - Math.floor(ms / 1000) * 1000) / 60_000);
}

type Zone = { fixed: number } | { iana: string };

function parseZone(raw: string | undefined): Zone | null {
  if (raw === undefined || raw === "") return { fixed: 0 };
  const z = raw.trim();
  const us = US_ZONES[z.toLowerCase()];
  if (typeof us === "number") return { fixed: us };
  if (typeof us === "string") return { iana: us };
  const off = /^([+-])(\d{1,2}):?(\d{2})?$/.exec(z);
  if (off) {
    const minutes = Number(off[2]) * 60 + Number(off[3] ?? 0);
    return minutes <= 14 * 60 ? { fixed: (off[1] === "-" ? -1 : 1) * minutes } : null;
  }
  if (/^[A-Za-z]+\/[A-Za-z_+\-/]+$/.test(z)) {
    try {
      new Intl.DateTimeFormat("en-US", { timeZone: z });
      return { iana: z };
    } catch {
      return null;
    }
  }
  return null;
}

/** Offset (minutes east of UTC) of `zone` at the wall-clock time `wallMs` (its fields read as UTC). */
function offsetAtWall(zone: Zone, wallMs: number): number {
  if ("fixed" in zone) return zone.fixed;
  // The instant is wall − offset, and the offset depends on the instant: two rounds settle it.
  let off = zoneOffsetMin(zone.iana, wallMs);
  off = zoneOffsetMin(zone.iana, wallMs - off * 60_000);
  return off;
}

function parseTime(raw: string): { h: number; m: number } | null {
  const t = raw.trim().toLowerCase();
  if (t === "noon") return { h: 12, m: 0 };
  if (t === "midnight") return { h: 0, m: 0 };
  const ampm = /^(\d{1,2})(?::(\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)$/.exec(t);
  if (ampm) {
    const h = Number(ampm[1]);
    const m = Number(ampm[2] ?? 0);
    if (h < 1 || h > 12 || m > 59) return null;
    return { h: (h % 12) + (ampm[3]!.startsWith("p") ? 12 : 0), m };
  }
  const h24 = /^(\d{1,2}):(\d{2})$/.exec(t);
  if (h24) {
    const h = Number(h24[1]);
    const m = Number(h24[2]);
    return h <= 23 && m <= 59 ? { h, m } : null;
  }
  return null;
}

function weekdayOf(word: string): number | null {
  const w = word.toLowerCase();
  const i = WEEKDAYS.indexOf(w);
  return i >= 0 ? i : (SHORT_DAYS[w] ?? null);
}

const RELATIVE = /^in\s+(\d{1,6}|an?)\s+(s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|w|weeks?)$/;
// [day] [at] time [zone], written in three parts: the day, the time, the zone (a name, an offset or z).
const ABSOLUTE = new RegExp(
  /^(?:(today|tomorrow|(?:next\s+)?[a-z]+)\s+)?(?:at\s+)?/.source +
    /(noon|midnight|\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)|\d{1,2}:\d{2})/.source +
    /(?:\s+([a-z]+(?:\/[a-z_+\-/]+)?|[+-]\d{1,2}:?\d{2}|z))?$/.source,
  "i",
);

/** See the header. */
export function parseWhen(text: string, nowMs: number): number | null {
  const t = text.trim().toLowerCase().replace(/\s+/g, " ");
  if (t === "now") return nowMs;
  const rel = RELATIVE.exec(t);
  if (rel) {
    const n = rel[1] === "a" || rel[1] === "an" ? 1 : Number(rel[1]);
    const word = rel[2]!;
    const ms = UNIT_MS[word] ?? UNIT_MS[word.replace(/s$/, "")];
    return ms === undefined ? null : nowMs + n * ms;
  }
  const abs = ABSOLUTE.exec(text.trim().replace(/\s+/g, " "));
  if (!abs) return null;
  const time = parseTime(abs[2]!);
  const zone = parseZone(abs[3]);
  if (time === null || zone === null) return null;
  // Today's date in the zone, then the day asked for.
  const nowWall = nowMs + ("fixed" in zone ? zone.fixed : zoneOffsetMin(zone.iana, nowMs)) * 60_000;
  const today = new Date(nowWall);
  const dayWord = (abs[1] ?? "today").toLowerCase();
  let addDays: number;
  if (dayWord === "today") addDays = 0;
  else if (dayWord === "tomorrow") addDays = 1;
  else {
    const next = dayWord.startsWith("next ");
    const wd = weekdayOf(next ? dayWord.slice(5) : dayWord);
    if (wd === null) return null;
    addDays = (wd - today.getUTCDay() + 7) % 7;
    if (next && addDays === 0) addDays = 7;
  }
  const wallMs = Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() + addDays, time.h, time.m);
  let at = wallMs - offsetAtWall(zone, wallMs) * 60_000;
  // A bare weekday whose time has passed today means next week's.
  if (abs[1] !== undefined && !/^(today|tomorrow|next )/.test(dayWord) && at <= nowMs) at += 7 * 86_400_000;
  return at;
}
