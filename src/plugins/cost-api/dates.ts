import { InvalidRequestError } from "../../core/errors.ts";

const DAY_MS = 86_400_000;
export const MAX_WINDOW_DAYS = 92;

/** "YYYY-MM-DD" of a UTC day. */
export function utcDayString(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** Parses a UTC day strictly: the format and a real calendar date (2026-02-30 is refused). */
export function parseUtcDay(value: string, field: string): number {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  if (!match) throw new InvalidRequestError(`${field} must be a UTC day written YYYY-MM-DD, got "${value}"`, { param: field });
  const [, year, month, day] = match.map(Number) as [number, number, number, number];
  // setUTCFullYear, not Date.UTC: the latter reads years 0..99 as 1900..1999 (0001-01-01 was "not a calendar date").
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  if (date.getUTCFullYear() !== year || date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day) {
    throw new InvalidRequestError(`${field} is not a calendar date: "${value}"`, { param: field });
  }
  return date.getTime();
}

/** The report window: defaults (end today, start 29 days before end), order and the 92-day cap. */
export function usageWindow(query: { start_date?: string; end_date?: string }, now: number): { startDay: string; endDay: string } {
  const end = query.end_date === undefined ? Date.UTC(...ymd(now)) : parseUtcDay(query.end_date, "end_date");
  const start = query.start_date === undefined ? end - 29 * DAY_MS : parseUtcDay(query.start_date, "start_date");
  if (start > end) throw new InvalidRequestError("start_date is after end_date", { param: "start_date" });
  const days = Math.round((end - start) / DAY_MS) + 1;
  if (days > MAX_WINDOW_DAYS) {
    throw new InvalidRequestError(`the window is ${days} days; at most ${MAX_WINDOW_DAYS} days (end_date inclusive)`, { param: "start_date" });
  }
  return { startDay: utcDayString(start), endDay: utcDayString(end) };
}

function ymd(ms: number): [number, number, number] {
  const date = new Date(ms);
  return [date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate()];
}

/** ISO 8601 with an explicit UTC offset: 2026-11-22T23:05:01.123+00:00. */
export function isoWithOffset(ms: number): string {
  return new Date(ms).toISOString().replace("Z", "+00:00");
}
