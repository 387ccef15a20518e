// The metadata-document fetcher against real https servers on this machine (CA and certificate made with the
// openssl CLI). PLATFORM_CIMD_ALLOWED_HOSTS is unset (allowedHosts empty) unless a test says otherwise, so every
// loopback or private address is refused, and the listening servers count connections to prove none was made.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOST_NOT_ALLOWED } from '../../idp/cimd/fetch.ts';
import { createMetadataClients, type FetchGate, type MetadataClients } from '../../idp/cimd/index.ts';
import { type HostPattern, parseHostPattern } from '../../lib/host-patterns.ts';
import { createTestCa, startHttpsServer, type TestCa, type TestHttpsServer } from '../helpers/tls.ts';

let ca: TestCa;
let v4: TestHttpsServer;
let v6: TestHttpsServer | undefined;
let elsewhere: TestHttpsServer;
let route: (req: IncomingMessage, res: ServerResponse, base: string) => void;

const pattern = (s: string) => parseHostPattern(s) as HostPattern;
const doc = (clientId: string, extra: Record<string, unknown> = {}) => ({
  client_id: clientId,
  client_name: 'Test Assistant',
  redirect_uris: ['http://127.0.0.1/callback', new URL('/oauth/callback', clientId).href],
  token_endpoint_auth_method: 'none',
  grant_types: ['authorization_code', 'refresh_token'],
  response_types: ['code'],
  ...extra,
});
const json = (res: ServerResponse, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(200, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};

beforeAll(async () => {
  ca = await createTestCa(['cimd.test', 'evil.test']);
  const handler = (req: IncomingMessage, res: ServerResponse) =>
    route(req, res, `https://${req.headers.host}`);
  v4 = await startHttpsServer(ca, handler);
  v6 = await startHttpsServer(ca, handler, { host: '::1' }).catch(() => undefined);
  elsewhere = await startHttpsServer(ca, (_req, res) => json(res, {}));
});

afterAll(async () => {
  await Promise.all([v4?.close(), v6?.close(), elsewhere?.close()]);
  await ca?.cleanup();
});

function clients(
  opts: {
    allowedHosts?: string[];
    resolve?: (h: string) => Promise<{ address: string; family: number }[]>;
    now?: () => number;
  } = {},
) {
  return createMetadataClients({
    now: opts.now,
    allowedHosts: (opts.allowedHosts ?? []).map(pattern),
    ca: ca.ca,
    resolve: opts.resolve,
    onHostRefused: (_host, detail) => logged.push(detail),
  });
}

/** What the fetcher told the log about refused hosts (the client is never told). */
const logged: string[] = [];
/** These tests are not about the rate limits: every fetch may go ahead. */
const anyFetch: FetchGate = async () => {};

/** Refused as invalid_client; `reason` is looked for in the error and in what was logged for it. */
async function refused(c: MetadataClients, url: string, reason: RegExp) {
  const before = logged.length;
  const err = await c.get(url, anyFetch).then(
    () => undefined,
    (e: unknown) => e as { error?: string; status?: number; message: string },
  );
  expect(err, `${url} was accepted`).toBeDefined();
  expect(err!.error).toBe('invalid_client');
  expect(err!.status).toBe(401);
  // How a name resolved is for the log only (the red team learned "vm resolves to 127.0.0.1" from it).
  expect(err!.message).not.toMatch(/resolves|does not resolve|non-public/);
  expect([err!.message, ...logged.slice(before)].join('\n')).toMatch(reason);
  return err!.message;
}

describe('addresses, with PLATFORM_CIMD_ALLOWED_HOSTS unset', () => {
  it('refuses 127.0.0.1 without connecting', async () => {
    route = (_req, res, base) => json(res, doc(`${base}/client.json`));
    const c = clients();
    const before = v4.connections();
    await refused(c, `https://127.0.0.1:${v4.port}/client.json`, /127\.0\.0\.1, a non-public address/);
    await refused(c, `https://[::ffff:7f00:1]:${v4.port}/client.json`, /non-public address/);
    expect(v4.connections()).toBe(before);
    await c.close();
  });

  it('refuses 10.x and 169.254.169.254 (the cloud metadata address) before any connection', async () => {
    const c = clients();
    await refused(c, 'https://10.1.2.3/client.json', /10\.1\.2\.3, a non-public address/);
    await refused(c, 'https://169.254.169.254/latest/meta-data/client.json', /169\.254\.169\.254/);
    await refused(c, 'https://100.64.0.1/client.json', /non-public/);
    await c.close();
  });

  it('refuses [::1] without connecting', async () => {
    const c = clients();
    const port = v6?.port ?? v4.port;
    const before = v6?.connections() ?? 0;
    await refused(c, `https://[::1]:${port}/client.json`, /::1, a non-public address/);
    expect(v6?.connections() ?? 0).toBe(before);
    await c.close();
  });

  it('refuses a DNS name that resolves to a private address, after resolution, without connecting', async () => {
    route = (_req, res, base) => json(res, doc(`${base}/client.json`));
    const asked: string[] = [];
    const c = clients({
      resolve: async (h) => {
        asked.push(h);
        return h === 'mixed.test'
          ? [
              { address: '93.184.215.14', family: 4 },
              { address: '127.0.0.1', family: 4 },
            ]
          : [{ address: '127.0.0.1', family: 4 }];
      },
    });
    const before = v4.connections();
    expect(
      await refused(c, `https://evil.test:${v4.port}/client.json`, /evil\.test resolves to 127\.0\.0\.1/),
    ).toBe(HOST_NOT_ALLOWED);
    // One public and one private answer: the private one is enough to refuse.
    await refused(c, `https://mixed.test:${v4.port}/client.json`, /mixed\.test resolves to 127\.0\.0\.1/);
    expect(asked).toEqual(['evil.test', 'mixed.test']);
    expect(v4.connections()).toBe(before);
    await c.close();
  });

  it('refuses a host outside PLATFORM_CIMD_ALLOWED_HOSTS, and a wildcard match is not exempt', async () => {
    const resolve = async () => [{ address: '127.0.0.1', family: 4 }];
    const c = clients({ allowedHosts: ['*.test:*'], resolve });
    const before = v4.connections();
    await refused(c, `https://localhost:${v4.port}/client.json`, /not allowed here/);
    await refused(c, `https://cimd.test:${v4.port}/client.json`, /non-public address/);
    expect(v4.connections()).toBe(before);
    await c.close();
  });
});

describe('an operator-named host (the exemption), and what is refused even then', () => {
  const exempt = () =>
    clients({ allowedHosts: ['cimd.test:*'], resolve: async () => [{ address: '127.0.0.1', family: 4 }] });

  it('fetches and validates a document from a host named exactly, connecting to the resolved address', async () => {
    route = (_req, res, base) => json(res, doc(`${base}/client.json`), { 'cache-control': 'max-age=60' });
    const c = exempt();
    const url = `https://cimd.test:${v4.port}/client.json`;
    const client = await c.get(url, anyFetch);
    expect(client).toMatchObject({ clientId: url, name: 'Test Assistant', host: `cimd.test:${v4.port}` });
    const seen = v4.requests();
    await c.get(url, anyFetch); // cached per max-age
    expect(v4.requests()).toBe(seen);
    await c.close();
  });

  it('asks the gate before each network fetch only (not for a cached document); a refusing gate stops it', async () => {
    route = (_req, res, base) => json(res, doc(`${base}/gated.json`), { 'cache-control': 'max-age=60' });
    const c = exempt();
    const url = `https://cimd.test:${v4.port}/gated.json`;
    const asked: string[] = [];
    const seen = v4.requests();
    await expect(
      c.get(url, async (u) => {
        asked.push(u.host);
        throw new Error('over the limit');
      }),
    ).rejects.toThrow('over the limit');
    expect(v4.requests()).toBe(seen);
    expect(c.cached(url)).toBeUndefined();
    const counting: FetchGate = async (u) => void asked.push(u.host);
    await c.get(url, counting);
    await c.get(url, counting);
    expect(asked).toEqual([`cimd.test:${v4.port}`, `cimd.test:${v4.port}`]);
    expect(c.cached(url)).toMatchObject({ clientId: url });
    await c.close();
  });

  it('does not follow a redirect: the target is never reached', async () => {
    route = (_req, res) => {
      res.writeHead(302, { location: `https://localhost:${elsewhere.port}/client.json` });
      res.end();
    };
    const c = exempt();
    const before = elsewhere.connections();
    await refused(c, `https://cimd.test:${v4.port}/redirect.json`, /redirects are not followed/);
    expect(elsewhere.connections()).toBe(before);
    await c.close();
  });

  it('refuses a 6 KiB document, declared or streamed', async () => {
    const big = (base: string) => doc(`${base}/big.json`, { padding: 'x'.repeat(6 * 1024) });
    route = (req, res, base) => {
      const body = JSON.stringify(big(base));
      if (req.url === '/chunked.json') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write(body.slice(0, 3000));
        res.end(body.slice(3000));
      } else {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        res.end(body);
      }
    };
    const c = exempt();
    await refused(c, `https://cimd.test:${v4.port}/big.json`, /exceeds 5120 bytes/);
    await refused(c, `https://cimd.test:${v4.port}/chunked.json`, /exceeds 5120 bytes/);
    await c.close();
  });

  it('gives up on a server slower than 3 s', async () => {
    route = (_req, res, base) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"client_id":');
      const t = setTimeout(() => res.end(`${JSON.stringify(`${base}/slow.json`)}}`), 4000);
      res.on('close', () => clearTimeout(t));
    };
    const c = exempt();
    const started = Date.now();
    await refused(c, `https://cimd.test:${v4.port}/slow.json`, /timed out/);
    expect(Date.now() - started).toBeLessThan(3900);
    await c.close();
  });

  it('refuses an http:// client_id and URLs not in normal form without fetching', async () => {
    const c = exempt();
    const before = v4.connections();
    await refused(c, `http://cimd.test:${v4.port}/client.json`, /must be https/);
    await refused(c, `https://cimd.test:${v4.port}/a/../client.json`, /normal form/);
    await refused(c, `https://cimd.test:${v4.port}/`, /must have a path/);
    await refused(c, `https://user@cimd.test:${v4.port}/c.json`, /userinfo/);
    expect(v4.connections()).toBe(before);
    await c.close();
  });
});

describe('document validation', () => {
  const exempt = () =>
    clients({ allowedHosts: ['cimd.test:*'], resolve: async () => [{ address: '127.0.0.1', family: 4 }] });
  const serve = (make: (url: string) => unknown, headers: Record<string, string> = {}) => {
    route = (req, res, base) => json(res, make(`${base}${req.url}`), headers);
  };

  it('its client_id must equal the URL', async () => {
    serve((url) => doc(`${url}x`));
    await refused(exempt(), `https://cimd.test:${v4.port}/a.json`, /does not equal the document URL/);
  });

  it('redirect URIs must be loopback or on the document origin', async () => {
    serve((url) => doc(url, { redirect_uris: ['https://attacker.example/cb'] }));
    await refused(exempt(), `https://cimd.test:${v4.port}/b.json`, /neither loopback nor on/);
    serve((url) => doc(url, { redirect_uris: ['http://localhost:1234/any/path', 'http://[::1]/cb'] }));
    await expect(exempt().get(`https://cimd.test:${v4.port}/c.json`, anyFetch)).resolves.toBeDefined();
  });

  it('token_endpoint_auth_method must be none, and no secret', async () => {
    serve((url) => doc(url, { token_endpoint_auth_method: 'client_secret_basic' }));
    await refused(exempt(), `https://cimd.test:${v4.port}/d.json`, /must be "none"/);
    serve((url) => doc(url, { client_secret: 'x' }));
    await refused(exempt(), `https://cimd.test:${v4.port}/e.json`, /client_secret/);
    serve(() => ['not', 'an', 'object']);
    await refused(exempt(), `https://cimd.test:${v4.port}/f.json`, /invalid/);
  });

  it('no-store and failures are not fetched again within the cool-down (30 s), and are after it', async () => {
    let n = 0;
    let broken = false;
    route = (req, res, base) => {
      n++;
      if (broken) json(res, { not: 'a document' });
      else json(res, doc(`${base}${req.url}`), { 'cache-control': 'no-store' });
    };
    let clock = Date.now();
    const c = clients({
      allowedHosts: ['cimd.test:*'],
      resolve: async () => [{ address: '127.0.0.1', family: 4 }],
      now: () => clock,
    });
    const gated: string[] = [];
    const counting: FetchGate = async (u) => void gated.push(u.href);
    const url = `https://cimd.test:${v4.port}/g.json`;
    await c.get(url, counting);
    await c.get(url, counting);
    // The uncacheable answer is reused, uncounted, for the cool-down; not kept as a cached document.
    expect(n).toBe(1);
    expect(gated).toHaveLength(1);
    expect(c.cached(url)).toBeUndefined();
    clock += 30_001;
    broken = true;
    const first = await c.get(url, counting).catch((e: Error) => e.message);
    expect(first).toMatch(/client metadata document is invalid/);
    const again = await c.get(url, counting).catch((e: Error) => e.message);
    expect(again).toBe(first);
    expect(n).toBe(2);
    expect(gated).toHaveLength(2);
    clock += 30_001;
    broken = false;
    await expect(c.get(url, counting)).resolves.toMatchObject({ clientId: url });
    expect(n).toBe(3);
    await c.close();
  });
});
