import { describe, expect, it } from "bun:test";
import moduleRanks from "gpt-tokenizer/bpeRanks/o200k_base";
import { countTokens as moduleCount } from "gpt-tokenizer/encoding/o200k_base";
import { countPromptTokens, loadTokenizer, o200kDataFile } from "../../../src/plugins/token-count/count.ts";
import { buildO200kCounter, PIECE } from "../../../src/plugins/token-count/o200k.ts";

const counter = buildO200kCounter(await Bun.file(o200kDataFile()).text());
/** gpt-tokenizer's count of ordinary text (special-token strings are text, not refused). */
const reference = (text: string) => moduleCount(text, { disallowedSpecial: new Set() });

/** Random text from a mix of scripts, digits, punctuation, whitespace, emoji and odd code points. */
function randomText(seed: number, length: number): string {
  const pools = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0123456789",
    " \t\n\r  ",
    ".,;:!?'\"()[]{}<>/\\|-_=+*&^%$#@~`",
    "éèêëàâäôöûüçñßøåæœÉÀÇ",
    "東京日本語中文字漢字かなカナ한국어를씁니다",
    "абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГД",
    "مرحبا بالعالم שלום עולם नमस्ते दुनिया",
    "🎉🚀👩‍💻🇫🇷👍🏽❤️‍🔥",
    "\uFEFF\u200B\u00A0\u2028\u0301\u0308",
  ];
  let state = seed >>> 0;
  const next = () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0);
  let out = "";
  while (out.length < length) {
    const pool = pools[next() % pools.length]!;
    const chars = [...pool];
    const run = 1 + (next() % 12);
    for (let i = 0; i < run; i++) out += chars[next() % chars.length];
  }
  return out;
}

describe("o200k counter built from the .tiktoken data file", () => {
  it("holds exactly gpt-tokenizer's rank table: every token's bytes map to its rank", () => {
    expect(counter.tokens).toBe(moduleRanks.length);
    const encoder = new TextEncoder();
    const differing: number[] = [];
    moduleRanks.forEach((token, rank) => {
      const bytes = typeof token === "string" ? encoder.encode(token) : new Uint8Array(token);
      if (counter.rankOf(bytes) !== rank) differing.push(rank);
    });
    expect(differing).toEqual([]);
    expect(counter.rankOf(new Uint8Array([0xff, 0xfe, 0xfd, 0xfc, 0xfb]))).toBe(-1);
  });

  it("counts exactly as gpt-tokenizer on English, code, CJK, emoji and special-token strings", () => {
    const samples = [
      "",
      "Hello, world! How many tokens is this sentence?",
      "function add(a: number, b: number): number {\n  return a + b;\n}\n",
      "東京は日本の首都です。우리는 한국어를 씁니다.",
      "emoji 🎉🚀👩‍💻 and accents: café, naïve, Zürich",
      "   multiple   spaces\t\ttabs\r\nand CRLF   ",
      "x".repeat(5000),
      "aGVsbG8gd29ybGQ".repeat(300), // one long base64-like piece: many merges
      "<|endoftext|> and <|im_start|>user are plain text in a prompt",
      "lone surrogates \uD800 and \uDC00 here",
    ];
    for (const text of samples) expect({ text, count: counter.count(text) }).toEqual({ text, count: reference(text) });
  });

  it("follows tiktoken where gpt-tokenizer does not: a piece that is itself a token counts one, byte-order mark included", () => {
    // o200k has tokens for a BOM glued to a word ("\uFEFFusing"); tiktoken looks a piece up whole before
    // merging. gpt-tokenizer keeps BOM tokens out of its string map, so it merges bytes instead: 3.
    expect(counter.rankOf(new TextEncoder().encode("\uFEFFusing"))).toBeGreaterThanOrEqual(0);
    expect(counter.count("\uFEFFusing")).toBe(1);
    expect(reference("\uFEFFusing")).toBe(3);
    expect(counter.count("\uFEFFusing System;\n\uFEFFnamespace Demo {}")).toBe(6);
  });

  it("splits text into contiguous pieces: the pre-tokenizer matches every code point on its own", () => {
    const uncovered: number[] = [];
    for (let codePoint = 0; codePoint <= 0x10ffff; codePoint++) {
      const text = String.fromCodePoint(codePoint);
      PIECE.lastIndex = 0;
      if (!PIECE.test(text) || PIECE.lastIndex !== text.length) uncovered.push(codePoint);
    }
    expect(uncovered).toEqual([]);
  });

  it("counts 300 random mixed-script texts exactly as gpt-tokenizer", () => {
    const mismatches: { seed: number; ours: number; theirs: number }[] = [];
    for (let seed = 1; seed <= 300; seed++) {
      const text = randomText(seed, 50 + (seed % 7) * 150);
      const ours = counter.count(text);
      const theirs = reference(text);
      if (ours !== theirs) mismatches.push({ seed, ours, theirs });
    }
    expect(mismatches).toEqual([]);
  });

  it("merges long pieces (one run of letters, hundreds to thousands of bytes) exactly as gpt-tokenizer", () => {
    const letters = "abcdefghijklmnopqrstuvwxyzéèñßабвгд";
    let state = 12345;
    const next = () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0);
    const mismatches: { length: number; ours: number; theirs: number }[] = [];
    for (const length of [65, 100, 257, 600, 1500, 3000]) {
      for (let sample = 0; sample < 4; sample++) {
        let word = "";
        for (let i = 0; i < length; i++) word += letters[next() % (sample < 2 ? 4 : letters.length)];
        const ours = counter.count(word);
        const theirs = reference(word);
        if (ours !== theirs) mismatches.push({ length, ours, theirs });
      }
    }
    expect(mismatches).toEqual([]);
    expect(counter.count("ab".repeat(10_000))).toBe(reference("ab".repeat(10_000)));
  });

  it("counts a 1 MB word (what gpt-tokenizer's quadratic merge would take minutes over) within the test's timeout", () => {
    const tokens = counter.count("ab".repeat(500_000));
    expect(tokens).toBe(counter.count("ab".repeat(1_000)) * 500);
  });

  it("gives a prompt's text its exact count inside the request framing", async () => {
    await loadTokenizer();
    const framing = countPromptTokens({ messages: [{ role: "user", content: "" }] }, true);
    for (const text of ["Say hello in five words.", randomText(7, 2000)]) {
      expect(countPromptTokens({ messages: [{ role: "user", content: text }] }, true) - framing).toBe(reference(text));
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
    for (const text of [base, variant, base, variant]) expect(prompt(text)).toBe(reference(text));
    expect(reference(variant)).not.toBe(reference(base));
  });
});
