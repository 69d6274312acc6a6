import { describe, expect, it } from "bun:test";
import { InvalidRequestError } from "../../../src/core/errors.ts";
import { parseTimestamp } from "../../../src/plugins/admin/timestamp.ts";

function refusal(value: string): InvalidRequestError {
  try {
    parseTimestamp(value, "expires_at");
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidRequestError);
    return error as InvalidRequestError;
  }
  throw new Error(`expected ${JSON.stringify(value)} to be refused`);
}

describe("admin/timestamp", () => {
  it("reads RFC 3339 times with their offset and UTC days to the exact instant", () => {
    expect(parseTimestamp("2030-01-31", "f")).toBe(Date.UTC(2030, 0, 31));
    expect(parseTimestamp("2030-01-31T12:00:00Z", "f")).toBe(Date.UTC(2030, 0, 31, 12));
    expect(parseTimestamp("2030-01-31t12:00z", "f")).toBe(Date.UTC(2030, 0, 31, 12));
    expect(parseTimestamp("2030-01-31 12:00:00.123456789+01:30", "f")).toBe(Date.UTC(2030, 0, 31, 10, 30, 0, 123));
    expect(parseTimestamp("2030-12-31T23:30:00-01:00", "f")).toBe(Date.UTC(2031, 0, 1, 0, 30));
    expect(parseTimestamp("2032-02-29", "f")).toBe(Date.UTC(2032, 1, 29));
    expect(parseTimestamp("2000-02-29", "f")).toBe(Date.UTC(2000, 1, 29));
    // Years below 100 are themselves, not 1900 + year as Date.UTC would read them.
    expect(new Date(parseTimestamp("0050-06-01", "f")).toISOString()).toBe("0050-06-01T00:00:00.000Z");
  });

  it("refuses a day the calendar does not have (Date.parse rolls 2030-02-30 over to March 2)", () => {
    expect(Date.parse("2030-02-30")).toBe(Date.UTC(2030, 2, 2)); // the rollover this module exists to refuse
    for (const value of ["2030-02-30", "2029-02-29", "1900-02-29", "2030-04-31", "2030-13-01", "2030-00-01", "2030-01-00", "2030-01-32T00:00:00Z"]) {
      const error = refusal(value);
      expect(error.param).toBe("expires_at");
      expect(error.message).toContain("is not a calendar date");
    }
  });

  it("refuses a time of day or an offset out of range, a leap second, and a time without an offset", () => {
    for (const value of ["2030-01-01T24:00:00Z", "2030-01-01T00:60:00Z", "2030-06-30T23:59:60Z", "2030-01-01T00:00:00+24:00", "2030-01-01T00:00:00+01:60"]) {
      expect(refusal(value).message).toContain("is not a valid time of day");
    }
    for (const value of ["2030-01-01T00:00:00", "2030-01-01T00:00Z0", "+275760-09-13T00:00:00Z", "30-01-01", "2030-1-1", "tomorrow", "", " 2030-01-01", "2030-01-01\u0000"]) {
      expect(refusal(value).message).toContain("must be an RFC 3339 time with an offset");
    }
  });

  it("quotes and clips the client's value in the message", () => {
    const message = refusal("x".repeat(1000) + "\u0000").message;
    expect(message.length).toBeLessThan(250);
    expect(refusal("a\u0000b").message).toContain('"a\\u0000b"');
  });
});
