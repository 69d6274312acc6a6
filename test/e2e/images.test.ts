import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import { inflateSync } from "node:zlib";
import OpenAI from "openai";
import { startTestGateway, UPSTREAM_KEYS, type TestGateway } from "../helpers/gateway.ts";
import { FAKE_IMAGE_TOKENS, imageOutputTokensOf, imagePromptTokens } from "../fake-upstream/images.ts";
import { loadCatalog } from "../../src/plugins/catalog/catalog.ts";
import { priceUsage } from "../../src/plugins/metering/cost.ts";
import { readImagesUsage } from "../../src/formats/openai-images/index.ts";
import { nanoToUsd, usdToNano } from "../../src/core/money.ts";

setDefaultTimeout(20_000);

const MODEL = "gpt-image-2.6-sunburst";
const SIZES = ["1024x1024", "1536x1024", "1024x1536"] as const;
const QUALITIES = ["low", "medium", "high"] as const;
/** gpt-image-2.6-sunburst: $5 / $30 per million tokens, i.e. nano-USD per token. */
const INPUT_NANO = 5_000;
const OUTPUT_NANO = 30_000;

const catalog = loadCatalog("catalog.yaml");

/** The exact nano-USD cost the gateway must bill for an Images usage object. */
function expectedCost(usage: OpenAI.ImagesResponse["usage"]): number {
  const normalized = readImagesUsage(usage as never)!;
  return priceUsage(normalized, catalog.pricesFor(catalog.get(MODEL)!, normalized.inputTokens, new Date())).totalCost;
}

// ------------------------------------------------------------------ a small PNG decoder (independent of the gateway's encoder)

interface DecodedPng {
  width: number;
  height: number;
  colorType: number;
  /** Unfiltered scanlines, bytesPerPixel * width bytes each. */
  rows: Uint8Array[];
}

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/** Decodes an 8-bit, non-interlaced PNG: signature, chunk CRCs, IHDR, zlib IDAT, every filter type. Throws when invalid. */
function decodePng(bytes: Uint8Array): DecodedPng {
  expect([...bytes.subarray(0, 8)]).toEqual(PNG_SIGNATURE);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 8;
  let header: { width: number; height: number; depth: number; colorType: number; interlace: number } | undefined;
  const idat: Uint8Array[] = [];
  let ended = false;
  while (at < bytes.length) {
    const length = view.getUint32(at);
    const type = new TextDecoder().decode(bytes.subarray(at + 4, at + 8));
    const data = bytes.subarray(at + 8, at + 8 + length);
    const crc = view.getUint32(at + 8 + length);
    expect(Bun.hash.crc32(bytes.subarray(at + 4, at + 8 + length))).toBe(crc);
    if (header === undefined) expect(type).toBe("IHDR");
    if (type === "IHDR") {
      expect(length).toBe(13);
      header = { width: view.getUint32(at + 8), height: view.getUint32(at + 12), depth: data[8]!, colorType: data[9]!, interlace: data[12]! };
    } else if (type === "IDAT") idat.push(data);
    else if (type === "IEND") {
      ended = true;
      at += 12 + length;
      break;
    }
    at += 12 + length;
  }
  expect(ended).toBe(true);
  expect(at).toBe(bytes.length);
  expect(header!.depth).toBe(8);
  expect(header!.interlace).toBe(0);
  const channels = ({ 0: 1, 2: 3, 4: 2, 6: 4 } as Record<number, number>)[header!.colorType];
  expect(channels).toBeDefined();
  const raw = inflateSync(Buffer.concat(idat));
  const stride = header!.width * channels!;
  expect(raw.length).toBe(header!.height * (1 + stride));
  const rows: Uint8Array[] = [];
  let previous = new Uint8Array(stride);
  for (let y = 0; y < header!.height; y++) {
    const filter = raw[y * (1 + stride)]!;
    const line = raw.subarray(y * (1 + stride) + 1, (y + 1) * (1 + stride));
    const row = new Uint8Array(stride);
    for (let i = 0; i < stride; i++) {
      const left = i >= channels! ? row[i - channels!]! : 0;
      const up = previous[i]!;
      const upLeft = i >= channels! ? previous[i - channels!]! : 0;
      const predictor = [0, left, up, (left + up) >> 1, paeth(left, up, upLeft)][filter];
      expect(predictor).toBeDefined();
      row[i] = (line[i]! + predictor!) & 0xff;
    }
    rows.push(row);
    previous = row;
  }
  return { width: header!.width, height: header!.height, colorType: header!.colorType, rows };
}

function paeth(a: number, b: number, c: number): number {
  const p = a + b - c;
  const pa = Math.abs(p - a);
  const pb = Math.abs(p - b);
  const pc = Math.abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

function decodeB64Png(b64: string | undefined): DecodedPng {
  expect(typeof b64).toBe("string");
  return decodePng(new Uint8Array(Buffer.from(b64!, "base64")));
}

// ------------------------------------------------------------------ against the fake OpenAI upstream

describe("POST /v1/images/generations (openai provider, fake upstream)", () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(async () => {
    await t?.stop();
  });

  function imageCalls() {
    return t.fake.requests.filter((request) => request.path === "/v1/images/generations");
  }

  for (const quality of QUALITIES) {
    for (const size of SIZES) {
      it(`${quality} ${size}: a decodable PNG, usage by the table, the exact cost in x-gateway-cost and the balance`, async () => {
        const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
        t.fake.reset();
        const prompt = `A lighthouse at dusk, ${quality} quality, ${size}`;
        const { data, response } = await t.client(key).images.generate({ model: MODEL, prompt, size, quality }).withResponse();

        expect(data.data).toHaveLength(1);
        const image = data.data![0]!;
        expect(image.url).toBeUndefined();
        const png = decodeB64Png(image.b64_json);
        const [w, h] = size.split("x").map((side) => Number(side) / 128);
        expect([png.width, png.height]).toEqual([w!, h!]);
        expect(png.colorType).toBe(2);

        const output = FAKE_IMAGE_TOKENS[quality]![size]!;
        expect(data.usage).toMatchObject({ input_tokens: imagePromptTokens(prompt), output_tokens: output });
        const cost = expectedCost(data.usage);
        expect(cost).toBe(imagePromptTokens(prompt) * INPUT_NANO + output * OUTPUT_NANO);
        expect(response.headers.get("x-gateway-request-id")).toMatch(/^gen-[0-9a-f]{32}$/);
        expect(response.headers.get("x-gateway-cost")).toBe(String(nanoToUsd(cost)));
        expect(await balanceOf(t, accountId)).toBe(usdToNano(10) - cost);

        // Upstream: OpenAI's images endpoint with the provider's key, size and quality explicit, no response_format.
        const [call] = imageCalls();
        expect(call!.headers.authorization).toBe(`Bearer ${UPSTREAM_KEYS.openai}`);
        expect(call!.body).toEqual({ model: MODEL, prompt, size, quality, n: 1 });
      });
    }
  }

  it("the cost grows with quality and size (the table, at the output price)", () => {
    expect(FAKE_IMAGE_TOKENS.high!["1536x1024"]! * OUTPUT_NANO).toBe(186_240_000); // $0.18624
    expect(FAKE_IMAGE_TOKENS.low!["1024x1024"]! * OUTPUT_NANO).toBe(8_160_000); // $0.00816
  });

  it("defaults to 1024x1024 and medium quality, sent explicitly upstream", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    t.fake.reset();
    const prompt = "A red bicycle";
    const { data, response } = await t.client(key).images.generate({ model: MODEL, prompt }).withResponse();
    expect(imageCalls()[0]!.body).toEqual({ model: MODEL, prompt, size: "1024x1024", quality: "medium", n: 1 });
    expect(decodeB64Png(data.data![0]!.b64_json)).toMatchObject({ width: 8, height: 8 });
    const cost = imagePromptTokens(prompt) * INPUT_NANO + 1056 * OUTPUT_NANO;
    expect(response.headers.get("x-gateway-cost")).toBe(String(nanoToUsd(cost)));
    expect(await balanceOf(t, accountId)).toBe(usdToNano(10) - cost);
  });

  it("n=2 returns two images and bills both; response_format b64_json is accepted and not sent upstream", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    t.fake.reset();
    const prompt = "Two cats";
    const { data, response } = await t
      .client(key)
      .images.generate({ model: MODEL, prompt, n: 2, quality: "low", size: "1024x1536", response_format: "b64_json" })
      .withResponse();
    expect(data.data).toHaveLength(2);
    for (const image of data.data!) expect(decodeB64Png(image.b64_json)).toMatchObject({ width: 8, height: 12 });
    const body = imageCalls()[0]!.body;
    expect(body.n).toBe(2);
    expect("response_format" in body).toBe(false);
    const cost = imagePromptTokens(prompt) * INPUT_NANO + imageOutputTokensOf("low", "1024x1536", 2) * OUTPUT_NANO;
    expect(response.headers.get("x-gateway-cost")).toBe(String(nanoToUsd(cost)));
    expect(await balanceOf(t, accountId)).toBe(usdToNano(10) - cost);
  });

  it("settles with the usage the upstream reports, not the table, and writes the generation record", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    const directive = { usage: { text_tokens: 120, output_tokens: 5000 } };
    const { data, response } = await t
      .client(key)
      .images.generate({ model: MODEL, prompt: `A map [[fake ${JSON.stringify(directive)}]]`, quality: "high" })
      .withResponse();
    expect(data.usage).toMatchObject({ input_tokens: 120, output_tokens: 5000, total_tokens: 5120, input_tokens_details: { text_tokens: 120, image_tokens: 0 } });
    const cost = 120 * INPUT_NANO + 5000 * OUTPUT_NANO;
    expect(cost).toBe(150_600_000);
    expect(response.headers.get("x-gateway-cost")).toBe("0.1506");
    expect(await balanceOf(t, accountId)).toBe(usdToNano(10) - cost);

    const id = response.headers.get("x-gateway-request-id")!;
    let record: any;
    for (let attempt = 0; attempt < 50; attempt++) {
      const answer = await fetch(`${t.url}/v1/generation?id=${id}`, { headers: { authorization: `Bearer ${key}` } });
      if (answer.status === 200) {
        record = ((await answer.json()) as any).data;
        break;
      }
      await Bun.sleep(20);
    }
    expect(record).toMatchObject({
      gateway_request_id: id,
      model: MODEL,
      status: "success",
      usage: { prompt_tokens: 120, completion_tokens: 5000, total_tokens: 5120 },
      total_cost: 0.1506,
      cost_breakdown: { input: 0.0006, output: 0.15 },
    });
  });

  it("strips a hosted url from the upstream's answer", async () => {
    const { key } = await t.newAccountWithKey({ credit: 10 });
    const response = await fetch(`${t.url}/v1/images/generations`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, prompt: `A boat [[fake {"with_url": true}]]`, quality: "low" }),
    });
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text).not.toContain("images.example.invalid");
    const body = JSON.parse(text);
    expect(Object.keys(body.data[0])).toEqual(["b64_json"]);
    decodeB64Png(body.data[0].b64_json);
  });

  it("passes upstream errors on, and bills nothing for them", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    const client = t.client(key);
    const refused = await client.images
      .generate({ model: MODEL, prompt: `x [[fake {"status": 400, "error": {"message": "Your request was rejected by the safety system.", "code": "moderation_blocked"}}]]` })
      .catch((e) => e);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused.message).toContain("safety system");
    const broken = await client.images.generate({ model: MODEL, prompt: `x [[fake {"status": 500}]]` }).catch((e) => e);
    expect(broken.status).toBe(502);
    const empty = await client.images.generate({ model: MODEL, prompt: `x [[fake {"no_image": true}]]` }).catch((e) => e);
    expect(empty.status).toBe(502);
    expect(await balanceOf(t, accountId)).toBe(usdToNano(10));
  });

  it("an answer without usage is billed at the table for what was generated", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    const { response } = await t
      .client(key)
      .images.generate({ model: MODEL, prompt: `x [[fake {"no_usage": true}]]`, quality: "high", size: "1024x1536" })
      .withResponse();
    const cost = 6240 * OUTPUT_NANO;
    expect(response.headers.get("x-gateway-cost")).toBe(String(nanoToUsd(cost)));
    expect(await balanceOf(t, accountId)).toBe(usdToNano(10) - cost);
  });

  describe("bad input: 400 before any upstream call, nothing charged", () => {
    const cases: [string, Record<string, unknown>, string][] = [
      ["missing prompt", { model: MODEL }, "'prompt' is required"],
      ["empty prompt", { model: MODEL, prompt: "" }, "'prompt' must not be empty"],
      ["blank prompt", { model: MODEL, prompt: "   " }, "'prompt' must not be empty"],
      ["prompt not a string", { model: MODEL, prompt: 42 }, "'prompt' must be a string"],
      ["prompt an array", { model: MODEL, prompt: ["a", "b"] }, "'prompt' must be a string"],
      ["prompt over 32,000 characters", { model: MODEL, prompt: "a".repeat(32_001) }, "the limit is 32000"],
      ["size 512x512", { model: MODEL, prompt: "cat", size: "512x512" }, "'size' must be one of 1024x1024, 1536x1024, 1024x1536"],
      ["size auto", { model: MODEL, prompt: "cat", size: "auto" }, "'size' must be one of 1024x1024, 1536x1024, 1024x1536"],
      ["size 1792x1024", { model: MODEL, prompt: "cat", size: "1792x1024" }, "'size' must be one of"],
      ["quality hd", { model: MODEL, prompt: "cat", quality: "hd" }, "'quality' must be one of low, medium, high"],
      ["quality auto", { model: MODEL, prompt: "cat", quality: "auto" }, "'quality' must be one of low, medium, high"],
      ["quality HIGH", { model: MODEL, prompt: "cat", quality: "HIGH" }, "'quality' must be one of low, medium, high"],
      ["n = 0", { model: MODEL, prompt: "cat", n: 0 }, "'n' must be an integer from 1 to 4"],
      ["n = 5", { model: MODEL, prompt: "cat", n: 5 }, "'n' must be an integer from 1 to 4"],
      ["n = 1.5", { model: MODEL, prompt: "cat", n: 1.5 }, "'n' must be an integer from 1 to 4"],
      ["response_format url", { model: MODEL, prompt: "cat", response_format: "url" }, "'response_format' must be b64_json"],
      ["stream", { model: MODEL, prompt: "cat", stream: true }, "'stream' is not supported"],
      ["missing model", { prompt: "cat" }, "'model' is required"],
      ["a chat model", { model: "gpt-6.2-sol", prompt: "cat" }, "is a chat model"],
      ["an unknown model", { model: "gpt-image-1", prompt: "cat" }, "does not exist"],
    ];
    for (const [name, body, message] of cases) {
      it(name, async () => {
        const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
        t.fake.reset();
        const error = await t
          .client(key)
          .images.generate(body as never)
          .catch((e) => e);
        expect(error).toBeInstanceOf(OpenAI.BadRequestError);
        expect(error.status).toBe(400);
        expect(error.message).toContain(message);
        expect(error.error.type).toBe("invalid_request_error");
        expect(error.headers.get("x-gateway-request-id")).toMatch(/^gen-/);
        expect(t.fake.requests).toHaveLength(0);
        expect(await balanceOf(t, accountId)).toBe(usdToNano(10));
      });
    }
  });

  it("the image model on /v1/chat/completions and /v1/messages is a 400 with no upstream call", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    t.fake.reset();
    const chat = await t
      .client(key)
      .chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "draw a cat" }] })
      .catch((e) => e);
    expect(chat).toBeInstanceOf(OpenAI.BadRequestError);
    expect(chat.message).toContain("/v1/images/generations");
    const messages = await fetch(`${t.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": key, "content-type": "application/json", "anthropic-version": "2023-06-01" },
      body: JSON.stringify({ model: MODEL, max_tokens: 100, messages: [{ role: "user", content: "draw a cat" }] }),
    });
    expect(messages.status).toBe(400);
    expect(JSON.stringify(await messages.json())).toContain("/v1/images/generations");
    expect(t.fake.requests).toHaveLength(0);
    expect(await balanceOf(t, accountId)).toBe(usdToNano(10));
  });

  it("refuses a balance below the hold for high 1536x1024 with 400 insufficient_balance before the upstream call", async () => {
    // $0.15 covers low 1024x1024 (272 tokens = $0.00816) but not high 1536x1024 (6,208 tokens = $0.18624).
    const { accountId, key } = await t.newAccountWithKey({ credit: 0.15, kind: "voucher" });
    t.fake.reset();
    const client = t.client(key);
    const refused = await client.images.generate({ model: MODEL, prompt: "A castle", quality: "high", size: "1536x1024" }).catch((e) => e);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused.error).toMatchObject({ code: "insufficient_balance" });
    expect(t.fake.requests).toHaveLength(0);
    expect(await balanceOf(t, accountId)).toBe(usdToNano(0.15));

    const { data, response } = await client.images.generate({ model: MODEL, prompt: "A castle", quality: "low", size: "1024x1024" }).withResponse();
    decodeB64Png(data.data![0]!.b64_json);
    expect(imageCalls()).toHaveLength(1);
    const cost = imagePromptTokens("A castle") * INPUT_NANO + 272 * OUTPUT_NANO;
    expect(response.headers.get("x-gateway-cost")).toBe(String(nanoToUsd(cost)));
    expect(await balanceOf(t, accountId)).toBe(usdToNano(0.15) - cost);
  });
});

// ------------------------------------------------------------------ sandbox: no provider key at all

describe("POST /v1/images/generations in sandbox mode without any provider key", () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ env: { GATEWAY_SANDBOX: "true", OPENAI_API_KEY: "", DEEPSEEK_API_KEY: "", XAI_API_KEY: "", MISTRAL_API_KEY: "" } });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it("returns a valid PNG of the requested aspect, usage from the token table, billed exactly", async () => {
    const { accountId, key } = await t.newAccountWithKey({ credit: 10 });
    t.fake.reset();
    const prompt = "A watercolor fox in the snow";
    const { data, response } = await t.client(key).images.generate({ model: MODEL, prompt, size: "1536x1024", quality: "high" }).withResponse();
    const png = decodeB64Png(data.data![0]!.b64_json);
    expect([png.width, png.height]).toEqual([12, 8]);
    expect(png.rows[0]!.slice(0, 3)).not.toEqual(png.rows[0]!.slice(3, 6)); // a checkerboard, not a blank
    const input = Math.ceil(prompt.length / 4);
    expect(data.usage).toMatchObject({ input_tokens: input, output_tokens: 6208, total_tokens: input + 6208 });
    const cost = input * INPUT_NANO + 6208 * OUTPUT_NANO;
    expect(response.headers.get("x-gateway-cost")).toBe(String(nanoToUsd(cost)));
    expect(await balanceOf(t, accountId)).toBe(usdToNano(10) - cost);
    expect(t.fake.requests).toHaveLength(0);

    // Deterministic: the same prompt gives the same image.
    const again = await t.client(key).images.generate({ model: MODEL, prompt, size: "1536x1024", quality: "high" });
    expect(again.data![0]!.b64_json).toBe(data.data![0]!.b64_json);
  });

  it("serves the defaults and n images", async () => {
    const { key } = await t.newAccountWithKey({ credit: 10 });
    const result = await t.client(key).images.generate({ model: MODEL, prompt: "Three moons", n: 3 });
    expect(result.data).toHaveLength(3);
    for (const image of result.data!) expect(decodeB64Png(image.b64_json)).toMatchObject({ width: 8, height: 8 });
    expect(result.usage!.output_tokens).toBe(3 * 1056);
  });
});

async function balanceOf(t: TestGateway, accountId: string): Promise<number> {
  const { body } = await t.admin("GET", `/admin/v1/accounts/${accountId}`);
  return usdToNano(String(body.data.balance));
}
