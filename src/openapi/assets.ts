import { readFileSync } from "node:fs";
import { join } from "node:path";

const VENDOR = join(import.meta.dir, "vendor");

/** The vendored bundle's manifest: which release of @scalar/api-reference it is (see vendor/README.md). */
export const scalarManifest = JSON.parse(readFileSync(join(VENDOR, "scalar.json"), "utf8")) as {
  version: string;
  sha256: string;
};

/**
 * Scalar's standalone browser bundle (one self-contained script, CSS included), vendored gzipped in
 * ./vendor at a pinned version. Read on the first request only: the docs page is rare.
 */
export function scalarBundle() {
  let gzipped: Uint8Array<ArrayBuffer> | undefined;
  let plain: Uint8Array<ArrayBuffer> | undefined;

  return {
    version: scalarManifest.version,
    /** The script, gzipped when the client takes it; cached a year (the page asks for it with ?v=<version>). */
    response(request: Request): Response {
      gzipped ??= new Uint8Array(readFileSync(join(VENDOR, "scalar-standalone.js.gz")));
      const gzip = /\bgzip\b/.test(request.headers.get("accept-encoding") ?? "");
      if (!gzip) plain ??= new Uint8Array(Bun.gunzipSync(gzipped));
      return new Response(gzip ? gzipped : plain, {
        headers: {
          "content-type": "text/javascript; charset=utf-8",
          "cache-control": "public, max-age=31536000, immutable",
          vary: "accept-encoding",
          ...(gzip ? { "content-encoding": "gzip" } : {}),
        },
      });
    },
  };
}
