import { afterAll, describe, expect, it } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { freePort, waitFor } from "../helpers/processes.ts";

/**
 * GATEWAY_WORKERS=auto in a container: one worker per CPU the process may use, its cgroup's CPU quota included (Bun's
 * availableParallelism() reads it; Node's does not: src/core/config.ts workerCount). A real cgroup with a quota of one CPU (cgroup v1's cpu controller, or v2's where it is enabled),
 * where this machine lets the test make one (root); skipped elsewhere.
 */

const ROOT = resolve(import.meta.dir, "../..");
const BUN = join(ROOT, "node_modules/.bin/bun");
const dir = mkdtempSync(join(tmpdir(), "gateway-workers-auto-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A new cgroup limited to `cpus` CPUs: the file a process joins it through, and its removal. */
function cgroupWithQuota(cpus: number): { procs: string; remove(): void } | null {
  const name = `gateway-test-${process.pid}-${Date.now()}`;
  const quota = Math.round(cpus * 100_000);
  const hierarchies: { path: string; usable(): boolean; limit(path: string): void }[] = [
    {
      path: join("/sys/fs/cgroup/cpu", name),
      usable: () => true,
      limit: (path) => {
        writeFileSync(join(path, "cpu.cfs_period_us"), "100000");
        writeFileSync(join(path, "cpu.cfs_quota_us"), String(quota));
      },
    },
    {
      path: join("/sys/fs/cgroup", name),
      usable: () => readFileSync("/sys/fs/cgroup/cgroup.subtree_control", "utf8").split(/\s+/).includes("cpu"),
      limit: (path) => writeFileSync(join(path, "cpu.max"), `${quota} 100000`),
    },
  ];
  for (const { path, usable, limit } of hierarchies) {
    try {
      if (!usable()) continue;
      mkdirSync(path);
    } catch {
      continue; // Not this hierarchy, or not allowed here.
    }
    try {
      limit(path);
      return { procs: join(path, "cgroup.procs"), remove: () => rmdirSync(path) };
    } catch {
      rmdirSync(path);
    }
  }
  return null;
}

/** Starts `bun src/index.ts` with GATEWAY_WORKERS=auto (inside the cgroup whose procs file is given), until it listens. */
async function startAuto(procs: string | null) {
  const port = String(freePort());
  const command = procs === null ? [BUN, "src/index.ts"] : ["sh", "-c", `echo $$ > '${procs}' && exec '${BUN}' src/index.ts`];
  const child = Bun.spawn(command, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? tmpdir(), HOST: "127.0.0.1", PORT: port, GATEWAY_WORKERS: "auto", DATABASE_URL: `sqlite:${join(dir, `${crypto.randomUUID()}.db`)}`, GATEWAY_ADMIN_TOKEN: "workers-auto-admin" },
    stdout: "pipe",
    stderr: "pipe",
  });
  let output = "";
  const reading = (async () => {
    for await (const chunk of child.stdout) output += new TextDecoder().decode(chunk);
  })();
  const lines = () => output.split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line));
  await waitFor(() => lines().some((line) => line.message === "gateway listening"), 30_000, "the gateway to listen");
  child.kill("SIGTERM");
  await child.exited;
  await reading;
  return lines();
}

// With one core the quota could change nothing: no cgroup is made.
const cgroup = availableParallelism() > 1 ? cgroupWithQuota(1) : null;
const describeWithCgroup = cgroup !== null ? describe : describe.skip;

describeWithCgroup("GATEWAY_WORKERS=auto under a CPU quota", () => {
  afterAll(() => cgroup?.remove());

  it("starts one worker per core without a quota, and one process under a quota of one CPU", async () => {
    const free = await startAuto(null);
    expect(free.find((line) => line.message === "workers: one per available CPU")).toMatchObject({ workers: availableParallelism() });
    expect(free.find((line) => line.message === "gateway listening")).toMatchObject({ workers: availableParallelism() });

    const limited = await startAuto(cgroup!.procs);
    expect(limited.find((line) => line.message === "workers: one per available CPU")).toMatchObject({ workers: 1 });
    // One process: no primary, no worker lines.
    expect(limited.filter((line) => line.message === "worker listening")).toHaveLength(0);
    expect(limited.find((line) => line.message === "gateway listening")!.workers).toBeUndefined();
  }, 60_000);
});

if (cgroup === null) describe.skip("GATEWAY_WORKERS=auto under a CPU quota (needs two cores or more and a cgroup this process may create: root, cgroup v1 cpu or v2 with cpu enabled)", () => it("skipped", () => {}));
