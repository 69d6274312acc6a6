import { afterAll, describe, expect, it, setDefaultTimeout } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { availableParallelism } from "node:os";
import { ConfigError, defaultConfigFile, loadConfig, workerCount } from "../../src/core/config.ts";
import { startGateway } from "../../src/core/lifecycle.ts";
import { createLogger } from "../../src/core/log.ts";

// Normally a few seconds; the margin is for a loaded machine (bun's default per-test limit is 5 s).
setDefaultTimeout(20_000);

const ROOT = resolve(import.meta.dir, "../..");
const dir = mkdtempSync(join(tmpdir(), "gateway-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let counter = 0;
/** Writes a YAML file in the temp folder and returns its absolute path. */
function yamlFile(text: string): string {
  const file = join(dir, `config-${++counter}.yaml`);
  writeFileSync(file, text);
  return file;
}

/** The ConfigError `loadConfig` rejects with (fails the test when it resolves or throws something else). */
async function configError(file: string, env: Record<string, string | undefined> = {}): Promise<ConfigError> {
  try {
    await loadConfig(file, env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error(`loadConfig(${file}) did not fail`);
}

/** A ConfigError message is one line naming the file, then each of `parts`. */
function expectOneLine(error: ConfigError, file: string, ...parts: string[]) {
  expect(error.message).not.toContain("\n");
  expect(error.message.startsWith(`${file}: `)).toBe(true);
  for (const part of parts) expect(error.message).toContain(part);
}

const names = (config: Awaited<ReturnType<typeof loadConfig>>) => config.plugins.map((plugin) => plugin.definition.name);

describe("environment expansion", () => {
  const file = yamlFile(`
server:
  port: \${GW_TEST_PORT}
  hostname: \${GW_TEST_HOST:-127.0.0.9}
plugins:
  storage:
    config:
      database_url: "sqlite:\${GW_TEST_DIR:-/tmp/default}/gw.db"
      flush_interval_ms: \${GW_TEST_FLUSH:-7}
`);

  it("expands ${VAR} and ${VAR:-default}, inside longer strings too, and converts numbers", async () => {
    const config = await loadConfig(file, { GW_TEST_PORT: "8123", GW_TEST_DIR: "/srv/data" });
    expect(config.file).toBe(file);
    expect(config.server.port).toBe(8123);
    expect(config.server.hostname).toBe("127.0.0.9");
    expect(config.server.drain_timeout_ms).toBe(30_000);
    expect(names(config)).toEqual(["storage"]);
    expect(config.plugins[0]!.config).toMatchObject({ database_url: "sqlite:/srv/data/gw.db", flush_interval_ms: 7 });
  });

  it("lets a set variable win over the default, and treats an empty one as unset", async () => {
    const config = await loadConfig(file, { GW_TEST_PORT: "1", GW_TEST_HOST: "", GW_TEST_FLUSH: "25", GW_TEST_DIR: "/d" });
    expect(config.server.hostname).toBe("127.0.0.9");
    expect(config.plugins[0]!.config).toMatchObject({ flush_interval_ms: 25, database_url: "sqlite:/d/gw.db" });
  });

  it("names a missing variable without default in a one-line ConfigError", async () => {
    const error = await configError(file, {});
    expectOneLine(error, file, "GW_TEST_PORT", "not set");
    const empty = await configError(file, { GW_TEST_PORT: "" });
    expect(empty.message).toContain("GW_TEST_PORT");
  });

  it("checks the expanded server block", async () => {
    const error = await configError(file, { GW_TEST_PORT: "eighty" });
    expectOneLine(error, file, "server", "/port");
  });
});

describe("defaultConfigFile", () => {
  it("honours GATEWAY_CONFIG and falls back to plugins-config.yaml", () => {
    expect(defaultConfigFile({ GATEWAY_CONFIG: "/etc/gateway/custom.yaml" })).toBe("/etc/gateway/custom.yaml");
    expect(defaultConfigFile({})).toBe("plugins-config.yaml");
    expect(defaultConfigFile({ GATEWAY_CONFIG: "" })).toBe("plugins-config.yaml");
  });
});

describe("the shipped plugins-config.yaml", () => {
  const shipped = join(ROOT, "plugins-config.yaml");

  it("loads with an empty environment: every plugin but the sandbox, in file order", async () => {
    const config = await loadConfig(shipped, {});
    expect(config.server).toMatchObject({ port: 3000, hostname: "0.0.0.0", max_body_bytes: 52_428_800 });
    // Other plugins join the file over time: check the sandbox is off and the core ones keep their order.
    const enabled = names(config);
    expect(enabled).not.toContain("sandbox");
    // The observers first (their onRequestEnd sees every request), then the edge limit before anything else.
    expect(enabled.slice(0, 3)).toEqual(["metrics", "tracing", "edge-rate-limit"]);
    const core = ["storage", "auth", "catalog", "admin", "allowlist", "metering", "chat-completions", "openai", "openai-compatible"];
    const positions = core.map((name) => enabled.indexOf(name));
    expect(positions.every((position) => position > 0)).toBe(true);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    expect(config.plugins.find((plugin) => plugin.definition.name === "edge-rate-limit")!.config).toEqual({ requests_per_second: 60, ipv6_prefix: 56 });
  });

  it('enables the sandbox from enabled: "${GATEWAY_SANDBOX:-false}" and takes numbers from strings', async () => {
    const config = await loadConfig(shipped, { GATEWAY_SANDBOX: "true", PORT: "8080", EDGE_RATE_LIMIT_RPS: "0" });
    expect(names(config)).toContain("sandbox");
    // The sandbox re-routes after the router and the guards, before metering.
    expect(names(config).indexOf("sandbox")).toBeGreaterThan(names(config).indexOf("allowlist"));
    expect(names(config).indexOf("sandbox")).toBeLessThan(names(config).indexOf("metering"));
    expect(config.server.port).toBe(8080);
    expect(config.plugins.find((plugin) => plugin.definition.name === "edge-rate-limit")!.config).toEqual({ requests_per_second: 0, ipv6_prefix: 56 });
  });

  it("via GATEWAY_CONFIG: the same file loads as defaultConfigFile names it", async () => {
    const config = await loadConfig(defaultConfigFile({ GATEWAY_CONFIG: shipped }), {});
    expect(config.file).toBe(shipped);
  });
});

describe("enabled flags", () => {
  const file = yamlFile(`
plugins:
  storage: {}
  auth:
    enabled: "\${GW_TEST_AUTH:-yes}"
  catalog:
    enabled: "\${GW_TEST_SANDBOX:-false}"
  sandbox:
    enabled: "\${GW_TEST_SANDBOX:-false}"
  admin:
    enabled: false
    config: { admin_token: 42, unknown: true }
`);

  it("skips enabled: false plugins without checking their config or requirements", async () => {
    const config = await loadConfig(file, {});
    expect(names(config)).toEqual(["storage", "auth"]);
  });

  it('accepts "${VAR:-false}" style strings (true/false/yes/no/on/off/1/0)', async () => {
    for (const on of ["true", "TRUE", "1", "on", "yes"]) {
      expect(names(await loadConfig(file, { GW_TEST_SANDBOX: on }))).toEqual(["storage", "auth", "catalog", "sandbox"]);
    }
    for (const off of ["false", "0", "off", "no"]) {
      expect(names(await loadConfig(file, { GW_TEST_SANDBOX: off }))).toEqual(["storage", "auth"]);
    }
  });

  it("refuses a flag that is not a boolean, naming the plugin and the field", async () => {
    const error = await configError(file, { GW_TEST_AUTH: "maybe" });
    expectOneLine(error, file, 'plugin "auth"', "/enabled", "maybe");
  });
});

describe("plugin config errors: one line naming the file, the plugin and the field", () => {
  it("a number field given a word", async () => {
    const file = yamlFile(`plugins:\n  storage:\n    config:\n      flush_interval_ms: "soon"\n`);
    expectOneLine(await configError(file), file, 'plugin "storage"', "/flush_interval_ms");
  });

  it("a number out of range", async () => {
    const file = yamlFile(`plugins:\n  storage:\n    config:\n      max_batch: 0\n`);
    expectOneLine(await configError(file), file, 'plugin "storage"', "/max_batch");
  });

  it("an unknown field in a closed schema", async () => {
    const file = yamlFile(`plugins:\n  storage:\n    config:\n      flush_every: 5\n`);
    expectOneLine(await configError(file), file, 'plugin "storage"', "flush_every");
  });

  it("an unknown plugin name", async () => {
    const file = yamlFile(`plugins:\n  storage: {}\n  no-such-plugin:\n    enabled: true\n`);
    expectOneLine(await configError(file), file, 'plugin "no-such-plugin"', "src/plugins/no-such-plugin");
  });

  it("a plugin name that is not a kebab-case folder name", async () => {
    const file = yamlFile(`plugins:\n  "../storage": {}\n`);
    expectOneLine(await configError(file), file, 'plugin "../storage"', "kebab-case");
  });

  it("a provider base_url without http(s)://", async () => {
    const file = yamlFile(`plugins:\n  openai:\n    config:\n      base_url: api.openai.com/v1\n      api_key_env: OPENAI_API_KEY\n`);
    expectOneLine(await configError(file), file, 'plugin "openai"', "/base_url");
  });

  it("a nested upstream base_url of openai-compatible", async () => {
    const file = yamlFile(`plugins:
  openai-compatible:
    config:
      upstreams:
        deepseek: { base_url: "\${DS_URL:-ftp://api.deepseek.com}", api_key_env: DEEPSEEK_API_KEY }
`);
    expectOneLine(await configError(file), file, 'plugin "openai-compatible"', "/upstreams/deepseek/base_url");
    const config = await loadConfig(file, { DS_URL: "https://api.deepseek.com" });
    expect(config.plugins[0]!.config).toEqual({ upstreams: { deepseek: { base_url: "https://api.deepseek.com", api_key_env: "DEEPSEEK_API_KEY" } } });
  });

  it("a missing required field", async () => {
    const file = yamlFile(`plugins:\n  openai:\n    config:\n      base_url: https://api.openai.com/v1\n`);
    expectOneLine(await configError(file), file, 'plugin "openai"', "api_key_env");
  });

  it("malformed YAML and a file that is not there", async () => {
    const broken = yamlFile(`plugins:\n  storage: {\n    config: [\n`);
    expectOneLine(await configError(broken), broken, "invalid YAML");
    const missing = join(dir, "missing.yaml");
    expectOneLine(await configError(missing), missing, "not found");
  });

  it("plugins that is not a mapping", async () => {
    const file = yamlFile(`plugins:\n  - storage\n  - auth\n`);
    expectOneLine(await configError(file), file, '"plugins"');
  });
});

describe("requires", () => {
  it("refuses a plugin whose required plugin is missing", async () => {
    const file = yamlFile(`plugins:\n  storage: {}\n  sandbox:\n    enabled: true\n`);
    expectOneLine(await configError(file), file, 'plugin "sandbox"', 'requires plugin "catalog"');
  });

  it("refuses a plugin whose required plugin comes later", async () => {
    const file = yamlFile(`plugins:\n  auth: {}\n  storage: {}\n`);
    expectOneLine(await configError(file), file, 'plugin "auth"', 'requires plugin "storage"');
  });

  it("refuses a plugin whose required plugin is disabled", async () => {
    const file = yamlFile(`plugins:\n  storage:\n    enabled: "\${GW_TEST_STORAGE:-off}"\n  auth: {}\n`);
    expectOneLine(await configError(file), file, 'plugin "auth"', 'requires plugin "storage"');
    expect(names(await loadConfig(file, { GW_TEST_STORAGE: "on" }))).toEqual(["storage", "auth"]);
  });
});

/** Runs `bun src/index.ts` with a bare environment plus `env`; resolves with its exit code and stderr lines. */
async function runGateway(env: Record<string, string>): Promise<{ code: number; lines: string[] }> {
  const child = Bun.spawn([process.execPath, "src/index.ts"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? dir, ...env },
    stdin: "ignore",
    stdout: "ignore",
    stderr: "pipe",
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
  try {
    const [code, stderr] = await Promise.all([child.exited, new Response(child.stderr).text()]);
    return { code, lines: stderr.split("\n").filter((line) => line.trim() !== "") };
  } finally {
    clearTimeout(timer);
    child.kill("SIGKILL");
  }
}

describe("the real process with a bad configuration", () => {
  it("exits non-zero with exactly one stderr line naming the file, the plugin and the field", async () => {
    const file = yamlFile(`server:\n  port: 0\n  hostname: 127.0.0.1\nplugins:\n  storage:\n    config:\n      flush_interval_ms: soon\n`);
    const { code, lines } = await runGateway({ GATEWAY_CONFIG: file });
    expect(code).not.toBe(0);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(file);
    expect(lines[0]).toContain('plugin "storage"');
    expect(lines[0]).toContain("/flush_interval_ms");
  });

  it("reports a plugin that cannot start (an unsupported database_url) the same way", async () => {
    const file = yamlFile(`server:\n  port: 0\n  hostname: 127.0.0.1\nplugins:\n  storage:\n    config:\n      database_url: \${DATABASE_URL}\n`);
    const { code, lines } = await runGateway({ GATEWAY_CONFIG: file, GATEWAY_LOG: "silent", DATABASE_URL: "mysql://db.example/gateway" });
    expect(code).not.toBe(0);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(file);
    expect(lines[0]).toContain('plugin "storage"');
    expect(lines[0]).toContain("database_url");
  });
});

describe("startGateway", () => {
  it("rejects with a one-line ConfigError naming the plugin whose setup failed", async () => {
    const env = { HOST: "127.0.0.1", DATABASE_URL: `sqlite:${join(dir, "setup.db")}`, GATEWAY_CATALOG: join(dir, "no-catalog.yaml"), GATEWAY_ADMIN_TOKEN: "t" };
    const failure = await startGateway({ env, port: 0, log: createLogger("test", { silent: true }) }).then(
      () => new Error("startGateway did not fail"),
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(ConfigError);
    const message = (failure as ConfigError).message;
    expect(message).not.toContain("\n");
    expect(message).toContain('plugin "catalog"');
    expect(message).toContain("no-catalog.yaml");
  });
});

describe("unknown keys: refused with the file, the dotted path and the nearest known key", () => {
  it("a misspelled key in a plugin's config block (the schema does not close it itself)", async () => {
    const file = yamlFile(`plugins:\n  storage: {}\n  auth:\n    config:\n      cache_tll_ms: 5\n`);
    expectOneLine(await configError(file), file, 'plugin "auth"', "unknown key plugins.auth.config.cache_tll_ms", "did you mean cache_ttl_ms?");
  });

  it("a misspelled key in the server block and at the top level", async () => {
    const server = yamlFile(`server:\n  prot: 3000\nplugins:\n  storage: {}\n`);
    expectOneLine(await configError(server), server, "unknown key server.prot", "did you mean port?");
    const top = yamlFile(`server: {}\nplugin:\n  storage: {}\nplugins: {}\n`);
    expectOneLine(await configError(top), top, "unknown key plugin", "did you mean plugins?");
  });

  it("a misspelled plugin name and a misspelled entry key", async () => {
    const name = yamlFile(`plugins:\n  storag: {}\n`);
    expectOneLine(await configError(name), name, 'plugin "storag"', "plugins.storag", "did you mean storage?");
    const entry = yamlFile(`plugins:\n  storage:\n    enabeld: true\n`);
    expectOneLine(await configError(entry), entry, 'plugin "storage"', "unknown key plugins.storage.enabeld", "did you mean enabled?");
    const configs = yamlFile(`plugins:\n  storage:\n    configs: {}\n`);
    expectOneLine(await configError(configs), configs, "unknown key plugins.storage.configs", "did you mean config?");
  });

  it("a misspelled plugin name is refused even when the entry is disabled", async () => {
    const file = yamlFile(`plugins:\n  storage: {}\n  sandbx:\n    enabled: false\n`);
    expectOneLine(await configError(file), file, 'plugin "sandbx"', "did you mean sandbox?");
  });

  it("keys nested in records, objects and unions (plans, upstreams, windows)", async () => {
    const windows = yamlFile(`plugins:
  storage: {}
  auth: {}
  catalog: {}
  token-count: {}
  budget:
    config:
      plans:
        pro: { price: 1, windows: { weekk: 3 } }
`);
    expectOneLine(await configError(windows), windows, 'plugin "budget"', "unknown key plugins.budget.config.plans.pro.windows.weekk", "did you mean week?");
    const upstream = yamlFile(`plugins:
  openai-compatible:
    config:
      upstreams:
        deepseek: { base_url: "https://api.deepseek.com", api_key_env: DEEPSEEK_API_KEY, apikey_env: X }
`);
    expectOneLine(await configError(upstream), upstream, "unknown key plugins.openai-compatible.config.upstreams.deepseek.apikey_env", "did you mean api_key_env?");
  });

  it("a key nowhere near a known one lists the known keys", async () => {
    const file = yamlFile(`plugins:\n  edge-rate-limit:\n    config:\n      burst: 5\n`);
    expectOneLine(await configError(file), file, "unknown key plugins.edge-rate-limit.config.burst", "known keys: requests_per_second");
  });

  it("the shipped plugins-config.yaml has no unknown key", async () => {
    await loadConfig(join(ROOT, "plugins-config.yaml"), { GATEWAY_SANDBOX: "true" });
  });
});

describe("server.trusted_proxies", () => {
  it("takes a list, or a comma-separated string (TRUSTED_PROXIES), empty by default", async () => {
    const list = yamlFile(`server:\n  trusted_proxies: ["10.0.0.0/8", "fd00::/8"]\nplugins: {}\n`);
    expect((await loadConfig(list, {})).server.trusted_proxies).toEqual(["10.0.0.0/8", "fd00::/8"]);
    const text = yamlFile(`server:\n  trusted_proxies: \${GW_TEST_PROXIES:-}\nplugins: {}\n`);
    expect((await loadConfig(text, { GW_TEST_PROXIES: "127.0.0.1, 192.168.0.0/16,::1" })).server.trusted_proxies).toEqual(["127.0.0.1", "192.168.0.0/16", "::1"]);
    expect((await loadConfig(text, {})).server.trusted_proxies).toEqual([]);
    expect((await loadConfig(join(ROOT, "plugins-config.yaml"), {})).server.trusted_proxies).toEqual([]);
    expect((await loadConfig(join(ROOT, "plugins-config.yaml"), { TRUSTED_PROXIES: "10.1.0.0/16" })).server.trusted_proxies).toEqual(["10.1.0.0/16"]);
  });

  it("refuses an entry that is no address or CIDR, naming it", async () => {
    const file = yamlFile(`server:\n  trusted_proxies: "10.0.0.0/8, 10.0.0.0/40"\nplugins: {}\n`);
    expectOneLine(await configError(file), file, "server.trusted_proxies", '"10.0.0.0/40"');
  });
});

describe("server.workers", () => {
  it("is 1 by default, a count from GATEWAY_WORKERS, or auto = the cores available", async () => {
    const file = join(ROOT, "plugins-config.yaml");
    expect(workerCount((await loadConfig(file, {})).server)).toBe(1);
    expect(workerCount((await loadConfig(file, { GATEWAY_WORKERS: "4" })).server)).toBe(4);
    expect(workerCount((await loadConfig(file, { GATEWAY_WORKERS: "auto" })).server)).toBe(availableParallelism());
  });

  it("refuses anything else, naming the field", async () => {
    for (const bad of ["0", "-2", "two", "1.5", "1000"]) {
      const file = yamlFile(`server:\n  workers: "${bad}"\nplugins: {}\n`);
      expectOneLine(await configError(file), file, "server", "/workers");
    }
  });
});

describe("the real process with an unknown key", () => {
  it("exits non-zero naming the file, the path and the nearest key (plugins-config.yaml)", async () => {
    const file = yamlFile(`server:\n  port: 0\n  hostname: 127.0.0.1\nplugins:\n  storage: {}\n  auth:\n    config:\n      cache_tll_ms: 500\n`);
    const { code, lines } = await runGateway({ GATEWAY_CONFIG: file, GATEWAY_LOG: "silent" });
    expect(code).not.toBe(0);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(file);
    expect(lines[0]).toContain("plugins.auth.config.cache_tll_ms");
    expect(lines[0]).toContain("did you mean cache_ttl_ms?");
  });

  it("exits non-zero naming the catalog file, the model and the path (catalog.yaml)", async () => {
    const catalog = join(dir, "typo-catalog.yaml");
    writeFileSync(
      catalog,
      readFileSync(join(ROOT, "catalog.yaml"), "utf8").replace("prices: { input:", "prices: { inptu:"),
    );
    const { code, lines } = await runGateway({ GATEWAY_CATALOG: catalog, DATABASE_URL: `sqlite:${join(dir, "typo.db")}`, PORT: "0", HOST: "127.0.0.1", GATEWAY_LOG: "silent" });
    expect(code).not.toBe(0);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(catalog);
    expect(lines[0]).toContain('model "gpt-6.2-astra"');
    expect(lines[0]).toContain("unknown key models[0].prices.inptu (did you mean input?)");
  });
});
