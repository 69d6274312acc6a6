import { afterEach, describe, expect, it, setDefaultTimeout } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startGateway, type RunningGateway } from "../../src/core/lifecycle.ts";
import { createLogger } from "../../src/core/log.ts";

// Each case waits for a fresh one-second window of the edge limit (up to three times on a slow machine).
setDefaultTimeout(30_000);

/**
 * Issue 25, item 10: behind a load balancer every client would share one edge limit. With
 * `server.trusted_proxies` (TRUSTED_PROXIES), a request whose socket peer is a trusted proxy counts and logs
 * as the address that proxy forwarded (rightmost untrusted X-Forwarded-For hop); from any other peer the
 * header is ignored. Real gateways, real HTTP from 127.0.0.1 (and ::1), configured trusted or not.
 */
const LIMIT = 2;

interface Started {
  gateway: RunningGateway;
  lines: string[];
  dataDir: string;
}

const started: Started[] = [];
afterEach(async () => {
  for (const { gateway, dataDir } of started.splice(0)) {
    await gateway.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

async function gatewayTrusting(trustedProxies: string, host = "127.0.0.1"): Promise<Started> {
  const dataDir = mkdtempSync(join(tmpdir(), "operations-proxies-"));
  const lines: string[] = [];
  const gateway = await startGateway({
    port: 0,
    env: {
      HOST: host,
      DATABASE_URL: `sqlite:${join(dataDir, "gateway.db")}`,
      GATEWAY_ADMIN_TOKEN: "operations-proxies-admin",
      EDGE_RATE_LIMIT_RPS: String(LIMIT),
      TRUSTED_PROXIES: trustedProxies,
    },
    log: createLogger("core", { silent: false, sink: (line) => void lines.push(line) }),
  });
  const entry = { gateway, lines, dataDir };
  started.push(entry);
  return entry;
}

/** Sleeps until just after the next wall-clock second starts (the edge limit counts in fixed one-second windows). */
async function nextSecond(): Promise<void> {
  await Bun.sleep(1000 - (Date.now() % 1000) + 15);
}

/**
 * GET /nope once per forwarded header value, in one one-second window (retried when a slow machine straddles
 * two): the statuses, and the client_ip of each request line.
 */
async function sendInOneWindow(url: string, forwarded: (string | undefined)[], lines: string[]): Promise<{ statuses: number[]; clients: string[] }> {
  for (let attempt = 0; ; attempt++) {
    await nextSecond();
    const window = Math.floor(Date.now() / 1000);
    const from = lines.length;
    const statuses: number[] = [];
    for (const value of forwarded) {
      const response = await fetch(`${url}/nope`, { headers: value === undefined ? {} : { "x-forwarded-for": value } });
      await response.arrayBuffer();
      statuses.push(response.status);
    }
    if (Math.floor(Date.now() / 1000) !== window && attempt < 2) continue;
    await Bun.sleep(20);
    const clients = lines
      .slice(from)
      .map((line) => JSON.parse(line))
      .filter((line) => line.message === "request")
      .map((line) => line.client_ip as string);
    return { statuses, clients };
  }
}

describe("trusted proxies: the edge limit and the request lines use one client address", () => {
  it("from a trusted peer, each forwarded client has its own limit and its own address in the lines", async () => {
    const { gateway, lines } = await gatewayTrusting("127.0.0.1");
    const { statuses, clients } = await sendInOneWindow(gateway.url, ["198.51.100.1", "198.51.100.1", "198.51.100.2", "198.51.100.1", "198.51.100.2"], lines);
    // 404 = let through (the path does not exist), 429 = over the limit.
    expect(statuses).toEqual([404, 404, 404, 429, 404]);
    expect(clients).toEqual(["198.51.100.1", "198.51.100.1", "198.51.100.2", "198.51.100.1", "198.51.100.2"]);
  });

  it("what a client writes left of the trusted proxy's entry is ignored: the rightmost untrusted hop counts", async () => {
    const { gateway, lines } = await gatewayTrusting("127.0.0.1, 10.0.0.0/8");
    // The client forges a different first hop each time; the proxy chain (10.0.0.7) appended the real address.
    const forged = ["1.1.1.1", "2.2.2.2", "3.3.3.3"].map((fake) => `${fake}, 203.0.113.50, 10.0.0.7`);
    const { statuses, clients } = await sendInOneWindow(gateway.url, forged, lines);
    expect(statuses).toEqual([404, 404, 429]);
    expect(clients).toEqual(["203.0.113.50", "203.0.113.50", "203.0.113.50"]);
  });

  it("from an untrusted peer, forged headers are ignored: one limit for the socket peer", async () => {
    for (const trusted of ["", "10.0.0.0/8, fd00::/8"]) {
      const { gateway, lines } = await gatewayTrusting(trusted);
      const { statuses, clients } = await sendInOneWindow(gateway.url, ["198.51.100.1", "198.51.100.2", "198.51.100.3"], lines);
      expect(statuses).toEqual([404, 404, 429]);
      expect(clients).toEqual(["127.0.0.1", "127.0.0.1", "127.0.0.1"]);
    }
  });

  it("a trusted peer that sends no header is the client itself", async () => {
    const { gateway, lines } = await gatewayTrusting("127.0.0.1");
    const { statuses, clients } = await sendInOneWindow(gateway.url, [undefined, "198.51.100.9", undefined, undefined], lines);
    expect(statuses).toEqual([404, 404, 404, 429]);
    expect(clients).toEqual(["127.0.0.1", "198.51.100.9", "127.0.0.1", "127.0.0.1"]);
  });

  it("IPv6: a trusted ::1 peer forwards an IPv6 client, counted with its /56 and logged as itself", async () => {
    const { gateway, lines } = await gatewayTrusting("::1", "::1");
    expect(gateway.url).toContain("[::1]");
    // Three addresses of one /56 (a client stepping through its own network), then one of another network.
    const forwarded = ["2001:db8::1", "2001:DB8:0::1", "2001:db8:0:ff::2", "2001:db8:0:100::1"];
    const { statuses, clients } = await sendInOneWindow(gateway.url, forwarded, lines);
    expect(statuses).toEqual([404, 404, 429, 404]);
    expect(clients).toEqual(["2001:db8::1", "2001:db8::1", "2001:db8:0:ff::2", "2001:db8:0:100::1"]);
  });

  it("a dual-stack listener sees IPv4 peers as IPv4: 127.0.0.1 is trusted on ::", async () => {
    const { gateway, lines } = await gatewayTrusting("127.0.0.1", "::");
    const url = `http://127.0.0.1:${gateway.port}`;
    const { statuses, clients } = await sendInOneWindow(url, ["198.51.100.1", "198.51.100.2"], lines);
    expect(statuses).toEqual([404, 404]);
    expect(clients).toEqual(["198.51.100.1", "198.51.100.2"]);
  });
});
