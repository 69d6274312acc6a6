import { describe, expect, it } from "bun:test";
import { InvalidRequestError } from "../../../src/core/errors.ts";
import {
  checkPassword,
  checkRole,
  DUMMY_PASSWORD_HASH,
  hashPassword,
  newUser,
  normalizeEmail,
  verifyAgainstNothing,
  verifyPassword,
} from "../../../src/plugins/auth/users.ts";

/** The InvalidRequestError `fn` throws (fails when it throws nothing or something else). */
function refusal(fn: () => unknown): InvalidRequestError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidRequestError);
    return error as InvalidRequestError;
  }
  throw new Error("expected an InvalidRequestError");
}

describe("normalizeEmail", () => {
  it("trims and lower-cases", () => {
    expect(normalizeEmail("  Alice@Example.COM ")).toBe("alice@example.com");
    expect(normalizeEmail("a.b+tag@mail.example.co.uk")).toBe("a.b+tag@mail.example.co.uk");
  });

  it("refuses what does not look like an email, naming email", () => {
    const bad = [
      "",
      "   ",
      "alice",
      "alice@",
      "@example.com",
      "alice@example",
      "alice@@example.com",
      "a@b@example.com",
      "alice@.example.com",
      "alice@example.com.",
      "alice@example..com",
      "al ice@example.com",
      "alice@exa\tmple.com",
      "alice\u0000@example.com",
      "alice\u007f@example.com",
      "alice\ud800@example.com",
      "a".repeat(250) + "@example.com",
    ];
    for (const email of bad) {
      const error = refusal(() => normalizeEmail(email));
      expect({ email, param: error.param }).toEqual({ email, param: "email" });
    }
    expect(refusal(() => normalizeEmail(42 as never)).param).toBe("email");
  });

  it("takes an address of exactly 254 characters", () => {
    const email = "a".repeat(254 - "@example.com".length) + "@example.com";
    expect(normalizeEmail(email)).toBe(email);
  });
});

describe("checkPassword", () => {
  it("takes 10 to 256 characters", () => {
    checkPassword("0123456789");
    checkPassword("x".repeat(256));
    checkPassword("🔑".repeat(10)); // counted in characters, not UTF-16 units
  });

  it("refuses a short or long password with the rule and never the password", () => {
    for (const password of ["", "short-pw1", "x".repeat(257), "🔑".repeat(257)]) {
      const error = refusal(() => checkPassword(password));
      expect(error.param).toBe("password");
      expect(error.message).toContain("10 to 256 characters");
      if (password) expect(error.message).not.toContain(password);
    }
    expect(refusal(() => checkPassword("secret-9!")).message).not.toContain("secret-9!");
  });
});

describe("checkRole", () => {
  it("takes owner and member only", () => {
    expect(checkRole("owner")).toBe("owner");
    expect(checkRole("member")).toBe("member");
    for (const role of ["admin", "Owner", "", null, 1]) expect(refusal(() => checkRole(role)).param).toBe("role");
  });
});

describe("password hashes", () => {
  it("hashes with argon2id and verifies only the same password", async () => {
    const hash = await hashPassword("correct horse battery");
    expect(hash).toStartWith("$argon2id$");
    expect(hash).not.toContain("correct horse battery");
    expect(await verifyPassword("correct horse battery", hash)).toBe(true);
    expect(await verifyPassword("correct horse batterY", hash)).toBe(false);
    expect(await hashPassword("correct horse battery")).not.toBe(hash); // salted
  });

  it("answers false, never a throw, for a malformed hash", async () => {
    expect(await verifyPassword("whatever-password", "not a hash")).toBe(false);
    expect(await verifyPassword("whatever-password", "")).toBe(false);
  });

  it("keeps one dummy argon2id hash, computed once, that no password matches", async () => {
    const first = await DUMMY_PASSWORD_HASH();
    expect(first).toStartWith("$argon2id$");
    expect(await DUMMY_PASSWORD_HASH()).toBe(first);
    expect(await verifyAgainstNothing("0123456789")).toBe(false);
    expect(await verifyAgainstNothing("")).toBe(false);
  });

  it("verifies an unknown email's sign-in in about the time of a wrong password", async () => {
    const hash = await hashPassword("the-real-password");
    await verifyAgainstNothing("warm-up-password"); // the dummy hash is made on its first use
    const time = async (fn: () => Promise<unknown>) => {
      const start = performance.now();
      for (let i = 0; i < 5; i++) await fn();
      return performance.now() - start;
    };
    const wrong = await time(() => verifyPassword("a-wrong-password", hash));
    const nothing = await time(() => verifyAgainstNothing("a-wrong-password"));
    // The same argon2id work each: within a factor of 3 either way (generous for a loaded machine).
    expect(nothing).toBeGreaterThan(wrong / 3);
    expect(nothing).toBeLessThan(wrong * 3);
  });
});

describe("newUser", () => {
  it("makes a usr_ id, normalizes the email, hashes the password and defaults the role to owner", async () => {
    const user = await newUser({ accountId: "acct_1", email: " Bob@Example.com", password: "long enough password" });
    expect(user.id).toMatch(/^usr_[0-9a-f]{24}$/);
    expect(user).toMatchObject({ accountId: "acct_1", email: "bob@example.com", role: "owner" });
    expect(user.passwordHash).toStartWith("$argon2id$");
    expect(await verifyPassword("long enough password", user.passwordHash)).toBe(true);
    expect(JSON.stringify(user)).not.toContain("long enough password");
    const member = await newUser({ accountId: "acct_1", email: "c@example.com", password: "long enough password", role: "member" });
    expect(member.role).toBe("member");
    expect(member.id).not.toBe(user.id);
  });

  it("refuses a bad email, password or role before hashing anything", async () => {
    const make = (input: Record<string, unknown>) =>
      newUser({ accountId: "acct_1", email: "d@example.com", password: "long enough password", ...input } as never);
    await expect(make({ email: "nope" })).rejects.toMatchObject({ param: "email" });
    await expect(make({ password: "short" })).rejects.toMatchObject({ param: "password" });
    await expect(make({ role: "admin" })).rejects.toMatchObject({ param: "role" });
  });
});
