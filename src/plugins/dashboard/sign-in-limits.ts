import { IPV6_CLIENT_PREFIX, addressGroup } from "../../core/client-ip.ts";

/** The window of the sign-in limits. */
export const SIGN_IN_WINDOW_MS = 15 * 60_000;

/**
 * Sign-in attempts per client address (an IPv6 one with its /56, which one client can send from) and failed ones
 * per email, in fixed 15-minute windows, in this process (several instances each count their own:
 * docs/dashboard.md). The maps are dropped whole at each window's end, so a flood of addresses or emails cannot
 * grow them past one window's traffic.
 */
export function createSignInLimits(limits: { per_ip: number; failures_per_email: number }, now: () => number) {
  let window = -1;
  let attempts = new Map<string, number>();
  let failures = new Map<string, number>();

  function roll(): number {
    const current = Math.floor(now() / SIGN_IN_WINDOW_MS);
    if (current !== window) {
      window = current;
      attempts = new Map();
      failures = new Map();
    }
    return current;
  }

  return {
    /** Counts an attempt from `ip` for `email`; the seconds to wait when either is over its limit, else 0. */
    admit(ip: string, email: string): number {
      const current = roll();
      const client = addressGroup(ip, IPV6_CLIENT_PREFIX);
      const fromIp = (attempts.get(client) ?? 0) + 1;
      attempts.set(client, fromIp);
      if (fromIp > limits.per_ip || (failures.get(email) ?? 0) >= limits.failures_per_email) {
        return Math.ceil(((current + 1) * SIGN_IN_WINDOW_MS - now()) / 1000);
      }
      return 0;
    },
    failed(email: string): void {
      roll();
      failures.set(email, (failures.get(email) ?? 0) + 1);
    },
  };
}
