import { InsufficientBalanceError, KeyBudgetExceededError } from "../../core/errors.ts";
import { nanoToUsdString, type NanoUsd } from "../../core/money.ts";
import type { ModelPrices } from "../catalog/catalog.ts";
import type { Funds } from "../storage/repository.ts";

export interface ReservationPlan {
  /** Nano-USD held. */
  amount: NanoUsd;
  /** The output tokens the hold assumes: always sent upstream as the request's output cap. */
  outputCap: number;
}

export interface WorstCase {
  promptTokens: number;
  prices: ModelPrices;
  /** The client's max_tokens, if any (never above modelMaxOutput: the budget refuses that first). */
  clientMaxOutput?: number;
  modelMaxOutput: number;
  /** The model's context window: prompt and output together never exceed it. */
  contextLength?: number;
}

/**
 * Decides what to hold for a request from the funds available (pure): the prompt at its dearest
 * per-token price plus the output cap at the output price. Throws the refusal a client can act on.
 */
export function planReservation(worst: WorstCase, funds: Funds): ReservationPlan {
  const { prices } = worst;
  const promptCost = worst.promptTokens * Math.max(prices.input, prices.cacheRead, prices.cacheWrite, prices.cacheWrite1h);
  const keyBinds = funds.key !== null && funds.key < funds.account;
  const available = keyBinds ? funds.key! : funds.account;
  const affordable = available <= promptCost ? 0 : prices.output === 0 ? worst.modelMaxOutput : Math.floor((available - promptCost) / prices.output);

  if (worst.clientMaxOutput !== undefined) {
    const requested = worst.clientMaxOutput;
    if (affordable >= requested) return { amount: promptCost + requested * prices.output, outputCap: requested };
    throw refusal(keyBinds, available, Math.min(affordable, worst.modelMaxOutput), promptCost + requested * prices.output, requested);
  }
  if (affordable < 1) throw refusal(keyBinds, available, 0);
  const output = Math.min(affordable, outputRoom(worst));
  return { amount: promptCost + output * prices.output, outputCap: output };
}

/**
 * The most a client without a cap can get: the model's maximum, and no more than the context window
 * leaves after the prompt's bound (upstreams that check prompt + max_tokens against the window refuse
 * more). A bound past the window (a loose byte bound) leaves the model's maximum.
 */
function outputRoom(worst: WorstCase): number {
  const room = worst.contextLength === undefined ? Infinity : worst.contextLength - worst.promptTokens;
  return room >= 1 ? Math.min(worst.modelMaxOutput, room) : worst.modelMaxOutput;
}

function refusal(keyBinds: boolean, available: NanoUsd, affordable: number, needed?: NanoUsd, requested?: number) {
  const have = `$${nanoToUsdString(Math.max(0, available))}`;
  const detail =
    requested === undefined
      ? `it does not cover this prompt`
      : affordable < 1
        ? `max_tokens=${requested} can cost up to $${nanoToUsdString(needed!)}, and it does not cover this prompt with even one output token`
        : `max_tokens=${requested} can cost up to $${nanoToUsdString(needed!)}, and it affords at most ${affordable} output tokens for this prompt (lower max_tokens to ${affordable} or less)`;
  if (keyBinds) {
    return new KeyBudgetExceededError(
      `this API key's remaining budget is ${have}: ${detail}. Retrying will not help; raise the key's limit or use another key.`,
    );
  }
  return new InsufficientBalanceError(`the account's available balance is ${have}: ${detail}. Retrying will not help; top up the balance.`);
}
