import { describe, expect, it } from "bun:test";
import moduleRanks from "gpt-tokenizer/bpeRanks/o200k_base";
import { countTokens as moduleCount } from "gpt-tokenizer/encoding/o200k_base";
import { countPromptTokens, loadTokenizer, o200kDataFile, parseTiktokenRanks } from "../../../src/plugins/token-count/count.ts";

describe("o200k tokenizer loaded from the .tiktoken data file", () => {
  it("builds exactly gpt-tokenizer's own rank table: same length, same text or bytes at every rank", async () => {
    const ranks = parseTiktokenRanks(await Bun.file(o200kDataFile()).text());
    expect(ranks.length).toBe(moduleRanks.length);
    const differing: number[] = [];
    for (let rank = 0; rank < ranks.length; rank++) {
      if (JSON.stringify(ranks[rank]) !== JSON.stringify(moduleRanks[rank])) differing.push(rank);
    }
    expect(differing).toEqual([]);
  });

  it("counts prompts exactly as gpt-tokenizer's module does, on English, code, CJK, emoji and byte-order marks", async () => {
    await loadTokenizer();
    const samples = [
      "Hello, world! How many tokens is this sentence?",
      "function add(a: number, b: number): number {\n  return a + b;\n}\n",
      "東京は日本の首都です。우리는 한국어를 씁니다.",
      "emoji 🎉🚀👩‍💻 and accents: café, naïve, Zürich",
      "\uFEFFusing System;\n\uFEFFnamespace Demo {}",
      "   multiple   spaces\t\ttabs\r\nand CRLF   ",
      "x".repeat(5000),
    ];
    for (const text of samples) {
      const body = { messages: [{ role: "user", content: text }] };
      // One message: the fixed per-request and per-message framing plus the text's own tokens.
      const framing = countPromptTokens({ messages: [{ role: "user", content: "" }] }, true);
      expect(countPromptTokens(body, true) - framing).toBe(moduleCount(text));
    }
  });

  it("counts long texts again exactly from its cache, and never mixes up texts of the same length", async () => {
    await loadTokenizer();
    const framing = countPromptTokens({ messages: [{ role: "user", content: "" }] }, true);
    const prompt = (text: string) => countPromptTokens({ messages: [{ role: "user", content: text }] }, true) - framing;
    const base = "The quick brown fox jumps over the lazy dog. ".repeat(400);
    // Same length, different tokens: one word changed into one without spaces.
    const variant = base.slice(0, 1000) + "Thequickbrownfoxjumps" + base.slice(1021);
    expect(variant.length).toBe(base.length);
    for (const text of [base, variant, base, variant]) expect(prompt(text)).toBe(moduleCount(text));
    expect(moduleCount(variant)).not.toBe(moduleCount(base));
  });
});
