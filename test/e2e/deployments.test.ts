import { afterAll, beforeAll, describe, expect, it } from "bun:test";
import { startFakeUpstream, type FakeUpstream } from "../fake-upstream/server.ts";
import { startTestGateway, type TestGateway } from "../helpers/gateway.ts";

/**
 * A provider's deployments from the environment's comma-separated shortcut (OPENAI_BASE_URL=a,b with
 * OPENAI_API_KEY=ka,kb), and the core's attempt loop over them: a failing primary, then the secondary.
 */

/** A deployment that answers every request with `status` (an OpenAI error body), recording the key it carried. */
function failingDeployment(status: number) {
  const keys: string[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(request) {
      keys.push(request.headers.get("authorization") ?? "");
      return Response.json({ error: { message: `primary is down (${status})`, type: "server_error", code: null } }, { status });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, keys, status, stop: () => server.stop(true) };
}

const MODEL = "gpt-6-luna";
const ask = (t: TestGateway, key: string, text = "hello") =>
  t.client(key).chat.completions.create({ model: MODEL, messages: [{ role: "user", content: text }] }).catch((error) => error);

describe("provider deployments", () => {
  let fake: FakeUpstream;
  let down: ReturnType<typeof failingDeployment>;
  let picky: ReturnType<typeof failingDeployment>;
  let t: TestGateway;
  let tBad: TestGateway;

  beforeAll(async () => {
    fake = await startFakeUpstream();
    down = failingDeployment(500);
    picky = failingDeployment(400);
    // Each gateway its own deployment health (in Redis too when REDIS_URL is set): other tests' breakers stay theirs.
    const own = () => ({ UPSTREAM_HEALTH_REDIS_PREFIX: `deployments-test-${crypto.randomUUID()}:` });
    t = await startTestGateway({ fake, env: { ...own(), OPENAI_BASE_URL: `${down.url}/v1,${fake.url}/v1`, OPENAI_API_KEY: "sk-primary-key,sk-secondary-key" } });
    tBad = await startTestGateway({ fake, env: { ...own(), OPENAI_BASE_URL: `${picky.url}/v1, ${fake.url}/v1`, OPENAI_API_KEY: "sk-one-key-for-all" } });
  });

  afterAll(async () => {
    await t?.stop();
    await tBad?.stop();
    down?.stop();
    picky?.stop();
    await fake?.stop();
  });

  it("answers from the secondary when the primary answers 500, each deployment with its own key", async () => {
    const { key } = await t.newAccountWithKey({ credit: 10 });
    fake.reset();
    const before = down.keys.length;
    const answer = await ask(t, key);
    expect(answer.choices?.[0]?.message?.content).toBeString();
    expect(down.keys.slice(before)).toEqual(["Bearer sk-primary-key"]);
    expect(fake.requests.filter((r) => r.path.endsWith("/chat/completions")).map((r) => r.headers.authorization)).toEqual(["Bearer sk-secondary-key"]);
  });

  it("passes a 400 from the primary on without trying the secondary; one key serves every URL", async () => {
    const { key } = await tBad.newAccountWithKey({ credit: 10 });
    fake.reset();
    const refused = await ask(tBad, key);
    expect(refused.status).toBe(400);
    expect(refused.message).toContain("primary is down (400)");
    expect(picky.keys).toEqual(["Bearer sk-one-key-for-all"]);
    expect(fake.requests).toHaveLength(0);
  });

  it("refuses to start when the URL and key lists do not pair up", async () => {
    const failed = await startTestGateway({ fake, env: { OPENAI_BASE_URL: `${fake.url}/v1,${fake.url}/v1,${fake.url}/v1`, OPENAI_API_KEY: "ka,kb" } }).then(
      (gateway) => gateway.stop().then(() => undefined),
      (error: Error) => error,
    );
    expect(failed?.message).toContain("3 base URLs and 2 keys in OPENAI_API_KEY");
    expect(failed?.message).not.toContain("ka");
  });
});
