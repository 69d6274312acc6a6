import { InsufficientBalanceError, KeyBudgetExceededError } from "../../core/errors.ts";
import { nanoToUsdString, type NanoUsd } from "../../core/money.ts";
import type { ModelPrices } from "../catalog/catalog.ts";
import type { Funds } from "../storage/repository.ts";

export interface ReservationPlan {
  /** Nano-USD held. */
  amount: NanoUsd;
  /** Output tokens the upstream may generate when the client set no cap and funds bind below the model's maximum. */
  outputCap?: number;
}

export interface WorstCase {
  promptTokens: number;
  prices: ModelPrices;
  /** The client's max_tokens, if any. */
  clientMaxOutput?: number;
  modelMaxOutput: number;
}

/**
 * Decides what to hold for a request from the funds available (pure): the prompt at its dearest
 * per-token price plus the output cap at the output price. Throws the refusal a client can act on.
 */
export function planReservation(worst: WorstCase, funds: Funds): ReservationPlan {
  const { prices } = worst;
  const promptCost = worst.promptTokens * Math.max(prices.input, prices.cacheRead, prices.cacheWrite);
  const keyBinds = funds.key !== null && funds.key < funds.account;
  const available = keyBinds ? funds.key! : funds.account;
  const affordable = available <= promptCost ? 0 : prices.output === 0 ? worst.modelMaxOutput : Math.floor((available - promptCost) / prices.output);

  if (worst.clientMaxOutput !== undefined) {
    if (affordable >= worst.clientMaxOutput) return { amount: promptCost + worst.clientMaxOutput * prices.output };
    throw refusal(keyBinds, available, affordable, promptCost + worst.clientMaxOutput * prices.output, worst.clientMaxOutput);
  }
  if (affordable < 1) throw refusal(keyBinds, available, 0);
  const output = Math.min(affordable, worst.modelMaxOutput);
  return { amount: promptCost + output * prices.output, outputCap: output < worst.modelMaxOutput ? output : undefined };
}

function refusal(keyBinds: boolean, available: NanoUsd, affordable: number, needed?: NanoUsd, requested?: number) {
  const have = `$${nanoToUsdString(Math.max(0, available))}`;
  const detail =
    requested === undefined
      ? `it does not cover this prompt`
      : `max_tokens=${requested} can cost up to $${nanoToUsdString(needed!)}, and it affords at most ${affordable} output tokens for this prompt (lower max_tokens to ${affordable} or less)`;
  if (keyBinds) {
    return new KeyBudgetExceededError(
      `this API key's remaining budget is ${have}: ${detail}. Retrying will not help; raise the key's limit or use another key.`,
    );
  }
  return new InsufficientBalanceError(`the account's available balance is ${have}: ${detail}. Retrying will not help; top up the balance.`);
}
