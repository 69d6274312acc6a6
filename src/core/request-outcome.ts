import type { GatewayContext, Outcome } from "./context.ts";
import { GatewayError, UpstreamError, UpstreamTimeoutError } from "./errors.ts";

/** A request's failed outcome, as plugins' onComplete and the request line read it. */
export function failure(error: GatewayError): Outcome {
  return { status: "failed", error: { status: error.status, code: error.code, message: error.message } };
}

/** The client went away (its signal fired for a reason other than a timeout). */
export function clientLeft(ctx: GatewayContext): boolean {
  return ctx.signal.aborted && (ctx.signal.reason as Error | undefined)?.name !== "TimeoutError";
}

/** Why the request's signal fired, as the client should read it: the upstream's deadline or silence (504), or the client gone. */
export function abortError(ctx: GatewayContext): GatewayError {
  const reason = ctx.signal.reason as Error | undefined;
  if (reason?.name === "TimeoutError") return new UpstreamTimeoutError(`upstream ${ctx.target?.provider ?? ""} timed out: ${reason.message}`.replace("  ", " "));
  return new UpstreamError("the client went away before the answer was complete");
}

/** A failed read of the upstream's body: our own deadline or the client's leaving, else the upstream's failure (502). */
export function readError(ctx: GatewayContext, thrown: unknown): GatewayError {
  if (thrown instanceof GatewayError) return thrown;
  if (ctx.signal.aborted) return abortError(ctx);
  const message = (thrown as Error)?.message ?? String(thrown);
  return new UpstreamError(`upstream ${ctx.target!.provider} broke off its answer: ${message}`, { cause: thrown });
}
