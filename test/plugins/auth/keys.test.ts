import { describe, expect, it } from "bun:test";
import { generateApiKey, hashApiKey, maskApiKey } from "../../../src/plugins/auth/keys.ts";

describe("API key material", () => {
  it("stores a key as the SHA-256 hex of its text (the hashes already in a store stay valid)", () => {
    expect(hashApiKey("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(hashApiKey("")).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const key = generateApiKey();
    expect(hashApiKey(key)).toBe(new Bun.CryptoHasher("sha256").update(key).digest("hex"));
  });

  it("makes keys of sk-gw- and 40 base62 characters, masked to their first and last four", () => {
    const key = generateApiKey();
    expect(key).toMatch(/^sk-gw-[A-Za-z0-9]{40}$/);
    expect(generateApiKey()).not.toBe(key);
    expect(maskApiKey(key)).toBe(`${key.slice(0, 10)}…${key.slice(-4)}`);
  });
});
