import { InvalidRequestError } from "../../core/errors.ts";

const DAY = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/**
 * Epoch ms of an RFC 3339 time with its offset (2030-01-31T12:00:00Z, …+02:00, seconds optional) or of
 * a UTC day (2030-01-31 = 00:00 UTC). Every field is checked against the calendar: Date.parse rolls
 * 2030-02-30 over to March 2 and reads a time without an offset in the server's own zone.
 */
export function parseTimestamp(value: string, field: string): number {
  const parts = DAY.exec(value) ?? DATE_TIME.exec(value);
  if (!parts) {
    throw new InvalidRequestError(
      `${field} must be an RFC 3339 time with an offset (2030-01-31T12:00:00Z) or a UTC day (2030-01-31), got ${shown(value)}`,
      { param: field },
    );
  }
  const [year, month, day, hour, minute, second] = [1, 2, 3, 4, 5, 6].map((i) => Number(parts[i] ?? 0)) as [number, number, number, number, number, number];
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) {
    throw new InvalidRequestError(`${field} is not a calendar date: ${shown(value)}`, { param: field });
  }
  const offsetHours = Number(parts[10] ?? 0);
  const offsetMinutes = Number(parts[11] ?? 0);
  if (hour > 23 || minute > 59 || second > 59 || offsetHours > 23 || offsetMinutes > 59) {
    throw new InvalidRequestError(`${field} is not a valid time of day: ${shown(value)}`, { param: field });
  }
  const date = new Date(0);
  // setUTCFullYear, not Date.UTC: the latter reads years 0..99 as 1900..1999.
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, Math.floor(Number(parts[7] ?? 0) * 1000));
  const offset = (parts[9] === "-" ? -1 : 1) * (offsetHours * 60 + offsetMinutes) * 60_000;
  return date.getTime() - offset;
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** The client's value, quoted, escaped and clipped for an error message. */
function shown(value: string): string {
  return JSON.stringify(value.length > 80 ? value.slice(0, 80) + "…" : value);
}
