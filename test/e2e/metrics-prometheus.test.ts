import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";

/**
 * The real Prometheus (Debian's `prometheus` package) scrapes the gateway's /metrics with the bearer token and
 * answers a query with the gateway's count. Skipped with a printed reason without /usr/bin/prometheus; under CI=true
 * that is a failure instead (.ci/run installs the package).
 */

const PROMETHEUS = process.env.PROMETHEUS_PATH ?? "/usr/bin/prometheus";
const HAVE_PROMETHEUS = existsSync(PROMETHEUS);
const CI = process.env.CI === "true";
const TOKEN = "metrics-token-for-prometheus";
const REQUESTS = 3;

function prometheusSuite(name: string): boolean {
  if (HAVE_PROMETHEUS) return true;
  if (CI) {
    describe(`${name} (CI)`, () => {
      it("has Prometheus to run with", () => {
        throw new Error(`CI=true and no Prometheus at ${PROMETHEUS}: .ci/run installs Debian's prometheus package`);
      });
    });
  } else {
    console.warn(`\n[metrics] ******** SKIPPED ${name}: no Prometheus at ${PROMETHEUS} (apt-get install -y prometheus, or set PROMETHEUS_PATH) ********\n`);
  }
  return false;
}

/** A port free now on 127.0.0.1. */
function freePort(): number {
  const probe = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response(null) });
  const port = probe.port!;
  probe.stop(true);
  return port;
}

const SUITE = "GET /metrics scraped by the real Prometheus";

describe.skipIf(!prometheusSuite(SUITE))(SUITE, () => {
  let t: TestGateway;
  let dir: string;
  let prometheus: ReturnType<typeof Bun.spawn> | undefined;
  let api: string;
  let logs = "";

  beforeAll(async () => {
    t = await startTestGateway({ env: { METRICS_TOKEN: TOKEN } });
    const { key } = await t.newAccountWithKey({ credit: 10 });
    for (let i = 0; i < REQUESTS; i++) {
      await t.client(key).chat.completions.create({ model: "gpt-6-luna", messages: [{ role: "user", content: "hello" }] });
    }
    dir = mkdtempSync(join(tmpdir(), "gateway-prometheus-"));
    const target = new URL(t.url).host;
    writeFileSync(
      join(dir, "prometheus.yml"),
      [
        "global:",
        "  scrape_interval: 1s",
        "  evaluation_interval: 1s",
        "scrape_configs:",
        "  - job_name: ai-gateway",
        "    metrics_path: /metrics",
        "    authorization:",
        "      type: Bearer",
        `      credentials: ${TOKEN}`,
        "    static_configs:",
        `      - targets: ["${target}"]`,
        "",
      ].join("\n"),
    );
    const port = freePort();
    api = `http://127.0.0.1:${port}`;
    prometheus = Bun.spawn(
      [PROMETHEUS, `--config.file=${join(dir, "prometheus.yml")}`, `--storage.tsdb.path=${join(dir, "data")}`, `--web.listen-address=127.0.0.1:${port}`],
      { stdout: "ignore", stderr: "pipe" },
    );
    // Kept for a failure's message.
    void (async () => {
      const reader = prometheus.stderr instanceof ReadableStream ? prometheus.stderr.getReader() : undefined;
      const decoder = new TextDecoder();
      for (;;) {
        const chunk = await reader?.read().catch(() => undefined);
        if (!chunk || chunk.done) break;
        logs = (logs + decoder.decode(chunk.value)).slice(-4000);
      }
    })();
  }, 30_000);

  afterAll(async () => {
    prometheus?.kill("SIGTERM");
    await prometheus?.exited;
    await t?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("reads gateway_requests_total with the gateway's exact count through its query API", async () => {
    const query = encodeURIComponent('sum(gateway_requests_total{job="ai-gateway",model="gpt-6-luna",code="ok"})');
    const deadline = Date.now() + 60_000;
    let last: unknown;
    while (Date.now() < deadline) {
      last = await fetch(`${api}/api/v1/query?query=${query}`)
        .then((response) => (response.ok ? response.json() : response.status))
        .catch((error) => String(error));
      const result = (last as { data?: { result?: { value: [number, string] }[] } })?.data?.result;
      if (result && result.length === 1 && result[0]!.value[1] === String(REQUESTS)) break;
      await Bun.sleep(250);
    }
    if (Date.now() >= deadline) throw new Error(`Prometheus never read the count: ${JSON.stringify(last)}\n${logs}`);
    // The scrape itself was healthy: authenticated, parsed.
    const up = (await (await fetch(`${api}/api/v1/query?query=${encodeURIComponent('up{job="ai-gateway"}')}`)).json()) as { data: { result: { value: [number, string] }[] } };
    expect(up.data.result[0].value[1]).toBe("1");
  }, 70_000);
});
