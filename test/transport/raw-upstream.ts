/**
 * A raw TCP upstream for transport tests: every complete request (head and content-length body) is counted
 * and handed to `answer`, which writes (or withholds) its answer's bytes itself and may reset the connection.
 */
import net from "node:net";

export interface ReceivedRequest {
  head: string;
  body: string;
  /** 1 for the first connection the upstream accepted, 2 for the next... */
  connection: number;
}

export type RawAnswer = (socket: net.Socket, request: ReceivedRequest, nth: number) => void;

export interface RawUpstream {
  url: string;
  port: number;
  requests: ReceivedRequest[];
  readonly connections: number;
  stop(): void;
}

export async function startRawUpstream(answer: RawAnswer): Promise<RawUpstream> {
  const requests: ReceivedRequest[] = [];
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const server = net.createServer((socket) => {
    const connection = ++connections;
    sockets.add(socket);
    let buffer = Buffer.alloc(0);
    socket.on("data", (data: Buffer) => {
      buffer = Buffer.concat([buffer, data]);
      for (;;) {
        const end = buffer.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buffer.toString("latin1", 0, end);
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (buffer.length < end + 4 + length) return;
        const request = { head, body: buffer.toString("utf8", end + 4, end + 4 + length), connection };
        buffer = buffer.subarray(end + 4 + length);
        requests.push(request);
        answer(socket, request, requests.length);
      }
    });
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    get connections() {
      return connections;
    },
    stop() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

/** A complete JSON answer that leaves the connection open for the next request. */
export function okAnswer(body = "{}"): string {
  return `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}
