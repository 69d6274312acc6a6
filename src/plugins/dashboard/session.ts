import { timingSafeEqual } from "node:crypto";
import type { Account, AccountStore, DashboardSession, SessionStore, User, UserStore } from "../storage/repository.ts";
import type { DashboardConfig } from "./schema.ts";

/** The cookie that carries the session id (the id is random; only its hash is stored). */
export const SESSION_COOKIE = "gw_session";
/** Before sign-in: a random value echoed by the sign-in form (double submit), so a sign-in cannot be forged cross-site. */
export const PRE_SESSION_COOKIE = "gw_signin";
export const CSRF_FIELD = "_csrf";
export const CSRF_HEADER = "x-csrf-token";

/** Who is looking at a page: a user of an account, or an operator (signed in with the admin token). */
export type Viewer =
  | { kind: "user"; user: User; account: Account; session: DashboardSession; csrf: string }
  | { kind: "operator"; session: DashboardSession; csrf: string };

export function sha256(text: string): string {
  return new Bun.CryptoHasher("sha256").update(text).digest("hex");
}

export function randomToken(bytes = 32): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString("base64url");
}

/** The CSRF token of a session: derived from its secret id, so it needs no storage and no one else can compute it. */
export function csrfTokenOf(sessionId: string): string {
  return sha256("csrf:" + sessionId);
}

export function readCookie(request: Request, name: string): string | undefined {
  const header = request.headers.get("cookie");
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq !== -1 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** Whether the cookie gets `Secure`: always, never, or when the request came over https. */
export function isSecure(request: Request, mode: DashboardConfig["secure_cookie"]): boolean {
  if (mode !== "auto") return mode === "always";
  return request.url.startsWith("https:") || request.headers.get("x-forwarded-proto")?.split(",")[0]?.trim() === "https";
}

export function cookieHeader(name: string, value: string, options: { secure: boolean; maxAgeSeconds?: number; path?: string }): string {
  const parts = [`${name}=${value}`, `Path=${options.path ?? "/dashboard"}`, "HttpOnly", "SameSite=Lax"];
  if (options.maxAgeSeconds !== undefined) parts.push(`Max-Age=${options.maxAgeSeconds}`);
  if (options.secure) parts.push("Secure");
  return parts.join("; ");
}

/** Server-side sessions: issue on sign-in, find per page, revoke on sign-out. */
export function createSessions(store: SessionStore & UserStore & AccountStore, config: DashboardConfig, now: () => number) {
  const ttlMs = config.session_hours * 3_600_000;

  return {
    /** A new session for the user (null: an operator); the Set-Cookie header carrying its id. */
    async issue(request: Request, userId: string | null): Promise<string> {
      const id = randomToken();
      const at = now();
      await store.createSession({ idHash: sha256(id), userId, createdAt: at, expiresAt: at + ttlMs });
      return cookieHeader(SESSION_COOKIE, id, { secure: isSecure(request, config.secure_cookie), maxAgeSeconds: Math.floor(ttlMs / 1000) });
    },

    /** The viewer of the request's session cookie, or null (no cookie, unknown, expired, user or account gone). */
    async viewer(request: Request): Promise<Viewer | null> {
      const id = readCookie(request, SESSION_COOKIE);
      if (!id || id.length > 100) return null;
      const session = await store.findSession(sha256(id), now());
      if (!session) return null;
      const csrf = csrfTokenOf(id);
      if (session.userId === null) return { kind: "operator", session, csrf };
      const user = await store.getUser(session.userId);
      const account = user ? await store.getAccount(user.accountId) : null;
      if (!user || !account) return null;
      return { kind: "user", user, account, session, csrf };
    },

    /** Revokes the request's session; the Set-Cookie header that clears the cookie. */
    async revoke(request: Request): Promise<string> {
      const id = readCookie(request, SESSION_COOKIE);
      if (id) await store.deleteSession(sha256(id));
      return cookieHeader(SESSION_COOKIE, "", { secure: isSecure(request, config.secure_cookie), maxAgeSeconds: 0 });
    },
  };
}

export type Sessions = ReturnType<typeof createSessions>;

/**
 * Whether a state-changing request carries the session's CSRF token (form field or htmx header) and was not
 * sent cross-site (Sec-Fetch-Site / Origin, where the browser says). Compared in constant time.
 */
export function csrfAccepted(request: Request, expected: string, form: Record<string, unknown> | undefined): boolean {
  const site = request.headers.get("sec-fetch-site");
  if (site === "cross-site") return false;
  const origin = request.headers.get("origin");
  if (origin && origin !== "null" && origin !== new URL(request.url).origin && !forwardedOriginMatches(request, origin)) return false;
  const presented = request.headers.get(CSRF_HEADER) ?? (typeof form?.[CSRF_FIELD] === "string" ? (form[CSRF_FIELD] as string) : "");
  return equalText(presented, expected);
}

/** Behind a proxy the request URL is the proxy's upstream address: the Host / X-Forwarded-Host the browser used counts too. */
function forwardedOriginMatches(request: Request, origin: string): boolean {
  const host = request.headers.get("x-forwarded-host") ?? request.headers.get("host");
  if (!host) return false;
  try {
    return new URL(origin).host === host.split(",")[0]!.trim();
  } catch {
    return false;
  }
}

export function equalText(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}
