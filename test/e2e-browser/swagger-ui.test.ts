import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";

// A cold Chromium start and the 4 MB docs script; normally a few seconds.
setDefaultTimeout(60_000);

/** Debian's chromium package (apt-get install -y chromium); CHROMIUM_PATH names another build. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const HAVE_CHROMIUM = existsSync(CHROMIUM);
const CI = process.env.CI === "true";

if (!HAVE_CHROMIUM && !CI) {
  console.warn(
    `\n[e2e-browser] ******** SKIPPED the /swagger browser test: no Chromium at ${CHROMIUM} ********\n` +
      "[e2e-browser] Install it with `apt-get install -y chromium` (or set CHROMIUM_PATH); under CI=true this test fails instead.\n",
  );
}

if (!HAVE_CHROMIUM && CI) {
  describe("/swagger in a browser (CI)", () => {
    it("has Chromium to run with", () => {
      throw new Error(`CI=true and no Chromium at ${CHROMIUM}: .ci/run installs Debian's chromium package; the docs page cannot be checked`);
    });
  });
}

describe.skipIf(!HAVE_CHROMIUM)("/swagger in headless Chromium, with the network cut off from everything but the gateway", () => {
  let t: TestGateway;
  let browser: Browser;

  beforeAll(async () => {
    t = await startTestGateway();
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  it("renders every documented endpoint, and asks for nothing outside the gateway", async () => {
    const gateway = new URL(t.url).origin;
    const spec = (await (await fetch(`${t.url}/swagger/json`)).json()) as { paths: Record<string, unknown> };
    const paths = Object.keys(spec.paths);
    expect(paths).toEqual(
      expect.arrayContaining([
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/messages/count_tokens",
        "/v1/responses",
        "/v1/images/generations",
        "/v1/models",
        "/v1/models/{id}",
        "/v1/generation",
        "/v1/usage",
        "/v1/credits",
        "/v1/key",
        "/health",
        "/ready",
        "/admin/v1/accounts",
      ]),
    );

    const page = await browser.newPage();
    const outside: string[] = [];
    const served: string[] = [];
    const failed: string[] = [];
    const errors: string[] = [];
    // The network cut: only the gateway's own origin answers; anything else is aborted and recorded.
    await page.route("**/*", (route) => {
      const url = route.request().url();
      if (new URL(url).origin === gateway) {
        served.push(new URL(url).pathname);
        return route.continue();
      }
      outside.push(url);
      return route.abort("blockedbyclient");
    });
    page.on("requestfailed", (request) => failed.push(`${request.url()}: ${request.failure()?.errorText}`));
    page.on("pageerror", (error) => errors.push(error.message));

    const response = await page.goto(`${t.url}/swagger`);
    expect(response?.status()).toBe(200);
    // Rendered: every path of the document is in the page's text (not only in the script or the JSON).
    // (Strings: they run in the page, where `document` is; this project compiles without the DOM types.)
    await page.waitForFunction(`${JSON.stringify(paths)}.every((path) => document.body.innerText.includes(path))`, undefined, { timeout: 30_000 }).catch(() => undefined);
    const text = await page.evaluate<string>("document.body.innerText");
    await page.close();

    expect(paths.filter((path) => !text.includes(path))).toEqual([]);
    expect(text).toContain("AI gateway");
    expect(outside).toEqual([]);
    expect(failed.filter((line) => !outside.some((url) => line.startsWith(url)))).toEqual([]);
    expect(errors).toEqual([]);
    expect(served).toEqual(expect.arrayContaining(["/swagger", "/swagger/assets/scalar.js", "/swagger/json"]));
  });
});
