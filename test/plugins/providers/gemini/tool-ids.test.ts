import { describe, expect, it } from "bun:test";
import { decodeGeminiCallId, encodeGeminiCallId, modelTag } from "../../../../src/plugins/providers/gemini/tool-ids.ts";

const SIGNATURE = "CiQBVKhc7mR+Lq/3Zy0xk8nH1YyZ1nJx3o6Qm9bP0ZkZ8wUeRhIKnwEBVKhc7jXh2c0=";

describe("gemini tool-call ids", () => {
  it("are deterministic, short without a signature and use only characters every client format accepts", () => {
    const a = encodeGeminiCallId({ model: "gemini-2.5-flash-lite", seed: "resp-1\n0\nget_weather\n{}" });
    const b = encodeGeminiCallId({ model: "gemini-2.5-flash-lite", seed: "resp-1\n0\nget_weather\n{}" });
    const other = encodeGeminiCallId({ model: "gemini-2.5-flash-lite", seed: "resp-1\n1\nget_weather\n{}" });
    expect(a).toBe(b);
    expect(a).not.toBe(other);
    expect(a).toMatch(/^call_h[0-9a-f]{16}$/);
    expect(a.length).toBeLessThanOrEqual(40);
    expect(decodeGeminiCallId(a)).toEqual({});
  });

  it("carry a thought signature byte for byte with the tag of the model that issued it", () => {
    const id = encodeGeminiCallId({ model: "gemini-4-carbon", signature: SIGNATURE, seed: "s" });
    expect(id).toMatch(/^call_[A-Za-z0-9_-]+$/);
    expect(decodeGeminiCallId(id)).toEqual({ signature: { value: SIGNATURE, modelTag: modelTag("gemini-4-carbon") } });
    expect(modelTag("models/gemini-4-carbon")).toBe(modelTag("gemini-4-carbon"));
    expect(modelTag("gemini-4-argon")).not.toBe(modelTag("gemini-4-carbon"));
  });

  it("round-trip signatures that are not padded standard base64 too", () => {
    for (const signature of ["abc", "a_b-c", "ünïcode sig", "QUJD"]) {
      const id = encodeGeminiCallId({ model: "m", signature, seed: "s" });
      expect(id).toMatch(/^call_[A-Za-z0-9_-]+$/);
      expect(decodeGeminiCallId(id)?.signature?.value).toBe(signature);
    }
  });

  it("keep Gemini's own call id", () => {
    const id = encodeGeminiCallId({ geminiId: "fc-7_x", signature: SIGNATURE, model: "m", seed: "s" });
    expect(decodeGeminiCallId(id)).toEqual({ geminiId: "fc-7_x", signature: { value: SIGNATURE, modelTag: modelTag("m") } });
  });

  it("do not mistake other formats' ids for Gemini's", () => {
    for (const id of ["call_abc123", "toolu_01A09q90qw90lq917835lq9", "call_Xyz_1", "fc_68a", "call_h123", "call_x1"]) {
      expect(decodeGeminiCallId(id)).toBeNull();
    }
  });
});
