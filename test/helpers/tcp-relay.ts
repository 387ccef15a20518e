import net from 'node:net';
import { freePort } from './processes.ts';

/**
 * A TCP relay on a fixed loopback port to a target port that can change, and that can be taken away and
 * brought back: a stand-in for a database endpoint (a proxy, a floating IP) in tests of what a client does
 * when the endpoint moves. Connections already relayed stay with the target they were opened to.
 */
export interface TcpRelay {
  port: number;
  /** `url` with its host and port replaced by the relay's. */
  urlFor(url: string): string;
  /** New connections go to this port from now on. */
  retarget(port: number): void;
  up(): Promise<void>;
  /** Stops listening and cuts every relayed connection. */
  down(): Promise<void>;
}

export async function startTcpRelay(
  targetPort: number,
  opts: { listening?: boolean } = {},
): Promise<TcpRelay> {
  const port = await freePort();
  let target = targetPort;
  const sockets = new Set<net.Socket>();
  let server: net.Server | undefined;
  const relay: TcpRelay = {
    port,
    urlFor(url) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    retarget(p) {
      target = p;
    },
    up: () =>
      new Promise<void>((resolve, reject) => {
        if (server) return resolve();
        const s = net.createServer((inbound) => {
          const outbound = net.connect(target, '127.0.0.1');
          for (const sock of [inbound, outbound]) {
            sockets.add(sock);
            sock.on('close', () => sockets.delete(sock));
            sock.on('error', () => {
              inbound.destroy();
              outbound.destroy();
            });
          }
          inbound.pipe(outbound).pipe(inbound);
        });
        s.once('error', reject);
        s.listen(port, '127.0.0.1', () => {
          server = s;
          resolve();
        });
      }),
    down: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        if (!server) return resolve();
        server.close(() => resolve());
        server = undefined;
      }),
  };
  if (opts.listening !== false) await relay.up();
  return relay;
}
