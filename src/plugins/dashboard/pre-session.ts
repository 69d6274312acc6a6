import type { DashboardConfig } from "./schema.ts";
import { cookieHeader, csrfAccepted, isSecure, PRE_SESSION_COOKIE, randomToken, readCookie, type Sessions } from "./session.ts";

/**
 * Login CSRF protection of the forms shown before a session exists (user sign-in, sign-up, operator sign-in):
 * a random cookie that the form echoes in its hidden CSRF field (double submit), made on the form's first view.
 */
export function preSession(request: Request, secureCookie: DashboardConfig["secure_cookie"]): { token: string; cookie?: string } {
  const existing = readCookie(request, PRE_SESSION_COOKIE);
  if (existing && /^[A-Za-z0-9_-]{43}$/.test(existing)) return { token: existing };
  const token = randomToken();
  return { token, cookie: cookieHeader(PRE_SESSION_COOKIE, token, { secure: isSecure(request, secureCookie), maxAgeSeconds: 3600 }) };
}

/** Whether a pre-session form's POST echoes its cookie (and was not sent cross-site). */
export function preSessionAccepted(request: Request, form: Record<string, unknown> | undefined): boolean {
  return csrfAccepted(request, readCookie(request, PRE_SESSION_COOKIE) ?? "\0", form);
}

/** The Set-Cookie header that drops the pre-session cookie once signed in. */
export function clearPreSession(request: Request, secureCookie: DashboardConfig["secure_cookie"]): string {
  return cookieHeader(PRE_SESSION_COOKIE, "", { secure: isSecure(request, secureCookie), maxAgeSeconds: 0 });
}

/**
 * The answer to a successful sign-in: a session the browser had ends (its cookie is replaced), a new one is
 * issued, the pre-session cookie dropped, and a 303 to `location`.
 */
export async function signedIn(sessions: Sessions, request: Request, userId: string | null, location: string, secureCookie: DashboardConfig["secure_cookie"]): Promise<Response> {
  await sessions.revoke(request);
  const headers = new Headers({ location, "cache-control": "no-store" });
  headers.append("set-cookie", await sessions.issue(request, userId));
  headers.append("set-cookie", clearPreSession(request, secureCookie));
  return new Response(null, { status: 303, headers });
}
