// The newer conformance suite's way through the gateway. The suite speaks MCP to a URL but has no option for a
// bearer token (and some of its scenarios write raw HTTP, with deliberately bad headers, past any fetch hook),
// while the gateway answers only requests that carry one. This proxy stands where a deployment's TLS proxy
// stands, in front of the gateway: it adds `Authorization: Bearer <token>` to every request that has none and
// relays everything else as it came — method, path, body, Host and Origin — so the gateway, its policies and
// the tool server behind it meet the suite's requests themselves. The gateway is told the proxy's origin is
// its own (`<SERVICE>_MCP_ALLOWED_ORIGINS`), as a deployment tells it its public origin.
import http from 'node:http';

export interface BearerProxy {
  url: string;
  close(): Promise<void>;
}

export async function startBearerProxy(opts: {
  target: string;
  token: string;
  port: number;
}): Promise<BearerProxy> {
  const target = new URL(opts.target);
  const server = http.createServer((req, res) => {
    const headers: http.OutgoingHttpHeaders = { ...req.headers };
    headers.authorization ??= `Bearer ${opts.token}`;
    const upstream = http.request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.once('error', () => res.destroy());
    res.once('close', () => upstream.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(opts.port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${opts.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
