import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Scalar's standalone browser bundle (one self-contained script, CSS included) from the pinned
 * @scalar/api-reference in node_modules. Read and gzipped on the first request only: the docs page is
 * rare, and the 4 MB script should not sit in memory before anyone asks for it.
 */
export function scalarBundle() {
  // The package exports no path to its browser build: it sits next to the main entry (dist/index.js).
  const dist = dirname(fileURLToPath(import.meta.resolve("@scalar/api-reference")));
  const file = join(dist, "browser", "standalone.js");
  const version = (JSON.parse(readFileSync(join(dist, "..", "package.json"), "utf8")) as { version: string }).version;
  let plain: Uint8Array<ArrayBuffer> | undefined;
  let gzipped: Uint8Array<ArrayBuffer> | undefined;

  return {
    version,
    /** The script, gzipped when the client takes it; cached a year (the page asks for it with ?v=<version>). */
    response(request: Request): Response {
      plain ??= new Uint8Array(readFileSync(file));
      const gzip = /\bgzip\b/.test(request.headers.get("accept-encoding") ?? "");
      if (gzip) gzipped ??= Bun.gzipSync(plain);
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
