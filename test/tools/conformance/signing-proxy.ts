// The conformance suite's way in: the suite speaks plain MCP to a URL, while a tool server answers only requests
// carrying the gateway's signed identity. This proxy stands where the gateway stands, signs every request for
// one caller and relays it unchanged otherwise — Host and Origin included, so the tool server's own guard is
// what the DNS-rebinding scenario meets. One mapping: the suite's error scenario calls a tool named
// `test_error_handling`, which no server of ours has; the proxy turns that call into a real failing call of
// ours (send_mail as another mailbox by a non-admin: the `send_as_forbidden` tool error).
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { bodySha256, type Identity, signIdentity } from '../../../lib/identity.ts';

export interface SigningProxy {
  url: string;
  port: number;
  close(): Promise<void>;
}

export const ERROR_SCENARIO_TOOL = 'test_error_handling';

function mapErrorScenario(body: Buffer): Buffer {
  let msg: { method?: unknown; params?: { name?: unknown; arguments?: unknown } };
  try {
    msg = JSON.parse(body.toString('utf8'));
  } catch {
    return body;
  }
  if (msg?.method !== 'tools/call' || msg.params?.name !== ERROR_SCENARIO_TOOL) return body;
  msg.params.name = 'send_mail';
  msg.params.arguments = {
    to: 'someone@example.com',
    subject: 'conformance',
    body: 'This tool intentionally returns an error for testing',
    as_user_email: 'another-mailbox@example.com',
  };
  return Buffer.from(JSON.stringify(msg));
}

export async function startSigningProxy(opts: {
  target: string;
  identity: Omit<Identity, 'requestId' | 'jti'>;
  service: string;
  /** The service's identity key (TOOL_IDENTITY_KEY). */
  key: string;
  port?: number;
}): Promise<SigningProxy> {
  const target = new URL(opts.target);
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = mapErrorScenario(Buffer.concat(chunks));
      const headers: http.OutgoingHttpHeaders = { ...req.headers };
      for (const name of Object.keys(headers)) if (name.startsWith('x-platform-')) delete headers[name];
      delete headers['transfer-encoding'];
      if (req.method !== 'GET' && req.method !== 'HEAD') headers['content-length'] = body.length;
      Object.assign(
        headers,
        signIdentity(
          opts.key,
          {
            service: opts.service,
            method: req.method ?? '',
            path: req.url ?? '',
            bodySha256: bodySha256(body),
          },
          { ...opts.identity, jti: randomUUID(), requestId: randomUUID() },
        ),
      );
      const upstream = http.request(
        { host: target.hostname, port: target.port, method: req.method, path: req.url, headers },
        (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        },
      );
      upstream.once('error', () => res.destroy());
      res.once('close', () => upstream.destroy());
      upstream.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
