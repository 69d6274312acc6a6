/** Integer nano-USD arithmetic. Floats appear only when a figure leaves through JSON. */

export type NanoUsd = number;

export const NANO_PER_USD = 1_000_000_000;

/**
 * Parses a decimal USD amount ("12.5", 12.5, "0.000000001") into exact nano-USD.
 * Throws on more than nine decimals, non-finite or unsafe values.
 */
export function usdToNano(amount: number | string): NanoUsd {
  const text = typeof amount === "number" ? numberToPlainString(amount) : amount.trim();
  return decimalToScaledInteger(text, 9, "amount");
}

/** Converts USD per million tokens ("1.475") into exact nano-USD per token (1475). */
export function usdPerMillionToNanoPerToken(perMillion: number | string): NanoUsd {
  const text = typeof perMillion === "number" ? numberToPlainString(perMillion) : perMillion.trim();
  return decimalToScaledInteger(text, 3, "price per million tokens");
}

/** Exact decimal string of a nano-USD amount: 1500000 -> "0.0015". Any integer magnitude prints in plain digits. */
export function nanoToUsdString(nano: NanoUsd): string {
  // Past 2^53 the float arithmetic below is inexact and String() of a whole >= 1e21 is exponent notation
  // ("$5e+293.13"): such figures (a stored key limit, a sum) go through BigInt. Not on the hot path.
  if (!Number.isSafeInteger(nano)) return bigNanoToUsdString(nano);
  const negative = nano < 0;
  const abs = Math.abs(nano);
  const whole = Math.floor(abs / NANO_PER_USD);
  const frac = abs % NANO_PER_USD;
  let text = String(whole);
  if (frac !== 0) {
    // The nine decimals without their trailing zeros (this runs on every answer: the cost header).
    let digits = frac;
    let places = 9;
    while (digits % 10 === 0) {
      digits /= 10;
      places--;
    }
    const shown = String(digits);
    text += "." + "00000000".slice(0, places - shown.length) + shown;
  }
  return negative ? "-" + text : text;
}

function bigNanoToUsdString(nano: number): string {
  if (!Number.isFinite(nano)) return String(nano);
  const big = BigInt(Math.trunc(nano)); // an unsafe double is always an integer; a fraction of a nano-USD is dropped
  const abs = big < 0n ? -big : big;
  const frac = (abs % 1_000_000_000n).toString().padStart(9, "0").replace(/0+$/, "");
  return (big < 0n ? "-" : "") + (abs / 1_000_000_000n).toString() + (frac ? "." + frac : "");
}

/**
 * The JSON-edge number for a nano-USD amount: the nearest double to the exact decimal. One division
 * gives exactly that: both operands are exact doubles (a safe integer, 1e9) and IEEE 754 rounds the
 * quotient correctly, as parsing the decimal string would.
 */
export function nanoToUsd(nano: NanoUsd): number {
  return nano / NANO_PER_USD + 0; // + 0: never -0
}

/** USD per token as a decimal string, e.g. 1475 nano/token -> "0.000001475". */
export function nanoPerTokenToUsdString(nano: NanoUsd): string {
  return nanoToUsdString(nano);
}

function numberToPlainString(value: number): string {
  if (!Number.isFinite(value)) throw new RangeError(`amount must be a finite number`);
  // toFixed(12) avoids exponent notation for small values; trailing zeros are trimmed below.
  return Math.abs(value) < 1e-6 || Math.abs(value) >= 1e21 ? value.toFixed(12) : String(value);
}

function decimalToScaledInteger(text: string, scale: number, what: string): number {
  const match = /^(-)?(\d+)(?:\.(\d+))?$/.exec(text);
  if (!match) throw new RangeError(`${what} must be a decimal number, got "${text}"`);
  const [, sign, whole, fraction = ""] = match;
  const trimmed = fraction.replace(/0+$/, "");
  if (trimmed.length > scale) throw new RangeError(`${what} has more than ${scale} decimals: "${text}"`);
  const value = Number(whole) * 10 ** scale + Number(trimmed.padEnd(scale, "0") || "0");
  if (!Number.isSafeInteger(value)) throw new RangeError(`${what} is too large: "${text}"`);
  return sign ? -value : value;
}
