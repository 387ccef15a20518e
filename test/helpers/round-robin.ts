// A round-robin HTTP reverse proxy in front of several IdP replicas: the one issuer URL clients and gateways
// use, each request answered by the next replica in turn (as a load balancer would).
import { createServer, request, type Server } from 'node:http';
import { freePort } from './processes.ts';

export interface RoundRobin {
  url: string;
  port: number;
  /** How many requests each upstream answered. */
  counts: number[];
  close(): Promise<void>;
}

/** Listens on `port` (else a free one) and forwards to `upstreams` (http origins) in turn. */
export async function startRoundRobin(upstreams: readonly string[], port?: number): Promise<RoundRobin> {
  const p = port ?? (await freePort());
  const counts = upstreams.map(() => 0);
  let next = 0;
  const server: Server = createServer((req, res) => {
    const i = next++ % upstreams.length;
    counts[i]!++;
    const target = new URL(req.url ?? '/', upstreams[i]);
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
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
