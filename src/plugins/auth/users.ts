import { InvalidRequestError } from "../../core/errors.ts";
import { USER_ROLES, type NewUser, type UserRole } from "../storage/repository.ts";

/**
 * The rules of people (dashboard users), shared by the admin API and the dashboard's sign-up: what an
 * email and a password must be, how a password is hashed (argon2id) and checked, and how a new user is
 * made. A password is never echoed in an error, a log line or an answer.
 */

export const EMAIL_MAX_LENGTH = 254;
export const PASSWORD_MIN_LENGTH = 10;
export const PASSWORD_MAX_LENGTH = 256;

export const EMAIL_RULE = `email must be an address like name@example.com: one @, a dot in the domain, at most ${EMAIL_MAX_LENGTH} characters, no spaces or control characters`;
export const PASSWORD_RULE = `password must be ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters`;

// Whitespace (any Unicode space), control characters (C0, DEL, C1) and an unpaired UTF-16 surrogate (no UTF-8 form).
const FORBIDDEN = /[\s\u0000-\u001f\u007f-\u009f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** The email as stored and looked up: trimmed and lower-cased. 400 (param `email`) unless it looks like an email. */
export function normalizeEmail(raw: string): string {
  if (typeof raw !== "string") throw new InvalidRequestError(EMAIL_RULE, { param: "email" });
  const email = raw.trim().toLowerCase();
  if (email.length === 0 || email.length > EMAIL_MAX_LENGTH || FORBIDDEN.test(email)) {
    throw new InvalidRequestError(EMAIL_RULE, { param: "email" });
  }
  const parts = email.split("@");
  const [local, domain] = parts;
  const labels = domain?.split(".") ?? [];
  if (parts.length !== 2 || !local || labels.length < 2 || labels.some((label) => label === "")) {
    throw new InvalidRequestError(EMAIL_RULE, { param: "email" });
  }
  return email;
}

/** 400 (param `password`) when the password is shorter than 10 or longer than 256 characters. The message says the rule, never the password. */
export function checkPassword(password: string): void {
  if (typeof password !== "string") throw new InvalidRequestError(PASSWORD_RULE, { param: "password" });
  // Characters as people count them (code points), not UTF-16 units.
  const length = [...password].length;
  if (length < PASSWORD_MIN_LENGTH) {
    throw new InvalidRequestError(`${PASSWORD_RULE}: this one is too short`, { param: "password" });
  }
  if (length > PASSWORD_MAX_LENGTH) {
    throw new InvalidRequestError(`${PASSWORD_RULE}: this one is too long`, { param: "password" });
  }
}

/** A role of USER_ROLES; 400 (param `role`) otherwise. */
export function checkRole(role: unknown): UserRole {
  if (typeof role === "string" && (USER_ROLES as readonly string[]).includes(role)) return role as UserRole;
  throw new InvalidRequestError(`role must be one of ${USER_ROLES.join(", ")}`, { param: "role" });
}

/** The PHC string (`$argon2id$…`) of the password, with Bun's argon2id defaults. */
export function hashPassword(password: string): Promise<string> {
  return Bun.password.hash(password, { algorithm: "argon2id" });
}

/** Whether the password matches the hash; false (never a throw) for a malformed hash. */
export async function verifyPassword(password: string, hash: string): Promise<boolean> {
  try {
    return await Bun.password.verify(password, hash);
  } catch {
    return false;
  }
}

let dummyHash: Promise<string> | undefined;

/**
 * An argon2id hash of a random password nobody knows, with the same parameters as every user's hash,
 * computed on its first use and kept: what a sign-in for an unknown email is checked against.
 */
export function DUMMY_PASSWORD_HASH(): Promise<string> {
  dummyHash ??= hashPassword(crypto.randomUUID() + crypto.randomUUID());
  return dummyHash;
}

/**
 * A sign-in for an email no user has: verifies the password against DUMMY_PASSWORD_HASH, so it takes as
 * long as a wrong password for a real user (no telling which emails exist by timing). Always false.
 */
export async function verifyAgainstNothing(password: string): Promise<false> {
  await verifyPassword(password, await DUMMY_PASSWORD_HASH());
  return false;
}

/** A new user's record: id `usr_` + 24 hex digits, the email normalized, the password checked and hashed, the role checked. */
export async function newUser(input: { accountId: string; email: string; password: string; role?: UserRole }): Promise<NewUser> {
  const email = normalizeEmail(input.email);
  checkPassword(input.password);
  const role = checkRole(input.role ?? "owner");
  return {
    id: "usr_" + crypto.randomUUID().replaceAll("-", "").slice(0, 24),
    accountId: input.accountId,
    email,
    role,
    passwordHash: await hashPassword(input.password),
  };
}
