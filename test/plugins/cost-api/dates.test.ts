import { describe, expect, it } from "bun:test";
import { parseUtcDay, usageWindow } from "../../../src/plugins/cost-api/dates.ts";

describe("cost-api/dates", () => {
  it("parses a UTC day strictly, years below 100 included (Date.UTC would read 0001 as 1901)", () => {
    expect(parseUtcDay("2030-02-28", "start_date")).toBe(Date.UTC(2030, 1, 28));
    expect(new Date(parseUtcDay("0001-01-01", "start_date")).toISOString()).toBe("0001-01-01T00:00:00.000Z");
    expect(usageWindow({ start_date: "0000-01-01", end_date: "0000-01-05" }, Date.now())).toEqual({ startDay: "0000-01-01", endDay: "0000-01-05" });
  });

  it("refuses a day the calendar does not have, naming the field", () => {
    for (const value of ["2030-02-30", "2029-02-29", "2030-13-01", "2030-00-10", "2030-01-32"]) {
      expect(() => parseUtcDay(value, "end_date")).toThrow(/end_date is not a calendar date/);
    }
    expect(() => parseUtcDay("2030-01-01\u0000", "end_date")).toThrow(/end_date must be a UTC day/);
  });
});
