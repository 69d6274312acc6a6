import * as coreErrors from "../../core/errors.ts";
import type { Outcome } from "../../core/context.ts";
import { CREDIT_KINDS, TAKE_BACK_KINDS } from "../storage/repository.ts";

/**
 * Bounded label values: every value a label can take comes from the code or the configuration (catalog ids,
 * provider and deployment names, the error codes below); anything else is `other`. A made-up model name, a
 * scanner's path or an upstream's own error code never becomes a label value (LiteLLM's leak).
 */
export const OTHER = "other";

/** The codes of the core's error classes (core/errors.ts), read from the classes themselves so they stay in step. */
function coreCodes(): string[] {
  const codes: string[] = [];
  for (const value of Object.values(coreErrors)) {
    if (typeof value !== "function" || !(value.prototype instanceof coreErrors.GatewayError)) continue;
    try {
      codes.push((new (value as new (message: string) => coreErrors.GatewayError)("")).code);
    } catch {
      // A class that needs other arguments (UpstreamHttpError): its codes are listed below.
    }
  }
  return codes;
}

/**
 * Error codes that may be labels: the core's, the plugins' own (catalog, budget plans) and the upstream failures the
 * attempt loop maps (core/attempts.ts upstreamFailure). An upstream's own code passed on to the client is `other`.
 */
export const KNOWN_CODES: ReadonlySet<string> = new Set([
  ...coreCodes(),
  "model_not_found", // catalog
  "spend_window_exceeded", // budget: a plan's spend window
  "upstream_invalid_request",
  "upstream_rate_limited",
  "upstream_overloaded",
  "upstream_error",
  "upstream_timeout",
  "provider_unavailable",
]);

/** The `code` label: "ok", "cancelled" (the client left: 499), or the error's code when known, else "other". */
export function codeLabel(outcome: Outcome): string {
  if (outcome.status === "success") return "ok";
  if (outcome.status === "cancelled") return "cancelled";
  return KNOWN_CODES.has(outcome.error.code) ? outcome.error.code : OTHER;
}

const STATUS_CLASSES = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/** The HTTP status class of the answer: 2xx for success, 4xx for a client gone (499), the error's status otherwise. */
export function statusClassLabel(outcome: Outcome): string {
  if (outcome.status === "success") return "2xx";
  if (outcome.status === "cancelled") return "4xx";
  return httpStatusClass(outcome.error.status);
}

/** The class of an HTTP status (200 -> 2xx); anything outside 100-599 is 5xx. */
export function httpStatusClass(status: number): string {
  return STATUS_CLASSES[Math.floor(status / 100) - 1] ?? "5xx";
}

/** Why the gateway refused a request for money or rate: the `reason` of gateway_refused_requests_total. */
export type RefusalReason = "balance" | "key_budget" | "plan_window" | "rate_limit" | "other_limit" | "edge";

const REFUSALS: Readonly<Record<string, RefusalReason>> = {
  insufficient_balance: "balance",
  key_budget_exceeded: "key_budget",
  spend_window_exceeded: "plan_window",
  rate_limit_exceeded: "rate_limit",
};

/**
 * The refusal reason of a failed outcome, or undefined when it is no refusal. `other_limit`: any other 429 the
 * gateway gave itself (an upstream's 429 is `upstream_rate_limited`, not a refusal).
 */
export function refusalReason(outcome: Outcome): RefusalReason | undefined {
  if (outcome.status !== "failed") return undefined;
  const reason = REFUSALS[outcome.error.code];
  if (reason !== undefined) return reason;
  return outcome.error.status === 429 && !outcome.error.code.startsWith("upstream") ? "other_limit" : undefined;
}

/** Token types of gateway_tokens_total, in the order of `Usage`'s fields (docs/observability.md: the GenAI mapping). */
export const TOKEN_TYPES = ["input", "output", "cache_read", "cache_write", "reasoning"] as const;

/** Breaker states as gateway_breaker_state's value. */
export const BREAKER_VALUES: Readonly<Record<string, number>> = { closed: 0, half_open: 1, open: 2 };

/** Ledger kinds (gateway_credits_nano_usd's `kind`): every one is exported, 0 until the ledger has one. */
export const LEDGER_KINDS: readonly string[] = [...CREDIT_KINDS, ...TAKE_BACK_KINDS, "plan"];
