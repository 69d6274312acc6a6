/**
 * The fake upstream over https: a local certificate authority made with `openssl` at start (a temporary
 * directory, never committed), and a TLS front that terminates TLS and relays the bytes to the plain fake
 * upstream (as a provider's edge does). The gateway trusts the CA through `NODE_EXTRA_CA_CERTS`, so it verifies
 * the certificate as it would a real provider's.
 *
 *   bun bench/tls-front.ts --port 9443 --upstream-port 9100 --cert server.pem --key server.key
 *   → prints "tls front listening on https://localhost:9443"
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Socket } from "bun";

export interface BenchCertificates {
  /** The CA certificate (PEM): what NODE_EXTRA_CA_CERTS points to. */
  caPath: string;
  /** The server certificate (localhost, 127.0.0.1) signed by the CA, and its key. */
  certPath: string;
  keyPath: string;
}

/** A CA and a server certificate for localhost and 127.0.0.1 (ECDSA P-256, as most provider edges serve), in `dir`. */
export function makeCertificates(dir: string): BenchCertificates {
  mkdirSync(dir, { recursive: true });
  const path = (name: string) => join(dir, name);
  writeFileSync(path("server.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n");
  const steps = [
    ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", path("ca.key")],
    ["req", "-x509", "-new", "-key", path("ca.key"), "-subj", "/CN=gateway bench CA", "-days", "2", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-out", path("ca.pem")],
    ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", path("server.key")],
    ["req", "-new", "-key", path("server.key"), "-subj", "/CN=localhost", "-out", path("server.csr")],
    ["x509", "-req", "-in", path("server.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"), "-CAcreateserial", "-days", "2", "-extfile", path("server.ext"), "-out", path("server.pem")],
  ];
  for (const args of steps) {
    const result = Bun.spawnSync(["openssl", ...args], { stdout: "pipe", stderr: "pipe" });
    if (result.exitCode !== 0) throw new Error(`openssl ${args[0]} failed (${result.exitCode}): ${result.stderr.toString()}`);
  }
  return { caPath: path("ca.pem"), certPath: path("server.pem"), keyPath: path("server.key") };
}

/** Bytes one side could not take yet; flushed on its drain, in order. */
interface Side {
  socket: Socket<Pair> | undefined;
  pending: Uint8Array[];
  ended: boolean;
}

interface Pair {
  client: Side;
  upstream: Side;
}

function send(side: Side, chunk: Uint8Array): void {
  if (!side.socket || side.pending.length > 0) {
    side.pending.push(chunk.slice());
    return;
  }
  const written = side.socket.write(chunk);
  if (written < chunk.length) side.pending.push(chunk.slice(Math.max(0, written)));
}

function flush(side: Side): void {
  while (side.socket && side.pending.length > 0) {
    const chunk = side.pending[0]!;
    const written = side.socket.write(chunk);
    if (written < chunk.length) {
      side.pending[0] = chunk.subarray(Math.max(0, written));
      return;
    }
    side.pending.shift();
  }
  if (side.socket && side.ended) side.socket.end();
}

function close(side: Side): void {
  side.ended = true;
  if (side.socket && side.pending.length === 0) side.socket.end();
}

/** Terminates TLS on `port` and relays each connection to 127.0.0.1:`upstreamPort`, one upstream connection per client connection. */
export function startTlsFront(options: { port: number; upstreamPort: number; certPath: string; keyPath: string }) {
  return Bun.listen<Pair>({
    hostname: "127.0.0.1",
    port: options.port,
    tls: { cert: Bun.file(options.certPath), key: Bun.file(options.keyPath) },
    socket: {
      open(client) {
        const pair: Pair = { client: { socket: client, pending: [], ended: false }, upstream: { socket: undefined, pending: [], ended: false } };
        client.data = pair;
        Bun.connect<Pair>({
          hostname: "127.0.0.1",
          port: options.upstreamPort,
          data: pair,
          socket: {
            open(upstream) {
              pair.upstream.socket = upstream;
              flush(pair.upstream);
            },
            data(_upstream, chunk) {
              send(pair.client, chunk);
            },
            drain() {
              flush(pair.upstream);
            },
            close() {
              close(pair.client);
            },
            error() {
              close(pair.client);
            },
          },
        }).catch(() => client.end());
      },
      data(client, chunk) {
        send(client.data.upstream, chunk);
      },
      drain(client) {
        flush(client.data.client);
      },
      close(client) {
        close(client.data.upstream);
      },
      error(client) {
        close(client.data.upstream);
      },
    },
  });
}

function argValue(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i < 0 ? undefined : args[i + 1];
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const port = Number(argValue(args, "--port") ?? 9443);
  const upstreamPort = Number(argValue(args, "--upstream-port"));
  const certPath = argValue(args, "--cert");
  const keyPath = argValue(args, "--key");
  if (!upstreamPort || !certPath || !keyPath) {
    console.error("usage: bun bench/tls-front.ts --port N --upstream-port M --cert server.pem --key server.key");
    process.exit(2);
  }
  const listener = startTlsFront({ port, upstreamPort, certPath, keyPath });
  console.log(`tls front listening on https://localhost:${listener.port}`);
}
