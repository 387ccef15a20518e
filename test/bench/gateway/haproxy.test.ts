import type { ChildProcess } from 'node:child_process';
import { generateKeyPairSync, type KeyObject, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findHaproxy, type HaproxyJob, startHaproxy } from '../../../bench/gateway/haproxy.ts';
import { AUDIENCE, SERVICE } from '../../../bench/gateway/shape.ts';
import { bodySha256, deriveIdentityKey, type Identity, verifyIdentity } from '../../../lib/identity.ts';
import { freePort } from '../../helpers/processes.ts';

// The benchmark compares the gateway with HAProxy doing "the same job". These tests hold the HAProxy side to
// that: an upstream that checks identity signature v2 as a tool server does (its own key, over the method, path
// with query and body it received) sees exactly what the gateway would send, and what the gateway refuses
// HAProxy refuses too.

const SECRET = 'bench-identity-secret-0123456789abcdef0123';
const ISSUER = 'http://127.0.0.1:9';
const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const other = generateKeyPairSync('rsa', { modulusLength: 2048 });

interface Seen {
  identity: Identity | { error: string };
  headers: IncomingHttpHeaders;
}

let upstream: Server;
const haproxies: ChildProcess[] = [];
/** The MCP URL through HAProxy doing the gateway's job, and through HAProxy verifying RS256 only. */
let url: string;
let rs256Url: string;
let dir: string;
const seen: Seen[] = [];

beforeAll(async () => {
  const bin = findHaproxy();
  if (!bin) throw new Error('haproxy is not installed (make test installs Debian haproxy)');
  upstream = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    let identity: Seen['identity'];
    try {
      identity = verifyIdentity(
        deriveIdentityKey(SECRET, SERVICE),
        {
          service: SERVICE,
          method: req.method!,
          path: req.url!,
          bodySha256: bodySha256(Buffer.concat(chunks)),
        },
        req.headers,
      );
    } catch (err) {
      identity = { error: (err as Error).message };
    }
    seen.push({ identity, headers: req.headers });
    res.end('{}');
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
  dir = mkdtempSync(join(tmpdir(), 'haproxy-test-'));
  const start = async (job: HaproxyJob) => {
    const port = await freePort();
    const setup = {
      dir,
      port,
      upstream: new URL(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`),
      issuer: ISSUER,
      publicKey,
      identitySecret: SECRET,
    };
    haproxies.push(await startHaproxy(bin.bin, 0, setup, job));
    return `http://127.0.0.1:${port}/${SERVICE}/mcp`;
  };
  [url, rs256Url] = await Promise.all([start('gateway'), start('rs256')]);
});

afterAll(async () => {
  for (const h of haproxies) h.kill();
  await new Promise((r) => upstream?.close(r));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function token(
  claims: Record<string, unknown> = {},
  key: KeyObject | Uint8Array = privateKey,
  alg = 'RS256',
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({
    iss: ISSUER,
    aud: AUDIENCE,
    sub: 'user-1',
    email: 'Someone@Example.COM',
    scope: `openid email mcp:${SERVICE}`,
    client_id: 'platform-cli',
    jti: randomUUID(),
    iat: now,
    exp: now + 600,
    ...claims,
  })
    .setProtectedHeader({ alg, kid: 'k1' })
    .sign(key);
}

async function post(
  authorization: string,
  extra: Record<string, string> = {},
  to = url,
  init: { method?: string; body?: string } = { method: 'POST', body: '{"jsonrpc":"2.0","id":1}' },
) {
  const before = seen.length;
  const res = await fetch(to, { method: init.method, headers: { authorization, ...extra }, body: init.body });
  await res.arrayBuffer();
  return { status: res.status, requestId: res.headers.get('x-request-id'), upstream: seen.slice(before) };
}

describe('the benchmark HAProxy reference', () => {
  it('forwards a valid bearer with identity headers the contract signature accepts, credentials and forgeries removed', async () => {
    const t = await token();
    const r = await post(`Bearer ${t}`, {
      'x-platform-user-email': 'admin@example.com',
      'x-platform-identity': 'x',
    });
    expect(r.status).toBe(200);
    expect(r.upstream).toHaveLength(1);
    const { identity, headers } = r.upstream[0]!;
    expect(identity).toMatchObject({
      email: 'someone@example.com',
      sub: 'user-1',
      issuer: 'platform',
      scope: `openid email mcp:${SERVICE}`,
      clientId: 'platform-cli',
      requestId: r.requestId,
    });
    expect(headers.authorization).toBeUndefined();
    expect(headers['x-platform-user-email']).not.toBe('admin@example.com');
  });

  it('signs the method, the path with its query and the body (a GET without one hashes the empty string)', async () => {
    const t = await token();
    const get = await post(`Bearer ${t}`, {}, `${url}?session=1`, { method: 'GET' });
    expect(get.status).toBe(200);
    expect(get.upstream[0]!.identity).toMatchObject({ sub: 'user-1', requestId: get.requestId });
    const big = await post(`Bearer ${t}`, {}, url, {
      method: 'POST',
      body: JSON.stringify({ p: 'x'.repeat(8000) }),
    });
    expect(big.upstream[0]!.identity).toMatchObject({ sub: 'user-1' });
  });

  it.each([
    ['a token signed by another key', () => token({}, other.privateKey)],
    ['an expired token (past the 60 s leeway)', () => token({ exp: Math.floor(Date.now() / 1000) - 120 })],
    ['a token for another audience', () => token({ aud: 'https://elsewhere.example' })],
    ['a token from another issuer', () => token({ iss: 'https://evil.example' })],
    ['a token without the service scope', () => token({ scope: 'openid email' })],
    // Algorithm confusion: HMAC keyed with the public key's PEM, the classic RS/HS mix-up.
    [
      'an HS256 token keyed with the public key',
      () => token({}, Buffer.from(publicKey.export({ type: 'spki', format: 'pem' }) as string), 'HS256'),
    ],
    ['no token', async () => ''],
  ])('refuses %s and never reaches the upstream', async (_name, make) => {
    const t = await make();
    const r = await post(t === '' ? '' : `Bearer ${t}`);
    expect([401, 403]).toContain(r.status);
    expect(r.upstream).toHaveLength(0);
  });
});

describe("the benchmark HAProxy reference verifying RS256 only (the issue's)", () => {
  it('forwards a validly signed bearer without Authorization and adds nothing', async () => {
    const r = await post(`Bearer ${await token()}`, {}, rs256Url);
    expect(r.status).toBe(200);
    expect(r.upstream).toHaveLength(1);
    expect(r.upstream[0]!.headers.authorization).toBeUndefined();
    expect(r.upstream[0]!.headers['x-platform-identity']).toBeUndefined();
  });

  it.each([
    ['a token signed by another key', () => token({}, other.privateKey)],
    [
      'an HS256 token keyed with the public key',
      () => token({}, Buffer.from(publicKey.export({ type: 'spki', format: 'pem' }) as string), 'HS256'),
    ],
    ['no token', async () => ''],
  ])('refuses %s', async (_name, make) => {
    const t = await make();
    const r = await post(t === '' ? '' : `Bearer ${t}`, {}, rs256Url);
    expect(r.status).toBe(401);
    expect(r.upstream).toHaveLength(0);
  });
});
