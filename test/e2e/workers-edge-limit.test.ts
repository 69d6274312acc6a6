/**
 * The edge limit across two worker processes (GATEWAY_WORKERS=2): one count per client address per second, kept by
 * the primary (src/plugins/edge-rate-limit/shared-counts.ts). Every request goes on a new connection, so the kernel
 * spreads them over both workers (SO_REUSEPORT); each worker counting alone would let an address through up to twice.
 */
import { afterAll, beforeAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import { startGatewayProcess, type GatewayProcess } from "../helpers/gateway-process.ts";
import { waitFor } from "../helpers/processes.ts";

setDefaultTimeout(60_000);

const LIMIT = 10;
let gateway: GatewayProcess;

beforeAll(async () => {
  gateway = await startGatewayProcess({ GATEWAY_WORKERS: "2", EDGE_RATE_LIMIT_RPS: String(LIMIT) });
  await waitFor(() => gateway.stdout.text().includes('"message":"gateway listening"'), 30_000, "both workers listening");
});

afterAll(async () => {
  if (gateway?.alive()) {
    gateway.child.kill("SIGTERM");
    await gateway.child.exited;
  }
  await gateway?.stop();
});

/**
 * GET /v1/models without a key, on a connection of its own: 401 when the edge limit lets it through (its request line
 * names the worker), 429 when it refuses it. Nothing else in this file asks for that path.
 */
async function probe(): Promise<number> {
  const response = await fetch(`${gateway.url}/v1/models`, { headers: { connection: "close" }, keepalive: false });
  await response.arrayBuffer();
  return response.status;
}

/** `count` probes at once, starting just after a second begins; null when they did not all end within that second. */
async function burstWithinOneSecond(count: number): Promise<number[] | null> {
  while (Date.now() % 1000 > 20) await Bun.sleep(1);
  const second = Math.floor(Date.now() / 1000);
  const statuses = await Promise.all(Array.from({ length: count }, probe));
  return Math.floor(Date.now() / 1000) === second ? statuses : null;
}

/** Per worker, the probes it let through (401) and refused (429), from its request lines. */
function probesByWorker(): Map<number, { through: number; refused: number }> {
  const byWorker = new Map<number, { through: number; refused: number }>();
  for (const line of gateway.stdout.text().split("\n")) {
    if (!line.includes('"message":"request"') || !line.includes('"path":"/v1/models"')) continue;
    const { worker, status } = JSON.parse(line) as { worker: number; status: number };
    const counts = byWorker.get(worker) ?? { through: 0, refused: 0 };
    if (status === 401) counts.through += 1;
    if (status === 429) counts.refused += 1;
    byWorker.set(worker, counts);
  }
  return byWorker;
}

describe("the edge limit with two workers", () => {
  it("lets an address through exactly its limit in a second, whichever worker serves it", async () => {
    let statuses: number[] | null = null;
    for (let attempt = 0; attempt < 5 && statuses === null; attempt++) statuses = await burstWithinOneSecond(3 * LIMIT);
    expect(statuses).not.toBeNull();
    expect(statuses!.filter((status) => status === 401).length).toBe(LIMIT);
    expect(statuses!.filter((status) => status === 429).length).toBe(2 * LIMIT);
    await waitFor(() => [...probesByWorker().values()].reduce((sum, c) => sum + c.through + c.refused, 0) === 3 * LIMIT, 5_000, "the probes' request lines");
    const byWorker = probesByWorker();
    // Both workers served probes, and one refused some before letting LIMIT through itself: it went by the shared
    // count (a worker counting alone refuses only once it has let the whole limit through).
    expect([...byWorker.keys()].sort()).toEqual([0, 1]);
    expect([...byWorker.values()].some((counts) => counts.refused > 0 && counts.through < LIMIT)).toBe(true);
  });

  it("admits the address again in the next second", async () => {
    await Bun.sleep(1_100);
    expect(await probe()).toBe(401);
  });
});
