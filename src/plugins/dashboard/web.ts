import { nanoToUsdString, type NanoUsd } from "../../core/money.ts";
import type { Viewer } from "./session.ts";

/** Headers of every dashboard page: no caching of account data, no framing, scripts only from the gateway. */
const PAGE_HEADERS = {
  "content-type": "text/html; charset=utf-8",
  "cache-control": "no-store",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "same-origin",
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
} as const;

/** An HTML answer (a page, or an htmx fragment). */
export async function html(body: JSX.Element, init: { status?: number; headers?: Record<string, string> } = {}): Promise<Response> {
  return new Response(await body, { status: init.status ?? 200, headers: { ...PAGE_HEADERS, ...init.headers } });
}

/** A 303 to `location` (after a form post, so a reload does not post again). */
export function redirect(location: string, headers: Record<string, string> = {}): Response {
  return new Response(null, { status: 303, headers: { location, "cache-control": "no-store", ...headers } });
}

/** Whether the request came from htmx (it then wants a fragment, not a whole page). */
export function isHtmx(request: Request): boolean {
  return request.headers.get("hx-request") === "true";
}

/** The viewer, if it is a user of an account. */
export function userOf(viewer: Viewer | null): Extract<Viewer, { kind: "user" }> | null {
  return viewer?.kind === "user" ? viewer : null;
}

/** A form field as a trimmed string ("" when absent or not text). */
export function field(form: Record<string, unknown> | undefined, name: string): string {
  const value = form?.[name];
  return typeof value === "string" ? value.trim() : "";
}

/** A nano-USD amount as exact USD: "$0.000123456", "$12.50", "-$3.00" (at least two decimals, never through a float). */
export function usd(nano: NanoUsd): string {
  const text = nanoToUsdString(nano);
  const negative = text.startsWith("-");
  const [whole, fraction = ""] = (negative ? text.slice(1) : text).split(".");
  return `${negative ? "-" : ""}$${whole}.${fraction.padEnd(2, "0")}`;
}
