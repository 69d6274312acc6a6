/** A TCP proxy in front of Redis that can be cut and restored on the same port (an outage, then recovery). */
export async function startTcpProxy(redisUrl: string) {
  const target = new URL(redisUrl);
  const upstreamPort = Number(target.port || 6379);
  type Pair = { upstream?: import("bun").Socket<unknown>; pending: Uint8Array[] };
  let listener: import("bun").TCPSocketListener<Pair> | undefined;
  let port = 0;
  const open = new Set<import("bun").Socket<Pair>>();

  function start() {
    listener = Bun.listen<Pair>({
      hostname: "127.0.0.1",
      port,
      socket: {
        open(client) {
          open.add(client);
          client.data = { pending: [] };
          Bun.connect({
            hostname: target.hostname,
            port: upstreamPort,
            socket: {
              open(upstream) {
                client.data.upstream = upstream;
                for (const chunk of client.data.pending) upstream.write(chunk);
                client.data.pending = [];
              },
              data(_upstream, chunk) {
                client.write(chunk);
              },
              close() {
                client.end();
              },
              error() {
                client.end();
              },
            },
          }).catch(() => client.end());
        },
        data(client, chunk) {
          if (client.data.upstream) client.data.upstream.write(chunk);
          else client.data.pending.push(new Uint8Array(chunk));
        },
        close(client) {
          open.delete(client);
          client.data.upstream?.end();
        },
      },
    });
    port = listener.port;
  }

  start();
  return {
    get port() {
      return port;
    },
    start,
    stop() {
      listener?.stop(true);
      for (const client of open) client.end();
      open.clear();
    },
  };
}
