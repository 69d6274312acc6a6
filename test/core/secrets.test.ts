import { describe, expect, it } from "bun:test";
import { REDACTED, redact, registerSecret } from "../../src/core/secrets.ts";

describe("secrets", () => {
  it("masks every occurrence of a registered value", () => {
    registerSecret("up-key-ds-XYZ");
    expect(redact("Incorrect API key provided: up-key-ds-XYZ (up-key-ds-XYZ)")).toBe(`Incorrect API key provided: ${REDACTED} (${REDACTED})`);
  });

  it("masks a secret that contains another one whole", () => {
    registerSecret("inner-secret-1");
    registerSecret("outer-inner-secret-1-tail");
    expect(redact("x outer-inner-secret-1-tail y")).toBe(`x ${REDACTED} y`);
  });

  it("masks a registered value in its JSON-escaped form too", () => {
    registerSecret('quote"in-key-value');
    expect(redact(JSON.stringify({ message: 'key quote"in-key-value' }))).toBe(JSON.stringify({ message: `key ${REDACTED}` }));
  });

  it("ignores values too short to be a key (they would mask ordinary words)", () => {
    registerSecret("error");
    registerSecret("");
    registerSecret(undefined);
    expect(redact("an error happened")).toBe("an error happened");
  });

  it("masks well-known key shapes it was never told about", () => {
    const gatewayKey = "sk-gw-" + "A1b2C3d4E5".repeat(4);
    expect(redact(`key ${gatewayKey} refused`)).toBe(`key ${REDACTED} refused`);
    expect(redact("sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345")).toBe(REDACTED);
    expect(redact("sk-proj-abcdefghijklmnopqrstuvwxyz")).toBe(REDACTED);
    expect(redact("key=AIzaSyA1234567890abcdefghijklmnopqrstu")).toBe(`key=${REDACTED}`);
    expect(redact("gwadm-" + "0123456789abcdef".repeat(3))).toBe(REDACTED);
    expect(redact("Authorization: Bearer abcdef.ghijkl-123")).toBe(`Authorization: Bearer ${REDACTED}`);
  });

  it("leaves ordinary text, and the gateway's own hints, as they are", () => {
    const hint = "missing API key: send `Authorization: Bearer <API_KEY>` or `x-api-key: <API_KEY>`";
    expect(redact(hint)).toBe(hint);
    expect(redact("the task-runner sk- prefix, sk-gw-Ab3d…x9Yz")).toBe("the task-runner sk- prefix, sk-gw-Ab3d…x9Yz");
  });
});
