// A round-robin HTTP reverse proxy in front of several IdP replicas: the one issuer URL clients and gateways
// use, each request answered by the next replica in turn (as a load balancer would).
import { createServer, request, type Server } from 'node:http';
import { freePort } from './processes.ts';

export interface RoundRobin {
  url: string;
  port: number;
  /** How many requests each upstream answered (by the index of the list it was given in first). */
  counts: number[];
  /**
   * Sends the following requests to `upstreams` instead (a load balancer taking replicas into and out of its
   * pool); requests already forwarded finish where they are. Counts of upstreams seen before are kept.
   */
  setUpstreams(upstreams: readonly string[]): void;
  /** How many requests each upstream answered, by origin. */
  answered: Map<string, number>;
  close(): Promise<void>;
}

/** Listens on `port` (else a free one) and forwards to `upstreams` (http origins) in turn. */
export async function startRoundRobin(upstreams: readonly string[], port?: number): Promise<RoundRobin> {
  const p = port ?? (await freePort());
  const counts = upstreams.map(() => 0);
  const answered = new Map<string, number>();
  let pool = [...upstreams];
  let next = 0;
  const server: Server = createServer((req, res) => {
    const origin = pool[next++ % pool.length]!;
    const i = upstreams.indexOf(origin);
    if (i >= 0) counts[i]!++;
    answered.set(origin, (answered.get(origin) ?? 0) + 1);
    const target = new URL(req.url ?? '/', origin);
    const out = request(
      target,
      { method: req.method, headers: { ...req.headers, host: `127.0.0.1:${p}` } },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    out.on('error', () => {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    });
    req.pipe(out);
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((resolve) => server.listen(p, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${p}`,
    port: p,
    counts,
    answered,
    setUpstreams(next) {
      pool = [...next];
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
