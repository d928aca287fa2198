import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseWhen } from "../../../worker/accept/when";
import { parseScheduledAt } from "../../../worker/accept/limits";

const NOW = Date.parse("2026-11-23T10:00:00Z"); // a Monday
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

describe("Resend's natural-language scheduled_at", () => {
  it.each([
    ["in 1 min", "2026-11-23T10:01:00.000Z"],
    ["in 10 minutes", "2026-11-23T10:10:00.000Z"],
    ["in an hour", "2026-11-23T11:00:00.000Z"],
    ["in 3 days", "2026-11-26T10:00:00.000Z"],
    ["in 2 weeks", "2026-12-07T10:00:00.000Z"],
    ["in 30 seconds", "2026-11-23T10:00:30.000Z"],
    ["in 5 s", "2026-11-23T10:00:05.000Z"],
    ["in 2 hrs", "2026-11-23T12:00:00.000Z"],
    ["in 15 mins", "2026-11-23T10:15:00.000Z"],
    ["now", "2026-11-23T10:00:00.000Z"],
    ["tomorrow at 9am", "2026-11-24T09:00:00.000Z"],
    ["Tomorrow at 9 AM", "2026-11-24T09:00:00.000Z"],
    ["tomorrow at 9am ET", "2026-11-24T14:00:00.000Z"],
    ["Friday at 3pm ET", "2026-11-27T20:00:00.000Z"],
    ["friday 3pm pt", "2026-11-27T23:00:00.000Z"],
    ["today at 11:30", "2026-11-23T11:30:00.000Z"],
    ["monday at 11am", "2026-11-23T11:00:00.000Z"],
    ["Monday at 9am", "2026-11-30T09:00:00.000Z"],
    ["next monday at 11am", "2026-11-30T11:00:00.000Z"],
    ["9pm PST", "2026-11-24T05:00:00.000Z"],
    ["tomorrow at noon", "2026-11-24T12:00:00.000Z"],
    ["tomorrow at midnight", "2026-11-24T00:00:00.000Z"],
    ["tomorrow at 9am +02:00", "2026-11-24T07:00:00.000Z"],
    ["tomorrow at 9am Europe/Berlin", "2026-11-24T08:00:00.000Z"],
    ["wed at 18:45 UTC", "2026-11-25T18:45:00.000Z"],
  ])("%s → %s (now: Monday 2026-11-23 10:00 UTC)", (text, want) => {
    expect(iso(parseWhen(text, NOW))).toBe(want);
  });

  it("follows daylight saving time: 9am Eastern is 13:00 UTC on the Sunday DST begins, 14:00 the day before", () => {
    const sat = Date.parse("2026-03-07T12:00:00Z");
    expect(iso(parseWhen("tomorrow at 9am ET", sat))).toBe("2026-03-08T13:00:00.000Z");
    expect(iso(parseWhen("today at 9pm ET", sat))).toBe("2026-03-08T02:00:00.000Z");
  });

  it.each([
    "tomorrow",
    "yesterday at 9am",
    "at 25:00",
    "tomorrow at 13pm",
    "in -1 days",
    "whenever",
    "Friday at 3pm XYZ",
    "in 1 fortnight",
    "Funday at 9am",
  ])("%s is not understood (null)", (text) => {
    expect(parseWhen(text, NOW)).toBeNull();
  });

  it('property: "in N minutes" is exactly N minutes on, whatever the clock', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 99_999 }), fc.integer({ min: 0, max: 4_000_000_000_000 }), (n, now) => {
        expect(parseWhen(`in ${n} minutes`, now)).toBe(now + n * 60_000);
      }),
    );
  });

  it("property: a day-and-time is always ahead of now and within 8 days", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1_700_000_000_000, max: 1_900_000_000_000 }),
        fc.constantFrom(
          "monday",
          "tuesday",
          "wednesday",
          "thursday",
          "friday",
          "saturday",
          "sunday",
          "next friday",
          "tomorrow",
        ),
        fc.integer({ min: 1, max: 12 }),
        fc.constantFrom("am", "pm"),
        fc.constantFrom("", " ET", " PT", " UTC", " Europe/Berlin", " +05:30"),
        (now, day, h, ap, zone) => {
          const at = parseWhen(`${day} at ${h}${ap}${zone}`, now);
          expect(at).not.toBeNull();
          expect(at!).toBeGreaterThan(now - 86_400_000); // "tomorrow" in a zone far from UTC may still be today in UTC
          expect(at!).toBeLessThan(now + 8 * 86_400_000 + 86_400_000);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("the API takes them, and still refuses what it cannot read with a 422 naming the forms", () => {
    expect(parseScheduledAt("tomorrow at 9am", NOW)).toBe(Date.parse("2026-11-24T09:00:00Z"));
    expect(parseScheduledAt("2026-11-24T09:00:00Z", NOW)).toBe(Date.parse("2026-11-24T09:00:00Z"));
    expect(() => parseScheduledAt("tomorrow-ish", NOW)).toThrow(/tomorrow at 9am/);
    expect(() => parseScheduledAt("in 31 days", NOW)).toThrow(/30 days/);
    expect(parseScheduledAt("now", NOW)).toBe(NOW);
    expect(parseScheduledAt(new Date(NOW - 59_000).toISOString(), NOW)).toBe(NOW - 59_000);
    expect(() => parseScheduledAt(new Date(NOW - 61_000).toISOString(), NOW)).toThrow(/is in the past/);
  });
});
