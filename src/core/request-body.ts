import { InvalidRequestError, PayloadTooLargeError, UnavailableError } from "./errors.ts";

/** Deeper JSON is refused: every later walk of the body (token count, translation, serializing it upstream) recurses per level. */
export const MAX_JSON_DEPTH = 256;

/**
 * Reads clients' JSON bodies within two bounds: one body's bytes (413) and the bytes of every body being
 * read at once, all requests together (503 with retry-after), so memory stays bounded whatever arrives.
 * A body's bytes count from its first byte read (or at once, by its declared length) until it is parsed.
 */
export class RequestBodies {
  private inFlight = 0;

  constructor(
    private readonly maxBodyBytes: number,
    private readonly maxInFlightBytes: number,
  ) {}

  /** Bytes of bodies being read now (for tests and health). */
  get bytesInFlight(): number {
    return this.inFlight;
  }

  /** The client's JSON object; 413 past one body's limit, 503 past the shared budget, 400 when it is not a JSON object. */
  async readJson(request: Request): Promise<Record<string, unknown>> {
    const header = request.headers.get("content-length");
    const declared = header === null ? -1 : Number(header);
    if (declared > this.maxBodyBytes) throw new PayloadTooLargeError(`request body is ${declared} bytes; the limit is ${this.maxBodyBytes} bytes`);
    const text = declared >= 0 ? await this.readDeclared(request, declared) : await this.readChunked(request);
    return parseJsonObject(text);
  }

  private take(bytes: number): void {
    if (this.inFlight + bytes > this.maxInFlightBytes && bytes > 0) {
      throw new UnavailableError("the gateway is receiving too many request bodies at once; retry in a second", { headers: { "retry-after": "1" } });
    }
    this.inFlight += bytes;
  }

  private async readDeclared(request: Request, declared: number): Promise<string> {
    this.take(declared);
    try {
      return await request.text();
    } finally {
      this.inFlight -= declared;
    }
  }

  /** A body without content-length (chunked): counted as it arrives, stopped at either bound. */
  private async readChunked(request: Request): Promise<string> {
    const body = request.body;
    if (body === null) return "";
    const reader = body.getReader();
    const chunks: Uint8Array[] = [];
    let received = 0;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        received += value.byteLength;
        if (received > this.maxBodyBytes) throw new PayloadTooLargeError(`request body exceeds the limit of ${this.maxBodyBytes} bytes`);
        this.take(value.byteLength);
        chunks.push(value);
      }
    } catch (error) {
      reader.cancel().catch(() => {});
      throw error;
    } finally {
      this.inFlight -= chunks.reduce((sum, chunk) => sum + chunk.byteLength, 0);
    }
    return Buffer.concat(chunks).toString("utf8");
  }
}

/** The text as a JSON object no deeper than MAX_JSON_DEPTH; 400 otherwise. */
export function parseJsonObject(text: string): Record<string, unknown> {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (error) {
    throw new InvalidRequestError(`request body is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new InvalidRequestError("request body must be a JSON object");
  // A body can nest at most half its length deep: short ones need no walk.
  if (text.length > 2 * MAX_JSON_DEPTH && jsonDepthExceeds(body, MAX_JSON_DEPTH)) {
    throw new InvalidRequestError(`request body is nested more than ${MAX_JSON_DEPTH} levels deep`);
  }
  return body as Record<string, unknown>;
}

/** Whether a parsed JSON value nests deeper than `limit` (iterative: a deep value cannot overflow the stack here). */
export function jsonDepthExceeds(value: unknown, limit: number): boolean {
  const stack: { value: unknown; depth: number }[] = [{ value, depth: 1 }];
  while (stack.length > 0) {
    const { value: current, depth } = stack.pop()!;
    if (depth > limit) return true;
    if (Array.isArray(current)) {
      for (const item of current) if (typeof item === "object" && item !== null) stack.push({ value: item, depth: depth + 1 });
    } else {
      for (const key in current as Record<string, unknown>) {
        const item = (current as Record<string, unknown>)[key];
        if (typeof item === "object" && item !== null) stack.push({ value: item, depth: depth + 1 });
      }
    }
  }
  return false;
}
