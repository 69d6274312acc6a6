/**
 * The gateway's HTTP/1.1 client for upstream calls: keep-alive sockets per origin on the event-loop thread.
 *
 * Bun's `fetch` runs on an HTTP client thread of its own, so every upstream call crosses threads twice and
 * every body chunk comes through a ReadableStream; with `Bun.connect` the bytes arrive in a socket callback on
 * the main thread and go to the pipeline without either. It speaks what upstream APIs need: POST with a
 * body, answers framed by content-length, chunked encoding or the connection's close, keep-alive reuse,
 * TLS, abort. Whatever it does not speak (proxies, other schemes) goes through `fetch` (see `upstreamFetch`).
 */
import { atTurnEnd } from "./turn-end.ts";
import type { AbortSignalLike } from "./request-signals.ts";

/** What the pipeline reads of an upstream answer: a subset of `Response`, which satisfies it too. */
export interface UpstreamResponse {
  readonly status: number;
  readonly ok: boolean;
  readonly headers: { get(name: string): string | null };
  readonly body: { getReader(): UpstreamBodyReader } | null;
  text(): Promise<string>;
}

export type BodyRead = { done: false; value: Uint8Array } | { done: true; value?: undefined };

export interface UpstreamBodyReader {
  read(): Promise<BodyRead>;
  cancel(reason?: unknown): Promise<void>;
}

/** An upstream that broke the protocol or the connection: the pipeline reports it as an upstream error. */
export class UpstreamConnectionError extends Error {
  override name = "UpstreamConnectionError";
}

type Socket = import("bun").Socket<Connection>;
/** Bun's sockets stop and resume reading (what node:net's pause/resume use); its types do not declare it yet. */
type PausableSocket = Socket & { pause(): boolean; resume(): boolean };

const CRLF_CRLF = Buffer.from("\r\n\r\n");
const DONE: BodyRead = Object.freeze({ done: true, value: undefined });
/**
 * A connection idle this long is not reused, and is closed (by Bun's socket timer, which ticks every 4 s: so
 * 4-8 s later). Servers commonly close idle connections after 5 s (Node, uvicorn): a connection reused just
 * as the server closes it costs one resend on a new one. A server's `keep-alive: timeout=N` shortens it to
 * N - 1 s.
 */
const DEFAULT_IDLE_SECONDS = 4;
/**
 * A new connection must be open (TCP connected and, for https, the TLS handshake done) within this long. Without
 * it, an upstream host that drops packets held the call ~2 minutes (the kernel's SYN retries), and one that
 * accepts TCP but never speaks TLS held it until the request's own deadline (10 minutes for streams).
 */
const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
const MAX_IDLE_PER_ORIGIN = 512;
const MAX_HEAD_BYTES = 64 * 1024;
/**
 * An answer's bytes received but not yet read: above this the socket stops reading, so a slow client holds
 * the upstream back through TCP instead of its answer piling up here. Reading again resumes it.
 */
const BODY_HIGH_WATER_BYTES = 1024 * 1024;

interface Origin {
  readonly key: string;
  readonly hostname: string;
  readonly port: number;
  readonly tls: boolean;
  readonly idle: Connection[];
}

/** A request's fixed part (request line, host and the provider's headers), built once per URL and header set. */
interface PreparedTarget {
  readonly origin: Origin;
  /** Ends with "content-length: ". */
  readonly head: string;
  readonly headBytes: number;
}

interface OutgoingRequest {
  readonly message: string;
  readonly bytes: number;
}

/** The body of one answer, handed to the pipeline as a reader or as text. */
class IncomingBody implements UpstreamBodyReader {
  private readonly chunks: Buffer[] = [];
  private queuedBytes = 0;
  private paused = false;
  private ended = false;
  private failure: unknown;
  private waiting: { resolve(result: BodyRead): void; reject(error: unknown): void } | undefined;
  private textWaiting: { resolve(text: string): void; reject(error: unknown): void } | undefined;

  constructor(
    private readonly onCancel: () => void,
    /** Stops (true) or resumes (false) reading the socket. */
    private readonly hold: (paused: boolean) => void,
  ) {}

  push(chunk: Buffer): void {
    if (this.waiting) {
      const waiting = this.waiting;
      this.waiting = undefined;
      waiting.resolve({ done: false, value: chunk });
      return;
    }
    this.chunks.push(chunk);
    this.queuedBytes += chunk.length;
    if (this.queuedBytes > BODY_HIGH_WATER_BYTES && !this.paused && !this.textWaiting) this.setPaused(true);
  }

  private setPaused(paused: boolean): void {
    this.paused = paused;
    this.hold(paused);
  }

  end(): void {
    if (this.ended || this.failure !== undefined) return;
    this.ended = true;
    if (this.waiting) {
      const waiting = this.waiting;
      this.waiting = undefined;
      waiting.resolve(DONE);
    }
    if (this.textWaiting) this.settleText();
  }

  fail(error: unknown): void {
    if (this.ended || this.failure !== undefined) return;
    this.failure = error;
    const waiting = this.waiting ?? this.textWaiting;
    this.waiting = this.textWaiting = undefined;
    waiting?.reject(error);
  }

  get finished(): boolean {
    return this.ended || this.failure !== undefined;
  }

  read(): Promise<BodyRead> {
    const chunk = this.chunks.shift();
    if (chunk !== undefined) {
      this.queuedBytes -= chunk.length;
      if (this.paused && this.queuedBytes <= BODY_HIGH_WATER_BYTES / 4) this.setPaused(false);
      return Promise.resolve({ done: false, value: chunk });
    }
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (this.ended) return Promise.resolve(DONE);
    return new Promise((resolve, reject) => (this.waiting = { resolve, reject }));
  }

  cancel(): Promise<void> {
    if (!this.finished) {
      this.fail(new UpstreamConnectionError("body cancelled"));
      this.onCancel();
    }
    this.chunks.length = 0;
    return Promise.resolve();
  }

  text(): Promise<string> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.textWaiting = { resolve, reject };
      if (this.ended) this.settleText();
      else if (this.paused) this.setPaused(false); // the whole text is wanted
    });
  }

  private settleText(): void {
    const waiting = this.textWaiting!;
    this.textWaiting = undefined;
    const chunks = this.chunks.splice(0);
    const text = (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).toString("utf8");
    // The answers that came in this turn are handled together once it ends (turn-end.ts): -4% of the event
    // loop's CPU per request at c=64. A reader (a stream) is not held back: it is read as it comes.
    atTurnEnd(() => waiting.resolve(text));
  }
}

/**
 * An answer's headers, read from its head text when asked (the pipeline asks for three or four names, so
 * no map is built). Repeated headers are joined with ", ", as fetch's Headers does.
 */
class HeaderMap {
  private lower: string | undefined;
  constructor(private readonly head: string) {}
  get(name: string): string | null {
    const lower = (this.lower ??= this.head.toLowerCase());
    const needle = headerNeedle(name);
    let value: string | null = null;
    for (let at = lower.indexOf(needle); at >= 0; at = lower.indexOf(needle, at + needle.length)) {
      const start = at + needle.length;
      const end = lower.indexOf("\r\n", start);
      const part = this.head.slice(start, end < 0 ? undefined : end).trim();
      value = value === null ? part : value + ", " + part;
    }
    return value;
  }
}

/** `\r\n<name>:` in lower case, per header name the code asks for (a handful: built once each). */
const needles = new Map<string, string>();
function headerNeedle(name: string): string {
  let needle = needles.get(name);
  if (needle === undefined) needles.set(name, (needle = "\r\n" + name.toLowerCase() + ":"));
  return needle;
}

class SocketResponse implements UpstreamResponse {
  constructor(
    readonly status: number,
    readonly headers: HeaderMap,
    private readonly incoming: IncomingBody,
  ) {}
  get ok(): boolean {
    return this.status >= 200 && this.status < 300;
  }
  get body(): { getReader(): UpstreamBodyReader } {
    const incoming = this.incoming;
    return { getReader: () => incoming };
  }
  text(): Promise<string> {
    return this.incoming.text();
  }
}

const enum Framing {
  Length,
  Chunked,
  UntilClose,
}

const enum ChunkState {
  Size,
  Data,
  DataEnd,
  Trailer,
}

/** One request and its answer on a connection. */
interface Exchange {
  resolve(response: UpstreamResponse): void;
  reject(error: unknown): void;
  signal: AbortSignalLike | undefined;
  onAbort: (() => void) | undefined;
  body: IncomingBody | undefined;
  /** No byte of the answer yet: a reused connection that fails now may be retried on a new one. */
  untouched: boolean;
  retry: (() => void) | undefined;
  /** The connection carrying it, once it has one. */
  connection: Connection | undefined;
}

/** A keep-alive socket to one origin and the parser of the answer on it. */
class Connection {
  socket: Socket | undefined;
  exchange: Exchange | undefined;
  reused = false;
  closed = false;
  private pendingWrite: Buffer | undefined;
  // Answer parsing.
  private head: Buffer | undefined;
  private framing = Framing.Length;
  private remaining = 0;
  private chunkState = ChunkState.Size;
  private sizeLine = "";
  private keepAlive = true;
  /** Reading paused by the body's reader (backpressure). */
  private paused = false;
  /** Fails the connection if it is not open in time (see DEFAULT_CONNECT_TIMEOUT_MS); cleared once it is. */
  connectTimer: ReturnType<typeof setTimeout> | undefined;
  /** When it last went back to the pool (performance.now()). */
  idleSince = 0;
  /** How long it may idle and still be reused: the server's keep-alive hint, else the client's. */
  idleLimitMs = Infinity;

  constructor(
    readonly origin: Origin,
    private readonly client: UpstreamHttpClient,
  ) {}

  /** Writes the request at the end of this turn of the event loop, with the others of the turn (turn-end.ts). */
  send(message: string, bytes: number): void {
    atTurnEnd(() => {
      // A connection closed meanwhile (an abort) has no socket and writes nothing.
      if (this.socket) this.write(message, bytes);
    });
  }

  /** Writes the request; what the socket does not take now goes out on drain. */
  write(message: string, bytes: number): void {
    const written = this.socket!.write(message);
    if (written < 0) return this.broken(new UpstreamConnectionError("connection closed"));
    if (written < bytes) this.pendingWrite = Buffer.from(message).subarray(written);
  }

  drain(): void {
    const pending = this.pendingWrite;
    if (!pending) return;
    const written = this.socket!.write(pending);
    if (written < 0) return this.broken(new UpstreamConnectionError("connection closed"));
    this.pendingWrite = written < pending.length ? pending.subarray(written) : undefined;
  }

  receive(data: Buffer): void {
    const exchange = this.exchange;
    if (!exchange) {
      this.broken(new UpstreamConnectionError("upstream sent data with no request pending"));
      return;
    }
    exchange.untouched = false;
    let offset = 0;
    if (!exchange.body) {
      const at = this.readHead(data);
      if (at < 0) return;
      offset = at;
      if (!this.exchange?.body) return; // a 1xx answer or a failure
    }
    this.readBody(data, offset);
  }

  /** Collects the answer's head; returns where its body starts in `data`, or -1 while incomplete. */
  private readHead(data: Buffer): number {
    let buffer = data;
    let base = 0;
    if (this.head) {
      base = this.head.length;
      buffer = Buffer.concat([this.head, data]);
    }
    const end = buffer.indexOf(CRLF_CRLF, Math.max(0, base - 3));
    if (end < 0) {
      if (buffer.length > MAX_HEAD_BYTES) this.broken(new UpstreamConnectionError("upstream answer head is too large"));
      else this.head = buffer === data ? Buffer.from(data) : buffer;
      return -1;
    }
    this.head = undefined;
    const bodyStart = end + 4 - base;
    if (!this.startAnswer(buffer.toString("latin1", 0, end))) {
      // 1xx: its head is skipped, the real answer follows (maybe in this very read).
      if (bodyStart < data.length) this.receive(data.subarray(bodyStart));
      return -1;
    }
    return bodyStart;
  }

  /** Parses the status line and headers; false for an informational (1xx) answer. */
  private startAnswer(head: string): boolean {
    const status = Number(head.slice(9, 12));
    if (!head.startsWith("HTTP/1.") || !(status >= 100 && status < 600)) {
      const statusLine = head.slice(0, head.indexOf("\r\n") >>> 0);
      this.broken(new UpstreamConnectionError(`upstream answered something that is not HTTP/1.x: ${JSON.stringify(statusLine.slice(0, 60))}`));
      return true;
    }
    if (status < 200) return false;
    const headers = new HeaderMap(head);
    const connection = headers.get("connection")?.toLowerCase();
    this.keepAlive = head.startsWith("HTTP/1.1") ? connection !== "close" : connection === "keep-alive";
    const hint = headers.get("keep-alive");
    if (hint !== null) {
      const seconds = Number(/(?:^|[,\s])timeout=(\d+)/i.exec(hint)?.[1]);
      if (seconds >= 0) this.idleLimitMs = Math.max(0, seconds - 1) * 1000;
    }
    const contentLength = headers.get("content-length");
    const transferEncoding = headers.get("transfer-encoding");
    const encoding = headers.get("content-encoding")?.toLowerCase();
    if (encoding && encoding !== "identity") {
      this.broken(new UpstreamConnectionError(`upstream answered with content-encoding ${encoding} although asked for identity`));
      return true;
    }
    if (status === 204 || status === 304) {
      this.framing = Framing.Length;
      this.remaining = 0;
    } else if (transferEncoding !== null) {
      if (transferEncoding.toLowerCase() !== "chunked") {
        this.broken(new UpstreamConnectionError(`upstream answered with transfer-encoding ${transferEncoding}, of which only chunked is read`));
        return true;
      }
      this.framing = Framing.Chunked;
      this.chunkState = ChunkState.Size;
      this.sizeLine = "";
    } else if (contentLength !== null) {
      this.framing = Framing.Length;
      this.remaining = contentLength === "" ? NaN : Number(contentLength);
      if (!Number.isSafeInteger(this.remaining) || this.remaining < 0) {
        this.broken(new UpstreamConnectionError("upstream answered with an invalid content-length"));
        return true;
      }
    } else {
      this.framing = Framing.UntilClose;
      this.keepAlive = false;
    }
    // Only now is the answer handed out: a failure before this rejects the call itself.
    const exchange = this.exchange!;
    const body = new IncomingBody(
      () => this.broken(undefined),
      (paused) => this.hold(paused),
    );
    exchange.body = body;
    // Handed over with the others of this turn (turn-end.ts): streams are relayed as they come, so this is where
    // their handling joins the turn's run (c=64, compare: -3 to -9% event-loop CPU per stream, +1 to +9% streams/s).
    const response = new SocketResponse(status, headers, body);
    atTurnEnd(() => exchange.resolve(response));
    if (this.framing === Framing.Length && this.remaining === 0) this.finishBody();
    return true;
  }

  private readBody(data: Buffer, offset: number): void {
    const body = this.exchange!.body!;
    if (this.framing === Framing.UntilClose) {
      if (offset < data.length) body.push(view(data, offset, data.length));
      return;
    }
    if (this.framing === Framing.Length) {
      const take = Math.min(this.remaining, data.length - offset);
      if (take > 0) {
        body.push(view(data, offset, offset + take));
        this.remaining -= take;
      }
      if (offset + take < data.length) return this.broken(new UpstreamConnectionError("upstream sent more than its content-length"));
      if (this.remaining === 0) this.finishBody();
      return;
    }
    this.readChunked(data, offset, body);
  }

  private readChunked(data: Buffer, offset: number, body: IncomingBody): void {
    let at = offset;
    while (at < data.length && this.exchange?.body === body) {
      switch (this.chunkState) {
        case ChunkState.Size: {
          const lineEnd = data.indexOf(10, at);
          if (lineEnd < 0) {
            this.sizeLine += data.toString("latin1", at, data.length);
            if (this.sizeLine.length > 1024) return this.broken(new UpstreamConnectionError("upstream chunk size line is too long"));
            return;
          }
          const line = (this.sizeLine + data.toString("latin1", at, lineEnd)).trim();
          this.sizeLine = "";
          at = lineEnd + 1;
          const semicolon = line.indexOf(";");
          const size = parseInt(semicolon < 0 ? line : line.slice(0, semicolon), 16);
          if (!Number.isSafeInteger(size) || size < 0) return this.broken(new UpstreamConnectionError("upstream sent an invalid chunk size"));
          if (size === 0) this.chunkState = ChunkState.Trailer;
          else {
            this.remaining = size;
            this.chunkState = ChunkState.Data;
          }
          break;
        }
        case ChunkState.Data: {
          const take = Math.min(this.remaining, data.length - at);
          body.push(view(data, at, at + take));
          at += take;
          this.remaining -= take;
          if (this.remaining === 0) {
            this.chunkState = ChunkState.DataEnd;
            this.remaining = 2;
          }
          break;
        }
        case ChunkState.DataEnd: {
          // The CRLF after a chunk's data (it may come split across reads).
          const take = Math.min(this.remaining, data.length - at);
          at += take;
          this.remaining -= take;
          if (this.remaining === 0) this.chunkState = ChunkState.Size;
          break;
        }
        case ChunkState.Trailer: {
          // Trailer lines end with an empty line; most answers send just that CRLF.
          const lineEnd = data.indexOf(10, at);
          if (lineEnd < 0) {
            this.sizeLine += data.toString("latin1", at, data.length);
            return;
          }
          const line = (this.sizeLine + data.toString("latin1", at, lineEnd)).trim();
          this.sizeLine = "";
          at = lineEnd + 1;
          if (line === "") {
            if (at < data.length) return this.broken(new UpstreamConnectionError("upstream sent data after the last chunk"));
            this.finishBody();
            return;
          }
          break;
        }
      }
    }
  }

  private hold(paused: boolean): void {
    this.paused = paused;
    const socket = this.socket as PausableSocket | undefined;
    if (paused) socket?.pause();
    else socket?.resume();
  }

  private finishBody(): void {
    const exchange = this.exchange!;
    this.exchange = undefined;
    detach(exchange);
    if (this.paused) this.hold(false); // the answer's last bytes came in with the reader behind: the socket reads again
    // An answer that came before the whole request went out (an early error) leaves the connection unusable.
    const reusable = this.keepAlive && !this.closed && this.pendingWrite === undefined;
    exchange.body!.end();
    if (reusable) this.client.release(this);
    else this.close();
  }

  /** The connection is done for: fail what is pending on it and close it. */
  broken(error: unknown): void {
    const exchange = this.exchange;
    this.exchange = undefined;
    this.close();
    if (!exchange) return;
    detach(exchange);
    if (exchange.untouched && this.reused && exchange.retry) return exchange.retry();
    if (exchange.body) exchange.body.fail(error ?? new UpstreamConnectionError("connection closed"));
    else exchange.reject(error ?? new UpstreamConnectionError("connection closed"));
  }

  /** The upstream closed its side. */
  ended(): void {
    if (this.exchange?.body && this.framing === Framing.UntilClose) {
      this.closed = true;
      return this.finishBody();
    }
    this.closed = true;
    this.broken(new UpstreamConnectionError(this.exchange?.body ? "upstream closed the connection before the answer ended" : "upstream closed the connection"));
  }

  /** The connection is open (TCP, and TLS when asked): the connect timeout no longer applies. */
  opened(): void {
    clearTimeout(this.connectTimer);
    this.connectTimer = undefined;
  }

  close(): void {
    this.closed = true;
    this.opened();
    this.client.forget(this);
    const socket = this.socket;
    this.socket = undefined;
    socket?.terminate();
  }
}

function view(data: Buffer, start: number, end: number): Buffer {
  // Bun hands each socket read a buffer of its own, so a view of it may outlive the callback.
  return start === 0 && end === data.length ? data : data.subarray(start, end);
}

function detach(exchange: Exchange): void {
  if (exchange.onAbort) exchange.signal!.removeEventListener("abort", exchange.onAbort);
  exchange.onAbort = undefined;
}

const handlers: import("bun").SocketHandler<Connection, "buffer"> = {
  binaryType: "buffer",
  data(socket, data) {
    socket.data.receive(data);
  },
  drain(socket) {
    socket.data.drain();
  },
  end(socket) {
    socket.data.ended();
  },
  close(socket) {
    const connection = socket.data;
    if (connection.closed) return;
    connection.socket = undefined;
    connection.ended();
  },
  error(socket, error) {
    socket.data.broken(error);
  },
  handshake(socket, success, authorizationError) {
    // Bun closes a TLS connection whose certificate does not verify: say why before it does.
    if (!success) socket.data.broken(new UpstreamConnectionError(`TLS with ${socket.data.origin.hostname} failed: ${authorizationError?.message ?? "certificate not trusted"}`));
    else socket.data.opened();
  },
  timeout(socket) {
    const connection = socket.data;
    if (!connection.exchange) connection.close(); // idle too long
  },
};

export class UpstreamHttpClient {
  /** `idleSeconds`: how long a connection may wait in the pool (whole seconds, Bun's socket timeout). */
  private readonly idleSeconds: number;
  private readonly connectTimeoutMs: number;

  /** `connectTimeoutMs`: how long a new connection may take to open (TCP and TLS). */
  constructor(options: { idleSeconds?: number; connectTimeoutMs?: number } = {}) {
    this.idleSeconds = options.idleSeconds ?? DEFAULT_IDLE_SECONDS;
    this.connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS;
  }

  private readonly origins = new Map<string, Origin>();
  private readonly prepared = new WeakMap<Headers, Map<string, PreparedTarget | null>>();
  private readonly open = new Set<Connection>();

  /** POSTs `body` (JSON text) to `url`. Rejects with the signal's reason when it aborts. */
  post(url: string, headers: Headers, body: string, signal: AbortSignalLike | undefined): Promise<UpstreamResponse> {
    const target = this.target(url, headers);
    if (!target) return Promise.reject(new UpstreamConnectionError(`not an http(s) URL: ${url}`));
    if (signal?.aborted) return Promise.reject(signal.reason);
    const bodyBytes = Buffer.byteLength(body);
    const length = String(bodyBytes);
    const message = target.head + length + "\r\n\r\n" + body;
    const request = { message, bytes: target.headBytes + length.length + 4 + bodyBytes };
    return new Promise<UpstreamResponse>((resolve, reject) => {
      const exchange: Exchange = { resolve, reject, signal, onAbort: undefined, body: undefined, untouched: true, retry: undefined, connection: undefined };
      exchange.retry = () => {
        exchange.retry = undefined; // once
        exchange.untouched = true;
        this.dispatch(target.origin, exchange, request, true);
      };
      this.dispatch(target.origin, exchange, request, false);
    });
  }

  /** Closes every connection (idle ones at once; busy ones fail their answer). */
  closeAll(): void {
    for (const connection of [...this.open]) connection.broken(new UpstreamConnectionError("client closed"));
  }

  /** Number of sockets open (idle and busy). */
  get openConnections(): number {
    return this.open.size;
  }

  release(connection: Connection): void {
    const idle = connection.origin.idle;
    if (idle.length >= MAX_IDLE_PER_ORIGIN) return connection.close();
    connection.reused = true;
    connection.idleSince = performance.now();
    connection.socket!.timeout(this.idleSeconds);
    connection.socket!.unref();
    idle.push(connection);
  }

  forget(connection: Connection): void {
    this.open.delete(connection);
    const idle = connection.origin.idle;
    const at = idle.indexOf(connection);
    if (at >= 0) idle.splice(at, 1);
  }

  private dispatch(origin: Origin, exchange: Exchange, request: OutgoingRequest, fresh: boolean): void {
    const signal = exchange.signal;
    if (signal && !exchange.onAbort) {
      exchange.onAbort = () => {
        exchange.onAbort = undefined;
        exchange.retry = undefined;
        const connection = exchange.connection;
        if (connection?.exchange === exchange) connection.broken(signal.reason);
        else if (exchange.body) exchange.body.fail(signal.reason);
        else exchange.reject(signal.reason);
      };
      signal.addEventListener("abort", exchange.onAbort); // a signal fires once
    }
    let idle = fresh ? undefined : origin.idle.pop();
    while (idle && performance.now() - idle.idleSince >= Math.min(idle.idleLimitMs, this.idleSeconds * 1000)) {
      idle.close(); // idle too long: the server may be closing it right now
      idle = origin.idle.pop();
    }
    if (idle) return this.start(idle, exchange, request);
    const connection = new Connection(origin, this);
    connection.exchange = exchange; // so an abort during connect finds it
    exchange.connection = connection;
    this.open.add(connection);
    connection.connectTimer = setTimeout(() => {
      connection.connectTimer = undefined;
      const what = origin.tls ? "connecting (TCP and TLS)" : "connecting";
      connection.broken(new UpstreamConnectionError(`${what} to ${origin.hostname}:${origin.port} took longer than ${this.connectTimeoutMs} ms`));
    }, this.connectTimeoutMs);
    Bun.connect<Connection>({
      hostname: origin.hostname,
      port: origin.port,
      tls: origin.tls ? { serverName: origin.hostname } : undefined,
      data: connection,
      socket: handlers,
    }).then(
      (socket) => {
        if (connection.closed) return socket.terminate(); // aborted or timed out while connecting
        connection.socket = socket;
        if (!origin.tls) connection.opened(); // TLS: once the handshake is done
        socket.setNoDelay(true);
        this.start(connection, exchange, request);
      },
      (error: Error) => {
        if (connection.closed) return;
        connection.broken(new UpstreamConnectionError(`cannot connect to ${origin.hostname}:${origin.port}: ${error.message}`));
      },
    );
  }

  private start(connection: Connection, exchange: Exchange, request: OutgoingRequest): void {
    connection.exchange = exchange;
    exchange.connection = connection;
    const socket = connection.socket!;
    socket.timeout(0);
    socket.ref();
    connection.send(request.message, request.bytes);
  }

  private target(url: string, headers: Headers): PreparedTarget | null {
    let byUrl = this.prepared.get(headers);
    if (!byUrl) this.prepared.set(headers, (byUrl = new Map()));
    let target = byUrl.get(url);
    if (target === undefined) byUrl.set(url, (target = this.prepare(url, headers)));
    return target;
  }

  private prepare(url: string, headers: Headers): PreparedTarget | null {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return null;
    }
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return null;
    const tls = parsed.protocol === "https:";
    const port = Number(parsed.port || (tls ? 443 : 80));
    const hostname = parsed.hostname.startsWith("[") ? parsed.hostname.slice(1, -1) : parsed.hostname;
    const key = `${parsed.protocol}//${hostname}:${port}`;
    let origin = this.origins.get(key);
    if (!origin) this.origins.set(key, (origin = { key, hostname, port, tls, idle: [] }));
    let head = `POST ${parsed.pathname}${parsed.search} HTTP/1.1\r\nhost: ${parsed.host}\r\n`;
    const skip = new Set(["host", "content-length", "connection", "transfer-encoding", "accept-encoding"]);
    headers.forEach((value, name) => {
      if (!skip.has(name)) head += `${name}: ${value}\r\n`;
    });
    head += "accept-encoding: identity\r\nconnection: keep-alive\r\ncontent-length: ";
    return { origin, head, headBytes: Buffer.byteLength(head) };
  }
}
