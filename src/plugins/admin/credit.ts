import { InvalidRequestError } from "../../core/errors.ts";
import { usdToNano } from "../../core/money.ts";
import { storeCall } from "../storage/http-errors.ts";
import { CREDIT_KINDS, type CreditKind, type CreditResult, type LedgerStore } from "../storage/repository.ts";
import { MAX_AMOUNT_USD, PRINTABLE } from "./schema.ts";

/** Minimum top-ups by payment kind (spec: 5 USD card, 12 USD USDT). */
export const MINIMUM_TOP_UP_USD: Partial<Record<CreditKind, number>> = { card: 5, usdt: 12 };

const PRINTABLE_TEXT = new RegExp(PRINTABLE);

/**
 * Credits an account by the rules of `POST /admin/v1/accounts/:id/credits` (the admin API and the operators'
 * dashboard page both come here): a positive amount of at most MAX_AMOUNT_USD with at most 9 decimals, the
 * minimum of its kind, idempotent on the reference (`duplicate`: the reference was credited before, nothing
 * added). The account must exist (the callers check it first). Refusals are GatewayErrors (400, 409).
 */
export async function creditAccount(
  store: Pick<LedgerStore, "addCredit">,
  accountId: string,
  credit: { amount: number | string; kind: string; reference: string },
): Promise<CreditResult> {
  // The API's body schema checks kind and reference before this; the dashboard's form arrives unchecked.
  if (!(CREDIT_KINDS as readonly string[]).includes(credit.kind)) {
    throw new InvalidRequestError(`kind must be one of ${CREDIT_KINDS.join(", ")}`, { param: "kind" });
  }
  const kind = credit.kind as CreditKind;
  if (credit.reference.length < 1 || credit.reference.length > 200 || !PRINTABLE_TEXT.test(credit.reference)) {
    throw new InvalidRequestError("reference must be 1 to 200 characters, without control characters (NUL included) or unpaired surrogates", {
      param: "reference",
    });
  }
  const amount = parseAmount(credit.amount);
  const minimum = MINIMUM_TOP_UP_USD[kind];
  if (minimum !== undefined && amount < usdToNano(minimum)) {
    throw new InvalidRequestError(`the minimum ${kind} top-up is ${minimum} USD`, { param: "amount" });
  }
  return storeCall(store.addCredit({ accountId, amount, kind, reference: credit.reference }));
}

/** A positive USD amount of at most MAX_AMOUNT_USD, in exact nano-USD. */
export function parseAmount(amount: number | string, field = "amount") {
  try {
    // Checked before the exact parse, so 1e300 or a 30-digit string is told the bound, not its notation.
    if (Number(amount) > MAX_AMOUNT_USD) throw new RangeError(`at most ${MAX_AMOUNT_USD} USD`);
    const nano = usdToNano(amount);
    if (nano <= 0) throw new RangeError("must be positive");
    return nano;
  } catch (error) {
    throw new InvalidRequestError(`invalid ${field}: ${(error as Error).message}`, { param: field });
  }
}
