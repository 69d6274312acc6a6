/**
 * The floor of any Bun gateway: forwards each request to the upstream with `fetch` (method, path,
 * headers minus host, body) and streams the upstream body back. No parsing, no auth, no metering.
 *
 *   bun bench/bare-proxy.ts --port 9201 --upstream http://127.0.0.1:9100
 *   → prints "bare proxy listening on http://127.0.0.1:9201"
 */

export function argValue(args: string[], name: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === name) return args[i + 1];
    if (a.startsWith(name + "=")) return a.slice(name.length + 1);
  }
  return undefined;
}

export function startBareProxy(options: { port: number; upstream: string; hostname?: string }) {
  const upstream = options.upstream.replace(/\/+$/, "");
  return Bun.serve({
    hostname: options.hostname ?? "127.0.0.1",
    port: options.port,
    development: false,
    idleTimeout: 0, // long streams must not be cut by Bun's 10 s default
    async fetch(req) {
      const url = req.url;
      const pathStart = url.indexOf("/", url.indexOf("//") + 2);
      const path = pathStart < 0 ? "/" : url.slice(pathStart);
      const headers = new Headers(req.headers);
      headers.delete("host");
      const hasBody = req.method !== "GET" && req.method !== "HEAD";
      const res = await fetch(upstream + path, {
        method: req.method,
        headers,
        body: hasBody ? await req.arrayBuffer() : undefined,
        signal: req.signal,
      });
      const out = new Headers(res.headers);
      // fetch already de-chunked (and decoded) the body; Bun sets its own framing on the way out.
      out.delete("content-length");
      out.delete("transfer-encoding");
      out.delete("content-encoding");
      return new Response(res.body, { status: res.status, headers: out });
    },
  });
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const port = Number(argValue(args, "--port") ?? 9201);
  const upstream = argValue(args, "--upstream");
  if (!upstream) {
    console.error("usage: bun bench/bare-proxy.ts --port N --upstream http://127.0.0.1:M");
    process.exit(2);
  }
  const server = startBareProxy({ port, upstream });
  // Exit normally on SIGTERM, so a `--cpu-prof` profile is written (bench/profile.ts --bare).
  process.on("SIGTERM", () => process.exit(0));
  console.log(`bare proxy listening on http://127.0.0.1:${server.port}`);
}
