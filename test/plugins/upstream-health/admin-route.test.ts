import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { startTestGateway, type TestGateway } from "../../helpers/gateway.ts";

describe("GET /admin/v1/upstreams", () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway();
  });
  afterAll(async () => {
    await gw.stop();
  });

  it("is a 401 without the admin token", async () => {
    const answer = await gw.admin("GET", "/admin/v1/upstreams", undefined, "wrong-token");
    expect(answer.status).toBe(401);
    const bare = await fetch(`${gw.url}/admin/v1/upstreams`);
    expect(bare.status).toBe(401);
  });

  it("lists each provider's deployments with their health", async () => {
    const answer = await gw.admin("GET", "/admin/v1/upstreams");
    expect(answer.status).toBe(200);
    const providers = answer.body.data as { provider: string; deployments: any[] }[];
    const openai = providers.find((p) => p.provider === "openai");
    expect(openai).toBeDefined();
    expect(openai!.deployments.length).toBeGreaterThanOrEqual(1);
    expect(openai!.deployments[0]).toMatchObject({
      breaker: "closed",
      failures: 0,
      errors_last_5m: {},
      p50_latency_ms: null,
      in_flight: 0,
      waiting_until: null,
      probe_at: null,
    });
    expect(typeof openai!.deployments[0].name).toBe("string");
  });
});
