/**
 * Floors between the bare proxy and the gateway: proxies that each add one step every gateway must take, so a
 * run shows what that step costs on its own (`bun bench/compare.ts . --floors`; docs/performance.md).
 *
 *   json   the client's body parsed and sent upstream re-serialized with the proxy's own headers; the answer is
 *          passed back natively, unread, as the bare proxy does
 *   read   json, and the answer read whole in JavaScript and answered as one body (non-streamed: `text()`;
 *          streamed: the body's reader to its end)
 *   parse  read, and every answer JSON (each SSE `data:` frame of a stream) parsed, given its own id and
 *          serialized again: the least a relay that bills from the answer and names it does, done naively
 *
 * The streamed floors answer once the upstream's stream has ended, which is what the gateway does with a stream that
 * has all arrived (the bench's default stream, one read); with `--chunk-delay` they are not floors of a relay.
 *
 *   bun bench/floor-proxy.ts --mode parse --port 9202 --upstream http://127.0.0.1:9100
 */

import { argValue } from "./bare-proxy.ts";

export type FloorMode = "json" | "read" | "parse";
export const FLOOR_MODES: readonly FloorMode[] = ["json", "read", "parse"];

const SSE_HEADERS = { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" };

/** Every `data: {…}` frame parsed, given the id, serialized again; other blocks kept as they were. */
function reserializeFrames(text: string, id: string): string {
  let out = "";
  for (const block of text.split("\n\n")) {
    if (block === "") continue;
    if (!block.startsWith("data: {")) {
      out += block + "\n\n";
      continue;
    }
    const frame = JSON.parse(block.slice(6)) as Record<string, unknown>;
    frame.id = id;
    out += "data: " + JSON.stringify(frame) + "\n\n";
  }
  return out;
}

async function readStream(body: ReadableStream<Uint8Array>): Promise<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text + decoder.decode();
    text += decoder.decode(value, { stream: true });
  }
}

export function startFloorProxy(options: { mode: FloorMode; port: number; upstream: string; upstreamKey: string }) {
  const { mode, upstream } = options;
  const upstreamHeaders = { authorization: `Bearer ${options.upstreamKey}`, "content-type": "application/json" };
  let served = 0;
  return Bun.serve({
    hostname: "127.0.0.1",
    port: options.port,
    development: false,
    idleTimeout: 0,
    async fetch(req) {
      const url = req.url;
      const path = url.slice(url.indexOf("/", url.indexOf("//") + 2));
      if (req.method !== "POST") return fetch(upstream + path); // the harness's readiness probe
      const body = JSON.parse(await req.text()) as Record<string, unknown>;
      const res = await fetch(upstream + path, { method: "POST", headers: upstreamHeaders, body: JSON.stringify(body), signal: req.signal });
      const type = res.headers.get("content-type") ?? "application/json";
      if (mode === "json" || !res.ok || res.body === null) return new Response(res.body, { status: res.status, headers: { "content-type": type } });
      const id = `gen-${++served}`;
      if (type.includes("event-stream")) {
        const text = await readStream(res.body);
        return new Response(mode === "parse" ? reserializeFrames(text, id) : text, { headers: { ...SSE_HEADERS, "x-request-id": id } });
      }
      const text = await res.text();
      if (mode === "read") return new Response(text, { headers: { "content-type": "application/json", "x-request-id": id } });
      const answer = JSON.parse(text) as Record<string, unknown>;
      answer.id = id;
      return new Response(JSON.stringify(answer), { headers: { "content-type": "application/json", "x-request-id": id } });
    },
  });
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const value = (name: string) => argValue(args, name);
  const mode = value("--mode") as FloorMode | undefined;
  const upstream = value("--upstream");
  if (!mode || !FLOOR_MODES.includes(mode) || !upstream) {
    console.error(`usage: bun bench/floor-proxy.ts --mode ${FLOOR_MODES.join("|")} --port N --upstream http://127.0.0.1:M [--upstream-key K]`);
    process.exit(2);
  }
  const server = startFloorProxy({ mode, port: Number(value("--port") ?? 9202), upstream: upstream.replace(/\/+$/, ""), upstreamKey: value("--upstream-key") ?? "bench-upstream" });
  process.on("SIGTERM", () => process.exit(0));
  console.log(`floor proxy (${mode}) listening on http://127.0.0.1:${server.port}`);
}
