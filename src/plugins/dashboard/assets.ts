import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";

/**
 * The dashboard's assets, every one served by the gateway itself (no CDN): htmx at its pinned version from
 * node_modules, our stylesheet and script from static/. Names carry the version or a content hash, so they are
 * cached for a year; each is gzipped once at start.
 */
interface Asset {
  body: Uint8Array;
  gzip: Uint8Array;
  type: string;
}

const HTMX_DIR = dirname(require.resolve("htmx.org/package.json"));
const HTMX_VERSION = (JSON.parse(readFileSync(join(HTMX_DIR, "package.json"), "utf8")) as { version: string }).version;
const STATIC_DIR = join(import.meta.dir, "static");

function asset(path: string, type: string): Asset {
  const body = new Uint8Array(readFileSync(path));
  return { body, gzip: Bun.gzipSync(body), type };
}

function hashed(name: string, asset: Asset): string {
  const hash = new Bun.CryptoHasher("sha256").update(asset.body).digest("hex").slice(0, 12);
  return name.replace(/(\.[a-z]+)$/, `-${hash}$1`);
}

const htmx = asset(join(HTMX_DIR, "dist", "htmx.min.js"), "text/javascript; charset=utf-8");
const css = asset(join(STATIC_DIR, "dashboard.css"), "text/css; charset=utf-8");
const js = asset(join(STATIC_DIR, "dashboard.js"), "text/javascript; charset=utf-8");

const BY_NAME = new Map<string, Asset>([
  [`htmx-${HTMX_VERSION}.min.js`, htmx],
  [hashed("dashboard.css", css), css],
  [hashed("dashboard.js", js), js],
]);
const names = [...BY_NAME.keys()];

/** The URL of each asset, for the pages' head. */
export const ASSETS = {
  htmx: `/dashboard/assets/${names[0]}`,
  css: `/dashboard/assets/${names[1]}`,
  js: `/dashboard/assets/${names[2]}`,
} as const;

/** The answer for /dashboard/assets/:name: gzipped when the client takes it, cached for a year; 404 otherwise. */
export function assetResponse(name: string, request: Request): Response {
  const found = BY_NAME.get(name);
  if (!found) return new Response("not found", { status: 404, headers: { "content-type": "text/plain" } });
  const gzip = /\bgzip\b/.test(request.headers.get("accept-encoding") ?? "");
  return new Response(gzip ? found.gzip : found.body, {
    headers: {
      "content-type": found.type,
      "cache-control": "public, max-age=31536000, immutable",
      "x-content-type-options": "nosniff",
      vary: "accept-encoding",
      ...(gzip ? { "content-encoding": "gzip" } : {}),
    },
  });
}
