import { describe, expect, it } from "bun:test";
import { createSignInLimits } from "../../../src/plugins/dashboard/sign-in-limits.ts";

describe("dashboard sign-in limits", () => {
  const at = () => 1_000_000;

  it("counts attempts per IPv4 address: another address has its own count", () => {
    const limits = createSignInLimits({ per_ip: 2, failures_per_email: 100 }, at);
    expect(limits.admit("198.51.100.1", "a1@example.com")).toBe(0);
    expect(limits.admit("198.51.100.1", "a2@example.com")).toBe(0);
    expect(limits.admit("198.51.100.1", "a3@example.com")).toBeGreaterThan(0);
    expect(limits.admit("198.51.100.2", "a5@example.com")).toBe(0);
  });

  it("counts an IPv6 client with its /56: stepping through its own network does not reset the count", () => {
    const limits = createSignInLimits({ per_ip: 2, failures_per_email: 100 }, at);
    expect(limits.admit("2001:db8:0:1::1", "b1@example.com")).toBe(0);
    expect(limits.admit("2001:db8:0:2::1", "b2@example.com")).toBe(0);
    expect(limits.admit("2001:db8:0:ff::9", "b3@example.com")).toBeGreaterThan(0);
    expect(limits.admit("2001:db8:0:100::1", "b4@example.com")).toBe(0);
  });
});
