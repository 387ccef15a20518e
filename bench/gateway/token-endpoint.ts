// The platform IdP's token endpoint as the "upstream connection" target needs it: every RFC 8693 exchange by
// `platform-gateway` answered 200 with one upstream token per user (about the size of an Entra access token),
// valid for an hour. The gateway exchanges once per user before anything is measured; the measured requests are
// served from its cache, so this server is off the measured path (it runs in the orchestrating process).
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export const BENCH_GATEWAY_CLIENT_SECRET = 'bench-gateway-client-secret-0123456789abcdef';

export interface BenchTokenEndpoint {
  url: string;
  /** Exchanges answered so far. */
  exchanges(): number;
  close(): void;
}

export async function startBenchTokenEndpoint(): Promise<BenchTokenEndpoint> {
  const expected = `Basic ${Buffer.from(`platform-gateway:${BENCH_GATEWAY_CLIENT_SECRET}`).toString('base64')}`;
  const tokens = new Map<string, string>();
  let exchanges = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c;
    });
    req.on('end', () => {
      const form = new URLSearchParams(body);
      const subject = form.get('subject_token') ?? '';
      if (req.headers.authorization !== expected || subject === '') {
        res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"invalid_client"}');
        return;
      }
      // One upstream token per platform user (the subject token's payload names it; not verified here).
      const sub = String(JSON.parse(Buffer.from(subject.split('.')[1] ?? '', 'base64url').toString()).sub);
      let token = tokens.get(sub);
      if (token === undefined) {
        token = `${randomBytes(900).toString('base64url')}`;
        tokens.set(sub, token);
      }
      exchanges++;
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(
        JSON.stringify({
          access_token: token,
          issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
          token_type: 'Bearer',
          expires_in: 3600,
        }),
      );
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/oauth/token`,
    exchanges: () => exchanges,
    close: () => server.close(),
  };
}
