import type { PrimaryHost, WorkerLink } from "../../core/workers.ts";
import type { DashboardConfig } from "./schema.ts";
import { createSignInLimits } from "./sign-in-limits.ts";

/** Whose sign-ins a limit counts: account users (email + password) or operators (the admin token). */
export type SignInScope = "users" | "operators";

/** The dashboard's counters that hold for the whole host: with several workers they live in the primary. */
export interface DashboardCounters {
  /** Counts a sign-in attempt; the seconds to wait when over a limit, else 0 (sign-in-limits.ts). */
  admitSignIn(scope: SignInScope, ip: string, email: string): Promise<number>;
  failedSignIn(scope: SignInScope, email: string): void;
  /** Takes one of the route proofs' hourly slots (all accounts together); false when this hour's are taken. */
  takeRouteProofSlot(): Promise<boolean>;
}

type CounterCall =
  | { op: "admit"; scope: SignInScope; ip: string; email: string }
  | { op: "failed"; scope: SignInScope; email: string }
  | { op: "route-proof" };

const TOPIC = "dashboard.counters";
/** The primary did not answer: refuse the sign-in for this long rather than count nothing (fail closed). */
const UNANSWERED_WAIT_S = 5;

/** The counters of one process: a gateway of one process uses them directly, the primary of several serves them. */
function localCounters(config: DashboardConfig, now: () => number) {
  const signIn = { users: createSignInLimits(config.sign_in_limits, now), operators: createSignInLimits(config.sign_in_limits, now) };
  let hour = -1;
  let startedThisHour = 0;
  return {
    answer(call: CounterCall): number | boolean | null {
      if (call.op === "admit") return signIn[call.scope].admit(call.ip, call.email);
      if (call.op === "failed") {
        signIn[call.scope].failed(call.email);
        return null;
      }
      const current = Math.floor(now() / 3_600_000);
      if (current !== hour) {
        hour = current;
        startedThisHour = 0;
      }
      if (startedThisHour >= config.route_proof.per_hour) return false;
      startedThisHour++;
      return true;
    },
  };
}

/** This process's view of the counters: local, or calls to the primary when it is one of several workers. */
export function createCounters(config: DashboardConfig, now: () => number, workers: WorkerLink | null): DashboardCounters {
  const ask: (call: CounterCall) => Promise<unknown> = workers
    ? (call) => workers.call(TOPIC, call)
    : ((local) => async (call: CounterCall) => local.answer(call))(localCounters(config, now));
  return {
    admitSignIn: (scope, ip, email) => ask({ op: "admit", scope, ip, email }).then(Number, () => UNANSWERED_WAIT_S),
    failedSignIn(scope, email) {
      ask({ op: "failed", scope, email }).catch(() => {});
    },
    takeRouteProofSlot: () => ask({ op: "route-proof" }).then(Boolean, () => false),
  };
}

/** The primary's part: one set of counters for every worker. */
export function serveCounters(config: DashboardConfig, host: PrimaryHost): void {
  const local = localCounters(config, host.now);
  host.serve(TOPIC, (call) => local.answer(call as CounterCall));
}
